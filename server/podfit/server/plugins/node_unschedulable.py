"""NodeUnschedulable: cordoned nodes (spec.unschedulable) reject pods that do not tolerate it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import Int32Array, IntpArray
from podfit.server.framework.profile import NODE_UNSCHEDULABLE
from podfit.server.framework.status import Status, unresolvable
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import Pod, Taint

if TYPE_CHECKING:
    from podfit.server.cache.node_table import NodeTable

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
_UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", value="", effect="NoSchedule")
_REJECTED = unresolvable(REASON_UNSCHEDULABLE)


class NodeUnschedulable:
    # Filter and Score of a row read only that row: results survive until the row's generation moves.
    row_local = True
    # ...and only its Node: pods coming and going leave them standing.
    reads_pods = False
    name = NODE_UNSCHEDULABLE

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        """The toleration does not depend on the node, so the verdict is the unschedulable column."""
        if _tolerates_unschedulable(pod):
            return np.zeros(len(rows), dtype=np.int32), []
        return table.unschedulable.take(rows).astype(np.int32), [_REJECTED]


def _tolerates_unschedulable(pod: Pod) -> bool:
    return any(t.tolerates(_UNSCHEDULABLE_TAINT) for t in pod.tolerations)


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> NodeUnschedulable:
    return NodeUnschedulable()
