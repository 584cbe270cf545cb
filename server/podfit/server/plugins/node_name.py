"""NodeName: a pod that names a node fits only there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import Int32Array, IntpArray
from podfit.server.framework.profile import NODE_NAME
from podfit.server.framework.status import Status, unresolvable
from podfit.server.model import Pod

if TYPE_CHECKING:
    from podfit.server.cache.node_table import NodeTable

REASON_NODE_NAME = "node(s) didn't match the requested node name"
_REJECTED = unresolvable(REASON_NODE_NAME)


class NodeName:
    # Filter and Score of a row read only that row: results survive until the row's generation moves.
    row_local = True
    name = NODE_NAME

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        """Names are unique table rows, so the named node is the one row equal to ``row_of[name]``."""
        if not pod.node_name:
            return np.zeros(len(rows), dtype=np.int32), []
        row = table.row_of.get(pod.node_name, -1)
        return (rows != row).astype(np.int32), [_REJECTED]


def new(args: Mapping[str, Any]) -> NodeName:
    return NodeName()
