"""Replicas on a replicated log (podfit.server.transport.replicated), for real: three nats-server nodes
(JetStream clustered on loopback, built from the Go module proxy and cached by version) and three
podfit-server replicas, each started and stopped (or SIGKILLed) by its own PID.

One group serves the whole module, the tests running in order: writes through any replica, then heavy
calls through a replica (what-if answers compared with the owner's, batches from every replica at once),
then the extender's bind through a replica, then the owner SIGKILLed under assuming clients, then again
with a ScheduleBatch in flight, then an engine node SIGKILLed, then the owner paused, then a replica
restarted from a snapshot, then the owner cut off from the engine by the network (each replica reaches
each engine node through a proxy of the test's, tests/cut_proxy.py; writes then refused at once), then a
replica paused while the log is purged past it. The TLS tests start an engine node and a replica of their
own. Every process is stopped at the end, whatever happened."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from podfit.client import AsyncClient
from podfit.client import _requests as rq
from podfit.client.errors import PodfitError
from podfit.client.manifests import to_cluster_object
from podfit.server.transport.replicated import seal, unseal
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import simulation_pb2 as sim

from tests.builders import make_node
from tests.cut_proxy import Cut, Link, Links
from tests.engine_cluster import EngineCluster, leaders, write_as_it_resumes
from tests.engine_cluster import PodfitReplica as Replica

LEASE_SECONDS = 2.0
# Beyond the lease: the lease's expiry is noticed within a poll (0.2 s), the new owner catches up and
# fences the log (one append), and a client's retry lands (its backoff, 0.1 s).
FAILOVER_BOUND_SECONDS = 2.0
NODE_CPU = 4
NODES = 6


def node(name: str) -> dict[str, Any]:
    return make_node(name).capacity(cpu=str(NODE_CPU), memory="16Gi").json()


def pod(name: str, cpu: str = "1") -> dict[str, Any]:
    container = {"name": "c", "image": "registry.k8s.io/pause:3.9", "resources": {"requests": {"cpu": cpu}}}
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"containers": [container]},
    }


@dataclass
class Group:
    engine: EngineCluster
    replicas: list[Replica]
    # Each replica reaches each engine node through a link of its own, which a test may cut.
    proxies: Links
    links: dict[str, list[Link]]

    def owner(self) -> Replica:
        owners = [r for r in self.replicas if r.owner()]
        assert len(owners) == 1, f"owners: {[r.name for r in owners]}"
        return owners[0]

    def tails(self) -> str:
        return "\n".join(f"--- {r.name}\n" + "\n".join(r.log().splitlines()[-30:]) for r in self.replicas)


def wait_for(what: str, check: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()  # may raise: a process that died is no reason to wait
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Group]:
    folder = tmp_path_factory.mktemp("replicated")
    engine = EngineCluster(folder / "engine", 3).start()
    key = folder / "key"
    key.write_bytes(os.urandom(32).hex().encode())
    key.chmod(0o600)
    proxies = Links()
    links = {f"podfit-{i}": [proxies.link(node.port) for node in engine.nodes] for i in range(3)}
    replicas = [
        Replica(name, folder, ",".join(link.url for link in through), key, lease_seconds=LEASE_SECONDS, extender=True)
        for name, through in links.items()
    ]
    try:
        for replica in replicas:
            replica.start()
        started = Group(engine, replicas, proxies, links)
        try:
            wait_for("every replica ready", lambda: all(r.ready() == 200 for r in replicas) or dead(replicas), 60)
            assert not dead(replicas)
            wait_for("an owner", lambda: any(r.owner() for r in replicas), 30)
        except AssertionError:
            raise AssertionError(started.tails()) from None
        yield started
    finally:
        for replica in replicas:
            replica.stop()
        engine.stop()
        proxies.close()


def dead(replicas: list[Replica]) -> bool:
    return not all(r.alive() for r in replicas)


def client(replica: Replica) -> AsyncClient:
    return AsyncClient(replica.address)


async def retrying(call: Any, within: float) -> Any:
    """``call()`` until it answers, for at most ``within`` seconds (UNAVAILABLE while the owner changes)."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await call()
        except PodfitError as exc:
            if exc.code is not grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def _apply(to: AsyncClient, name: str) -> None:
    await to.apply([node(name)])


async def _replace(to: AsyncClient, name: str) -> None:
    # Replace makes ``name`` the only Namespace: as good a single write as any.
    await to.replace("Namespace", [{"kind": "Namespace", "metadata": {"name": f"ns-{name}"}}])
    await to.apply([node(name)])


async def _stream(to: AsyncClient, name: str) -> None:
    batches = [cc.StreamRequest(sequence=1, updates=rq.upserts([node(name)]))]
    acknowledged = [a async for a in to.stream(batches)]
    assert [a.generation > 0 for a in acknowledged] == [True]


async def _batch(to: AsyncClient, name: str) -> None:
    # A heavy call: its reservations are made on the owner's heavy-call thread and logged as it ends.
    await to.apply([node(name)])
    answer = await to.schedule_batch([pod(f"{name}-a", cpu="1"), pod(f"{name}-b", cpu="1")], node_names=[name])
    assert answer.placed_count == 2
    for suffix in ("a", "b"):
        assert (await to.get("Pod", f"{name}-{suffix}", namespace="default")).object.pod.spec.node_name == name


WRITES = {"Apply": _apply, "Replace then Apply": _replace, "a Stream batch": _stream, "a ScheduleBatch": _batch}


