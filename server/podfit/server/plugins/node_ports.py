"""NodePorts: a pod's host ports must be free on the node (0.0.0.0 clashes with every address)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from podfit.server.cache.node_info import NodeInfo
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import PreFilterResult
from podfit.server.framework.profile import NODE_PORTS
from podfit.server.framework.status import SKIP, Status, unschedulable
from podfit.server.model import ContainerPort, Pod

if TYPE_CHECKING:
    from podfit.server.cache.snapshot import Snapshot

REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"


class NodePorts:
    """No PreFilterExtensions upstream: the wanted ports do not depend on other pods, and the used
    ports are read from the (possibly preemption-modified) NodeInfo itself."""

    name = NODE_PORTS

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.host_ports:
            return None, SKIP
        state.write(self.name, pod.host_ports)
        return None, None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        wanted: tuple[ContainerPort, ...] = state.get(self.name) or pod.host_ports
        used = node_info.used_ports
        if not used:
            return None
        for port in wanted:
            if used.conflicts(port.host_ip, port.protocol, port.host_port):
                return unschedulable(REASON_PORTS)
        return None


def new(args: Mapping[str, Any]) -> NodePorts:
    return NodePorts()
