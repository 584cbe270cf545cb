"""VolumeBinding: the pod's PersistentVolumeClaims must be bound, or bindable, on the node.

PreFilter reads every claim (a missing generic-ephemeral claim, a lost or deleting claim, an ephemeral
claim the pod does not own: the pod is rejected) and sorts them as upstream's volume binder does: bound
(volume name and the bind-completed annotation), delayed (WaitForFirstConsumer, no volume name yet), and
immediate (anything else: the pod waits for the PV controller and is rejected). Filter then asks, per
node: do the bound claims' volumes allow the node (node affinity), can each delayed claim be matched to
an available PersistentVolume (smallest first, no PV twice) or provisioned there (the class's provisioner
and allowed topologies, and enough CSIStorageCapacity when the CSIDriver asks for capacity checks)?
Reasons come in upstream's order. All rejections are unresolvable.

Scoring (StorageCapacityScoring, on from v1.37) favours nodes whose storage is least used: per class,
100 minus the utilisation of the statically matched volumes, or of the capacity found for provisioning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from podfit.server.cache.snapshot import NO_STORAGE
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import Int32Array, Int64Array, IntpArray, PreFilterResult
from podfit.server.framework.profile import VOLUME_BINDING
from podfit.server.framework.status import SKIP, Status, unresolvable
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import Node, NodeSelectorRequirement, NodeSelectorTerm, Pod
from podfit.server.model.node_selectors import field_requirement_matches, label_requirement_matches, term_valid
from podfit.server.model.storage import (
    SELECTED_NODE_ANNOTATION,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
)
from podfit.server.plugins.volume_zone import BETA_REGION, BETA_ZONE, REGION, ZONE, not_found

if TYPE_CHECKING:
    from podfit.server.cache.node_table import NodeTable
    from podfit.server.cache.snapshot import Snapshot, StorageView

REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
_MAX_UTILIZATION = 100


def _affinity_allows(pv: PersistentVolume, labels: Mapping[str, str]) -> bool:
    """CheckNodeAffinity: the PV's required terms against a node known by its labels only (so a
    ``metadata.name`` field requirement matches no node, as upstream's label-only node)."""
    if pv.node_affinity is None:
        return True
    for term in pv.node_affinity:
        if not term_valid(term):
            continue
        if all(label_requirement_matches(req, labels) for req in term.match_expressions) and all(
            field_requirement_matches(req, "") for req in term.match_fields
        ):
            return True
    return False


# In-tree plugin -> the zone topology key of its CSI driver (csi-translation-lib), for the in-tree
# volumes podfit models.
_CSI_TOPOLOGY = {
    "kubernetes.io/gce-pd": "topology.gke.io/zone",
    "kubernetes.io/aws-ebs": "topology.ebs.csi.aws.com/zone",
}


def _in_tree_plugin(pv: PersistentVolume) -> str:
    if pv.csi_driver:
        return ""
    if pv.gce_pd_name:
        return "kubernetes.io/gce-pd"
    return "kubernetes.io/aws-ebs" if pv.aws_volume_id else ""


def translated_for_node(pv: PersistentVolume, migrated_plugins: frozenset[str]) -> PersistentVolume:
    """tryTranslatePVToCSI: an in-tree PV on a node whose CSINode lists its plugin as migrated is judged
    as its CSI translation, whose node affinity names the CSI driver's zone key instead of the in-tree
    zone label (translateTopologyFromInTreeToCSI)."""
    plugin = _in_tree_plugin(pv)
    if not plugin or plugin not in migrated_plugins:
        return pv
    csi_key = _CSI_TOPOLOGY[plugin]
    terms = list(pv.node_affinity or ())

    def keys() -> set[str]:
        return {req.key for term in terms for req in term.match_expressions}

    if ZONE in keys():
        zone_label, region_label = ZONE, REGION
    elif BETA_ZONE in keys():
        zone_label, region_label = BETA_ZONE, BETA_REGION
    elif ZONE in pv.labels:
        zone_label, region_label = ZONE, REGION
    elif BETA_ZONE in pv.labels:
        zone_label, region_label = BETA_ZONE, BETA_REGION
    else:
        zone_label, region_label = ZONE, REGION

    def rename(old: str, new: str) -> None:
        for i, term in enumerate(terms):
            exprs = tuple(replace(r, key=new) if r.key == old else r for r in term.match_expressions)
            terms[i] = replace(term, match_expressions=exprs)

    if zone_label in keys():
        rename(zone_label, csi_key)
    elif zone_label in pv.labels:
        zones = sorted({z.strip() for z in pv.labels[zone_label].split("__") if z.strip()})
        if zones:
            if not terms:
                terms = [NodeSelectorTerm()]
            requirement = NodeSelectorRequirement(csi_key, "In", tuple(zones))
            terms = [replace(t, match_expressions=(*t.match_expressions, requirement)) for t in terms]
    if region_label == BETA_REGION and BETA_REGION in keys():
        rename(BETA_REGION, REGION)
    return replace(pv, node_affinity=tuple(terms) if terms else pv.node_affinity)