@pytest.mark.parametrize(
    "how, writer, reader",
    [
        pytest.param("Apply", 0, 0, id="an Apply through one replica is read on that replica at once"),
        pytest.param("Apply", 1, 1, id="an Apply through another replica is read there at once"),
        pytest.param("Apply", 2, 0, id="an Apply through one replica is read on another once it caught up"),
        pytest.param("Replace then Apply", 1, 1, id="a Replace through a replica is read there at once"),
        pytest.param("a Stream batch", 2, 2, id="an acknowledged Stream batch is read on its replica at once"),
        pytest.param("a ScheduleBatch", 1, 1, id="a ScheduleBatch through a replica is read there at once"),
        pytest.param("a ScheduleBatch", 1, 2, id="a ScheduleBatch's reservations reach every replica"),
    ],
)
async def test_writes_through_any_replica_are_made_by_the_owner_and_read_everywhere(
    group: Group, how: str, writer: int, reader: int
) -> None:
    name = f"node-{how.split()[0].lower()}-w{writer}-r{reader}"
    to_writer, to_reader = client(group.replicas[writer]), client(group.replicas[reader])
    try:
        await WRITES[how](to_writer, name)
        if writer == reader:
            assert (await to_reader.get("Node", name)).object  # at once: read-your-writes
        else:
            await wait_for_async(lambda: has_node(to_reader, name), 5)
        await asyncio.gather(*(wait_for_async(lambda r=r: has_node(client(r), name), 5) for r in group.replicas))
    finally:
        await to_writer.close()
        await to_reader.close()


def bound_pod(name: str, node_name: str) -> dict[str, Any]:
    """A one-CPU pod of a ReplicaSet, running on ``node_name`` (a drain may move it)."""
    manifest = pod(name)
    manifest["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "uid-rs", "controller": True}
    ]
    manifest["spec"]["nodeName"] = node_name
    return manifest


HEAVY_NODES = [f"heavy-{i}" for i in range(3)]
# Read-only heavy calls: the replica asked answers them itself, from its own cache.
WHAT_IF = {
    "a dry-run ScheduleBatch": lambda to: to.schedule_batch(
        [pod(f"dry-{i}", cpu="2") for i in range(7)], node_names=HEAVY_NODES, dry_run=True
    ),
    "Simulate": lambda to: to.simulate(
        [pod(f"sim-{i}", cpu="3") for i in range(6)],
        sim.Scenario(add_nodes=[sim.HypotheticalNodes(template=to_cluster_object(node("template")), count=2)]),
    ),
    "EstimateScaleUp": lambda to: to.estimate_scale_up(
        [[pod(f"est-{i}", cpu="3") for i in range(9)]], [("pool", node("template"), 0, 10)]
    ),
    "SimulateDrain": lambda to: to.simulate_drain(["heavy-0"]),
}


async def pods_on(to: AsyncClient, prefix: str) -> dict[str, str]:
    return {
        p.pod.metadata.name: p.pod.spec.node_name
        for p in (await to.list("Pod")).objects
        if p.pod.metadata.name.startswith(prefix)
    }


async def test_heavy_calls_through_a_replica_answer_as_the_owner_and_a_batch_is_read_everywhere(group: Group) -> None:
    """Simulate, EstimateScaleUp, SimulateDrain and a dry-run ScheduleBatch asked of a replica that is not
    the owner answer exactly as the owner does at the same log entry (generation included) and change
    nothing; a ScheduleBatch sent through it places its pods where the owner's dry run said, is read back
    on the same connection at once, and reaches every replica."""
    owner = group.owner()
    other = next(r for r in group.replicas if r is not owner)
    to_owner, to_other = client(owner), client(other)
    try:
        await to_other.apply([node(name) for name in HEAVY_NODES] + [bound_pod("running-0", "heavy-0")])
        await to_owner.stats()
        before = (await to_other.stats()).generation
        for what, call in WHAT_IF.items():
            here, there = await call(to_other), await call(to_owner)
            assert here == there, f"{what}: the replica answered\n{here}\nthe owner\n{there}"
        assert (await to_other.stats()).generation == before, "a read-only heavy call changed the replica"
        assert (await to_owner.stats()).generation == before, "a read-only heavy call changed the owner"
        dry = await to_owner.schedule_batch([pod(f"batch-{i}", cpu="2") for i in range(7)], HEAVY_NODES, dry_run=True)
        made = await to_other.schedule_batch([pod(f"batch-{i}", cpu="2") for i in range(7)], HEAVY_NODES)
        expected = {f"batch-{i}": r.selected_node for i, r in enumerate(made.results) if r.selected_node}
        assert [r.selected_node for r in made.results] == [r.selected_node for r in dry.results]
        assert made.placed_count == 5 and not made.all_placed  # 3 nodes of 4 CPUs, one CPU taken: 5 two-CPU pods
        assert await pods_on(to_other, "batch-") == expected  # read-your-writes, on the same connection
    finally:
        await to_owner.close()
        await to_other.close()
    for replica in group.replicas:
        to = client(replica)
        try:
            await to.stats()  # caught up with everything acknowledged
            assert await pods_on(to, "batch-") == expected, replica.name
        finally:
            await to.close()


CROWD_NODES = [f"crowd-{i}" for i in range(3)]


async def test_batches_through_every_replica_at_once_overbook_no_node(group: Group) -> None:
    """Three ScheduleBatches, one through each replica, all at once, want 18 CPUs of 3 nodes holding 12:
    the owner makes them one after another, so exactly 12 pods are placed, each where its answer said, on
    every replica, and no node holds more than its CPUs; each caller reads its own pods back at once."""
    clients = [client(r) for r in group.replicas]
    try:
        await clients[0].apply([node(name) for name in CROWD_NODES])
        await asyncio.gather(*(to.stats() for to in clients))

        async def batch(index: int) -> dict[str, str]:
            to = clients[index]
            answer = await to.schedule_batch([pod(f"crowd-{index}-{i}") for i in range(6)], CROWD_NODES)
            placed = {f"crowd-{index}-{i}": r.selected_node for i, r in enumerate(answer.results) if r.selected_node}
            assert await pods_on(to, f"crowd-{index}-") == placed, f"replica {index}: its own pods, read back"
            return placed

        answers = await asyncio.gather(*(batch(i) for i in range(len(clients))))
        placed = {name: where for answer in answers for name, where in answer.items()}
        assert len(placed) == NODE_CPU * len(CROWD_NODES), answers
        for replica, to in zip(group.replicas, clients, strict=True):
            await to.stats()
            held = await pods_on(to, "crowd-")
            assert held == placed, replica.name
            assert all(list(held.values()).count(n) == NODE_CPU for n in CROWD_NODES), held
    finally:
        for to in clients:
            await to.close()


