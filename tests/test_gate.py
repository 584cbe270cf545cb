"""The heavy-call gate: first come, first served; nothing left waiting for a wakeup nobody sends; every
heavy call bounded by the server's own deadline. Unit tests on one event loop, then the same faults
through a real server on loopback."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from podfit.client import PodfitError
from podfit.server.budget import DeadlineExceeded, check_deadline, deadline_scope
from podfit.server.gate import Gate
from podfit.server.settings import Settings
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import scheduler_pb2 as sc
from podfit.v1 import simulation_pb2 as sim

from tests.builders import make_node, make_pod
from tests.conftest import LiveServer, start_live_server


def _blocking(release: threading.Event) -> Callable[[], str]:
    """A heavy call's body that runs until ``release`` (checking its deadline as the simulations do)."""

    def run() -> str:
        while not release.wait(0.01):
            check_deadline()
        return "done"

    return run


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def _hold_shared(gate: Gate, entered: asyncio.Event, leave: asyncio.Event) -> None:
    async with gate.shared():
        entered.set()
        await leave.wait()


async def test_a_write_queued_behind_a_cancelled_heavy_call_runs_once_the_readers_leave() -> None:
    """The review's reproduction: A shared, H heavy waits, B blocks, H is cancelled, A leaves."""
    gate = Gate()
    a_in, a_leave = asyncio.Event(), asyncio.Event()
    a = asyncio.create_task(_hold_shared(gate, a_in, a_leave))
    await a_in.wait()
    release = threading.Event()
    h = asyncio.create_task(gate.run_heavy(_blocking(release)))
    await _settle()
    b_in, b_leave = asyncio.Event(), asyncio.Event()
    b = asyncio.create_task(_hold_shared(gate, b_in, b_leave))
    await _settle()
    assert not b_in.is_set(), "B must wait behind the heavy call queued before it"
    h.cancel()
    await _settle()
    a_leave.set()
    await asyncio.wait_for(b_in.wait(), 1.0)
    b_leave.set()
    await asyncio.gather(a, b)
    with pytest.raises(asyncio.CancelledError):
        await h
    assert (gate.queued, gate.busy) == (0, False)
    release.set()


@pytest.mark.parametrize("heavy_first", [False, True], ids=["update arrived first", "another batch was already queued"])
async def test_an_update_waits_for_the_running_batch_only(heavy_first: bool) -> None:
    """Batches (exclusive heavy calls) queue for the heavy-call thread; an update waits only for the one
    holding the cache, never for those queued, whenever they arrived."""
    gate = Gate()
    order: list[str] = []
    releases = [threading.Event() for _ in range(4)]

    def heavy(name: str, release: threading.Event) -> Callable[[], None]:
        def run() -> None:
            order.append(name)
            release.wait(5)

        return run

    running = asyncio.create_task(gate.run_heavy(heavy("h1", releases[0])))
    while not gate.busy:
        await asyncio.sleep(0.005)

    async def update() -> None:
        async with gate.shared():
            order.append("update")

    tasks = []
    if heavy_first:
        tasks.append(asyncio.create_task(gate.run_heavy(heavy("h2", releases[1]))))
        await _settle()
    tasks.append(asyncio.create_task(update()))
    await _settle()
    for i in (2, 3):
        tasks.append(asyncio.create_task(gate.run_heavy(heavy(f"h{i + 1}", releases[i]))))
        await _settle()
    for release in releases:
        release.set()
    await asyncio.wait_for(asyncio.gather(running, *tasks), 5)
    expected = ["h1", "update", "h2", "h3", "h4"] if heavy_first else ["h1", "update", "h3", "h4"]
    assert order == expected


async def test_a_heavy_call_ends_at_the_servers_deadline_without_one_from_its_client() -> None:
    gate = Gate(heavy_seconds=0.2)
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        await gate.run_heavy(_blocking(release))
    assert time.monotonic() - started < 1.0
    assert not gate.busy


async def test_the_clients_deadline_wins_when_it_is_earlier() -> None:
    gate = Gate(heavy_seconds=30)
    release = threading.Event()
    started = time.monotonic()
    with deadline_scope(0.2), pytest.raises(DeadlineExceeded):
        await gate.run_heavy(_blocking(release))
    assert time.monotonic() - started < 1.0


async def test_a_heavy_call_waiting_past_the_deadline_leaves_the_queue_and_lets_the_next_in() -> None:
    gate = Gate(heavy_seconds=0.3)
    release = threading.Event()
    # Not queued: a decision worker's image, which has no server deadline and outlasts the next call's.
    running = asyncio.create_task(gate.run_heavy(_blocking(release), queued=False))
    while not gate.busy:
        await asyncio.sleep(0.005)
    with pytest.raises(DeadlineExceeded, match="waiting"):
        # Queued behind a call that holds the cache past this one's deadline.
        await gate.run_heavy(lambda: "never")
    assert gate.queued == 0
    release.set()
    assert await running == "done"
    async with asyncio.timeout(1):
        async with gate.shared():
            pass


