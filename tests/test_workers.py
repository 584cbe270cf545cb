"""Decision workers (podfit.server.transport.workers): an owner and a worker in this process on separate loopback
ports, so each call goes where the test says; then podfit-server --workers 2 as users start it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from podfit.client import AsyncClient
from podfit.client.conformance import NO_OTHER_LISTENERS, free_port
from podfit.client.errors import PodfitError
from podfit.client.soak import Soak
from podfit.server.app import RunningServer, build_service, create_server, register_services, start_what_if_server
from podfit.server.cache.cluster_cache import Change
from podfit.server.model import Kind
from podfit.server.reserver import ReservationMoved
from podfit.server.settings import Settings
from podfit.server.telemetry import Telemetry
from podfit.server.transport.forward import OwnerLink
from podfit.server.transport.what_if import WhatIfLink
from podfit.server.transport.workers import Follower, Owner
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import simulation_pb2 as sim

from tests.builders import make_node


def node(name: str, cpu: str = "4", zone: str = "a") -> dict[str, Any]:
    return make_node(name).label("topology.kubernetes.io/zone", zone).capacity(cpu=cpu, memory="16Gi").json()


def pod(name: str, cpu: str = "1", labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "registry.k8s.io/pause:3.9", "resources": {"requests": {"cpu": cpu}}}
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels or {}},
        "spec": {"containers": [container], **spec},
    }


SPREAD = {
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
}
CLUSTER = [node(f"node-{i}", cpu=str(2 + i % 3), zone="ab"[i % 2]) for i in range(6)]


@dataclass
class Pair:
    owner: RunningServer
    worker: RunningServer
    link: Owner
    follower: Follower
    to_owner: AsyncClient
    to_worker: AsyncClient

    def assert_replica_current(self) -> None:
        """The worker's replica is the owner's cache: same generation, same pods where they are."""
        owner, replica = self.owner.service.cache, self.worker.service.cache
        assert replica.generation == owner.generation
        assert pods_by_node(self.worker) == pods_by_node(self.owner)


def pods_by_node(running: RunningServer) -> dict[str, str]:
    from podfit.server.model import Kind

    return {e.obj.name: e.obj.node_name for e in running.service.cache.entries(Kind.POD)}  # type: ignore[union-attr]


async def start_pair(settings: Settings | None = None, preload: Sequence[dict[str, Any]] = ()) -> Pair:
    settings = settings or Settings()
    owner = await create_server(settings, addr="127.0.0.1:0", extender_addr="off")
    to_owner = AsyncClient(f"127.0.0.1:{owner.port}")
    if preload:
        await to_owner.apply(list(preload))
    link = Owner(owner.service, [], 1)
    await link.start(lambda server: register_services(server, owner.service))
    service = build_service(settings, Telemetry.disabled())
    follower = Follower(service, link.target, link.token)
    await follower.start()
    service.reservations = follower
    worker = await create_server(
        settings, addr="127.0.0.1:0", extender_addr="off", service=service, owner=OwnerLink(follower)
    )
    return Pair(owner, worker, link, follower, to_owner, AsyncClient(f"127.0.0.1:{worker.port}"))


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    started = await start_pair(preload=CLUSTER)
    yield started
    await stop_pair(started)


async def stop_pair(pair: Pair) -> None:
    await pair.to_worker.close()
    await pair.to_owner.close()
    await pair.worker.stop(0)
    await pair.follower.close()
    await pair.link.stop()
    await pair.owner.stop(0)


# -- writes through a worker ---------------------------------------------------------------------


def slow_replication(pair: Pair, seconds: float = 0.1) -> None:
    """The worker's replica trails the owner by ``seconds``: an answer that did not wait for it shows."""
    apply = pair.follower._apply

    async def late(op: tuple[str, Any]) -> None:
        await asyncio.sleep(seconds)
        await apply(op)

    pair.follower._apply = late  # type: ignore[method-assign]


async def _apply(client: AsyncClient) -> None:
    await client.apply([pod("pending-1"), node("node-9")])


async def _replace(client: AsyncClient) -> None:
    await client.replace("Node", CLUSTER[:3])