def extender(replica: Replica, verb: str, args: dict[str, Any], timeout: float = 15) -> tuple[int, Any]:
    """kube-scheduler's call of the extender's ``verb`` on ``replica`` (HTTP on loopback): status, answer."""
    url = f"http://127.0.0.1:{replica.extender_port}/scheduler/{verb}"
    request = urllib.request.Request(url, json.dumps(args).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return int(reply.status), json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), json.loads(exc.read())


def binding(name: str, node_name: str) -> dict[str, Any]:
    """ExtenderBindingArgs for the pod ``name`` (pod()'s uid)."""
    return {"PodName": name, "PodNamespace": "default", "PodUID": f"uid-{name}", "Node": node_name}


def fits(replica: Replica, name: str, node_name: str, cpu: str) -> bool:
    """Whether the extender's filter on ``replica`` passes ``node_name`` for a ``cpu`` pod, from its cache as
    it is (filter does not catch up with the log: it shows what this replica has applied)."""
    status, answer = extender(replica, "filter", {"Pod": pod(name, cpu=cpu), "NodeNames": [node_name]})
    assert status == 200, answer
    return node_name in (answer["NodeNames"] or [])


async def test_the_extenders_bind_through_a_replica_is_made_by_the_owner_and_read_everywhere(group: Group) -> None:
    """kube-scheduler's bind verb sent to a replica that is not the owner: the owner makes it (a pod that
    no longer fits is refused there, as by one process, and nothing is written), the answer comes once
    the replica asked has applied it (its own filter sees the room taken), and every replica holds it."""
    owner = group.owner()
    first, second = (r for r in group.replicas if r is not owner)
    to = client(first)
    try:
        await to.apply([node("bind-0"), pod("bind-a", cpu="3"), pod("bind-b", cpu="3")])
    finally:
        await to.close()
    assert await asyncio.to_thread(fits, first, "probe", "bind-0", "3")
    status, answer = await asyncio.to_thread(extender, first, "bind", binding("bind-a", "bind-0"))
    assert (status, answer) == (200, {"Error": ""})
    # Read on the replica asked, at once: 3 of its 4 CPUs are taken.
    assert not await asyncio.to_thread(fits, first, "probe", "bind-0", "3")
    status, answer = await asyncio.to_thread(extender, second, "bind", binding("bind-b", "bind-0"))
    assert status == 200 and "bind: pod default/bind-b does not fit node bind-0" in answer["Error"], answer
    status, answer = await asyncio.to_thread(extender, second, "bind", binding("bind-nobody", "bind-0"))
    assert status == 400 and "pod default/bind-nobody is not in podfit's cache" in answer["Error"], answer
    for replica in group.replicas:
        to = client(replica)
        try:
            await to.stats()
            assert await pods_on(to, "bind-") == {"bind-a": "bind-0", "bind-b": ""}, replica.name
        finally:
            await to.close()


@pytest.mark.parametrize(
    "through_owner",
    [
        pytest.param(True, id="a bind the owner's extender answers waits for the log"),
        pytest.param(False, id="a bind another replica's extender sends to the owner waits for the log"),
    ],
)
async def test_a_bind_is_answered_only_once_the_log_holds_it(group: Group, through_owner: bool) -> None:
    """Every engine node paused (SIGSTOP) while a bind is in flight: no answer before the engine resumes,
    then OK."""
    owner = group.owner()
    other = owner if through_owner else next(r for r in group.replicas if r is not owner)
    name = f"bind-paused-{'owner' if through_owner else 'other'}"
    to = client(other)
    try:
        await to.apply([node(name), pod(f"{name}-a")])
    finally:
        await to.close()
    await asyncio.to_thread(fits, other, "probe", name, "1")  # the replica holds them
    for engine_node in group.engine.nodes:
        assert engine_node.popen is not None
        engine_node.popen.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        call = asyncio.ensure_future(asyncio.to_thread(extender, other, "bind", binding(f"{name}-a", name)))
        await asyncio.sleep(PAUSE_SECONDS)
        assert not call.done(), f"answered while the log could not hold it: {call.result()}"
    finally:
        for engine_node in group.engine.nodes:
            assert engine_node.popen is not None
            engine_node.popen.send_signal(signal.SIGCONT)
    assert await call == (200, {"Error": ""})
    assert time.monotonic() - started >= PAUSE_SECONDS
    wait_for("every replica ready", lambda: all(r.ready() == 200 for r in group.replicas), 10)


async def _assume(to: AsyncClient, name: str) -> None:
    answer = await to.schedule(pod(name), assume=True)
    assert answer.selected_node


PAUSE_SECONDS = 0.5


@pytest.mark.parametrize(
    "how, through_owner",
    [
        pytest.param("Apply", True, id="an Apply answered by the owner waits for the log"),
        pytest.param("a Stream batch", False, id="a Stream batch forwarded by another replica waits for the log"),
        pytest.param("assume", False, id="an assume reserved by the owner for another replica waits for the log"),
    ],
)
async def test_no_write_is_acknowledged_before_the_log_holds_it(group: Group, how: str, through_owner: bool) -> None:
    """The engine is paused (SIGSTOP, every node) while a write is in flight: its OK comes only after."""
    owner = group.owner()
    replica = owner if through_owner else next(r for r in group.replicas if r is not owner)
    to = client(replica)
    name = f"paused-{how.split()[-1].lower()}"
    write = {**WRITES, "assume": _assume}[how]
    try:
        await to.apply([node("warm-up-" + name)])  # the connection and the forwarding path are up
        if how == "assume":
            await to.apply([node("room-" + name)])
        for engine_node in group.engine.nodes:
            assert engine_node.popen is not None
            engine_node.popen.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            call = asyncio.ensure_future(write(to, name))
            await asyncio.sleep(PAUSE_SECONDS)
            assert not call.done(), "acknowledged while the log could not hold it"
        finally:
            for engine_node in group.engine.nodes:
                assert engine_node.popen is not None
                engine_node.popen.send_signal(signal.SIGCONT)
        await call
        assert time.monotonic() - started >= PAUSE_SECONDS
    finally:
        await to.close()
    wait_for("every replica ready", lambda: all(r.ready() == 200 for r in group.replicas), 10)


