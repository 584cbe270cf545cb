"""``podfit bench soak``: concurrent feeders and deciders against one server, checking what a scheduler
relies on while they run, through the public gRPC API only.

Workers, all at once for ``duration`` seconds:

- stream feeders (``ClusterCache.Stream``), each owning a share of the nodes: every batch relabels one
  of its nodes (``soak.podfit.dev/version``), adds a pending pod and deletes an older one; after each
  acknowledgement a Filter whose nodeSelector names that version must find the node (read-your-writes);
- deciders: ``Schedule`` with assume of pods requesting 250m to 1 CPU; after each reservation a Get
  must show the pod bound where it was placed (read-your-writes);
- a reaper (``Apply``): deletes reserved pods as they "complete", so the deciders keep finding room;
  after each acknowledgement the pod must be gone.

Then, and every second while they run, the cache is compared with what was acknowledged: no request
on any node above its allocatable CPU (overbooking); at the end every node carries its last acknowledged
version and the pods are exactly those acknowledged and not deleted since (no lost update, nothing extra).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
import random
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from podfit.client._requests import ChannelConfig, object_key
from podfit.client.aio import AsyncClient
from podfit.client.errors import PodfitError
from podfit.client.manifests import to_cluster_object
from podfit.v1 import cluster_cache_pb2 as cc

NAMESPACE = "soak"
VERSION_LABEL = "soak.podfit.dev/version"
NODE_CPU_MILLIS = 4000
CPU_CHOICES_MILLIS = (250, 500, 1000)


@dataclass
class SoakReport:
    """What ran and what was wrong: ``ok`` when no call failed and no check found a violation."""

    seconds: float = 0.0
    ops: collections.Counter[str] = field(default_factory=collections.Counter)
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and not self.violations

    @property
    def ops_per_second(self) -> float:
        return sum(self.ops.values()) / self.seconds if self.seconds else 0.0

    def violate(self, message: str) -> None:
        if len(self.violations) < 100:
            self.violations.append(message)

    def as_dict(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 2),
            "ops": dict(sorted(self.ops.items())),
            "ops_per_second": round(self.ops_per_second, 1),
            "errors": dict(self.errors),
            "violations": self.violations,
            "ok": self.ok,
        }

    def summary(self) -> str:
        ops = ", ".join(f"{name} {count}" for name, count in sorted(self.ops.items()))
        lines = [
            f"soak: {self.seconds:.1f} s, {sum(self.ops.values())} calls ({self.ops_per_second:.0f}/s): {ops}",
            f"errors: {dict(self.errors) or 'none'}; violations: {len(self.violations) or 'none'}",
            *(f"  {v}" for v in self.violations[:20]),
        ]
        return "\n".join(lines)


@dataclass
class _Acknowledged:
    """What the server acknowledged, as the checks expect to find it."""

    versions: dict[str, int] = field(default_factory=dict)  # node -> last acknowledged version
    pending: set[str] = field(default_factory=set)  # pending pods written and not deleted
    placed: dict[str, tuple[str, int]] = field(default_factory=dict)  # pod -> (node, cpu millis), reserved
    reapable: collections.deque[str] = field(default_factory=collections.deque)


def _node(name: str, version: int) -> cc.ClusterObject:
    return to_cluster_object(
        {
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, VERSION_LABEL: str(version)}},
            "status": {"allocatable": {"cpu": f"{NODE_CPU_MILLIS}m", "memory": "64Gi", "pods": "110"}},
        }
    )


def _pod(name: str, cpu_millis: int = 0, node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "registry.k8s.io/pause:3.9"}
    if cpu_millis:
        container["resources"] = {"requests": {"cpu": f"{cpu_millis}m", "memory": "64Mi"}}
    spec: dict[str, Any] = {"containers": [container]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"}, "spec": spec}


class Soak:
    def __init__(
        self,
        client: AsyncClient,
        *,
        nodes: int = 24,
        feeders: int = 2,
        deciders: int = 4,
        seed: int = 0,
        connections: Sequence[AsyncClient] = (),
    ) -> None:
        self.client = client
        # One per feeder, decider and the reaper, in that order, when given: a server with decision
        # workers spreads connections over its processes, and read-your-writes holds per connection.
        self.connections = list(connections) or [client]
        self.nodes = [f"soak-node-{i:03d}" for i in range(nodes)]
        self.feeders = feeders
        self.deciders = deciders
        self.random = random.Random(seed)
        self.acked = _Acknowledged()
        self.report = SoakReport()
        self._stop = asyncio.Event()

    async def _call(self, op: str, call: Any) -> Any:
        """Awaits one call, counting it; a failure is counted by code and answers None."""
        try:
            result = await call
        except PodfitError as exc:
            self.report.errors[f"{op}: {exc.code.name}"] += 1
            return None
        self.report.ops[op] += 1
        return result

    async def setup(self) -> None:
        await self.client.apply([to_cluster_object({"kind": "Namespace", "metadata": {"name": NAMESPACE}})])
        await self.client.apply([_node(name, 0) for name in self.nodes])
        self.acked.versions = dict.fromkeys(self.nodes, 0)

    async def run(self, seconds: float) -> SoakReport:
        await self.setup()
        started = time.monotonic()
        workers = [
            *(self._feeder(f) for f in range(self.feeders)),
            *(self._decider(d) for d in range(self.deciders)),
            self._reaper(),
            self._overbooking_watch(),
        ]
        tasks = [asyncio.create_task(w) for w in workers]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)
        self._stop.set()
        await asyncio.gather(*tasks)
        self.report.seconds = time.monotonic() - started
        await self.verify()
        return self.report

    # -- feeders ---------------------------------------------------------------------------------

    async def _feeder(self, index: int) -> None:
        """One Stream; a batch at a time, each acknowledgement checked with a Filter before the next."""
        owned = self.nodes[index :: self.feeders]
        outbox: asyncio.Queue[cc.StreamRequest | None] = asyncio.Queue()
        counter = itertools.count(1)

        async def requests() -> AsyncIterator[cc.StreamRequest]:
            while (request := await outbox.get()) is not None:
                yield request

        client = self._via(index)
        responses = client.stream(requests()).__aiter__()
        mine: collections.deque[str] = collections.deque()
        try:
            while not self._stop.is_set():
                sequence = next(counter)
                node = owned[sequence % len(owned)]
                version = self.acked.versions[node] + 1
                pending = f"pending-{index}-{sequence}"
                updates = [cc.Update(upsert=_node(node, version)), cc.Update(upsert=to_cluster_object(_pod(pending)))]
                if len(mine) >= 5:
                    updates.append(cc.Update(delete=object_key("Pod", mine[0], NAMESPACE)))
                await outbox.put(cc.StreamRequest(sequence=sequence, updates=updates))
                ack = await self._call("stream_batch", anext(responses))
                if ack is None:
                    return
                if ack.error or ack.sequence != sequence:
                    self.report.violate(f"feeder {index}: batch {sequence} answered {ack.sequence}: {ack.error}")
                    return
                self.acked.versions[node] = version
                self.acked.pending.add(pending)
                mine.append(pending)
                if len(updates) == 3:
                    self.acked.pending.discard(mine.popleft())
                await self._check_label_visible(client, node, version)
        finally:
            await outbox.put(None)
            with contextlib.suppress(PodfitError, StopAsyncIteration):
                async for _ in responses:
                    pass

    def _via(self, slot: int) -> AsyncClient:
        return self.connections[slot % len(self.connections)]

    async def _check_label_visible(self, client: AsyncClient, node: str, version: int) -> None:
        probe = _pod("probe", node_selector={VERSION_LABEL: str(version), "kubernetes.io/hostname": node})
        answer = await self._call("filter", client.filter(probe, node_names=[node]))
        if answer is not None and not (len(answer.nodes) == 1 and answer.nodes[0].fits):
            verdict = [(v.node_name, v.plugin, list(v.reasons)) for v in answer.nodes]
            self.report.violate(f"read-your-writes: {node} version {version} acknowledged, Filter saw {verdict}")

    # -- deciders --------------------------------------------------------------------------------

    async def _decider(self, index: int) -> None:
        client = self._via(self.feeders + index)
        for sequence in itertools.count():
            if self._stop.is_set():
                return
            name = f"placed-{index}-{sequence}"
            cpu = self.random.choice(CPU_CHOICES_MILLIS)
            call = client.schedule(_pod(name, cpu), assume=True, disable_preemption=True, view="basic")
            answer = await self._call("schedule_assume", call)
            if answer is None or not answer.assumed_generation:
                await asyncio.sleep(0.01)  # full for now: the reaper frees room
                continue
            self.acked.placed[name] = (answer.selected_node, cpu)
            got = await self._call("get", client.get("Pod", name, NAMESPACE))
            bound = got.object.pod.spec.node_name if got is not None else None
            if got is not None and bound != answer.selected_node:
                self.report.violate(f"read-your-writes: {name} placed on {answer.selected_node}, Get says {bound!r}")
            self.acked.reapable.append(name)

    async def _reaper(self) -> None:
        """Deletes reserved pods, oldest first, once a few have piled up (they completed)."""
        client = self._via(self.feeders + self.deciders)
        while not self._stop.is_set():
            if len(self.acked.reapable) < 8:
                await asyncio.sleep(0.005)
                continue
            names = [self.acked.reapable.popleft() for _ in range(4)]
            deletes = [object_key("Pod", name, NAMESPACE) for name in names]
            if await self._call("apply_delete", client.apply(deletes=deletes)) is None:
                return
            for name in names:
                self.acked.placed.pop(name, None)
            try:
                await client.get("Pod", names[0], NAMESPACE)
                self.report.violate(f"read-your-writes: {names[0]} deleted, Get still finds it")
            except PodfitError as exc:
                if exc.code is not grpc.StatusCode.NOT_FOUND:
                    self.report.errors[f"get: {exc.code.name}"] += 1

    # -- checks ----------------------------------------------------------------------------------

    async def _overbooking_watch(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), 1.0)
            await self._check_overbooking()

    async def _pods(self) -> dict[str, tuple[str, int]]:
        """Every soak pod in the cache: name -> (node, '' when pending; its CPU request in millis)."""
        listed = await self._call("list", self.client.list("Pod", NAMESPACE))
        if listed is None:
            return {}
        return {
            o.pod.metadata.name: (
                o.pod.spec.node_name,
                sum(_millis(c.resources.requests.get("cpu", "0")) for c in o.pod.spec.containers),
            )
            for o in listed.objects
        }

    async def _check_overbooking(self, pods: dict[str, tuple[str, int]] | None = None) -> None:
        pods = await self._pods() if pods is None else pods
        requested: collections.Counter[str] = collections.Counter()
        for node, millis in pods.values():
            if node:
                requested[node] += millis
        for node, millis in sorted(requested.items()):
            if millis > NODE_CPU_MILLIS:
                self.report.violate(f"overbooking: {node} holds {millis}m of {NODE_CPU_MILLIS}m")

    async def verify(self) -> None:
        """The cache equals what was acknowledged: node versions, the pods and where they are bound."""
        listed = await self._call("list", self.client.list("Node"))
        if listed is not None:
            versions = {
                o.node.metadata.name: o.node.metadata.labels.get(VERSION_LABEL, "")
                for o in listed.objects
                if o.node.metadata.name.startswith("soak-node-")
            }
            for node, version in self.acked.versions.items():
                if versions.get(node) != str(version):
                    found = versions.get(node)
                    self.report.violate(f"lost update: {node} at version {found!r}, acknowledged {version}")
        pods = await self._pods()
        expected = {name: "" for name in self.acked.pending} | {n: node for n, (node, _) in self.acked.placed.items()}
        for name in sorted(expected.keys() - pods.keys())[:10]:
            self.report.violate(f"lost update: acknowledged pod {name} is missing")
        for name in sorted(pods.keys() - expected.keys())[:10]:
            self.report.violate(f"unexpected pod {name}: deleted, or never acknowledged")
        for name in sorted(expected.keys() & pods.keys()):
            if pods[name][0] != expected[name]:
                self.report.violate(f"lost update: {name} on {pods[name][0]!r}, acknowledged on {expected[name]!r}")
        await self._check_overbooking(pods)


def _millis(cpu: str) -> int:
    """CPU as this soak writes it: "250m" or whole cores."""
    return int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)


async def run(target: str, seconds: float, config: ChannelConfig | None = None) -> SoakReport:
    """The soak with every feeder, decider and the reaper on a connection of its own."""
    config = dataclasses.replace(config or ChannelConfig(target=target), target=target, own_connection=True)
    soak = Soak(AsyncClient(config=config))
    soak.connections = [AsyncClient(config=config) for _ in range(soak.feeders + soak.deciders + 1)]
    try:
        return await soak.run(seconds)
    finally:
        for client in {*soak.connections, soak.client}:
            await client.close()