async def _stream(client: AsyncClient) -> None:
    batches = [cc.StreamRequest(sequence=1, updates=[cc.Update(upsert=_object(pod("streamed")))])]
    acks = [ack async for ack in client.stream(batches)]
    assert [ack.sequence for ack in acks] == [1] and not acks[0].error


async def _schedule_assume(client: AsyncClient) -> None:
    answer = await client.schedule(pod("placed", labels={"app": "web"}, **SPREAD), assume=True)
    assert answer.assumed_generation and answer.selected_node


async def _schedule_stream_assume(client: AsyncClient) -> None:
    from podfit.client import schedule_request

    requests = [schedule_request(pod(f"streamed-{i}", cpu="2"), assume=True) for i in range(3)]
    answers = [a async for a in client.schedule_stream(requests)]
    assert all(a.assumed_generation for a in answers)


async def _schedule_batch(client: AsyncClient) -> None:
    answer = await client.schedule_batch([pod(f"gang-{i}", labels={"app": "web"}, **SPREAD) for i in range(4)])
    assert answer.all_placed


def _object(manifest: dict[str, Any]) -> cc.ClusterObject:
    from podfit.client.manifests import to_cluster_object

    return to_cluster_object(manifest)


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(_apply, id="Apply"),
        pytest.param(_replace, id="Replace"),
        pytest.param(_stream, id="Stream"),
        pytest.param(_schedule_assume, id="Schedule with assume"),
        pytest.param(_schedule_stream_assume, id="ScheduleStream with assume"),
        pytest.param(_schedule_batch, id="ScheduleBatch"),
    ],
)
async def test_a_write_through_a_worker_is_made_by_the_owner_and_seen_by_the_worker_at_once(
    pair: Pair, write: Callable[[AsyncClient], Awaitable[None]]
) -> None:
    slow_replication(pair)
    before = pair.owner.service.generation
    await write(pair.to_worker)
    assert pair.owner.service.generation > before
    # Read-your-writes: the worker's replica holds the write when its answer arrives, nothing later.
    pair.assert_replica_current()


async def test_mark_synced_through_a_worker_readies_every_process() -> None:
    started = await start_pair(Settings(wait_for_sync=True))
    try:
        with pytest.raises(PodfitError) as refused:
            await started.to_worker.filter(pod("early"))
        assert refused.value.code is grpc.StatusCode.FAILED_PRECONDITION
        await started.to_worker.mark_synced("test")
        assert started.owner.service.synced and started.worker.service.synced
        assert (await started.to_worker.filter(pod("now"))).feasible_count == 0
    finally:
        await stop_pair(started)


# -- refusals, decisions, reservations -----------------------------------------------------------


async def test_the_owners_refusal_reaches_the_caller_unchanged(pair: Pair) -> None:
    bad = pod("bad")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    errors = []
    for client in (pair.to_owner, pair.to_worker):
        with pytest.raises(PodfitError) as refused:
            await client.apply([bad])
        errors.append(refused.value)
    assert errors[0] == errors[1]
    assert errors[0].code is grpc.StatusCode.INVALID_ARGUMENT
    assert errors[0].field_violations and "cpu" in errors[0].field_violations[0][0]


async def test_a_worker_decides_like_the_owner(pair: Pair) -> None:
    await pair.to_owner.apply([pod(f"bound-{i}", cpu="1", nodeName=f"node-{i % 4}") for i in range(5)])
    await pair.to_worker.stats()  # caught up
    for probe in (pod("small", cpu="1"), pod("big", cpu="3"), pod("web", labels={"app": "web"}, **SPREAD)):
        answers = [await client.score(probe) for client in (pair.to_owner, pair.to_worker)]
        assert answers[0] == answers[1]
        assert answers[0].scores


