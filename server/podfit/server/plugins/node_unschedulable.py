"""NodeUnschedulable: cordoned nodes (spec.unschedulable) reject pods that do not tolerate it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from podfit.server.cache.node_info import NodeInfo
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.profile import NODE_UNSCHEDULABLE
from podfit.server.framework.status import Status, unresolvable
from podfit.server.model import Pod, Taint

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
_UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", value="", effect="NoSchedule")


class NodeUnschedulable:
    name = NODE_UNSCHEDULABLE

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if not node_info.node.unschedulable:
            return None
        if any(t.tolerates(_UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return None
        return unresolvable(REASON_UNSCHEDULABLE)


def new(args: Mapping[str, Any]) -> NodeUnschedulable:
    return NodeUnschedulable()
