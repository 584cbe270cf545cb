"""cluster-autoscaler's drain simulation: can every pod on a node be moved off it, and if not, which
pod blocks and why (``GetPodsToMove`` with the default drainability rules and the basic PDB tracker,
as of mid-2024).

Each pod goes through the rules below in this order; the first rule with an opinion decides:

1. mirror pods (``kubernetes.io/config.mirror``) are skipped: they go with the node;
2. pods deleted longer ago than their termination grace period (default 30 s) plus 30 s are skipped;
3. (skip_nodes_with_custom_controller_pods) the pod's controller must exist: ControllerNotFound,
   and a ReplicationController's or ReplicaSet's ``spec.replicas`` must reach ``min_replica_count``:
   MinReplicasReached;
4. DaemonSet pods (controller kind, or the ``daemonset-pod: "true"`` annotation) are drainable;
5. ``safe-to-evict: "true"`` pods are drainable;
6. terminal pods (by phase and restart policy) are drainable;
7. pods without a controller (with skip_nodes_with_custom_controller_pods: without a ReplicaSet,
   StatefulSet, ReplicationController or Job controller) block: NotReplicated;
8. (skip_nodes_with_system_pods) kube-system pods no PDB matches block: UnmovableKubeSystemPod;
9. ``safe-to-evict: "false"`` blocks: NotSafeToEvictAnnotation;
10. (skip_nodes_with_local_storage) a hostPath volume, or an emptyDir not in memory, not listed in
    ``safe-to-evict-local-volumes``, blocks: LocalStorageRequested;
11. a matching PDB with fewer than one disruption left blocks: NotEnoughPdb.

Pods no rule decides are moved. The first blocking pod ends the walk. PDB budgets live in a
``PdbTracker`` so that a scale-down pass over several nodes counts them down (``remove_pods``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from podfit.server.model import Pod, PodDisruptionBudget, WorkloadSelector

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
DAEMONSET_POD_ANNOTATION = "cluster-autoscaler.kubernetes.io/daemonset-pod"
SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
KUBE_SYSTEM = "kube-system"
# core/v1 DefaultTerminationGracePeriodSeconds, and drain.PodLongTerminatingExtraThreshold.
DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30
LONG_TERMINATING_EXTRA_SECONDS = 30
_REPLICATED_KINDS = frozenset({"ReplicationController", "Job", "ReplicaSet", "StatefulSet"})
# The group-qualified resource names Kubernetes listers put into their NotFound errors.
_NOT_FOUND_RESOURCE = {
    "ReplicationController": "replicationcontroller",
    "DaemonSet": "daemonset.apps",
    "Job": "job.batch",
    "ReplicaSet": "replicaset.apps",
    "StatefulSet": "statefulset.apps",
}


class BlockingReason(enum.Enum):
    """drain.BlockingPodReason, by its upstream name."""

    CONTROLLER_NOT_FOUND = "ControllerNotFound"
    MIN_REPLICAS_REACHED = "MinReplicasReached"
    NOT_REPLICATED = "NotReplicated"
    LOCAL_STORAGE_REQUESTED = "LocalStorageRequested"
    NOT_SAFE_TO_EVICT_ANNOTATION = "NotSafeToEvictAnnotation"
    UNMOVABLE_KUBE_SYSTEM_POD = "UnmovableKubeSystemPod"
    NOT_ENOUGH_PDB = "NotEnoughPdb"


@dataclass(frozen=True, slots=True)
class DrainOptions:
    """cluster-autoscaler's flags of the same names, with its defaults (``skip_terminal_pods`` is podfit's:
    what its scale-down loop does, as an option so that the drain rules can be run on every pod)."""

    skip_nodes_with_system_pods: bool = True
    skip_nodes_with_local_storage: bool = True
    skip_nodes_with_custom_controller_pods: bool = True
    min_replica_count: int = 0
    # --expendable-pods-priority-cutoff: the scale-down loop leaves pods below it out (``is_expendable``).
    expendable_pods_priority_cutoff: int = -10
    # The scale-down loop lists no Succeeded or Failed pod; False hands them to the drain rules too.
    skip_terminal_pods: bool = True


@dataclass(frozen=True, slots=True)
class BlockingPod:
    pod: Pod
    reason: BlockingReason
    # Upstream's error text (informational; it names the pod and what is missing).
    message: str = ""


@dataclass(frozen=True, slots=True)
class PdbCheck:
    """PDB accounting for a set of pods: ``can_remove`` is False when a matching PDB allows no
    disruption at all; ``in_parallel`` is False when some PDB allows fewer disruptions than the pods
    it matches (they must go one after another). ``blocking`` is the pod that made either False."""

    can_remove: bool
    in_parallel: bool
    blocking: BlockingPod | None = None


@dataclass(frozen=True, slots=True)
class DrainResult:
    blocking: BlockingPod | None = None
    # Both empty when a pod blocks; mirror and long-terminating pods are in neither.
    pods_to_move: tuple[Pod, ...] = ()
    daemonset_pods: tuple[Pod, ...] = ()
    # The PDB check of pods_to_move; None when a pod blocks.
    pdb: PdbCheck | None = None


class PdbTracker:
    """The PDBs with their remaining disruptions (cluster-autoscaler's basic RemainingPdbTracker).

    The budgets are copies: ``remove_pods`` counts them down as nodes are drained in simulation,
    leaving the PDB records untouched."""

    def __init__(self, pdbs: Iterable[PodDisruptionBudget]) -> None:
        self._pdbs = list(pdbs)
        self._remaining = [pdb.disruptions_allowed for pdb in self._pdbs]

    def _matching(self, pod: Pod) -> list[int]:
        # metav1.LabelSelectorAsSelector: a missing selector matches nothing, an empty one everything.
        return [
            i
            for i, pdb in enumerate(self._pdbs)
            if pdb.namespace == pod.namespace and pdb.selector is not None and pdb.selector.matches(pod.labels)
        ]

    def matching(self, pod: Pod) -> list[tuple[PodDisruptionBudget, int]]:
        """The PDBs in the pod's namespace whose selector matches it, with their remaining disruptions."""
        return [(self._pdbs[i], self._remaining[i]) for i in self._matching(pod)]

    def can_remove(self, pods: Sequence[Pod]) -> PdbCheck:
        """Whether the budgets allow evicting ``pods``, PDB by PDB in the order given; within a PDB the
        pods are counted in order, and the last one beyond its budget is reported."""
        in_parallel = True
        blocking: BlockingPod | None = None
        for i, pdb in enumerate(self._pdbs):
            allowed = self._remaining[i]
            count = 0
            for pod in pods:
                if pdb.namespace != pod.namespace or pdb.selector is None or not pdb.selector.matches(pod.labels):
                    continue
                count += 1
                if allowed < 1:
                    return PdbCheck(False, False, BlockingPod(pod, BlockingReason.NOT_ENOUGH_PDB))
                if allowed < count:
                    in_parallel = False
                    blocking = BlockingPod(pod, BlockingReason.NOT_ENOUGH_PDB)
        return PdbCheck(True, in_parallel, blocking)

    def remove_pods(self, pods: Iterable[Pod]) -> None:
        """Counts each matching PDB down once per pod evicted (it may go below zero, as upstream)."""
        for pod in pods:
            for i in self._matching(pod):
                self._remaining[i] -= 1


def pdb_can_remove(tracker: PdbTracker, pods: Sequence[Pod], *, remove: bool = False) -> PdbCheck:
    """The PDB check for draining one node's ``pods`` with the budgets left in ``tracker``. With
    ``remove`` and a removable result, the pods' disruptions are also counted against the budgets, so
    the next node of a scale-down pass sees what this one used."""
    check = tracker.can_remove(pods)
    if remove and check.can_remove:
        tracker.remove_pods(pods)
    return check


def is_daemonset_pod(pod: Pod) -> bool:
    ref = pod.controller_ref
    return (ref is not None and ref.kind == "DaemonSet") or pod.annotations.get(DAEMONSET_POD_ANNOTATION) == "true"


def is_mirror_pod(pod: Pod) -> bool:
    return MIRROR_ANNOTATION in pod.annotations


def is_long_terminating(pod: Pod, now: float) -> bool:
    """Deleted, and past its grace period (spec.terminationGracePeriodSeconds, not the deletion's) by
    more than 30 s: kubelet is not going to finish it, so it does not hold the node."""
    if pod.deletion_timestamp is None:
        return False
    grace = pod.termination_grace_period_seconds
    if grace is None:
        grace = DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS
    return pod.deletion_timestamp + grace + LONG_TERMINATING_EXTRA_SECONDS < now


def is_terminal(pod: Pod) -> bool:
    """Finished for good: Failed, or Succeeded unless the restart policy would run it again."""
    if pod.phase == "Failed":
        return True
    return pod.phase == "Succeeded" and pod.restart_policy in ("Never", "OnFailure")


def has_blocking_local_storage(pod: Pod) -> bool:
    listed = pod.annotations.get(SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION, "")
    safe = set(listed.split(",")) if listed else set()
    return any(
        (volume.host_path or (volume.empty_dir_medium is not None and volume.empty_dir_medium != "Memory"))
        and volume.name not in safe
        for volume in pod.volumes
    )


def _valid_group_version(api_version: str) -> bool:
    """schema.ParseGroupVersion accepts "", "version" and "group/version", nothing with more slashes."""
    return api_version.count("/") <= 1


def _group(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


# Pod controllers by (kind, namespace, name): a snapshot's ``controllers``.
Controllers = Mapping[tuple[str, str, str], WorkloadSelector]


def controllers_of(workloads: Iterable[WorkloadSelector]) -> Controllers:
    return {(w.kind.value, w.namespace, w.name): w for w in workloads}


def _not_found(kind: str, name: str) -> str:
    return f'{_NOT_FOUND_RESOURCE[kind]} "{name}" not found'


def _replica_count(pod: Pod, controllers: Controllers, options: DrainOptions) -> BlockingPod | None:
    """The ReplicaCount rule: the pod's controller must be listed, and have enough replicas."""
    ref = pod.controller_ref
    if ref is None or not _valid_group_version(ref.api_version):
        return None
    where = f"{pod.namespace}/{pod.name}"
    found = controllers.get((ref.kind, pod.namespace, ref.name)) if ref.kind in _NOT_FOUND_RESOURCE else None
    missing = _not_found(ref.kind, ref.name) if ref.kind in _NOT_FOUND_RESOURCE else ""
    too_few = f"has too few replicas spec: {{}} min: {options.min_replica_count}"
    if ref.kind == "ReplicationController" or (ref.kind == "ReplicaSet" and not is_daemonset_pod(pod)):
        if found is None:
            message = f"replication controller for {where} is not available, err: {missing}"
            return BlockingPod(pod, BlockingReason.CONTROLLER_NOT_FOUND, message)
        if found.replicas is not None and found.replicas < options.min_replica_count:
            message = f"replication controller for {where} {too_few.format(found.replicas)}"
            return BlockingPod(pod, BlockingReason.MIN_REPLICAS_REACHED, message)
        return None
    if is_daemonset_pod(pod):
        if _group(ref.api_version) != "apps" or ref.kind != "DaemonSet" or found is not None:
            return None
        message = f"daemonset for {where} is not present, err: {missing}"
        return BlockingPod(pod, BlockingReason.CONTROLLER_NOT_FOUND, message)
    if ref.kind in ("Job", "StatefulSet") and found is None:
        label = "job" if ref.kind == "Job" else "statefulset"
        message = f"{label} for {where} is not available: err: {missing}"
        return BlockingPod(pod, BlockingReason.CONTROLLER_NOT_FOUND, message)
    return None


def _decide(
    pod: Pod, controllers: Controllers, tracker: PdbTracker, options: DrainOptions, now: float
) -> bool | BlockingPod | None:
    """One pod through the default rules: None to skip it, True to move it, or what blocks."""
    if is_mirror_pod(pod) or is_long_terminating(pod, now):
        return None
    if options.skip_nodes_with_custom_controller_pods:
        blocked = _replica_count(pod, controllers, options)
        if blocked is not None:
            return blocked
    if is_daemonset_pod(pod) or pod.annotations.get(SAFE_TO_EVICT_ANNOTATION) == "true" or is_terminal(pod):
        return True
    ref = pod.controller_ref
    replicated = ref is not None
    if options.skip_nodes_with_custom_controller_pods:
        replicated = ref is not None and ref.kind in _REPLICATED_KINDS
    if not replicated:
        return BlockingPod(pod, BlockingReason.NOT_REPLICATED, f"{pod.namespace}/{pod.name} is not replicated")
    matching = tracker.matching(pod)
    if options.skip_nodes_with_system_pods and pod.namespace == KUBE_SYSTEM and not matching:
        message = f"non-daemonset, non-mirrored, non-pdb-assigned kube-system pod present: {pod.name}"
        return BlockingPod(pod, BlockingReason.UNMOVABLE_KUBE_SYSTEM_POD, message)
    if pod.annotations.get(SAFE_TO_EVICT_ANNOTATION) == "false":
        message = f"pod annotated as not safe to evict present: {pod.name}"
        return BlockingPod(pod, BlockingReason.NOT_SAFE_TO_EVICT_ANNOTATION, message)
    if options.skip_nodes_with_local_storage and has_blocking_local_storage(pod):
        return BlockingPod(pod, BlockingReason.LOCAL_STORAGE_REQUESTED, f"pod with local storage present: {pod.name}")
    if any(remaining < 1 for _, remaining in matching):
        message = f"not enough pod disruption budget to move {pod.namespace}/{pod.name}"
        return BlockingPod(pod, BlockingReason.NOT_ENOUGH_PDB, message)
    return True


def pods_to_move(
    node_pods: Sequence[Pod],
    controllers: Controllers | Iterable[WorkloadSelector],
    pdbs: Iterable[PodDisruptionBudget] | PdbTracker,
    options: DrainOptions = DrainOptions(),
    now: float = 0.0,
) -> DrainResult:
    """GetPodsToMove for one node: ``node_pods`` in the order they are checked (the first blocking pod
    wins), the controllers that exist (a snapshot's ``controllers``, or a list), and the PDBs (or a
    tracker already counted down by earlier nodes). ``now`` is seconds since the epoch. The tracker is
    only read: counting this node's pods down is ``pdb_can_remove(..., remove=True)``, once the caller
    decides to drain it."""
    if not isinstance(controllers, Mapping):
        controllers = controllers_of(controllers)
    tracker = pdbs if isinstance(pdbs, PdbTracker) else PdbTracker(pdbs)
    moved: list[Pod] = []
    daemonset: list[Pod] = []
    for pod in node_pods:
        decision = _decide(pod, controllers, tracker, options, now)
        if isinstance(decision, BlockingPod):
            return DrainResult(blocking=decision)
        if decision is True:
            (daemonset if is_daemonset_pod(pod) else moved).append(pod)
    return DrainResult(pods_to_move=tuple(moved), daemonset_pods=tuple(daemonset), pdb=tracker.can_remove(moved))


__all__ = [
    "BlockingPod",
    "BlockingReason",
    "Controllers",
    "DrainOptions",
    "DrainResult",
    "PdbCheck",
    "PdbTracker",
    "controllers_of",
    "pdb_can_remove",
    "pods_to_move",
]
