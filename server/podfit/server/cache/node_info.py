"""Per-node aggregates maintained incrementally as pods come and go (kube-scheduler's NodeInfo)."""

from __future__ import annotations

from collections.abc import Iterator

from podfit.server.model import Node, Pod
from podfit.server.model.objects import CPU, MEMORY

# (host IP, protocol, port) -> number of bound pods using it.
PortKey = tuple[str, str, int]
WILDCARD_IP = "0.0.0.0"


class HostPortInfo:
    """Used host ports; 0.0.0.0 conflicts with every address of the same protocol and port."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: dict[PortKey, int] = {}

    def add(self, ip: str, protocol: str, port: int) -> None:
        key = (ip or WILDCARD_IP, protocol or "TCP", port)
        self._counts[key] = self._counts.get(key, 0) + 1

    def remove(self, ip: str, protocol: str, port: int) -> None:
        key = (ip or WILDCARD_IP, protocol or "TCP", port)
        left = self._counts.get(key, 0) - 1
        if left > 0:
            self._counts[key] = left
        else:
            self._counts.pop(key, None)

    def conflicts(self, ip: str, protocol: str, port: int) -> bool:
        """NodePorts' CheckConflict."""
        ip = ip or WILDCARD_IP
        protocol = protocol or "TCP"
        if ip == WILDCARD_IP:
            return any(p == protocol and n == port for (_, p, n) in self._counts)
        return (ip, protocol, port) in self._counts or (WILDCARD_IP, protocol, port) in self._counts

    def __len__(self) -> int:
        return len(self._counts)

    def __iter__(self) -> Iterator[PortKey]:
        return iter(self._counts)

    def clone(self) -> HostPortInfo:
        copy = HostPortInfo()
        copy._counts = dict(self._counts)
        return copy


class NodeInfo:
    """A node and the bound pods on it, with summed requests and indexes the plugins read."""

    __slots__ = (
        "derived",
        "generation",
        "node",
        "non_zero_cpu",
        "non_zero_memory",
        "pods",
        "pods_with_affinity",
        "pods_with_required_anti_affinity",
        "requested",
        "used_ports",
    )

    def __init__(self, node: Node, generation: int = 0) -> None:
        self.node = node
        # Bound, non-terminal pods by namespace/name.
        self.pods: dict[str, Pod] = {}
        self.requested: dict[str, int] = {}
        self.non_zero_cpu = 0
        self.non_zero_memory = 0
        self.used_ports = HostPortInfo()
        self.pods_with_affinity: dict[str, Pod] = {}
        self.pods_with_required_anti_affinity: dict[str, Pod] = {}
        self.generation = generation
        # What plugins derive from the pod set (each under its own key), dropped whenever it changes: a
        # node whose pods did not change keeps it from one decision to the next, and a clone starts empty.
        self.derived: dict[str, object] | None = None

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def allocatable(self) -> dict[str, int]:
        return self.node.allocatable  # type: ignore[return-value]

    def add_pod(self, pod: Pod) -> None:
        self.derived = None
        key = pod.key
        if key in self.pods:
            self.remove_pod(self.pods[key])
        self.pods[key] = pod
        self._update(pod, 1)

    def remove_pod(self, pod: Pod) -> bool:
        existing = self.pods.pop(pod.key, None)
        if existing is None:
            return False
        self.derived = None
        self._update(existing, -1)
        return True

    def _update(self, pod: Pod, sign: int) -> None:
        requested = self.requested
        for name, amount in pod.requests.items():
            total = requested.get(name, 0) + sign * amount
            if total:
                requested[name] = total
            else:
                requested.pop(name, None)
        self.non_zero_cpu += sign * pod.non_zero_cpu
        self.non_zero_memory += sign * pod.non_zero_memory
        for port in pod.host_ports:
            if sign > 0:
                self.used_ports.add(port.host_ip, port.protocol, port.host_port)
            else:
                self.used_ports.remove(port.host_ip, port.protocol, port.host_port)
        if pod.has_affinity:
            if sign > 0:
                self.pods_with_affinity[pod.key] = pod
            else:
                self.pods_with_affinity.pop(pod.key, None)
        if pod.has_required_anti_affinity:
            if sign > 0:
                self.pods_with_required_anti_affinity[pod.key] = pod
            else:
                self.pods_with_required_anti_affinity.pop(pod.key, None)

    def requested_amount(self, resource: str) -> int:
        return self.requested.get(resource, 0)

    def non_zero_requested(self, resource: str) -> int:
        """cpu/memory as scoring sees them; other resources as requested."""
        if resource == CPU:
            return self.non_zero_cpu
        if resource == MEMORY:
            return self.non_zero_memory
        return self.requested.get(resource, 0)

    def __getstate__(self) -> dict[str, object]:
        """Without ``derived``: what decisions derive on the event loop may grow while a frozen NodeInfo
        is pickled on another thread (a decision worker's image), and is derived again there anyway."""
        return {slot: getattr(self, slot) for slot in self.__slots__ if slot != "derived"}

    def __setstate__(self, state: dict[str, object]) -> None:
        for slot, value in state.items():
            setattr(self, slot, value)
        self.derived = None

    def clone(self) -> NodeInfo:
        """A copy whose pod set can change without touching the cache (preemption's dry runs)."""
        copy = NodeInfo(self.node, self.generation)
        copy.pods = dict(self.pods)
        copy.requested = dict(self.requested)
        copy.non_zero_cpu = self.non_zero_cpu
        copy.non_zero_memory = self.non_zero_memory
        copy.used_ports = self.used_ports.clone()
        copy.pods_with_affinity = dict(self.pods_with_affinity)
        copy.pods_with_required_anti_affinity = dict(self.pods_with_required_anti_affinity)
        return copy