async def test_a_worker_decides_an_assume_itself_and_the_owner_only_reserves(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def not_here(*args: object, **kwargs: object) -> None:
        raise AssertionError("the owner decided a call its worker should have decided")

    monkeypatch.setattr(pair.owner.service, "schedule", not_here)
    slow_replication(pair)
    answer = await pair.to_worker.schedule(pod("placed"), assume=True)
    assert pods_by_node(pair.owner)["placed"] == answer.selected_node
    assert answer.assumed_generation == pair.owner.service.generation
    pair.assert_replica_current()
    # The worker made its reservation in its replica at once; the journal's copy of it is skipped.
    await pair.to_owner.apply([pod("later", nodeName="node-1")])
    await pair.to_worker.stats()
    pair.assert_replica_current()


class _Moved:
    """The owner's answer when the cache moved on since the worker's decision."""

    def __init__(self) -> None:
        self.refused = 0

    async def commit(self, generation: int, changes: Sequence[Change]) -> int:
        self.refused += 1
        raise ReservationMoved("moved")


async def test_a_refused_reservation_is_decided_again_by_the_owner(pair: Pair) -> None:
    moved = pair.worker.service.reservations = _Moved()
    slow_replication(pair)
    answer = await pair.to_worker.schedule(pod("placed"), assume=True)
    assert moved.refused == 1
    assert pods_by_node(pair.owner)["placed"] == answer.selected_node
    pair.assert_replica_current()


async def test_a_worker_whose_reservations_keep_being_refused_forwards_assumes_and_probes_again(pair: Pair) -> None:
    from podfit.server.transport.forward import PROBE_EVERY

    moved = pair.worker.service.reservations = _Moved()
    for i in range(2 * PROBE_EVERY):
        assert (await pair.to_worker.schedule(pod(f"placed-{i}", cpu="100m"), assume=True)).assumed_generation
    # Refused until forwarding took over, then one probe per PROBE_EVERY calls.
    assert 4 <= moved.refused <= 4 + 2
    pair.assert_replica_current()


async def test_the_owner_reserves_only_at_the_generation_decided_on(pair: Pair) -> None:
    await pair.to_worker.stats()
    stale = pair.worker.service.generation
    await pair.to_owner.apply([pod("meanwhile", nodeName="node-0")])
    await pair.to_worker.stats()
    from podfit.server.cache.cluster_cache import Upsert
    from podfit.server.model import Kind
    from podfit.server.model.objects import pod_from_k8s

    manifest = {**pod("late"), "spec": {**pod("late")["spec"], "nodeName": "node-1"}}
    late = [Upsert(Kind.POD, pod_from_k8s(manifest), _object(manifest).SerializeToString())]
    with pytest.raises(ReservationMoved):
        await pair.follower.commit(stale, late)
    assert "late" not in pods_by_node(pair.owner)
    assert await pair.follower.commit(pair.worker.service.generation, late) == pair.owner.service.generation
    assert pods_by_node(pair.owner)["late"] == "node-1"
    # A reservation that changes nothing is no journal operation: the owner answers such a call whole.
    await pair.to_worker.stats()
    with pytest.raises(ReservationMoved):
        await pair.follower.commit(pair.worker.service.generation, late)


async def test_a_rolled_back_batch_never_reaches_the_worker(pair: Pair) -> None:
    before = pair.owner.service.generation
    gang = [pod(f"gang-{i}", cpu="3") for i in range(10)]  # more than the nodes hold
    answer = await pair.to_owner.schedule_batch(gang, all_or_nothing=True)
    assert not answer.all_placed and pair.owner.service.generation == before
    await pair.to_owner.apply([pod("after")])
    await pair.to_worker.stats()
    pair.assert_replica_current()


async def test_a_dry_run_batch_is_answered_by_the_worker_alone(pair: Pair, monkeypatch: pytest.MonkeyPatch) -> None:
    def not_here(*args: object, **kwargs: object) -> None:
        raise AssertionError("a dry run was forwarded")

    monkeypatch.setattr(pair.owner.service, "schedule_batch", not_here)
    answer = await pair.to_worker.schedule_batch([pod(f"try-{i}") for i in range(3)], dry_run=True)
    assert all(r.selected_node for r in answer.results) and not answer.assumed_generation


async def test_inspection_on_a_worker_shows_what_the_owner_acknowledged(pair: Pair) -> None:
    slow_replication(pair)
    await pair.to_owner.apply([pod("fresh", nodeName="node-2")])
    got = await pair.to_worker.get("Pod", "fresh", "default")
    assert got.object.pod.spec.node_name == "node-2"
    assert (await pair.to_worker.stats()).generation == pair.owner.service.generation


async def test_a_worker_started_late_loads_the_whole_cache(pair: Pair) -> None:
    await pair.to_owner.apply([pod(f"bound-{i}", nodeName=f"node-{i % 6}") for i in range(30)])
    late = build_service(Settings(), Telemetry.disabled())
    follower = Follower(late, pair.link.target, pair.link.token)
    await follower.start()
    try:
        assert late.generation == pair.owner.service.generation
        assert late.stats().pods == 30 and late.stats().nodes == len(CLUSTER)
        assert late.stats() == pair.owner.service.stats()
        assert pods_by_node(pair.owner) == {e.obj.name: e.obj.node_name for e in late.cache.entries(Kind.POD)}
    finally:
        await follower.close()


async def _decide(client: AsyncClient) -> Any:
    return await client.schedule(pod("question"))


async def _write(client: AsyncClient) -> Any:
    return await client.apply([pod("orphan")])


@pytest.mark.parametrize("call", [pytest.param(_decide, id="a decision"), pytest.param(_write, id="a write")])
async def test_a_worker_whose_owner_is_gone_answers_nothing_from_its_replica(
    pair: Pair, call: Callable[[AsyncClient], Awaitable[Any]]
) -> None:
    await _decide(pair.to_worker)  # answered while the owner is there
    await pair.link.stop()
    await asyncio.wait_for(pair.follower.ended.wait(), 5)
    with pytest.raises(PodfitError) as refused:
        await call(pair.to_worker)
    assert refused.value.code is grpc.StatusCode.UNAVAILABLE
    assert refused.value.reason == "OWNER_GONE"
    assert pair.link.directory not in str(refused.value)


async def _while_the_workers_replica_is_held(pair: Pair) -> Any:
    """A dry-run batch on the worker: a writer there (its tentative reservations), so it holds the
    worker's replica exclusively for seconds."""
    await pair.to_owner.apply([make_node(f"big-{i:04d}").capacity(cpu="1", pods="110").json() for i in range(2000)])
    batch = [pod(f"dry-{i}", cpu="500m") for i in range(4000)]
    heavy = asyncio.ensure_future(pair.to_worker.schedule_batch(batch, dry_run=True, view="basic", timeout=60))
    while not pair.worker.service.gate.busy:
        await asyncio.sleep(0.01)
    return heavy


async def test_inspection_on_a_worker_answers_at_once_while_a_heavy_call_holds_its_replica(pair: Pair) -> None:
    heavy = await _while_the_workers_replica_is_held(pair)
    try:
        await pair.to_owner.apply([pod("fresh", nodeName="node-2")])
        started = time.monotonic()
        got = await pair.to_worker.get("Pod", "fresh", "default")
        stats = await pair.to_worker.stats()
        assert time.monotonic() - started < 0.5
        assert pair.worker.service.gate.busy, "the batch ended before the inspection was answered"
        assert got.object.pod.spec.node_name == "node-2"
        assert stats.generation == pair.owner.service.generation
    finally:
        heavy.cancel()


async def test_decisions_on_a_worker_go_on_while_a_batch_holds_its_replica(pair: Pair) -> None:
    """A batch is a writer: the worker's replication waits for it, but decisions that reserve nothing do
    not: they answer at once from the generation the batch started from, and see the writes the worker
    received once it ends."""
    heavy = await _while_the_workers_replica_is_held(pair)
    started_at = pair.worker.service.generation
    await pair.to_owner.apply([pod("first", nodeName="node-2")])
    await pair.to_owner.apply([pod("second", nodeName="node-3")])
    written = pair.owner.service.generation
    # Both writes reach the worker's socket while its replica is held.
    while pair.follower.received < pair.link.journal.position:
        await asyncio.sleep(0.01)
    started = time.monotonic()
    during = await pair.to_worker.schedule(pod("reader"))
    assert time.monotonic() - started < 0.5, "the decision waited for the batch"
    assert pair.worker.service.gate.busy, "the batch ended before the decision was answered"
    assert during.generation == started_at < written
    heavy.cancel()
    # (The batch's own tentative reservations move the worker's generation too: wait for it to end.)
    while pair.worker.service.gate.heavy_running or pair.worker.service.generation != written:
        await asyncio.sleep(0.01)
    after = await pair.to_worker.schedule(pod("reader"))
    assert after.generation == written


async def test_a_new_workers_image_never_holds_the_owner(pair: Pair, monkeypatch: pytest.MonkeyPatch) -> None:
    await pair.to_owner.apply([pod(f"bound-{i}", nodeName=f"node-{i % 6}") for i in range(3000)])
    gate = pair.owner.service.gate
    held: list[bool] = []

    async def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the image was taken as a heavy call")

    monkeypatch.setattr(gate, "run_heavy", never)
    late = build_service(Settings(), Telemetry.disabled())
    follower = Follower(late, pair.link.target, pair.link.token)
    loading = asyncio.ensure_future(follower.start())
    try:
        written = 0
        while not loading.done():
            held.append(gate.busy)
            started = time.monotonic()
            await pair.to_owner.apply([pod(f"during-{written}")])
            written += 1
            assert time.monotonic() - started < 0.5
            await asyncio.sleep(0.005)
        await loading
        await follower.barrier()
        assert late.generation == pair.owner.service.generation
        assert late.stats() == pair.owner.service.stats()
        assert not any(held)
    finally:
        await follower.close()


async def test_a_follower_let_go_for_lagging_is_disconnected_at_once(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    from podfit.server.cache import journal as journal_module

    monkeypatch.setattr(journal_module, "MAX_BACKLOG_BYTES", 1_000_000)
    # The worker stops reading its socket: the owner's task for it blocks writing, the backlog grows.
    assert pair.follower._journal is not None
    pair.follower._journal.transport.pause_reading()
    big = {"kind": "Pod", "metadata": {"annotations": {"a": "x" * 20_000}}}
    for i in range(200):
        manifest = pod(f"heavy-{i}")
        manifest["metadata"] = {**manifest["metadata"], **big["metadata"]}
        await pair.to_owner.apply([manifest])
    try:
        async with asyncio.timeout(5):
            while pair.link.journal._cursors or any(not t.done() for t in pair.link._connections):
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(
            f"cursors {pair.link.journal._cursors} backlog {pair.link.journal._backlog_bytes} "
            f"connections {[t.done() for t in pair.link._connections]} dropped {pair.link.journal._dropped}"
        ) from None


async def test_the_private_socket_refuses_whoever_lacks_the_token(pair: Pair, tmp_path: Any) -> None:
    import pickle

    from podfit.server.transport import workers

    stream = os.path.join(pair.link.directory, workers.STREAM_SOCKET)
    reader, writer = await asyncio.open_unix_connection(stream)
    writer.write(workers.COMMIT + b"\0" * workers.TOKEN_BYTES)
    assert await asyncio.wait_for(reader.read(), 2) == b""  # closed without an answer
    writer.close()

    class Exploit:
        def __reduce__(self) -> Any:
            return (open, (str(tmp_path / "pwned"), "w"))

    reader, writer = await asyncio.open_unix_connection(stream)
    payload = pickle.dumps((pair.owner.service.generation, [Exploit()]))
    writer.write(workers.COMMIT + pair.link.token + len(payload).to_bytes(4, "big") + payload)
    length = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 2), "big")
    assert await reader.readexactly(length) == b""  # refused: no reservation
    writer.close()
    assert not (tmp_path / "pwned").exists()

    channel = grpc.aio.insecure_channel(pair.link.target)
    try:
        position = channel.unary_unary(workers.POSITION)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await position(b"")
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
    finally:
        await channel.close()


