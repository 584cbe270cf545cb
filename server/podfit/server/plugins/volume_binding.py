"""VolumeBinding: scores nodes by how full the storage a pod's volumes would bind to is.

Only with StorageCapacityScoring on (beta and on from v1.37) does the plugin score at all: without the
gate upstream builds no scorer and PreScore skips every pod. With it, a node where the pod has no volume
to bind scores 0. podfit does not model PersistentVolumeClaims yet, so every pod it accepts has nothing
to bind and scores 0 on every node, exactly as kube-scheduler scores a pod without claims.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import Int64Array, IntpArray
from podfit.server.framework.profile import VOLUME_BINDING
from podfit.server.framework.status import SKIP, Status
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import Pod

if TYPE_CHECKING:
    from podfit.server.cache.node_table import NodeTable
    from podfit.server.cache.snapshot import Snapshot


class VolumeBinding:
    # Score of a row reads only that row: results survive until the row's generation moves.
    row_local = True
    name = VOLUME_BINDING

    def __init__(self, capacity_scoring: bool) -> None:
        self.capacity_scoring = capacity_scoring

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: IntpArray) -> Status | None:
        return None if self.capacity_scoring else SKIP

    def score_rows(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray) -> Int64Array:
        return np.zeros(len(rows), dtype=np.int64)


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> VolumeBinding:
    return VolumeBinding(features.enable_storage_capacity_scoring)