async def has_node(to: AsyncClient, name: str) -> bool:
    try:
        await to.get("Node", name)
        return True
    except PodfitError:
        return False


async def wait_for_async(check: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.05)


@dataclass
class Soak:
    """Assuming clients and a feeder against the replicas while the test does its worst; every answer
    they were given OK is kept, to be found again afterwards."""

    group: Group
    assumed: dict[str, str] = field(default_factory=dict)
    applied: list[str] = field(default_factory=list)
    acknowledged_at: list[float] = field(default_factory=list)
    # (sent, answered) of each call answered OK, for the time writes were refused.
    attempts: list[tuple[float, float]] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    def alive(self, start: int) -> Replica:
        replicas = self.group.replicas
        for offset in range(len(replicas)):
            replica = replicas[(start + offset) % len(replicas)]
            if replica.alive():
                return replica
        raise AssertionError("no replica alive")

    async def _call(self, index: int, call: Any) -> Any:
        """``call(client)`` on replica ``index`` or, while it is down or the owner changes, the next one."""
        deadline = time.monotonic() + LEASE_SECONDS + FAILOVER_BOUND_SECONDS + 20
        while True:
            to = client(self.alive(index))
            try:
                attempted = time.monotonic()
                answer = await call(to)
                if answer is not None:  # a write was made
                    self.attempts.append((attempted, time.monotonic()))
                return answer
            except PodfitError as exc:
                if exc.code is not grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
            finally:
                await to.close()

    async def assuming(self, index: int, count: int) -> None:
        for i in range(count):
            if self.stop.is_set():
                return
            name = f"pod-{index}-{i}"

            async def assume(to: AsyncClient, name: str = name) -> tuple[str, str] | None:
                answer = await to.schedule(pod(name), assume=True)
                if not answer.selected_node:
                    return None  # no room left: nothing written
                # Read-your-writes on the same connection: the pod is where the answer put it.
                got = await to.get("Pod", name, namespace="default")
                return answer.selected_node, got.object.pod.spec.node_name

            made = await self._call(index, assume)
            if made is not None:
                selected, read = made
                assert read == selected, f"{name}: assumed on {selected}, read back on {read}"
                self.assumed[name] = selected
                self.acknowledged_at.append(time.monotonic())
            await asyncio.sleep(0.02)

    async def feeding(self, index: int, count: int) -> None:
        for i in range(count):
            if self.stop.is_set():
                return
            name = f"ns-{i}"
            namespace = {"kind": "Namespace", "metadata": {"name": name}}
            await self._call(index, lambda to, namespace=namespace: to.apply([namespace]))
            self.applied.append(name)
            self.acknowledged_at.append(time.monotonic())
            await asyncio.sleep(0.02)


async def test_the_owner_killed_under_load_is_replaced_within_the_lease_and_nothing_acknowledged_is_lost(
    group: Group,
) -> None:
    setup = client(group.replicas[0])
    try:
        await retrying(lambda: setup.apply([node(f"node-{i}") for i in range(NODES)]), 10)
    finally:
        await setup.close()
    owner = group.owner()
    others = [i for i, r in enumerate(group.replicas) if r is not owner]
    before = client(group.replicas[others[0]])
    try:
        # The group's cache id, carried in the log: a feeder needs no resync after an owner change.
        epoch = (await before.list("Namespace")).server_epoch
    finally:
        await before.close()
    soak = Soak(group)
    work = [asyncio.ensure_future(soak.assuming(i, 16)) for i in range(len(group.replicas))] + [
        asyncio.ensure_future(soak.feeding(others[0], 60))
    ]
    await asyncio.sleep(0.6)
    assert soak.acknowledged_at, "nothing acknowledged before the kill"
    killed_at = time.monotonic()
    owner.kill()
    await asyncio.gather(*work)
    # The first write sent after the kill and answered OK was made by the new owner.
    after = sorted(answered for sent, answered in soak.attempts if sent > killed_at)
    assert after, "nothing acknowledged after the owner was killed"
    failover = after[0] - killed_at
    print(f"failover: first write acknowledged {failover:.2f} s after SIGKILL (lease {LEASE_SECONDS} s)")
    assert failover < LEASE_SECONDS + FAILOVER_BOUND_SECONDS, group.tails()
    new_owner = group.owner()
    assert new_owner is not owner
    await log_terms(group.engine.urls)  # every entry made by the owner of its term
    for replica in group.replicas:
        if not replica.alive():
            continue
        to = client(replica)
        try:
            await to.stats()  # catches up with everything acknowledged
            pods = {p.pod.metadata.name: p.pod.spec.node_name for p in (await to.list("Pod")).objects}
            listed = await to.list("Namespace")
            namespaces = {n.namespace.metadata.name for n in listed.objects}
        finally:
            await to.close()
        assert listed.server_epoch == epoch, replica.name
        # No acknowledged write lost, and every reservation exactly where its answer said.
        assert {name: pods.get(name) for name in soak.assumed} == soak.assumed, replica.name
        assert set(soak.applied) <= namespaces, replica.name
        # No node overbooked: each holds at most NODE_CPU one-CPU pods.
        per_node: dict[str, int] = {}
        for node_name in pods.values():
            per_node[node_name] = per_node.get(node_name, 0) + 1
        assert max(per_node.values()) <= NODE_CPU, per_node