async def test_a_caller_granted_the_cache_while_it_was_cancelled_gives_it_back() -> None:
    gate = Gate()
    release = threading.Event()
    running = asyncio.create_task(gate.run_heavy(_blocking(release)))
    while not gate.busy:
        await asyncio.sleep(0.005)
    b_in, b_leave = asyncio.Event(), asyncio.Event()
    b = asyncio.create_task(_hold_shared(gate, b_in, b_leave))
    await _settle()
    release.set()
    await running
    # B was granted; cancel it before it resumes.
    b.cancel()
    with pytest.raises(asyncio.CancelledError):
        await b
    assert not b_in.is_set()
    async with asyncio.timeout(1):
        await gate.run_heavy(lambda: None)


# -- through a real server ------------------------------------------------------------------------


def _long_simulate() -> sim.SimulateRequest:
    """5,000 pods that fit only on 5,000 template nodes: seconds of work on 2,000 cached nodes."""
    template = cc.ClusterObject(
        kubernetes_json=json.dumps(make_node("template").capacity(cpu="4", memory="8Gi", pods="110").json()).encode()
    )
    pods = [
        sc.PodReference(kubernetes_json=json.dumps(make_pod(f"p{i}").req(cpu="2").json()).encode()) for i in range(5000)
    ]
    return sim.SimulateRequest(
        scenario=sim.Scenario(add_nodes=[sim.HypotheticalNodes(template=template, count=5000)]), pods=pods
    )


def _simulate(server: LiveServer, timeout: float | None) -> Any:
    return asyncio.ensure_future(server.client._call(server.client.simulation.Simulate, _long_simulate(), timeout))


async def _nodes(server: LiveServer, count: int = 2000) -> None:
    await server.client.apply([make_node(f"n{i:04d}").capacity(cpu="1", pods="110").json() for i in range(count)])


async def test_a_server_ends_a_heavy_call_at_limits_heavy_call_seconds_when_the_client_sent_no_deadline() -> None:
    server = await start_live_server(Settings(limits_heavy_call_seconds=1))
    try:
        await _nodes(server)
        started = time.monotonic()
        with pytest.raises(PodfitError) as failed:
            await _simulate(server, None)
        assert failed.value.code is grpc.StatusCode.DEADLINE_EXCEEDED
        assert time.monotonic() - started < 5
    finally:
        await server.client.close()
        await server.running.stop(0)


async def test_an_update_behind_a_heavy_call_cancelled_in_the_queue_is_applied(live: LiveServer) -> None:
    await _nodes(live)
    first = _simulate(live, 2.0)
    await asyncio.sleep(0.3)
    queued = _simulate(live, 30.0)
    await asyncio.sleep(0.2)
    update = asyncio.ensure_future(live.client.apply([make_node("late").capacity(cpu="1", pods="110").json()]))
    await asyncio.sleep(0.2)
    queued.cancel()
    with pytest.raises(PodfitError) as failed:
        await first
    assert failed.value.code is grpc.StatusCode.DEADLINE_EXCEEDED
    # Applied once the first call let go (~2 s in), not after the cancelled one would have run.
    await asyncio.wait_for(update, 3.0)
    assert (await live.client.stats()).nodes == 2001


async def _loop_ticks_during(gate: Gate, exclusive: bool) -> int:
    """How often the event loop gets the interpreter (1 ms sleeps) while a heavy call computes for 0.4 s."""

    def compute() -> None:
        ends = time.monotonic() + 0.4
        while time.monotonic() < ends:
            sum(i * i for i in range(2_000))  # a step of a simulation, then its check
            check_deadline()

    running = asyncio.ensure_future(gate.run_heavy(compute, exclusive=exclusive))
    ticks = 0
    while not running.done():
        await asyncio.sleep(0.001)
        ticks += 1
    await running
    return ticks


async def test_a_reader_hands_the_interpreter_to_the_event_loop_at_every_step() -> None:
    """A reader runs beside decisions: at every check it lets the loop in, instead of keeping the
    interpreter for the whole switch interval each time the loop asks for it."""
    gate = Gate()
    reader = await _loop_ticks_during(gate, exclusive=False)
    writer = await _loop_ticks_during(gate, exclusive=True)
    assert reader > 2 * writer, (reader, writer)


async def test_a_failing_after_heavy_hook_still_lets_go_of_the_cache() -> None:
    gate = Gate()

    def broken() -> None:
        raise RuntimeError("a hook failed")

    gate.after_heavy.append(broken)
    with pytest.raises(RuntimeError, match="a hook failed"):
        await gate.run_heavy(lambda: None)
    assert not gate.busy and not gate.heavy_running
    async with asyncio.timeout(1):
        async with gate.shared():
            pass


async def test_stats_during_a_batch_read_the_cache_once_the_batch_let_go(live: LiveServer) -> None:
    """A batch writes the cache on its thread; an inspection meanwhile waits for it rather than read a
    cache being changed under it (a dict changing size mid-iteration, a half-done batch)."""
    await _nodes(live)
    pods = [make_pod(f"b{i}").req(cpu="500m").json() for i in range(3000)]
    batch = asyncio.ensure_future(live.client.schedule_batch(pods, view="basic", timeout=60))
    gate = live.running.service.gate
    while not gate.busy:
        await asyncio.sleep(0.005)
    stats = await live.client.stats()
    placed = await batch
    assert placed.assumed_generation and stats.generation == placed.assumed_generation
