"""cluster-autoscaler's drain simulation: the 200 recorded public cases, each rule and flag on its own,
PDB accounting across several nodes, and the model fields drain needs."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pytest
from podfit.client.conformance import load_cases
from podfit.server.model import Kind, Pod, PodDisruptionBudget, ValidationError, Volume, WorkloadSelector
from podfit.server.model.objects import pdb_from_k8s, pod_from_k8s, workload_from_k8s
from podfit.server.simulation.drain import (
    BlockingReason,
    DrainOptions,
    DrainResult,
    PdbTracker,
    pdb_can_remove,
    pods_to_move,
)

from tests.builders import make_pdb
from tests.corpora import corpus

CASES = load_cases(corpus("drain/cases-public.jsonl"))
NOW = "2024-06-25T12:00:00Z"


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _blocking(blocking: Any) -> dict[str, str] | None:
    if blocking is None:
        return None
    return {"pod": blocking.pod.name, "namespace": blocking.pod.namespace, "reason": blocking.reason.value}


def _answer(result: DrainResult) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "blocking": _blocking(result.blocking),
        "pods_to_move": [p.name for p in result.pods_to_move],
        "daemonset_pods": [p.name for p in result.daemonset_pods],
    }
    if result.pdb is not None:
        answer["pdb_can_remove"] = {"can_remove": result.pdb.can_remove, "in_parallel": result.pdb.in_parallel}
        if result.pdb.blocking is not None:
            answer["pdb_can_remove"]["blocking"] = _blocking(result.pdb.blocking)
    return answer


def test_all_public_cases_are_here() -> None:
    assert len(CASES) == 200
    assert len({case["id"] for case in CASES}) == 200


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_public_case(case: dict[str, Any]) -> None:
    o = case["options"]
    options = DrainOptions(
        skip_nodes_with_system_pods=o["skipNodesWithSystemPods"],
        skip_nodes_with_local_storage=o["skipNodesWithLocalStorage"],
        skip_nodes_with_custom_controller_pods=o["skipNodesWithCustomControllerPods"],
        min_replica_count=o["minReplicaCount"],
    )
    result = pods_to_move(
        [pod_from_k8s(p, f"pods[{i}]") for i, p in enumerate(case["pods"])],
        [workload_from_k8s(Kind(w["kind"]), w, f"workloads[{i}]") for i, w in enumerate(case["workloads"])],
        [pdb_from_k8s(p, f"pdbs[{i}]") for i, p in enumerate(case["pdbs"])],
        options,
        _epoch(case["timestamp"]),
    )
    expect = dict(case["expect"])
    error = None
    if expect["blocking"] is not None:
        error = expect["blocking"]["error"]
        expect["blocking"] = {k: v for k, v in expect["blocking"].items() if k != "error"}
    assert _answer(result) == expect
    if error is not None:
        assert result.blocking is not None
        # Upstream formats the replicas pointer with %d; the recording shows it as <ptr>.
        pattern = re.escape(error).replace(re.escape("<ptr>"), r"\d+")
        assert re.fullmatch(pattern, result.blocking.message), result.blocking.message


# --------------------------------------------------------------------------------------------------
# One rule, one flag at a time


def pod(
    name: str = "p",
    namespace: str = "default",
    owner: tuple[str, str] | None = ("ReplicaSet", "rs"),
    api_version: str = "apps/v1",
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    volumes: list[dict[str, Any]] | None = None,
    phase: str = "Running",
    restart_policy: str = "Always",
    deleted: str | None = None,
    grace: int | None = None,
    controller: bool = True,
) -> Pod:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels or {"app": "a"})}
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": api_version, "kind": owner[0], "name": owner[1], "controller": controller}
        ]
    if annotations:
        meta["annotations"] = dict(annotations)
    if deleted is not None:
        meta["deletionTimestamp"] = deleted
    spec: dict[str, Any] = {"containers": [{"name": "c"}], "restartPolicy": restart_policy, "nodeName": "n"}
    if volumes:
        spec["volumes"] = volumes
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return pod_from_k8s({"metadata": meta, "spec": spec, "status": {"phase": phase}})


def workload(kind: str, name: str, namespace: str = "default", replicas: int | None = None) -> WorkloadSelector:
    return WorkloadSelector(kind=Kind(kind), name=name, namespace=namespace, replicas=replicas)


def pdb(allowed: int, selector: Mapping[str, Any] | None = None, namespace: str = "default") -> PodDisruptionBudget:
    _, data = make_pdb(f"pdb-{allowed}", {"matchLabels": {"app": "a"}} if selector is None else selector, allowed)
    data["metadata"]["namespace"] = namespace
    return pdb_from_k8s(data)


ALL = [
    workload("ReplicaSet", "rs", replicas=3),
    workload("StatefulSet", "ss"),
    workload("ReplicationController", "rc", replicas=3),
    workload("Job", "job"),
    workload("DaemonSet", "ds"),
]
HOST_PATH = {"name": "data", "hostPath": {"path": "/var/x"}}
EMPTY_DIR = {"name": "scratch", "emptyDir": {}}
MEMORY_DIR = {"name": "tmp", "emptyDir": {"medium": "Memory"}}
CUSTOM = ("CronTabController", "ct")
LAX = DrainOptions(False, False, False, 0)


def _outcome(result: DrainResult) -> str:
    if result.blocking is not None:
        return result.blocking.reason.value
    if result.daemonset_pods:
        return "daemonset"
    return "move" if result.pods_to_move else "skip"


RULE_CASES = [
    # (id, pod, workloads, pdbs, options, expected outcome)
    ("a replicated pod moves", pod(), ALL, [], DrainOptions(), "move"),
    (
        "mirror pods are skipped",
        pod(annotations={"kubernetes.io/config.mirror": "x"}, owner=None),
        [],
        [],
        DrainOptions(),
        "skip",
    ),
    (
        "mirror beats not-safe-to-evict",
        pod(annotations={"kubernetes.io/config.mirror": "", "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
        ALL,
        [],
        DrainOptions(),
        "skip",
    ),
    (
        "deleted past grace+30s is skipped",
        pod(deleted="2024-06-25T11:58:59Z", owner=None),
        [],
        [],
        DrainOptions(),
        "skip",
    ),
    (
        "deleted within default grace+30s still counts",
        pod(deleted="2024-06-25T11:59:01Z", owner=None),
        [],
        [],
        DrainOptions(),
        "NotReplicated",
    ),
    (
        "exactly grace+30s is not yet long-terminating",
        pod(deleted="2024-06-25T11:59:00Z", owner=None),
        [],
        [],
        DrainOptions(),
        "NotReplicated",
    ),
    (
        "spec grace period stretches the wait",
        pod(deleted="2024-06-25T11:55:00Z", grace=600, owner=None),
        [],
        [],
        DrainOptions(),
        "NotReplicated",
    ),
    (
        "zero grace period shortens it",
        pod(deleted="2024-06-25T11:59:29Z", grace=0, owner=None),
        [],
        [],
        DrainOptions(),
        "skip",
    ),
    ("missing ReplicaSet", pod(), [], [], DrainOptions(), "ControllerNotFound"),
    ("missing ReplicaSet in another namespace", pod(namespace="team-a"), ALL, [], DrainOptions(), "ControllerNotFound"),
    ("missing StatefulSet", pod(owner=("StatefulSet", "other")), ALL, [], DrainOptions(), "ControllerNotFound"),
    (
        "missing ReplicationController",
        pod(owner=("ReplicationController", "other"), api_version="v1"),
        ALL,
        [],
        DrainOptions(),
        "ControllerNotFound",
    ),
    ("missing Job", pod(owner=("Job", "other"), api_version="batch/v1"), ALL, [], DrainOptions(), "ControllerNotFound"),
    ("missing DaemonSet", pod(owner=("DaemonSet", "other")), ALL, [], DrainOptions(), "ControllerNotFound"),
    (
        "missing DaemonSet outside apps group is not looked up",
        pod(owner=("DaemonSet", "other"), api_version="example.com/v1"),
        ALL,
        [],
        DrainOptions(),
        "daemonset",
    ),
    (
        "unparsable apiVersion skips the lookup",
        pod(owner=("ReplicaSet", "other"), api_version="a/b/c"),
        ALL,
        [],
        DrainOptions(),
        "move",
    ),
    (
        "missing controller is fine without the custom-controller flag",
        pod(),
        [],
        [],
        DrainOptions(skip_nodes_with_custom_controller_pods=False),
        "move",
    ),
    (
        "ReplicaSet below min replicas",
        pod(),
        [workload("ReplicaSet", "rs", replicas=1)],
        [],
        DrainOptions(min_replica_count=2),
        "MinReplicasReached",
    ),
    (
        "ReplicaSet at min replicas",
        pod(),
        [workload("ReplicaSet", "rs", replicas=2)],
        [],
        DrainOptions(min_replica_count=2),
        "move",
    ),
    (
        "ReplicaSet without spec.replicas is not checked",
        pod(),
        [workload("ReplicaSet", "rs")],
        [],
        DrainOptions(min_replica_count=5),
        "move",
    ),
    (
        "ReplicationController below min replicas",
        pod(owner=("ReplicationController", "rc"), api_version="v1"),
        [workload("ReplicationController", "rc", replicas=0)],
        [],
        DrainOptions(min_replica_count=1),
        "MinReplicasReached",
    ),
    (
        "StatefulSet replicas are not checked",
        pod(owner=("StatefulSet", "ss")),
        [workload("StatefulSet", "ss", replicas=0)],
        [],
        DrainOptions(min_replica_count=3),
        "move",
    ),
    (
        "min replicas ignored without the custom-controller flag",
        pod(),
        [workload("ReplicaSet", "rs", replicas=0)],
        [],
        DrainOptions(skip_nodes_with_custom_controller_pods=False, min_replica_count=3),
        "move",
    ),
    ("DaemonSet pods go with the node", pod(owner=("DaemonSet", "ds")), ALL, [], DrainOptions(), "daemonset"),
    (
        "daemonset-pod annotation makes a DaemonSet pod",
        pod(owner=None, annotations={"cluster-autoscaler.kubernetes.io/daemonset-pod": "true"}),
        [],
        [],
        DrainOptions(),
        "daemonset",
    ),
    (
        "daemonset-pod annotation on a ReplicaSet pod skips its lookup",
        pod(annotations={"cluster-autoscaler.kubernetes.io/daemonset-pod": "true"}),
        [],
        [],
        DrainOptions(),
        "daemonset",
    ),
    (
        "DaemonSet pod with local storage still goes",
        pod(owner=("DaemonSet", "ds"), volumes=[HOST_PATH]),
        ALL,
        [pdb(0)],
        DrainOptions(),
        "daemonset",
    ),
    (
        "safe-to-evict true moves an unreplicated pod",
        pod(owner=None, annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}),
        [],
        [],
        DrainOptions(),
        "move",
    ),
    (
        "safe-to-evict true overrides local storage and PDB",
        pod(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}, volumes=[HOST_PATH]),
        ALL,
        [pdb(0)],
        DrainOptions(),
        "move",
    ),
    (
        "safe-to-evict true does not excuse a missing controller",
        pod(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}),
        [],
        [],
        DrainOptions(),
        "ControllerNotFound",
    ),
    ("failed pods move", pod(owner=None, phase="Failed"), [], [], DrainOptions(), "move"),
    (
        "succeeded pod that never restarts moves",
        pod(owner=None, phase="Succeeded", restart_policy="Never"),
        [],
        [],
        DrainOptions(),
        "move",
    ),
    (
        "succeeded pod restarted on failure moves",
        pod(owner=None, phase="Succeeded", restart_policy="OnFailure"),
        [],
        [],
        DrainOptions(),
        "move",
    ),
    (
        "succeeded pod that always restarts is not terminal",
        pod(owner=None, phase="Succeeded"),
        [],
        [],
        DrainOptions(),
        "NotReplicated",
    ),
    ("no controller", pod(owner=None), [], [], DrainOptions(), "NotReplicated"),
    ("a non-controller owner is no controller", pod(controller=False), ALL, [], DrainOptions(), "NotReplicated"),
    ("no controller blocks even with lax flags", pod(owner=None), [], [], LAX, "NotReplicated"),
    ("custom controller blocks with the flag", pod(owner=CUSTOM), [], [], DrainOptions(), "NotReplicated"),
    ("custom controller moves without the flag", pod(owner=CUSTOM), [], [], LAX, "move"),
    ("Job pods are replicated", pod(owner=("Job", "job"), api_version="batch/v1"), ALL, [], DrainOptions(), "move"),
    (
        "kube-system pod without PDB",
        pod(namespace="kube-system"),
        [workload("ReplicaSet", "rs", "kube-system")],
        [],
        DrainOptions(),
        "UnmovableKubeSystemPod",
    ),
    (
        "kube-system pod with a PDB moves",
        pod(namespace="kube-system"),
        [workload("ReplicaSet", "rs", "kube-system")],
        [pdb(1, namespace="kube-system")],
        DrainOptions(),
        "move",
    ),
    (
        "kube-system pod with a PDB elsewhere",
        pod(namespace="kube-system"),
        [workload("ReplicaSet", "rs", "kube-system")],
        [pdb(1)],
        DrainOptions(),
        "UnmovableKubeSystemPod",
    ),
    (
        "kube-system pod with an exhausted PDB",
        pod(namespace="kube-system"),
        [workload("ReplicaSet", "rs", "kube-system")],
        [pdb(0, namespace="kube-system")],
        DrainOptions(),
        "NotEnoughPdb",
    ),
    (
        "kube-system pod moves without the system flag",
        pod(namespace="kube-system"),
        [workload("ReplicaSet", "rs", "kube-system")],
        [],
        DrainOptions(skip_nodes_with_system_pods=False),
        "move",
    ),
    (
        "kube-system check comes before not-safe-to-evict",
        pod(namespace="kube-system", annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
        [workload("ReplicaSet", "rs", "kube-system")],
        [],
        DrainOptions(),
        "UnmovableKubeSystemPod",
    ),
    (
        "safe-to-evict false",
        pod(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
        ALL,
        [],
        DrainOptions(),
        "NotSafeToEvictAnnotation",
    ),
    (
        "safe-to-evict false blocks with lax flags",
        pod(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
        [],
        [],
        LAX,
        "NotSafeToEvictAnnotation",
    ),
    (
        "safe-to-evict other values mean nothing",
        pod(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "False"}),
        ALL,
        [],
        DrainOptions(),
        "move",
    ),
    (
        "not-safe-to-evict comes before local storage",
        pod(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}, volumes=[HOST_PATH]),
        ALL,
        [],
        DrainOptions(),
        "NotSafeToEvictAnnotation",
    ),
    ("hostPath", pod(volumes=[HOST_PATH]), ALL, [], DrainOptions(), "LocalStorageRequested"),
    ("emptyDir on disk", pod(volumes=[EMPTY_DIR]), ALL, [], DrainOptions(), "LocalStorageRequested"),
    ("emptyDir in memory", pod(volumes=[MEMORY_DIR]), ALL, [], DrainOptions(), "move"),
    (
        "listed local volumes are safe",
        pod(
            volumes=[HOST_PATH, EMPTY_DIR],
            annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes": "data,scratch"},
        ),
        ALL,
        [],
        DrainOptions(),
        "move",
    ),
    (
        "an unlisted local volume still blocks",
        pod(
            volumes=[HOST_PATH, EMPTY_DIR],
            annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes": "data"},
        ),
        ALL,
        [],
        DrainOptions(),
        "LocalStorageRequested",
    ),
    (
        "listing is exact (no spaces trimmed)",
        pod(
            volumes=[HOST_PATH, EMPTY_DIR],
            annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes": "data, scratch"},
        ),
        ALL,
        [],
        DrainOptions(),
        "LocalStorageRequested",
    ),
    (
        "local storage moves without the flag",
        pod(volumes=[HOST_PATH]),
        ALL,
        [],
        DrainOptions(skip_nodes_with_local_storage=False),
        "move",
    ),
    (
        "persistent volumes are not local",
        pod(volumes=[{"name": "pv", "persistentVolumeClaim": {"claimName": "c"}}]),
        ALL,
        [],
        DrainOptions(),
        "move",
    ),
    ("exhausted PDB", pod(), ALL, [pdb(0)], DrainOptions(), "NotEnoughPdb"),
    ("exhausted PDB blocks with lax flags", pod(), ALL, [pdb(0)], LAX, "NotEnoughPdb"),
    ("PDB with room", pod(), ALL, [pdb(1)], DrainOptions(), "move"),
    ("exhausted PDB in another namespace", pod(), ALL, [pdb(0, namespace="team-a")], DrainOptions(), "move"),
    (
        "exhausted PDB with another selector",
        pod(),
        ALL,
        [pdb(0, {"matchLabels": {"app": "b"}})],
        DrainOptions(),
        "move",
    ),
    ("exhausted PDB with an empty selector matches all", pod(), ALL, [pdb(0, {})], DrainOptions(), "NotEnoughPdb"),
    (
        "exhausted PDB without a selector matches none",
        pod(),
        ALL,
        [pdb_from_k8s(make_pdb("x", None, 0)[1])],
        DrainOptions(),
        "move",
    ),
]


@pytest.mark.parametrize(
    ("subject", "workloads", "pdbs", "options", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in RULE_CASES],
)
def test_rule(
    subject: Pod,
    workloads: list[WorkloadSelector],
    pdbs: list[PodDisruptionBudget],
    options: DrainOptions,
    expected: str,
) -> None:
    result = pods_to_move([subject], workloads, pdbs, options, _epoch(NOW))
    assert _outcome(result) == expected
    if result.blocking is not None:
        assert result.blocking.pod is subject
        assert result.pods_to_move == () and result.daemonset_pods == () and result.pdb is None


def test_first_blocking_pod_wins_and_clears_the_lists() -> None:
    pods = [
        pod("ds", owner=("DaemonSet", "ds")),
        pod("ok"),
        pod("local", volumes=[HOST_PATH]),
        pod("orphan", owner=None),
    ]
    result = pods_to_move(pods, ALL, [], DrainOptions(), _epoch(NOW))
    assert _blocking(result.blocking) == {"pod": "local", "namespace": "default", "reason": "LocalStorageRequested"}
    assert result.blocking is not None and result.blocking.message == "pod with local storage present: local"
    assert result.pods_to_move == () and result.daemonset_pods == ()


def test_order_and_split_when_nothing_blocks() -> None:
    pods = [
        pod("a"),
        pod("ds", owner=("DaemonSet", "ds")),
        pod("mirror", annotations={"kubernetes.io/config.mirror": "x"}),
        pod("b", owner=("StatefulSet", "ss")),
    ]
    result = pods_to_move(pods, ALL, [pdb(5)], DrainOptions(), _epoch(NOW))
    assert [p.name for p in result.pods_to_move] == ["a", "b"]
    assert [p.name for p in result.daemonset_pods] == ["ds"]
    assert result.pdb is not None and (result.pdb.can_remove, result.pdb.in_parallel) == (True, True)


def test_default_options_are_upstreams() -> None:
    assert DrainOptions() == DrainOptions(
        skip_nodes_with_system_pods=True,
        skip_nodes_with_local_storage=True,
        skip_nodes_with_custom_controller_pods=True,
        min_replica_count=0,
    )


# --------------------------------------------------------------------------------------------------
# PDB accounting


@pytest.mark.parametrize(
    ("allowed", "pods", "expected"),
    [
        pytest.param(2, 2, (True, True, None), id="budget covers all pods"),
        pytest.param(2, 3, (True, False, "p2"), id="one pod too many: sequential, last pod over budget"),
        pytest.param(1, 3, (True, False, "p2"), id="the last pod over budget is reported"),
        pytest.param(0, 1, (False, False, "p0"), id="no budget at all: cannot remove"),
        pytest.param(0, 0, (True, True, None), id="no matching pods"),
    ],
)
def test_pdb_can_remove(allowed: int, pods: int, expected: tuple[bool, bool, str | None]) -> None:
    check = pdb_can_remove(PdbTracker([pdb(allowed)]), [pod(f"p{i}") for i in range(pods)])
    blocking = check.blocking.pod.name if check.blocking is not None else None
    assert (check.can_remove, check.in_parallel, blocking) == expected
    if check.blocking is not None:
        assert check.blocking.reason is BlockingReason.NOT_ENOUGH_PDB


def test_pdb_budget_counts_down_across_nodes() -> None:
    tracker = PdbTracker([pdb(3)])
    node_a = [pod("a1"), pod("a2")]
    node_b = [pod("b1"), pod("b2")]
    node_c = [pod("c1")]

    first = pods_to_move(node_a, ALL, tracker, DrainOptions(), _epoch(NOW))
    assert first.pdb is not None and (first.pdb.can_remove, first.pdb.in_parallel) == (True, True)
    assert pdb_can_remove(tracker, first.pods_to_move, remove=True).can_remove

    second = pods_to_move(node_b, ALL, tracker, DrainOptions(), _epoch(NOW))
    assert second.blocking is None and second.pdb is not None
    assert (second.pdb.can_remove, second.pdb.in_parallel) == (True, False)
    assert pdb_can_remove(tracker, second.pods_to_move, remove=True).can_remove

    # Four disruptions used against a budget of three: the next node's pod is blocked by the rule.
    third = pods_to_move(node_c, ALL, tracker, DrainOptions(), _epoch(NOW))
    assert _blocking(third.blocking) == {"pod": "c1", "namespace": "default", "reason": "NotEnoughPdb"}


def test_pdb_tracker_leaves_pdb_records_alone_and_only_counts_matching_pods() -> None:
    budget = pdb(1)
    other = pdb(1, {"matchLabels": {"app": "b"}})
    tracker = PdbTracker([budget, other])
    pdb_can_remove(tracker, [pod("x"), pod("y", labels={"app": "c"})], remove=True)
    assert budget.disruptions_allowed == 1
    assert [remaining for _, remaining in tracker.matching(pod("z"))] == [0]
    assert [remaining for _, remaining in tracker.matching(pod("z", labels={"app": "b"}))] == [1]


def test_pdb_can_remove_without_remove_does_not_count_down() -> None:
    tracker = PdbTracker([pdb(1)])
    for _ in range(3):
        assert pdb_can_remove(tracker, [pod("x")]).in_parallel


def test_unremovable_pods_are_not_counted_down() -> None:
    tracker = PdbTracker([pdb(0), pdb(5, {})])
    assert not pdb_can_remove(tracker, [pod("x")], remove=True).can_remove
    assert [remaining for _, remaining in tracker.matching(pod("x"))] == [0, 5]


# --------------------------------------------------------------------------------------------------
# Model: the fields drain reads, converted and validated with field paths


def test_pod_drain_fields_convert() -> None:
    subject = pod_from_k8s(
        {
            "metadata": {
                "name": "p",
                "annotations": {"kubernetes.io/config.mirror": "abc"},
                "deletionTimestamp": "2024-06-25T11:00:00Z",
                "deletionGracePeriodSeconds": 30,
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "ReplicationController", "name": "x"},
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "controller": True},
                ],
            },
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 60,
                "volumes": [
                    {"name": "h", "hostPath": {"path": "/x"}},
                    {"name": "e", "emptyDir": {}},
                    {"name": "m", "emptyDir": {"medium": "Memory"}},
                    {"name": "c", "configMap": {"name": "cm"}},
                ],
            },
        }
    )
    assert subject.annotations == {"kubernetes.io/config.mirror": "abc"}
    assert subject.deletion_timestamp == _epoch("2024-06-25T11:00:00Z")
    assert subject.deletion_grace_period_seconds == 30
    assert subject.controller_ref is not None and subject.controller_ref.name == "rs"
    assert subject.restart_policy == "Never"
    assert subject.termination_grace_period_seconds == 60
    assert subject.volumes == (
        Volume("h", host_path=True),
        Volume("e", empty_dir_medium=""),
        Volume("m", empty_dir_medium="Memory"),
        Volume("c"),
    )


def test_pod_drain_fields_default() -> None:
    subject = pod_from_k8s({"metadata": {"name": "p"}})
    assert subject.annotations == {}
    assert subject.deletion_timestamp is None and subject.deletion_grace_period_seconds is None
    assert subject.termination_grace_period_seconds is None and subject.volumes == ()
    assert subject.controller_ref is None


@pytest.mark.parametrize(
    ("metadata", "spec", "field"),
    [
        pytest.param({"annotations": {"a": 1}}, {}, "pod.metadata.annotations.a", id="annotation value"),
        pytest.param({"annotations": []}, {}, "pod.metadata.annotations", id="annotations not a map"),
        pytest.param({"deletionTimestamp": "yesterday"}, {}, "pod.metadata.deletionTimestamp", id="deletion time"),
        pytest.param(
            {"deletionGracePeriodSeconds": "soon"}, {}, "pod.metadata.deletionGracePeriodSeconds", id="deletion grace"
        ),
        pytest.param(
            {"ownerReferences": [{"kind": "ReplicaSet", "name": "x", "controller": "yes"}]},
            {},
            "pod.metadata.ownerReferences[0].controller",
            id="controller flag",
        ),
        pytest.param({}, {"terminationGracePeriodSeconds": True}, "pod.spec.terminationGracePeriodSeconds", id="grace"),
        pytest.param({}, {"restartPolicy": 3}, "pod.spec.restartPolicy", id="restart policy"),
        pytest.param({}, {"volumes": {}}, "pod.spec.volumes", id="volumes not a list"),
        pytest.param({}, {"volumes": [{"hostPath": {}}]}, "pod.spec.volumes[0].name", id="volume without name"),
        pytest.param({}, {"volumes": [{"name": "v", "hostPath": "x"}]}, "pod.spec.volumes[0].hostPath", id="hostPath"),
        pytest.param(
            {},
            {"volumes": [{"name": "v", "emptyDir": {"medium": 1}}]},
            "pod.spec.volumes[0].emptyDir.medium",
            id="medium",
        ),
    ],
)
def test_pod_drain_fields_reject_bad_input(metadata: dict[str, Any], spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        pod_from_k8s({"metadata": {"name": "p", **metadata}, "spec": spec})
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(
            {"kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "a"}, "spec": {"replicas": 2}},
            WorkloadSelector(Kind.REPLICA_SET, "rs", "a", replicas=2),
            id="ReplicaSet with replicas",
        ),
        pytest.param(
            {"kind": "StatefulSet", "metadata": {"name": "ss"}, "spec": {}},
            WorkloadSelector(Kind.STATEFUL_SET, "ss", "default"),
            id="StatefulSet without replicas",
        ),
        pytest.param(
            {"kind": "ReplicationController", "metadata": {"name": "rc"}, "spec": {"replicas": "0"}},
            WorkloadSelector(Kind.REPLICATION_CONTROLLER, "rc", "default", replicas=0),
            id="ReplicationController",
        ),
        pytest.param(
            {"kind": "Job", "metadata": {"name": "j"}, "spec": {"parallelism": 2}},
            WorkloadSelector(Kind.JOB, "j"),
            id="Job",
        ),
        pytest.param(
            {"kind": "DaemonSet", "metadata": {"name": "d"}}, WorkloadSelector(Kind.DAEMON_SET, "d"), id="DaemonSet"
        ),
    ],
)
def test_controller_from_k8s(data: dict[str, Any], expected: WorkloadSelector) -> None:
    assert workload_from_k8s(Kind(data["kind"]), data, "workload") == expected


@pytest.mark.parametrize(
    ("data", "field"),
    [
        pytest.param({"kind": "Job", "metadata": {}}, "workload.metadata.name", id="missing name"),
        pytest.param(
            {"kind": "ReplicaSet", "metadata": {"name": "r"}, "spec": {"replicas": "many"}},
            "workload.spec.replicas",
            id="replicas not a number",
        ),
        pytest.param(
            {"kind": "ReplicaSet", "metadata": {"name": "r"}, "spec": {"replicas": -1}},
            "workload.spec.replicas",
            id="negative replicas",
        ),
        pytest.param({"kind": "Job", "metadata": {"name": "j"}, "spec": []}, "workload.spec", id="spec not a map"),
    ],
)
def test_controller_from_k8s_rejects_bad_input(data: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        workload_from_k8s(Kind(data["kind"]), data, "workload")
    assert caught.value.field == field