def _claim_key(claim: PersistentVolumeClaim) -> str:
    return f"{claim.namespace}/{claim.name}"


def _bound_to(pv: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """IsVolumeBoundToClaim."""
    if pv.claim_ref is None:
        return False
    namespace, name, uid = pv.claim_ref
    return name == claim.name and namespace == claim.namespace and (not uid or uid == claim.uid)


def find_matching_volume(
    claim: PersistentVolumeClaim, volumes: Sequence[PersistentVolume], labels: Mapping[str, str], excluded: set[str]
) -> PersistentVolume | None:
    """FindMatchingVolume for a delayed claim on a node: a PV pre-bound to the claim, else the smallest
    available one that fits (size, mode, class, selector, node affinity, access modes)."""
    smallest: PersistentVolume | None = None
    for pv in volumes:
        if pv.name in excluded:
            continue
        if pv.claim_ref is not None and not _bound_to(pv, claim):
            continue
        capacity = pv.capacity or 0
        if capacity < claim.request:
            continue
        if claim.volume_mode != pv.volume_mode:
            continue
        allowed = _affinity_allows(pv, labels)
        if _bound_to(pv, claim):
            return pv if allowed else None
        if pv.phase != "Available":
            continue
        if claim.selector is not None and not claim.selector.matches(pv.labels):
            continue
        if pv.storage_class != claim.storage_class:
            continue
        if not allowed:
            continue
        if not set(claim.access_modes) <= set(pv.access_modes):
            continue
        if smallest is None or (smallest.capacity or 0) > capacity:
            smallest = pv
    return smallest


@dataclass(frozen=True, slots=True)
class _Decision:
    """What Filter found for one node (upstream's PodVolumes): the static bindings and, for claims to
    provision, the capacity objects that had room (None where no capacity was checked)."""

    static: tuple[tuple[PersistentVolumeClaim, PersistentVolume], ...] = ()
    provisions: tuple[tuple[PersistentVolumeClaim, CSIStorageCapacity | None], ...] = ()


@dataclass(slots=True)
class _State:
    bound: tuple[PersistentVolumeClaim, ...]
    delayed: tuple[PersistentVolumeClaim, ...]
    # Candidate PVs of each delayed claim's class, by name.
    volumes_by_class: dict[str, tuple[PersistentVolume, ...]]
    storage: StorageView
    # What a node's answer depends on besides these claims: the node labels any volume, class or
    # capacity reads, whether the node's name matters (a selected-node annotation), and whether its
    # CSINode does (an in-tree bound volume, judged as its CSI translation where migrated).
    label_keys: tuple[str, ...] = ()
    by_name: bool = False
    by_csi_node: bool = False
    # Filter's decisions for Score: every distinct decision, and per table (by id) each row's index
    # into them (-1: no decision, the row failed or was not filtered).
    decisions: list[_Decision] = field(default_factory=list)
    row_decisions: dict[int, Int32Array] = field(default_factory=dict)
    static_bindings: bool = False

    def clone(self) -> _State:
        return self


_NO_CLAIMS = _State((), (), {}, NO_STORAGE)


def _term_keys(terms: Sequence[NodeSelectorTerm] | None) -> set[str]:
    return {req.key for term in terms or () for req in term.match_expressions}


def _dependencies(
    bound: Sequence[PersistentVolumeClaim],
    delayed: Sequence[PersistentVolumeClaim],
    volumes_by_class: Mapping[str, Sequence[PersistentVolume]],
    storage: StorageView,
) -> tuple[tuple[str, ...], bool, bool]:
    """(label keys, by name, by CSINode): everything a node's answer reads of the node."""
    keys: set[str] = set()
    by_csi_node = False
    for claim in bound:
        pv = storage.volumes.get(claim.volume_name)
        if pv is not None:
            keys |= _term_keys(pv.node_affinity)
            if _in_tree_plugin(pv):
                by_csi_node = True
                keys |= set(_CSI_TOPOLOGY.values())
    for volumes in volumes_by_class.values():
        for pv in volumes:
            keys |= _term_keys(pv.node_affinity)
    classes = {claim.storage_class for claim in delayed}
    for name in classes:
        storage_class = storage.classes.get(name)
        if storage_class is not None:
            keys |= {key for term in storage_class.allowed_topologies for key, _ in term}
    for capacity in storage.capacities:
        if capacity.storage_class in classes and capacity.node_topology is not None:
            keys |= {key for key, _ in capacity.node_topology.match_labels}
            keys |= {req.key for req in capacity.node_topology.match_expressions}
    by_name = any(SELECTED_NODE_ANNOTATION in claim.annotations for claim in delayed)
    return tuple(sorted(keys)), by_name, by_csi_node


class VolumeBinding:
    name = VOLUME_BINDING

    def __init__(self, capacity_scoring: bool) -> None:
        # StorageCapacityScoring: without it upstream builds no scorer and never scores.
        self.capacity_scoring = capacity_scoring

    def replica_invariant(self, state: CycleState, pod: Pod) -> bool:
        """A pod without claims (PreFilter skipped) binds nothing, and its replicas neither."""
        return self.name in state.skip_filter

    # -- PreFilter ---------------------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        storage = snapshot.storage
        claims: list[PersistentVolumeClaim] = []
        for volume in pod.volumes:
            if not (volume.claim_name or volume.ephemeral):
                continue
            name = volume.claim_name or f"{pod.name}-{volume.name}"
            claim = storage.claims.get(f"{pod.namespace}/{name}")
            if claim is None:
                if volume.ephemeral:
                    return None, unresolvable(
                        f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
                    )
                return None, unresolvable(not_found("persistentvolumeclaim", name))
            if claim.phase == "Lost":
                return None, unresolvable(
                    f'persistentvolumeclaim "{claim.name}" bound to non-existent persistentvolume "{claim.volume_name}"'
                )
            if claim.being_deleted:
                return None, unresolvable(f'persistentvolumeclaim "{claim.name}" is being deleted')
            if volume.ephemeral and not any(r.controller and r.uid == pod.uid for r in claim.owner_references):
                return None, unresolvable(
                    f"PVC {claim.namespace}/{claim.name} was not created for pod {pod.namespace}/{pod.name} "
                    "(pod is not owner)"
                )
            claims.append(claim)
        if not claims:
            state.write(self.name, _NO_CLAIMS)
            return None, SKIP
        bound: list[PersistentVolumeClaim] = []
        delayed: list[PersistentVolumeClaim] = []
        for claim in claims:
            if claim.bound:
                bound.append(claim)
                continue
            storage_class = storage.classes.get(claim.storage_class) if claim.storage_class else None
            if storage_class is not None and storage_class.wait_for_first_consumer and not claim.volume_name:
                delayed.append(claim)
            else:
                return None, unresolvable(REASON_UNBOUND_IMMEDIATE)
        classes = {claim.storage_class for claim in delayed}
        by_class: dict[str, list[PersistentVolume]] = {name: [] for name in classes}
        if classes:
            for pv_name in sorted(storage.volumes):
                pv = storage.volumes[pv_name]
                if pv.storage_class in by_class:
                    by_class[pv.storage_class].append(pv)
        volumes_by_class = {k: tuple(v) for k, v in by_class.items()}
        keys, by_name, by_csi_node = _dependencies(bound, delayed, volumes_by_class, storage)
        state.write(
            self.name,
            _State(tuple(bound), tuple(delayed), volumes_by_class, storage, keys, by_name, by_csi_node),
        )
        return None, None

    # -- Filter ------------------------------------------------------------------------------------

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        """Nodes that look the same to the pod's claims (the labels they read, and the name or CSINode
        when those matter) get one answer: it is computed once per distinct form and broadcast."""
        data = state.read(self.name, _State)
        inverse, representatives = self._forms(data, table, rows)
        infos = table.infos
        statuses: list[Status] = []
        known: dict[tuple[str, ...], int] = {}
        group_codes = np.zeros(len(representatives), dtype=np.int32)
        group_decisions = np.full(len(representatives), -1, dtype=np.int32)
        for g, position in enumerate(representatives):
            info = infos[int(rows[position])]
            if info is None:
                continue
            reasons, decision = self._find_pod_volumes(data, info.node)
            if reasons:
                if reasons not in known:
                    statuses.append(unresolvable(*reasons))
                    known[reasons] = len(statuses)
                group_codes[g] = known[reasons]
            else:
                group_decisions[g] = len(data.decisions)
                data.decisions.append(decision)
                data.static_bindings = data.static_bindings or bool(decision.static)
        row_decisions = data.row_decisions.get(id(table))
        if row_decisions is None or len(row_decisions) < table.capacity:
            grown = np.full(table.capacity, -1, dtype=np.int32)
            if row_decisions is not None:
                grown[: len(row_decisions)] = row_decisions
            row_decisions = data.row_decisions[id(table)] = grown
        row_decisions[rows] = group_decisions[inverse]
        return group_codes[inverse], statuses

    @staticmethod
    def _forms(data: _State, table: NodeTable, rows: IntpArray) -> tuple[IntpArray, list[int]]:
        """(each row's form, one row position per form): rows of a form share every value the answer
        reads. By name, every row is a form of its own."""
        if data.by_name or not len(rows):
            return np.arange(len(rows), dtype=np.intp), list(range(len(rows)))
        columns = [table.label_codes(key, rows) for key in data.label_keys]
        if data.by_csi_node:
            infos, csi_nodes = table.infos, data.storage.csi_nodes
            codes: dict[frozenset[str] | None, int] = {}
            migrated = []
            for row in rows.tolist():
                csi = csi_nodes.get(infos[row].name) if infos[row] is not None else None
                plugins = csi.migrated_plugins if csi is not None else None
                migrated.append(codes.setdefault(plugins, len(codes)))
            columns.append(np.array(migrated, dtype=np.int32))
        if not columns:
            return np.zeros(len(rows), dtype=np.intp), [0]
        _, first, inverse = np.unique(np.stack(columns, axis=1), axis=0, return_index=True, return_inverse=True)
        return inverse.reshape(-1).astype(np.intp), first.tolist()

    def _find_pod_volumes(self, data: _State, node: Node) -> tuple[tuple[str, ...], _Decision]:
        """FindPodVolumes: (reasons, in upstream's order; the node's decision when there are none)."""
        storage = data.storage
        labels = node.labels
        affinity_ok, volumes_found = True, True
        csi_node = storage.csi_nodes.get(node.name)
        migrated = csi_node.migrated_plugins if csi_node is not None else frozenset()
        for claim in data.bound:
            pv = storage.volumes.get(claim.volume_name)
            if pv is None:
                volumes_found = False
                break
            if not _affinity_allows(translated_for_node(pv, migrated), labels):
                affinity_ok = False
                break
        bindable, enough_storage = True, True
        static: list[tuple[PersistentVolumeClaim, PersistentVolume]] = []
        provisions: list[tuple[PersistentVolumeClaim, CSIStorageCapacity | None]] = []
        if data.delayed:
            to_match: list[PersistentVolumeClaim] = []
            to_provision: list[PersistentVolumeClaim] = []
            for claim in data.delayed:
                selected = claim.annotations.get(SELECTED_NODE_ANNOTATION)
                if selected is not None:
                    if selected != node.name:
                        bindable = False
                        break
                    to_provision.append(claim)
                else:
                    to_match.append(claim)
            if bindable:
                chosen: set[str] = set()
                # Smallest claims first (upstream's byPVCSize; a stable sort keeps the pod's order on ties).
                for claim in sorted(to_match, key=lambda c: c.request):
                    pv = find_matching_volume(claim, data.volumes_by_class.get(claim.storage_class, ()), labels, chosen)
                    if pv is None:
                        to_provision.append(claim)
                        bindable = False
                        continue
                    chosen.add(pv.name)
                    static.append((claim, pv))
                if to_provision:
                    bindable, enough_storage, provisions = self._check_provisions(to_provision, node, storage)
        reasons: list[str] = []
        if not affinity_ok:
            reasons.append(REASON_NODE_CONFLICT)
        if not bindable:
            reasons.append(REASON_BIND_CONFLICT)
        if not enough_storage:
            reasons.append(REASON_NOT_ENOUGH_SPACE)
        if not volumes_found:
            reasons.append(REASON_PV_NOT_EXIST)
        return tuple(reasons), _Decision(tuple(static), tuple(provisions))

    @staticmethod
    def _check_provisions(
        claims: Sequence[PersistentVolumeClaim], node: Node, storage: StorageView
    ) -> tuple[bool, bool, list[tuple[PersistentVolumeClaim, CSIStorageCapacity | None]]]:
        """checkVolumeProvisions: (provisionable, enough storage, the provisions)."""
        provisions: list[tuple[PersistentVolumeClaim, CSIStorageCapacity | None]] = []
        for claim in claims:
            storage_class = storage.classes.get(claim.storage_class)
            if storage_class is None:
                return False, False, []
            provisioner = storage_class.provisioner
            if not provisioner or provisioner == NO_PROVISIONER:
                return False, True, []
            if storage_class.allowed_topologies and not any(
                all(node.labels.get(key) in values for key, values in term) for term in storage_class.allowed_topologies
            ):
                return False, True, []
            sufficient, capacity = _capacity_for(claim, provisioner, storage_class.name, node, storage)
            if not sufficient:
                return True, False, []
            provisions.append((claim, capacity))
        return True, True, provisions

    # -- Score -------------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: IntpArray) -> Status | None:
        return None if self.capacity_scoring else SKIP

    def score_rows(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray) -> Int64Array:
        data = state.get(self.name)
        if not isinstance(data, _State) or not data.decisions:
            return np.zeros(len(rows), dtype=np.int64)
        row_decisions = data.row_decisions.get(id(table))
        if row_decisions is None:
            return np.zeros(len(rows), dtype=np.int64)
        # Scores of every decision, then broadcast: nodes of one form share theirs.
        scores = np.array([_capacity_score(d, self.capacity_scoring) for d in data.decisions] + [0], dtype=np.int64)
        return scores[row_decisions[rows]]


def _capacity_for(
    claim: PersistentVolumeClaim, provisioner: str, class_name: str, node: Node, storage: StorageView
) -> tuple[bool, CSIStorageCapacity | None]:
    """hasEnoughCapacity: only a CSIDriver that asks for capacity checks is checked; then some capacity
    object of the class that selects the node must hold the claim on its own."""
    if not claim.has_request:
        return True, None
    driver = storage.csi_drivers.get(provisioner)
    if driver is None or not driver.storage_capacity:
        return True, None
    for capacity in storage.capacities:
        limit = capacity.maximum_volume_size if capacity.maximum_volume_size is not None else capacity.capacity
        if (
            capacity.storage_class == class_name
            and limit is not None
            and limit >= claim.request
            and capacity.node_topology is not None
            and capacity.node_topology.matches(node.labels)
        ):
            return True, capacity
    return False, None


def _capacity_score(decision: _Decision, capacity_scoring: bool) -> int:
    """The scorer of the default shape (utilisation 0 -> 100, 100 -> 0), averaged over classes and
    rounded half away from zero."""
    classes: dict[str, list[int]] = {}
    if decision.static or not capacity_scoring:
        for claim, pv in decision.static:
            entry = classes.setdefault(pv.storage_class, [0, 0])
            entry[0] += claim.request
            entry[1] += pv.capacity or 0
    else:
        for claim, capacity in decision.provisions:
            if capacity is None:
                continue
            entry = classes.setdefault(claim.storage_class, [0, 0])
            entry[1] = capacity.capacity or 0  # the capacity, not the largest volume size
            entry[0] += claim.request
    if not classes:
        return 0
    total = 0
    for requested, available in classes.values():
        utilization = (
            _MAX_UTILIZATION if available == 0 or requested > available else requested * _MAX_UTILIZATION // available
        )
        total += _MAX_UTILIZATION - utilization
    mean = total / len(classes)
    return int(mean + 0.5) if mean >= 0 else -int(-mean + 0.5)


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> VolumeBinding:
    return VolumeBinding(features.enable_storage_capacity_scoring)