FLIGHT_NODES = [f"flight-{i}" for i in range(20)]
FLIGHT_PODS = 400


async def test_a_batch_in_flight_when_the_owner_is_killed_is_all_there_or_nowhere(group: Group) -> None:
    """The replica killed above is started again; a large ScheduleBatch goes through a replica that is not
    the owner, and the owner is SIGKILLed while it decides it (half its measured time after it was sent).
    Acknowledged, its every pod is on every surviving replica where the answer said; refused, it is on
    every replica whole or not at all (the owner's answer may be lost after the log took it), never in
    part. The group is left as before: one replica down."""
    for replica in group.replicas:
        if not replica.alive():
            replica.start()
    wait_for("every replica ready", lambda: all(r.ready() == 200 for r in group.replicas), 30)
    owner = group.owner()
    other = next(r for r in group.replicas if r is not owner)
    flight = [make_node(name).capacity(cpu="1000", memory="1Ti", pods="1000").json() for name in FLIGHT_NODES]
    pods = [pod(f"flight-{i}", cpu="100m") for i in range(FLIGHT_PODS)]
    to = client(other)
    try:
        await to.apply([*flight, pod("refused-bind")])
        started = time.monotonic()
        await to.schedule_batch(pods, FLIGHT_NODES, dry_run=True, view="basic")  # how long the owner will take
        took = time.monotonic() - started
        call = asyncio.ensure_future(to.schedule_batch(pods, FLIGHT_NODES, view="basic", timeout=30))
        await asyncio.sleep(took / 2)
        owner.kill()
        # No owner answers until another takes the lease: a bind through a replica is refused meanwhile.
        refused = await asyncio.to_thread(extender, other, "bind", binding("refused-bind", "flight-0"))
        try:
            answer = await call
            acknowledged = answer.placed_count == FLIGHT_PODS
            assert acknowledged, answer.placed_count
        except PodfitError as exc:
            assert exc.code is grpc.StatusCode.UNAVAILABLE, exc
            acknowledged = False
    finally:
        await to.close()
    print(f"a batch of {FLIGHT_PODS} pods ({took:.2f} s dry) in flight at the SIGKILL: acknowledged {acknowledged}")
    wait_for("another owner", lambda: any(r.owner() for r in group.replicas if r is not owner), 2 * LEASE_SECONDS + 5)
    held: dict[str, int] = {}
    for replica in group.replicas:
        if not replica.alive():
            continue
        again = client(replica)
        try:
            await retrying(again.stats, LEASE_SECONDS + FAILOVER_BOUND_SECONDS)
            held[replica.name] = len(await pods_on(again, "flight-"))
        finally:
            await again.close()
    assert set(held.values()) <= ({FLIGHT_PODS} if acknowledged else {0, FLIGHT_PODS}), held
    status, answer = refused
    assert status == 503 and answer["reason"] == "OWNER_GONE", refused
    assert answer["Error"].startswith("bind: no owner of the replica group took the bind ("), refused
    assert answer["Error"].endswith(": retry"), refused
    assert len(set(held.values())) == 1, held


async def test_an_engine_node_killed_leaves_the_service_going(group: Group) -> None:
    # A node that leads neither the log nor the lease: the two others go on without an election. (Losing
    # a leader stops appends for JetStream's election, seconds: the README says how long, and why the
    # default lease outlasts it.)
    leading = await leaders(group.engine.urls)
    victim = next(node for node in group.engine.nodes if node.name not in leading)
    owner = group.owner()
    killed_at = time.monotonic()
    victim.kill()
    to = client(owner)
    try:
        for i in range(20):
            await to.apply([{"kind": "Namespace", "metadata": {"name": f"engine-{i}"}}])
        print(f"engine node SIGKILLed: 20 writes acknowledged in {time.monotonic() - killed_at:.2f} s")
    finally:
        await to.close()
    assert group.owner() is owner
    wait_for("the replicas ready", lambda: all(r.ready() == 200 for r in group.replicas if r.alive()), 10)
    assert sum(r.alive() for r in group.replicas) == 2


async def test_an_owner_cut_off_from_the_engine_is_fenced_by_the_log_and_replaced(group: Group) -> None:
    old = group.owner()
    assert old.popen is not None
    old.popen.send_signal(signal.SIGSTOP)  # cut off from everything: its lease lapses
    try:
        wait_for("another owner", lambda: any(r.owner() for r in group.replicas if r is not old), 2 * LEASE_SECONDS + 5)
    finally:
        # A write the cut-off owner receives as it comes back: applied in its cache, refused by the log.
        outcome = await write_as_it_resumes(old)
    # Never OK: refused (UNAVAILABLE) by the log or the drain, or cut short as the process stops.
    assert outcome in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED), f"{outcome}\n{group.tails()}"
    assert old.popen.wait(15) == 3, group.tails()  # it stops, to start again as a replica
    await log_terms(group.engine.urls)  # no entry of the old owner after the new owner's ``owner`` entry
    to = client(group.owner())
    try:
        await to.stats()
        names = {n.namespace.metadata.name for n in (await to.list("Namespace")).objects}
    finally:
        await to.close()
    assert "stray" not in names


async def test_a_replica_restarts_from_a_snapshot_and_the_log_after_it(group: Group) -> None:
    owner = group.owner()
    to = client(owner)
    try:
        for i in range(45):  # past replication.snapshotEntries (40): the owner takes a snapshot
            await to.apply([{"kind": "Namespace", "metadata": {"name": f"before-snapshot-{i}"}}])
        stored = re.compile(r"snapshot at log entry \d+ \(\d+ bytes\)")
        wait_for("a snapshot stored", lambda: stored.search(owner.log()), 15)
        await to.apply([{"kind": "Namespace", "metadata": {"name": "after-snapshot"}}])
        expected = {n.namespace.metadata.name for n in (await to.list("Namespace")).objects}
        expected_pods = {p.pod.metadata.name: p.pod.spec.node_name for p in (await to.list("Pod")).objects}
    finally:
        await to.close()
    restarted = next(r for r in group.replicas if not r.alive())
    restarted.start()
    wait_for("the restarted replica ready", lambda: restarted.ready() == 200, 30)
    assert "loaded the snapshot at log entry" in restarted.log()
    again = client(restarted)
    try:
        names = {n.namespace.metadata.name for n in (await again.list("Namespace")).objects}
        pods = {p.pod.metadata.name: p.pod.spec.node_name for p in (await again.list("Pod")).objects}
    finally:
        await again.close()
    assert names == expected
    assert pods == expected_pods