def test_retired_workers_metrics_are_one_running_sum() -> None:
    from podfit.server.metrics import retire
    from prometheus_client import generate_latest

    total = b""
    for _ in range(50):
        total = retire(total, generate_latest(_registry_with(2, 7, [0.002])))
    once = len(retire(b"", generate_latest(_registry_with(2, 7, [0.002]))))
    samples = _samples(total)
    assert samples[("podfit_extender_requests_total", (("verb", "filter"),))] == 100
    assert samples[("podfit_rpc_duration_seconds_count", ())] == 50
    assert ("podfit_cache_objects", (("kind", "Pod"),)) not in samples  # a gone worker's gauges are not kept
    assert len(total) < 2 * once


# -- podfit-server --workers 2 -------------------------------------------------------------------


def _children(pid: int, what_if: bool = False) -> list[int]:
    """The decision workers of server ``pid`` (or, with ``what_if``, its what-if process)."""
    out = subprocess.run(["ps", "-ww", "-o", "pid=,args=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    rows = [line.split(None, 1) for line in out.splitlines() if line.strip()]
    return [int(child) for child, args in rows if ("--what-if" in args.split()) == what_if]


@pytest.fixture
def server() -> Any:
    from podfit.client.conformance import LocalServer

    with LocalServer("--workers", "2", "--what-if-process") as started:
        yield started


def _clients(target: str, count: int) -> list[AsyncClient]:
    # Each on a connection of its own, so the kernel spreads them over the processes.
    return [AsyncClient(target, own_connection=True) for _ in range(count)]


async def test_a_soak_against_two_processes_finds_no_overbooking_and_no_lost_update(server: Any) -> None:
    clients = _clients(server.target, 8)
    try:
        stats = await clients[0].stats()
        assert stats.workers == 2 and len(_children(server.process.pid)) == 1
        assert len(_children(server.process.pid, what_if=True)) == 1
        report = await Soak(clients[0], seed=3, connections=clients).run(5.0)
        assert report.ok, report.summary()
        assert report.ops["schedule_assume"] > 50 and report.ops["stream_batch"] > 50, report.summary()
    finally:
        for client in clients:
            await client.close()


async def test_a_worker_that_dies_is_started_again_and_the_owner_stops_them_all(server: Any) -> None:
    (worker,) = _children(server.process.pid)
    os.kill(worker, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _children(server.process.pid) in ([], [worker]):
        await asyncio.sleep(0.2)
    (replacement,) = _children(server.process.pid)
    assert replacement != worker
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(timeout=20) == 0
    # Its followers' connections end with it, and nothing of that is logged as an error.
    log = server.process.stderr.read().decode()
    assert "Traceback" not in log and "Exception in callback" not in log, log[-2000:]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(replacement):
        await asyncio.sleep(0.1)
    assert not _alive(replacement)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_workers_flag_is_refused_out_of_range() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "podfit.server.app",
            "--grpc-addr",
            f"127.0.0.1:{free_port()}",
            *NO_OTHER_LISTENERS,
            "--workers",
            "-1",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2 and "workers: -1 must be between 0" in done.stderr


# -- one /metrics for every process --------------------------------------------------------------


def _registry_with(requests: float, objects: float, seconds: Sequence[float]) -> Any:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

    registry = CollectorRegistry()
    Counter("podfit_extender_requests", "verbs", ["verb"], registry=registry).labels("filter").inc(requests)
    Gauge("podfit_cache_objects", "objects", ["kind"], registry=registry).labels("Pod").set(objects)
    histogram = Histogram("podfit_rpc_duration_seconds", "rpc", buckets=(0.01, 1.0), registry=registry)
    for value in seconds:
        histogram.observe(value)
    return registry


def _samples(exposition: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(exposition.decode())
        for s in family.samples
        if not s.name.endswith("_created")
    }


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        pytest.param(("podfit_extender_requests_total", (("verb", "filter"),)), 3 + 4 + 5, id="counters add up"),
        pytest.param(("podfit_rpc_duration_seconds_count", ()), 2 + 1 + 0, id="histogram counts add up"),
        pytest.param(("podfit_rpc_duration_seconds_bucket", (("le", "0.01"),)), 1 + 1, id="buckets add up"),
        pytest.param(("podfit_cache_objects", (("kind", "Pod"),)), 7, id="the cache's gauges are the owner's"),
    ],
)
def test_the_owners_metrics_include_its_workers(
    sample: tuple[str, tuple[tuple[str, str], ...]], expected: float
) -> None:
    from podfit.server.metrics import exposition
    from prometheus_client import generate_latest

    owner = _registry_with(3, 7, [0.001, 0.5])
    workers = [generate_latest(_registry_with(4, 7, [0.002])), generate_latest(_registry_with(5, 7, []))]
    assert _samples(exposition(owner, workers))[sample] == expected


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param({}, None, id="no cgroup: every core"),
        pytest.param({"cpu.max": "max 100000\n"}, None, id="v2 without a limit: every core"),
        pytest.param({"cpu.max": "50000 100000\n"}, 1, id="v2 half a CPU: one core"),
        pytest.param({"cpu.max": "300000 100000\n"}, 3, id="v2 three CPUs: three cores"),
        pytest.param({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None, id="v1 unlimited"),
        pytest.param({"cpu/cpu.cfs_quota_us": "100000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1, id="v1 one CPU"),
    ],
)
def test_the_cores_are_those_the_cpu_limit_allows(tmp_path: Any, files: dict[str, str], expected: int | None) -> None:
    from podfit.server.transport.workers import available_cores

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    cores = min(expected or os.cpu_count() or 1, len(os.sched_getaffinity(0)))
    assert available_cores(str(tmp_path)) == cores


@pytest.mark.parametrize(
    ("cores", "processes"),
    [
        pytest.param(1, 1, id="one core: one process"),
        pytest.param(2, 1, id="two cores: one process on the listeners, the other core the what-if process's"),
        pytest.param(4, 4, id="four cores: one process per core"),
    ],
)
def test_the_default_process_count_follows_the_cores(
    monkeypatch: pytest.MonkeyPatch, cores: int, processes: int
) -> None:
    from podfit.server.transport import workers

    monkeypatch.setattr(workers, "available_cores", lambda cgroup="": cores)
    assert workers.default_workers() == processes


def test_the_merge_keeps_one_target_info_and_counts_retired_workers_counters_only() -> None:
    from podfit.server.metrics import exposition
    from prometheus_client import Info, generate_latest

    def with_target(requests: float, objects: float) -> Any:
        registry = _registry_with(requests, objects, [])
        Info("target", "the process", registry=registry).info({"service_name": "podfit"})
        return registry

    owner = with_target(3, 7)
    running, gone = generate_latest(with_target(4, 7)), generate_latest(with_target(5, 9))
    text = exposition(owner, [running], [gone]).decode()
    assert text.count("# TYPE target_info") == 1
    samples = _samples(text.encode())
    assert samples[("podfit_extender_requests_total", (("verb", "filter"),))] == 3 + 4 + 5
    assert samples[("podfit_cache_objects", (("kind", "Pod"),))] == 7


# -- the journal ---------------------------------------------------------------------------------


def test_a_rollback_after_its_writes_were_published_is_refused() -> None:
    from podfit.server.cache.journal import Journal

    journal = Journal()  # not bound to a loop: writes wait for publish(), as a heavy call's do
    mark = journal.mark()
    journal.record(("synced", "a"))
    journal.discard(mark)
    journal.publish()
    assert journal.position == 0
    mark = journal.mark()
    journal.record(("synced", "b"))
    journal.publish()
    with pytest.raises(RuntimeError, match="already published"):
        journal.discard(mark)


async def test_a_follower_far_behind_is_let_go(monkeypatch: pytest.MonkeyPatch) -> None:
    from podfit.server.cache import journal as journal_module

    monkeypatch.setattr(journal_module, "MAX_BACKLOG_BYTES", 2_000)
    journal = journal_module.Journal()
    journal.bind(asyncio.get_running_loop())
    journal.cursor(1)  # follower 1 reads nothing from here on
    journal.cursor(2)
    for i in range(20):
        journal.record(("synced", "x" * 200 + str(i)))
        frames = await journal.follow(2, journal.position - 1)
        assert frames[-1][0] == journal.position
    with pytest.raises(journal_module.FollowerDropped):
        await journal.follow(1, 0)


async def test_a_reservation_the_owner_cannot_make_is_answered_whole_by_it(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the owner's assume raises, the worker hears 'refused' (and forwards the call), never a
    broken connection it would report as OWNER_GONE."""

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("not expected")

    monkeypatch.setattr(pair.owner.service, "assume", broken)
    answer = await pair.to_worker.schedule(pod("through-owner"), assume=True)
    assert answer.selected_node and not pair.follower.ended.is_set()


# -- the what-if process -------------------------------------------------------------------------


async def _what_if_listening(server: int, timeout: float = 30.0) -> int:
    """The pid of server ``server``'s what-if process, once it listens (the owner answers before it does)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in _children(server, what_if=True):
            with open(f"/proc/{pid}/cmdline") as cmdline:
                args = cmdline.read().split("\0")
            owner_socket = args[args.index("--follow") + 1].removeprefix("unix:")
            if os.path.exists(os.path.join(os.path.dirname(owner_socket), "what-if.sock")):
                return pid
        await asyncio.sleep(0.1)
    raise AssertionError("no what-if process listens")


def _simulation(client: AsyncClient, cpu: str = "16", timeout: float = 10.0) -> Awaitable[Any]:
    """A pod that fits only the scenario's template node."""
    template = json.dumps(make_node("template").capacity(cpu="32", pods="110").json()).encode()
    scenario = sim.Scenario(
        add_nodes=[sim.HypotheticalNodes(template=cc.ClusterObject(kubernetes_json=template), count=1)]
    )
    return client.simulate([pod("wanted", cpu=cpu)], scenario, timeout=timeout)


async def test_what_if_runs_in_its_own_process_and_decisions_never_wait_for_it(server: Any) -> None:
    """With the what-if process stopped (SIGSTOP), a Simulate waits while decisions, the extender's filter
    and updates answer as before: none of them is behind it. Once it is gone (SIGKILL), the process
    that received a Simulate answers it itself until a new what-if process listens."""
    clients = _clients(server.target, 4)
    try:
        await clients[0].apply(CLUSTER)
        what_if = await _what_if_listening(server.process.pid)
        os.kill(what_if, signal.SIGSTOP)
        try:
            with pytest.raises(PodfitError, match="DEADLINE_EXCEEDED"):
                await _simulation(clients[1], timeout=1.0)
            started = time.monotonic()
            for client in clients:
                assert (await client.schedule(pod("decided"))).selected_node
                await client.apply([pod(f"written-{id(client)}")])
            assert time.monotonic() - started < 2.0
        finally:
            os.kill(what_if, signal.SIGCONT)
        assert (await _simulation(clients[1])).placements[0].node_name
        os.kill(what_if, signal.SIGKILL)
        for client in clients:
            assert (await _simulation(client)).placements[0].node_name
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _children(server.process.pid, what_if=True) in ([], [what_if]):
            await asyncio.sleep(0.2)
        assert _children(server.process.pid, what_if=True) not in ([], [what_if])
    finally:
        for client in clients:
            await client.close()


async def test_a_what_if_reads_every_write_acknowledged_to_its_sender() -> None:
    """The what-if replica trails the owner (its replication slowed); a Simulate sent right after an Apply
    still sees the applied node, because the question carries its sender's journal position."""
    link = WhatIfLink()
    owner = await create_server(Settings(), addr="127.0.0.1:0", extender_addr="off", what_if=link)
    journal = Owner(owner.service, [], 1)
    await journal.start(lambda server: register_services(server, owner.service))
    link.bind(journal.directory, journal.token, lambda: journal.journal.position)
    service = build_service(Settings(), Telemetry.disabled())
    follower = Follower(service, journal.target, journal.token)
    await follower.start()
    what_if, _ = await start_what_if_server(service, follower, Telemetry.disabled())
    replicate = follower._apply

    async def late(op: tuple[str, Any]) -> None:
        await asyncio.sleep(0.3)
        await replicate(op)

    follower._apply = late  # type: ignore[method-assign]
    client = AsyncClient(f"127.0.0.1:{owner.port}")
    try:
        await client.apply([*CLUSTER, node("node-big", cpu="64")])
        answer = await client.simulate([pod("wanted", cpu="48")])
        assert link.sent == 1, "the Simulate was not answered by the what-if replica"
        assert answer.placements[0].node_name == "node-big"
    finally:
        await client.close()
        await what_if.stop(0)
        await follower.close()
        await journal.stop()
        await owner.stop(0)
        await link.close()
