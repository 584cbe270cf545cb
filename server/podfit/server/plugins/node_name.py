"""NodeName: a pod that names a node fits only there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from podfit.server.cache.node_info import NodeInfo
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.profile import NODE_NAME
from podfit.server.framework.status import Status, unresolvable
from podfit.server.model import Pod

REASON_NODE_NAME = "node(s) didn't match the requested node name"


class NodeName:
    name = NODE_NAME

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if not pod.node_name or pod.node_name == node_info.name:
            return None
        return unresolvable(REASON_NODE_NAME)


def new(args: Mapping[str, Any]) -> NodeName:
    return NodeName()
