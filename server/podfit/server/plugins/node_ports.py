"""NodePorts: a pod's host ports must be free on the node (0.0.0.0 clashes with every address)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import Int32Array, IntpArray, PreFilterResult
from podfit.server.framework.profile import NODE_PORTS
from podfit.server.framework.status import SKIP, Status, unschedulable
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import ContainerPort, Pod

if TYPE_CHECKING:
    from podfit.server.cache.node_table import NodeTable
    from podfit.server.cache.snapshot import Snapshot

REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"
_REJECTED = unschedulable(REASON_PORTS)


class NodePorts:
    """No PreFilterExtensions upstream: the wanted ports do not depend on other pods, and the used
    ports are read from the (possibly preemption-modified) NodeInfo itself."""

    # Filter and Score of a row read only that row: results survive until the row's generation moves.
    row_local = True
    # ...but the row's used ports live in its NodeInfo, not in a column.
    reads_node_info = True
    name = NODE_PORTS

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.host_ports:
            return None, SKIP
        state.write(self.name, pod.host_ports)
        return None, None

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        """Only nodes with a used host port can conflict; those few are checked one by one."""
        wanted: tuple[ContainerPort, ...] = state.get(self.name) or pod.host_ports
        codes = np.zeros(len(rows), dtype=np.int32)
        infos = table.infos
        with_ports = np.flatnonzero(table.has_ports.take(rows))
        for i, row in zip(with_ports.tolist(), rows[with_ports].tolist(), strict=True):
            info = infos[row]
            used = info.used_ports if info is not None else None
            if used and any(used.conflicts(p.host_ip, p.protocol, p.host_port) for p in wanted):
                codes[i] = 1
        return codes, [_REJECTED]


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> NodePorts:
    return NodePorts()