# How soon an owner cut off from the engine stops answering ready: its look at the log's end every
# POLL_SECONDS (0.25 s) times out after 1 s.
NOT_READY_BOUND_SECONDS = 1.5


def namespace(name: str) -> dict[str, Any]:
    return {"kind": "Namespace", "metadata": {"name": name}}


async def until(what: str, check: Any, timeout: float) -> float:
    """Seconds until ``check()`` holds (polled without blocking the loop for longer than one check)."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def until_written(replica: Replica, name: str, within: float) -> None:
    """A write through ``replica`` retried until acknowledged (UNAVAILABLE while no owner takes it)."""
    deadline = time.monotonic() + within
    while True:
        to = client(replica)
        try:
            await to.apply([namespace(name)], timeout=2)
            return
        except PodfitError as exc:
            retry = exc.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
            if not retry or time.monotonic() > deadline:
                raise
        finally:
            await to.close()
        await asyncio.sleep(0.05)


async def log_terms(urls: str) -> list[tuple[str, int]]:
    """The log read back as owner terms: (the owner's identity, the entries it appended after its
    ``owner`` entry), in order. An entry made by any process but the latest owner before it fails."""
    import nats
    from podfit.server.transport.replicated import STREAM, SUBJECT

    connection = await nats.connect(urls.split(","))
    try:
        js = connection.jetstream()
        last = (await js.stream_info(STREAM)).state.last_seq
        terms: list[tuple[str, int]] = []
        sequence = 0
        while sequence < last:
            msg = await js.get_msg(STREAM, seq=sequence + 1, subject=SUBJECT, next=True)
            sequence = int(msg.seq or 0)
            made_by = (msg.headers or {})["Nats-Msg-Id"]
            if "-owner-" in made_by:
                terms.append((made_by.partition("-owner-")[0], 0))
                continue
            appender = made_by.rpartition("-")[0]
            if not terms:  # the log's start was purged below a snapshot: this term began before it
                terms.append((appender, 0))
            owner, count = terms[-1]
            assert appender == owner, f"entry {sequence} appended by {appender} after {owner} owned the log"
            terms[-1] = (owner, count + 1)
        return terms
    finally:
        await connection.close()


# How soon a write is refused by an owner that knows it is cut off: at once, not after a lease.
REFUSED_BOUND_SECONDS = 0.5
CUT_OFF = "the owner cannot reach the replicated log ("


async def refusal(call: Any) -> tuple[float, grpc.StatusCode, str]:
    """How long ``call`` took to be refused, its code and message (OK: acknowledged)."""
    started = time.monotonic()
    try:
        await call
        return time.monotonic() - started, grpc.StatusCode.OK, ""
    except PodfitError as exc:
        return time.monotonic() - started, exc.code, exc.message


async def refused_bind(replica: Replica, args: dict[str, Any]) -> tuple[float, int, Any]:
    """How long the bind took to be refused, its HTTP status and answer (0: no answer, the process gone)."""
    started = time.monotonic()
    try:
        status, answer = await asyncio.to_thread(extender, replica, "bind", args)
    except OSError as exc:
        status, answer = 0, {"Error": str(exc)}
    return time.monotonic() - started, status, answer


@pytest.mark.parametrize("how", ["blackholed", "severed"])
async def test_an_owner_cut_off_from_the_engine_by_the_network_stops_acknowledging_and_is_replaced(
    group: Group, how: Cut
) -> None:
    """Only the owner's links to the engine are cut (every process runs on, and its gRPC listeners are
    reachable): a write sent to it is never OK, it stops answering ready, and once it is not ready a write
    sent to it, one forwarded to it by another replica and a bind sent to its extender are refused at once
    (UNAVAILABLE, the extender's 503), saying why, and never made; another replica owns within the
    lease plus FAILOVER_BOUND_SECONDS, and once the link heals what the old owner sent into it is refused
    by the log; the old owner exits 3 and comes back as a replica holding every acknowledged write."""
    old = group.owner()
    others = [r for r in group.replicas if r is not old and r.alive()]
    assert others, "no replica left to take over"
    assert old.popen is not None
    to_old = client(old)
    try:
        await to_old.apply([namespace(f"before-{how}"), node(f"cut-{how}"), pod(f"cut-{how}")])
        to_other = client(others[0])
        await to_other.stats()  # caught up: it holds the pod the bind below names
        group.proxies.cut(group.links[old.name], how)
        cut_at = time.monotonic()
        try:
            stray = asyncio.ensure_future(to_old.apply([namespace(f"stray-{how}")], timeout=20))
            not_ready = await until("the cut-off owner not ready", lambda: old.ready() != 200, 10)
            direct, forwarded, bind = await asyncio.gather(
                refusal(to_old.apply([namespace(f"refused-{how}")], timeout=5)),
                refusal(to_other.apply([namespace(f"forwarded-{how}")], timeout=5)),
                refused_bind(old, binding(f"cut-{how}", f"cut-{how}")),
            )
            deposed = "this replica is no longer the owner" in old.log()
            await to_other.close()
            await until_written(others[0], f"after-{how}", 30)
            failover = time.monotonic() - cut_at
            try:
                await stray
                outcome = grpc.StatusCode.OK
            except PodfitError as exc:
                outcome = exc.code
            refused = time.monotonic() - cut_at
        finally:
            group.proxies.heal(group.links[old.name])
    finally:
        await to_old.close()
    print(
        f"owner {how}: not ready after {not_ready:.2f} s, the next write acknowledged after {failover:.2f} s, "
        f"its own stray write {outcome.name} after {refused:.2f} s (lease {LEASE_SECONDS} s)"
    )
    print(
        f"owner {how}, once not ready: a write refused after {direct[0]:.3f} s, one forwarded by another replica "
        f"after {forwarded[0]:.3f} s, a bind after {bind[0]:.3f} s ({bind[1]}; deposed by then: {deposed})"
    )
    assert outcome is grpc.StatusCode.UNAVAILABLE, f"{outcome}\n{group.tails()}"
    assert not_ready < NOT_READY_BOUND_SECONDS, group.tails()
    # With a 2 s lease the owner deposes itself (renew deadline) as soon as 1.3 s after the cut, and a
    # blackhole shows up to 1.25 s after it: the refusals may find it already stopping (then they need not
    # say why). Severed, it is not ready within 0.25 s: the refusals always find it cut off but owning.
    assert how == "blackholed" or not deposed, group.tails()
    for took, code, message in (direct, forwarded):
        assert code is grpc.StatusCode.UNAVAILABLE and (deposed or CUT_OFF in message), (code, message)
        assert took < REFUSED_BOUND_SECONDS, took
    took, status, answer = bind
    assert status in ((503, 0) if deposed else (503,)), bind
    assert deposed or (answer["reason"] == "OWNER_GONE" and CUT_OFF in answer["Error"]), bind
    assert took < REFUSED_BOUND_SECONDS, took
    assert failover < LEASE_SECONDS + FAILOVER_BOUND_SECONDS, group.tails()
    assert old.popen.wait(15) == 3, group.tails()  # deposed: it stops, to start again as a replica
    new_owner = group.owner()
    assert new_owner is not old
    # What the old owner sent into the cut was delivered as it healed and refused: after the new owner's
    # ``owner`` entry, every entry is the new owner's.
    terms = await log_terms(group.engine.urls)
    assert len(terms) >= 2 and terms[-1][0] != terms[-2][0], terms
    old.start()
    await until("the old owner back as a ready replica", lambda: old.ready() == 200, 30)
    for replica in group.replicas:
        if not replica.alive():
            continue
        to = client(replica)
        try:
            await to.stats()
            names = {n.namespace.metadata.name for n in (await to.list("Namespace")).objects}
            cut_pods = await pods_on(to, f"cut-{how}")
        finally:
            await to.close()
        assert {f"before-{how}", f"after-{how}"} <= names, replica.name
        assert not {f"stray-{how}", f"refused-{how}", f"forwarded-{how}"} & names, replica.name
        assert cut_pods == {f"cut-{how}": ""}, replica.name  # the refused bind is nowhere
    assert group.owner() is new_owner


async def log_bounds(urls: str) -> tuple[int, int]:
    """The first and last entry the log's stream holds."""
    import nats
    from podfit.server.transport.replicated import STREAM

    connection = await nats.connect(urls.split(","))
    try:
        state = (await connection.jetstream().stream_info(STREAM)).state
        return int(state.first_seq), int(state.last_seq)
    finally:
        await connection.close()


async def test_a_replica_whose_next_entries_were_purged_while_it_was_paused_loads_the_newer_snapshot(
    group: Group,
) -> None:
    """A replica paused (SIGSTOP) while the owner writes past a snapshot and its 1,000-entry margin: the
    log below is purged, so when it resumes its consumer jumps past what it had; it loads the snapshot and
    holds exactly what the owner holds."""
    owner = group.owner()
    paused = next(r for r in group.replicas if r.alive() and r is not owner)
    assert paused.popen is not None
    to = client(owner)
    loaded = paused.log().count("loaded the snapshot at log entry")
    try:
        await to.stats()
        _, end = await log_bounds(group.engine.urls)
        paused.popen.send_signal(signal.SIGSTOP)
        try:
            i = 0
            while (await log_bounds(group.engine.urls))[0] <= end + 1:
                for _ in range(100):
                    await to.apply([namespace(f"purged-{i}")])
                    i += 1
                assert i < 3_000, "the log was never purged past the paused replica"
        finally:
            paused.popen.send_signal(signal.SIGCONT)
        expected = {n.namespace.metadata.name for n in (await to.list("Namespace")).objects}
    finally:
        await to.close()
    # (Ready at once is no proof: a paused process answers its probe as it last knew until it looks again.)
    snapshots = lambda: paused.log().count("loaded the snapshot at log entry")  # noqa: E731
    try:
        await until("the paused replica on the newer snapshot", lambda: snapshots() > loaded, 20)
    except AssertionError:
        raise AssertionError(group.tails()) from None
    await until("the paused replica ready again", lambda: paused.ready() == 200, 20)
    again = client(paused)
    try:
        await again.stats()
        assert {n.namespace.metadata.name for n in (await again.list("Namespace")).objects} == expected
    finally:
        await again.close()


def health(replica: Replica) -> int:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(replica.address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=2)
        except grpc.RpcError:
            return -1
        return int(reply.status)


async def test_a_replica_cut_off_from_the_engine_stops_being_ready_and_is_ready_again_once_back(group: Group) -> None:
    from grpc_health.v1 import health_pb2

    replicas = [r for r in group.replicas if r.alive() and not r.owner()]
    assert replicas
    assert all(r.ready() == 200 and health(r) == health_pb2.HealthCheckResponse.SERVING for r in replicas)
    nodes = [n for n in group.engine.nodes if n.alive()]
    for engine_node in nodes:
        assert engine_node.popen is not None
        engine_node.popen.send_signal(signal.SIGSTOP)
    try:
        wait_for(
            "/readyz 503 and gRPC health NOT_SERVING on every replica",
            lambda: all(r.ready() == 503 and health(r) == health_pb2.HealthCheckResponse.NOT_SERVING for r in replicas),
            5,
        )
    finally:
        for engine_node in nodes:
            assert engine_node.popen is not None
            engine_node.popen.send_signal(signal.SIGCONT)
    wait_for("the replicas ready again", lambda: all(r.ready() == 200 for r in replicas if r.alive()), 20)


def test_an_owner_stopped_gracefully_releases_the_engines_lease(group: Group) -> None:
    # The engine paused above outlasted the owner's renew deadline: whoever stopped starts again first.
    for replica in group.replicas:
        if not replica.alive():
            replica.start()
    wait_for("every replica ready", lambda: all(r.ready() == 200 for r in group.replicas), 30)
    wait_for("an owner", lambda: any(r.owner() for r in group.replicas), 2 * LEASE_SECONDS + 5)
    owner = group.owner()
    assert owner.popen is not None
    stopped_at = time.monotonic()
    owner.popen.send_signal(signal.SIGTERM)
    wait_for("another owner", lambda: any(r.owner() for r in group.replicas if r is not owner), 2 * LEASE_SECONDS + 5)
    took = time.monotonic() - stopped_at
    print(f"owner stopped with SIGTERM: another owns {took:.2f} s later")
    assert owner.popen.wait(15) == 0, group.tails()
    assert "released the engine KV key podfit_lease/owner" in owner.log()
    # Unreleased, a lease renewed every third of it is taken two thirds of a lease after the stop at the
    # earliest: sooner shows the release was seen.
    assert took < LEASE_SECONDS * 2 / 3, group.tails()


REPLICATED = ["--replicated-log", "nats://a:4222", "--replica-addr", "127.0.0.1:8090", "--replication-key-file", "k"]


@pytest.mark.parametrize(
    "argv, refused",
    [
        pytest.param(
            ["--replicated-log", "nats://a:4222"], "needs replication.peerAddr", id="an engine without a peer address"
        ),
        pytest.param(
            ["--replicated-log", "nats://a:4222", "--replica-addr", "127.0.0.1:8090"],
            "needs replication.peerAddr and replication.keyFile",
            id="an engine without the group's key",
        ),
        pytest.param(["--replication-lease-seconds", "0.5"], "leaseSeconds", id="a lease under a second"),
        pytest.param(
            [*REPLICATED, "--replication-tls-cert-file", "c.pem"],
            "tlsCertFile and tlsKeyFile must be set together",
            id="a client certificate for the engine without its key",
        ),
        pytest.param(
            ["--replication-tls-ca-file", "ca.pem"], "only with replication.engine", id="engine TLS without an engine"
        ),
    ],
)
def test_replication_settings_are_refused_at_start_when_incomplete(argv: list[str], refused: str) -> None:
    from podfit.server.settings import SettingsError, resolve

    with pytest.raises(SettingsError, match=refused):
        resolve(argv, {})


def test_replicas_serve_the_extenders_bind_verb() -> None:
    from podfit.server.settings import resolve

    assert resolve([*REPLICATED, "--extender-bind"], {}).extender_bind


def test_one_process_needs_no_engine() -> None:
    from podfit.server.settings import resolve

    assert resolve([], {}).replicated_log == ""


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda sealed: sealed[:-1] + bytes([sealed[-1] ^ 1]), id="a changed payload is refused"),
        pytest.param(lambda sealed: bytes([sealed[0] ^ 1]) + sealed[1:], id="a changed seal is refused"),
        pytest.param(lambda sealed: seal(b"another group's key!", sealed[32:]), id="another key's seal is refused"),
    ],
)
def test_nothing_unsealed_by_the_groups_key_is_read(tamper: Any) -> None:
    key = b"the group's key, 16+ bytes"
    sealed = seal(key, b"entry")
    assert unseal(key, sealed) == b"entry"
    with pytest.raises(ValueError, match="not sealed with this group's key"):
        unseal(key, tamper(sealed))


