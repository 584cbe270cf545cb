"""VolumeRestrictions: in-tree disks that cannot be mounted twice, and ReadWriteOncePod claims.

PreFilter looks up every PersistentVolumeClaim the pod names (a missing one rejects the pod, before
VolumeBinding ever sees it) and counts the ReadWriteOncePod claims some pod on a node already uses;
Filter then rejects every node while such a claim is in use, and the nodes holding a conflicting GCE PD,
EBS volume, iSCSI or RBD disk. Both rejections are Unschedulable: evicting the holder may help, so
PreFilter's count follows the pods preemption removes and re-adds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import Int32Array, IntpArray, PreFilterResult
from podfit.server.framework.profile import VOLUME_RESTRICTIONS
from podfit.server.framework.status import SKIP, Status, unresolvable, unschedulable
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import Pod, Volume

if TYPE_CHECKING:
    from podfit.server.cache.node_info import NodeInfo
    from podfit.server.cache.node_table import NodeTable
    from podfit.server.cache.snapshot import Snapshot

REASON_DISK_CONFLICT = "node(s) had no available disk"
REASON_RWOP_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)
READ_WRITE_ONCE_POD = "ReadWriteOncePod"


def claim_not_found(name: str) -> str:
    """The lister's NotFound error text for a claim."""
    return f'persistentvolumeclaim "{name}" not found'


def _in_tree(volume: Volume) -> bool:
    return bool(volume.gce_pd_name or volume.aws_volume_id or volume.iscsi_iqn or volume.rbd is not None)


def _conflicts(volume: Volume, existing: Pod) -> bool:
    """Upstream's isVolumeConflict: the same disk, and not read-only on both sides (EBS: always)."""
    for other in existing.volumes:
        both_read_only = volume.read_only and other.read_only
        if volume.gce_pd_name and volume.gce_pd_name == other.gce_pd_name and not both_read_only:
            return True
        if volume.aws_volume_id and volume.aws_volume_id == other.aws_volume_id:
            return True
        if volume.iscsi_iqn and volume.iscsi_iqn == other.iscsi_iqn and not both_read_only:
            return True
        if volume.rbd is not None and other.rbd is not None:
            monitors, pool, image = volume.rbd
            other_monitors, other_pool, other_image = other.rbd
            overlap = bool(set(monitors) & set(other_monitors))
            if overlap and pool == other_pool and image == other_image and not both_read_only:
                return True
    return False


@dataclass(slots=True)
class _State:
    # Names of the pod's ReadWriteOncePod claims (in its namespace).
    rwop_claims: frozenset[str]
    # How many uses of them pods on nodes hold.
    conflicting: int

    def clone(self) -> _State:
        return _State(self.rwop_claims, self.conflicting)

    def update(self, pod: Pod, multiplier: int) -> None:
        # As upstream, a pod's claims are matched by name only.
        self.conflicting += multiplier * sum(1 for v in pod.volumes if v.claim_name in self.rwop_claims)


def _used_claims(snapshot: Snapshot) -> set[str]:
    """ "namespace/claim" of every claim some pod on a node uses (upstream's usedPVCSet)."""
    return {
        f"{pod.namespace}/{v.claim_name}"
        for info in snapshot.node_infos
        for pod in info.pods.values()
        for v in pod.volumes
        if v.claim_name
    }


class VolumeRestrictions:
    name = VOLUME_RESTRICTIONS

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        needs_check = any(_in_tree(v) for v in pod.volumes)
        claims = snapshot.storage.claims
        rwop: set[str] = set()
        for volume in pod.volumes:
            if not volume.claim_name:
                continue
            claim = claims.get(f"{pod.namespace}/{volume.claim_name}")
            if claim is None:
                return None, unresolvable(claim_not_found(volume.claim_name))
            if READ_WRITE_ONCE_POD in claim.access_modes:
                rwop.add(claim.name)
        conflicting = 0
        if rwop:
            used = _used_claims(snapshot)
            conflicting = sum(1 for name in rwop if f"{pod.namespace}/{name}" in used)
        if not needs_check and not conflicting:
            return None, SKIP
        state.write(self.name, _State(frozenset(rwop), conflicting))
        return None, None

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo, snapshot: Snapshot) -> None:
        state.read(self.name, _State).update(pod_to_add, 1)

    def remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo, snapshot: Snapshot
    ) -> None:
        state.read(self.name, _State).update(pod_to_remove, -1)

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        codes = np.zeros(len(rows), dtype=np.int32)
        disks = [v for v in pod.volumes if _in_tree(v)]
        if disks:
            infos = table.infos
            for i, row in enumerate(rows.tolist()):
                info = infos[row]
                if info is not None and any(_conflicts(v, p) for v in disks for p in info.pods.values()):
                    codes[i] = 1
        if state.read(self.name, _State).conflicting > 0:
            codes[codes == 0] = 2
        return codes, [unschedulable(REASON_DISK_CONFLICT), unschedulable(REASON_RWOP_CONFLICT)]


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> VolumeRestrictions:
    return VolumeRestrictions()
