"""NodeName: a pod that names a node fits only there.

From v1.37 (``node_name_pre_filter``) the plugin also restricts the candidates at PreFilter, so every
other node is rejected by the framework ("didn't satisfy plugin(s) [NodeName]") before Filter runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import Int32Array, IntpArray, PreFilterResult
from podfit.server.framework.profile import NODE_NAME
from podfit.server.framework.status import Status, unresolvable
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import Pod

if TYPE_CHECKING:
    from podfit.server.cache.node_table import NodeTable
    from podfit.server.cache.snapshot import Snapshot

REASON_NODE_NAME = "node(s) didn't match the requested node name"
_REJECTED = unresolvable(REASON_NODE_NAME)


class NodeName:
    # Filter and Score of a row read only that row: results survive until the row's generation moves.
    row_local = True
    # ...and only its Node: pods coming and going leave them standing.
    reads_pods = False
    name = NODE_NAME

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        """Names are unique table rows, so the named node is the one row equal to ``row_of[name]``."""
        if not pod.node_name:
            return np.zeros(len(rows), dtype=np.int32), []
        row = table.row_of.get(pod.node_name, -1)
        return (rows != row).astype(np.int32), [_REJECTED]


class NodeNamePreFilter(NodeName):
    """NodeName with upstream v1.37's PreFilter."""

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.node_name:
            return None, None
        return PreFilterResult(frozenset((pod.node_name,))), None


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> NodeName:
    return NodeNamePreFilter() if features.node_name_pre_filter else NodeName()