@pytest.mark.parametrize(
    "client_certificate",
    [
        pytest.param(True, id="a replica trusting the engine's CA, with a client certificate, joins over TLS"),
        pytest.param(False, id="a replica without a client certificate is refused by an engine that demands one"),
    ],
)
async def test_the_engine_is_reached_over_tls(
    tmp_path: Any, pki: dict[str, Any], monkeypatch: pytest.MonkeyPatch, client_certificate: bool
) -> None:
    """One nats-server node serving only TLS and demanding a client certificate (``verify: true``), the test
    PKI's; the replica's engine TLS set by its environment (PODFIT_REPLICATION_TLS_*)."""
    engine = EngineCluster(tmp_path / "engine", 1, tls=(pki["server_cert"], pki["server_key"], pki["ca"])).start()
    key = tmp_path / "key"
    key.write_bytes(os.urandom(32).hex().encode())
    monkeypatch.setenv("PODFIT_REPLICATION_TLS_CA_FILE", str(pki["ca"]))
    if client_certificate:
        monkeypatch.setenv("PODFIT_REPLICATION_TLS_CERT_FILE", str(pki["client_cert"]))
        monkeypatch.setenv("PODFIT_REPLICATION_TLS_KEY_FILE", str(pki["client_key"]))
    # The server's certificate names localhost, not 127.0.0.1: the URL's name is the one checked.
    replica = Replica("tls-0", tmp_path, engine.urls.replace("127.0.0.1", "localhost"), key)
    try:
        replica.start()
        if not client_certificate:
            with pytest.raises(AssertionError, match="timed out"):
                wait_for("ready", lambda: replica.ready() == 200, 6)
            assert "client didn't provide a certificate" in engine.nodes[0].log_path.read_text(), replica.log()
            return
        wait_for("the replica ready and the owner", lambda: replica.ready() == 200 and replica.owner(), 30)
        to = client(replica)
        try:
            await to.apply([namespace("over-tls")])
            assert (await to.get("Namespace", "over-tls")).object
        finally:
            await to.close()
    finally:
        replica.stop()
        engine.stop()
