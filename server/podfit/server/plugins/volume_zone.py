"""VolumeZone: a pod whose bound PersistentVolumes carry zone or region labels fits only nodes in them.

Only claims bound to a volume count (a WaitForFirstConsumer claim is VolumeBinding's business). A PV's
label of either generation is matched against the node's label of the same key, a beta key falling back
to the node's GA key (a GA key does not fall back); ``a__b`` means either zone, and an unparsable value
is ignored. A node with none of the four topology labels passes. Every rejection is unresolvable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import Int32Array, IntpArray, PreFilterResult
from podfit.server.framework.profile import VOLUME_ZONE
from podfit.server.framework.status import SKIP, Status, unresolvable
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import Pod

if TYPE_CHECKING:
    from podfit.server.cache.node_table import NodeTable
    from podfit.server.cache.snapshot import Snapshot

REASON_CONFLICT = "node(s) had no available volume zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
# In upstream's order.
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}
_MULTI_ZONE = "__"


def not_found(resource: str, name: str) -> str:
    """A lister's NotFound error text."""
    return f'{resource} "{name}" not found'


def label_zones(value: str) -> frozenset[str] | None:
    """``a__b`` -> {a, b}; None when a part is empty (upstream ignores such a label)."""
    zones = [part.strip() for part in value.split(_MULTI_ZONE)]
    return None if any(not zone for zone in zones) else frozenset(zones)


@dataclass(frozen=True, slots=True)
class _Topology:
    key: str
    values: frozenset[str]


@dataclass(frozen=True, slots=True)
class _State:
    topologies: tuple[_Topology, ...]

    def clone(self) -> _State:
        return self


def volume_topologies(pod: Pod, snapshot: Snapshot) -> tuple[tuple[_Topology, ...], Status | None]:
    """The zone and region constraints of the pod's bound volumes, or the status that rejects the pod."""
    storage = snapshot.storage
    topologies: list[_Topology] = []
    for volume in pod.volumes:
        if not volume.claim_name:
            continue
        claim = storage.claims.get(f"{pod.namespace}/{volume.claim_name}")
        if claim is None:
            return (), unresolvable(not_found("persistentvolumeclaim", volume.claim_name))
        if not claim.volume_name:
            if not claim.storage_class:
                return (), unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
            storage_class = storage.classes.get(claim.storage_class)
            if storage_class is None:
                return (), unresolvable(not_found("storageclass.storage.k8s.io", claim.storage_class))
            if storage_class.wait_for_first_consumer:
                continue
            return (), unresolvable("PersistentVolume had no name")
        pv = storage.volumes.get(claim.volume_name)
        if pv is None:
            return (), unresolvable(not_found("persistentvolume", claim.volume_name))
        for key in TOPOLOGY_LABELS:
            value = pv.labels.get(key)
            if value is None:
                continue
            zones = label_zones(value)
            if zones is not None:
                topologies.append(_Topology(key, zones))
    return tuple(topologies), None


class VolumeZone:
    name = VOLUME_ZONE

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        topologies, status = volume_topologies(pod, snapshot)
        if status is not None:
            return None, status
        if not topologies:
            return None, SKIP
        state.write(self.name, _State(topologies))
        return None, None

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        topologies = state.read(self.name, _State).topologies
        codes = np.zeros(len(rows), dtype=np.int32)
        infos = table.infos
        for i, row in enumerate(rows.tolist()):
            info = infos[row]
            if info is None:
                continue
            labels = info.node.labels
            if not any(key in labels for key in TOPOLOGY_LABELS):
                continue
            for topology in topologies:
                value = labels.get(topology.key)
                if value is None:
                    value = labels.get(_GA.get(topology.key, topology.key))
                if value is None or value not in topology.values:
                    codes[i] = 1
                    break
        return codes, [unresolvable(REASON_CONFLICT)]


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> VolumeZone:
    return VolumeZone()
