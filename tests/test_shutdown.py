"""Graceful shutdown: NOT_SERVING during the delay, every call that reached the server answered, open
streams ended UNAVAILABLE, and the process gone as soon as the work is done (not after the grace)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from podfit.client import AsyncClient, PodfitError, schedule_request
from podfit.client.manifests import to_cluster_object
from podfit.server.app import create_server
from podfit.server.lifecycle import SHUTTING_DOWN_MESSAGE
from podfit.server.settings import Settings, SettingsError, load_file, resolve
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import simulation_pb2 as sim

from tests.builders import make_node, make_pod
from tests.server_process import ServerProcess

NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _pod(i: int) -> dict[str, Any]:
    return make_pod(f"p{i}").req(cpu="10m").json()


@pytest.fixture
def server_process() -> Iterator[Callable[..., ServerProcess]]:
    started: list[ServerProcess] = []

    def start(*flags: str) -> ServerProcess:
        started.append(ServerProcess(*flags))
        return started[-1]

    yield start
    for process in started:
        process.kill()


async def test_sigterm_under_load_answers_every_call_that_reached_the_server(
    server_process: Callable[..., ServerProcess],
) -> None:
    # A long grace: the process must leave as soon as the work is done, not when the grace runs out.
    server = server_process("--shutdown-grace-seconds", "60")
    async with AsyncClient(server.target) as client:
        await server.ready(client)
        await client.apply([make_node(f"n{i}").capacity(cpu="64", memory="64Gi", pods="110").json() for i in range(20)])
        answered: list[float] = []

        async def schedule(i: int) -> str:
            try:
                await client.schedule(_pod(i), view="basic")
            except PodfitError as exc:
                return exc.code.name
            answered.append(time.monotonic())
            return "OK"

        calls = [asyncio.create_task(schedule(i)) for i in range(1500)]
        while len(answered) < 20:
            await asyncio.sleep(0.005)
        signalled = server.signal()
        outcomes = collections.Counter(await asyncio.gather(*calls))
        outstanding_at_signal = 1500 - sum(1 for t in answered if t < signalled)
        gone = await server.exited(within=20)
        # Every call got a real answer, or (had it not reached the server before the port closed) a
        # retryable UNAVAILABLE; none was cancelled.
        assert set(outcomes) <= {"OK", "UNAVAILABLE"}, outcomes
        assert outstanding_at_signal > 500 and outcomes["OK"] > 1000, (outstanding_at_signal, outcomes)
        assert gone - max(answered) < 5, "the process outlived its last answer by seconds"
        with pytest.raises(PodfitError) as closed:
            await client.stats(timeout=5)
        assert closed.value.code is grpc.StatusCode.UNAVAILABLE
    assert server.process.returncode == 0


async def test_health_and_readyz_say_not_serving_during_the_delay_while_calls_are_still_answered() -> None:
    running = await create_server(Settings(), addr="127.0.0.1:0", extender_addr="127.0.0.1:0")
    target = f"127.0.0.1:{running.port}"
    readyz = f"http://127.0.0.1:{running.extender_port}/readyz"
    async with (
        AsyncClient(target) as client,
        grpc.aio.insecure_channel(target) as channel,
        aiohttp.ClientSession() as http,
    ):
        await client.apply([make_node("n0").json()])
        async with http.get(readyz) as before:
            assert before.status == 200
        started = time.monotonic()
        stopping = asyncio.create_task(running.stop(5, delay=1.0))
        await asyncio.sleep(0.2)
        health = health_pb2_grpc.HealthStub(channel)
        for _ in range(3):
            assert (await health.Check(health_pb2.HealthCheckRequest(), timeout=2)).status == NOT_SERVING
            async with http.get(readyz) as during:
                assert during.status == 503 and "shutting down" in await during.text()
            # Load balancers have not noticed yet: what they still send is answered.
            assert (await client.schedule(_pod(0), timeout=2)).selected_node == "n0"
            await asyncio.sleep(0.2)
        assert not stopping.done()
        await stopping
        assert 1.0 <= time.monotonic() - started < 3.0
        with pytest.raises(PodfitError) as closed:
            await client.stats(timeout=2)
        assert closed.value.code is grpc.StatusCode.UNAVAILABLE


async def _idle_cache_stream(client: AsyncClient) -> AsyncIterator[Any]:
    async def batches() -> AsyncIterator[cc.StreamRequest]:
        yield cc.StreamRequest(sequence=1)
        await asyncio.Event().wait()  # a feeder with nothing more to say

    async for ack in client.stream(batches()):
        yield ack


async def _idle_schedule_stream(client: AsyncClient) -> AsyncIterator[Any]:
    async def requests() -> AsyncIterator[Any]:
        yield schedule_request(_pod(0), view="basic")
        await asyncio.Event().wait()

    async for answer in client.schedule_stream(requests()):
        yield answer


async def _health_watch(client: AsyncClient) -> AsyncIterator[Any]:
    call = health_pb2_grpc.HealthStub(client._channel).Watch(health_pb2.HealthCheckRequest())
    try:
        async for status in call:
            yield status
    except grpc.RpcError as exc:
        raise PodfitError.from_rpc_error(exc) from None


@pytest.mark.parametrize(
    "open_stream",
    [
        pytest.param(_idle_cache_stream, id="an idle ClusterCache.Stream"),
        pytest.param(_idle_schedule_stream, id="an idle ScheduleStream"),
        pytest.param(_health_watch, id="a Health.Watch"),
    ],
)
async def test_an_open_stream_ends_unavailable_and_does_not_hold_the_shutdown(
    open_stream: Callable[[AsyncClient], AsyncIterator[Any]],
) -> None:
    running = await create_server(Settings(), addr="127.0.0.1:0", extender_addr="off")
    async with AsyncClient(f"127.0.0.1:{running.port}") as client:
        await client.apply([make_node("n0").json()])
        stream = open_stream(client)
        first = await anext(stream)
        assert first is not None
        started = time.monotonic()
        stopping = asyncio.create_task(running.stop(30))
        with pytest.raises(PodfitError) as ended:
            async for _ in stream:
                pass
        assert ended.value.code is grpc.StatusCode.UNAVAILABLE
        assert ended.value.message == SHUTTING_DOWN_MESSAGE
        await asyncio.wait_for(stopping, 5)
        assert time.monotonic() - started < 3.0


async def test_an_idle_feeder_stream_does_not_keep_the_process_for_the_grace_period(
    server_process: Callable[..., ServerProcess],
) -> None:
    server = server_process("--shutdown-grace-seconds", "60", "--shutdown-delay-seconds", "0.3")
    async with AsyncClient(server.target) as client:
        await server.ready(client)
        stream = _idle_cache_stream(client)
        assert (await anext(stream)).sequence == 1
        signalled = server.signal()
        with pytest.raises(PodfitError) as ended:
            await anext(stream)
        assert (ended.value.code, ended.value.message) == (grpc.StatusCode.UNAVAILABLE, SHUTTING_DOWN_MESSAGE)
        assert await server.exited(within=10) - signalled < 5
    assert server.process.returncode == 0
    assert "stopped after" in server.log()


async def test_a_second_signal_cuts_the_shutdown_delay_short(server_process: Callable[..., ServerProcess]) -> None:
    server = server_process("--shutdown-delay-seconds", "60")
    async with AsyncClient(server.target) as client:
        await server.ready(client)
        signalled = server.signal(signal.SIGTERM)
        await asyncio.sleep(0.5)
        assert server.process.poll() is None, "the first signal must wait out the delay"
        server.signal(signal.SIGINT)
        assert await server.exited(within=10) - signalled < 5
    assert "second signal" in server.log()


def test_the_deployment_outwaits_the_delay_and_the_grace() -> None:
    """The kubelet kills the pod at terminationGracePeriodSeconds: it must outlast podfit's own shutdown
    (the delay load balancers need, then the drain), or calls are cut off after all."""
    manifests = Path(__file__).resolve().parents[1] / "deploy" / "kubernetes"
    values, _ = load_file(str(manifests / "podfit-config.yaml"))
    settings = replace(Settings(), **values)
    docs = list(yaml.safe_load_all((manifests / "podfit.yaml").read_text()))
    deployment = next(d for d in docs if d and d.get("kind") == "Deployment")
    termination = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert settings.shutdown_delay_seconds > 0, "without a delay, load balancers still send to a closed port"
    assert termination >= settings.shutdown_delay_seconds + settings.shutdown_grace_seconds + 5


async def test_a_second_signal_during_the_drain_cancels_what_is_left_at_once() -> None:
    running = await create_server(Settings(), addr="127.0.0.1:0", extender_addr="off")
    never = asyncio.Event()
    schedule = running.service.schedule

    async def stuck(*args: Any, **kwargs: Any) -> Any:
        await never.wait()
        return await schedule(*args, **kwargs)

    running.service.schedule = stuck  # type: ignore[method-assign]
    async with AsyncClient(f"127.0.0.1:{running.port}") as client:
        call = asyncio.create_task(client.schedule(_pod(0)))
        while running.drain.in_flight == 0:
            await asyncio.sleep(0.01)
        started = time.monotonic()
        stopping = asyncio.create_task(running.stop(30))
        await asyncio.sleep(0.3)
        assert not stopping.done(), "the drain waits for the call in flight"
        running.hurry.set()
        await asyncio.wait_for(stopping, 5)
        assert time.monotonic() - started < 3
        with pytest.raises(PodfitError) as cancelled:
            await call
        assert cancelled.value.code is grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize(
    ("argv", "environ", "expected"),
    [
        pytest.param([], {}, (0.0, 10.0), id="defaults: no delay, 10 s grace"),
        pytest.param(["--shutdown-delay-seconds", "5"], {}, (5.0, 10.0), id="the delay as a flag"),
        pytest.param([], {"PODFIT_SHUTDOWN_DELAY_SECONDS": "2.5"}, (2.5, 10.0), id="the delay from the environment"),
        pytest.param(
            ["--shutdown-grace-seconds", "30"], {"PODFIT_SHUTDOWN_GRACE_SECONDS": "20"}, (0.0, 30.0), id="flag wins"
        ),
    ],
)
def test_the_delay_and_the_grace_are_configurable(
    argv: list[str], environ: dict[str, str], expected: tuple[float, float]
) -> None:
    settings = resolve(argv, environ)
    assert (settings.shutdown_delay_seconds, settings.shutdown_grace_seconds) == expected


@pytest.mark.parametrize(
    ("environ", "field"),
    [
        pytest.param({"PODFIT_SHUTDOWN_DELAY_SECONDS": "-1"}, "shutdownDelaySeconds", id="a negative delay"),
        pytest.param({"PODFIT_SHUTDOWN_GRACE_SECONDS": "nan"}, "shutdownGraceSeconds", id="a grace that is no number"),
        pytest.param({"PODFIT_SHUTDOWN_DELAY_SECONDS": "7200"}, "shutdownDelaySeconds", id="a delay over an hour"),
    ],
)
def test_a_bad_delay_or_grace_is_refused_at_start(environ: dict[str, str], field: str) -> None:
    with pytest.raises(SettingsError, match=f"^{field}: "):
        resolve([], environ)


async def test_frequent_health_checks_do_not_hold_the_drain_open() -> None:
    running = await create_server(Settings(), addr="127.0.0.1:0", extender_addr="off")
    target = f"127.0.0.1:{running.port}"
    statuses: list[int] = []

    async def probe(health: health_pb2_grpc.HealthStub) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError):
            while True:
                statuses.append((await health.Check(health_pb2.HealthCheckRequest(), timeout=1)).status)
                await asyncio.sleep(0.05)

    async with grpc.aio.insecure_channel(target) as channel:
        prober = asyncio.create_task(probe(health_pb2_grpc.HealthStub(channel)))
        await asyncio.sleep(0.2)
        started = time.monotonic()
        await asyncio.wait_for(running.stop(30), 10)
        assert time.monotonic() - started < 3
        await asyncio.wait_for(prober, 5)
    assert statuses[0] == health_pb2.HealthCheckResponse.SERVING and statuses[-1] == NOT_SERVING


async def test_the_grace_period_bounds_a_heavy_call_too() -> None:
    """A simulation of seconds in flight at shutdown is stopped when the grace runs out: the worker thread
    notices the cancellation between steps and the process does not wait for it to finish."""
    running = await create_server(Settings(), addr="127.0.0.1:0", extender_addr="off")
    async with AsyncClient(f"127.0.0.1:{running.port}") as client:
        await client.apply([make_node(f"n{i:04d}").capacity(cpu="1", pods="110").json() for i in range(2000)])
        pods = [make_pod(f"p{i}").req(cpu="2").json() for i in range(5000)]
        template = cc.ClusterObject(node=to_cluster_object(make_node("t").capacity(cpu="4", pods="110").json()).node)
        scenario = sim.Scenario(add_nodes=[sim.HypotheticalNodes(template=template, count=5000)])
        call = asyncio.create_task(client.simulate(pods, scenario, timeout=60))
        while not running.service.gate.heavy_running:
            await asyncio.sleep(0.01)
        started = time.monotonic()
        await asyncio.wait_for(running.stop(0.5), 5)
        assert time.monotonic() - started < 1.5
        assert not running.service.gate.heavy_running
        with pytest.raises(PodfitError):
            await call
