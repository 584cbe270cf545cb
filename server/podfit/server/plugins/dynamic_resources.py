"""DynamicResources: podfit does not model ResourceClaims, so for the pods it accepts (no claims) the
plugin passes every node and scores 0, exactly what kube-scheduler reports for claim-less pods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import Int64Array, IntpArray
from podfit.server.framework.profile import DYNAMIC_RESOURCES
from podfit.server.model import Pod

if TYPE_CHECKING:
    from podfit.server.cache.node_table import NodeTable


class DynamicResources:
    # Filter and Score of a row read only that row: results survive until the row's generation moves.
    row_local = True
    name = DYNAMIC_RESOURCES

    def score_rows(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray) -> Int64Array:
        return np.zeros(len(rows), dtype=np.int64)


def new(args: Mapping[str, Any]) -> DynamicResources:
    return DynamicResources()
