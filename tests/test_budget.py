"""A question's cost is bounded: size limits are checked before any work (naming the field and the
setting), an estimate's node group room is capped as cluster-autoscaler caps it, and a heavy call ends
with DEADLINE_EXCEEDED at its deadline while the server keeps answering."""

from __future__ import annotations

import asyncio
import json
import resource
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from podfit.client import PodfitError
from podfit.server.settings import Settings, SettingsError, resolve
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import scheduler_pb2 as sc
from podfit.v1 import simulation_pb2 as sim

from tests.builders import make_node, make_pod
from tests.conftest import LiveServer, start_live_server

INT32_MAX = 2**31 - 1
T = TypeVar("T")


def _json(obj: dict[str, Any]) -> cc.ClusterObject:
    return cc.ClusterObject(kubernetes_json=json.dumps(obj).encode())


def _pod_ref(name: str) -> sc.PodReference:
    return sc.PodReference(kubernetes_json=json.dumps(make_pod(name).req(cpu="100m").json()).encode())


TEMPLATE = _json(make_node("template").capacity(cpu="4", memory="8Gi", pods="110").json())


def _simulate(*counts: int, pods: int = 0) -> sim.SimulateRequest:
    scenario = sim.Scenario(add_nodes=[sim.HypotheticalNodes(template=TEMPLATE, count=c) for c in counts])
    return sim.SimulateRequest(scenario=scenario, pods=[_pod_ref(f"p{i}") for i in range(pods)])


def _gpus(count: int) -> cc.ClusterObject:
    """One node's ResourceSlice of ``count`` devices, as a template carries it."""
    spec = {
        "driver": "gpu.example.com",
        "nodeName": "template",
        "pool": {"name": "template", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": f"gpu-{i}"} for i in range(count)],
    }
    return _json({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "gpus"},
                  "spec": spec})  # fmt: skip


def _simulate_gpus(count: int, gpus: int) -> sim.SimulateRequest:
    group = sim.HypotheticalNodes(template=TEMPLATE, count=count, resource_slices=[_gpus(gpus)])
    return sim.SimulateRequest(scenario=sim.Scenario(add_nodes=[group]))


def _estimate_gpus(room: int, gpus: int) -> sim.EstimateScaleUpRequest:
    group = sim.NodeGroup(id="g", template=TEMPLATE, max_size=room, template_resource_slices=[_gpus(gpus)])
    return sim.EstimateScaleUpRequest(groups=[sim.PodGroup(pods=[_pod_ref("p")])], node_groups=[group])


OVER_LIMIT = {
    "a million template nodes": (
        "/podfit.v1.Simulation/Simulate", _simulate(1_000_000), "scenario.add_nodes", "limits.hypotheticalNodes"),
    "three groups of 2^31-1 nodes in a 100-byte request": (
        "/podfit.v1.Simulation/Simulate", _simulate(INT32_MAX, INT32_MAX, INT32_MAX), "scenario.add_nodes",
        "limits.hypotheticalNodes"),
    "more pods than a Simulate may place": (
        "/podfit.v1.Simulation/Simulate", _simulate(1, pods=11), "pods", "limits.podsPerRequest"),
    "a drain of more nodes than allowed": (
        "/podfit.v1.Simulation/SimulateDrain", sim.SimulateDrainRequest(node_names=[f"n{i}" for i in range(6)]),
        "node_names", "limits.drainNodes"),
    "an estimate of more pods than allowed": (
        "/podfit.v1.Simulation/EstimateScaleUp",
        sim.EstimateScaleUpRequest(groups=[sim.PodGroup(pods=[_pod_ref(f"p{i}") for i in range(11)])]),
        "groups", "limits.podsPerRequest"),
    "template nodes whose slice copies hold more devices than allowed (7 nodes of 8 GPUs)": (
        "/podfit.v1.Simulation/Simulate", _simulate_gpus(7, 8), "scenario.add_nodes", "limits.templateDevices"),
    "an estimate whose node group's room holds more devices than allowed": (
        "/podfit.v1.Simulation/EstimateScaleUp", _estimate_gpus(7, 8), "node_groups", "limits.templateDevices"),
    "a batch of more pods than allowed": (
        "/podfit.v1.Scheduler/ScheduleBatch",
        sc.ScheduleBatchRequest(pods=[_pod_ref(f"p{i}") for i in range(11)]), "pods", "limits.podsPerRequest"),
}  # fmt: skip


@pytest.fixture
async def small_limits() -> Any:
    settings = Settings(
        limits_pods_per_request=10, limits_drain_nodes=5, limits_hypothetical_nodes=100, limits_template_devices=50
    )
    server = await start_live_server(settings)
    yield server
    await server.client.close()
    await server.running.stop(0)


@pytest.mark.parametrize("case", list(OVER_LIMIT), ids=list(OVER_LIMIT))
async def test_a_request_over_a_limit_is_refused_before_any_work(small_limits: LiveServer, case: str) -> None:
    method, request, field, setting = OVER_LIMIT[case]
    channel = grpc.aio.insecure_channel(small_limits.target)
    try:
        call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(request.SerializeToString(), timeout=10)
        assert time.monotonic() - started < 2
    finally:
        await channel.close()
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details().startswith(f"{field}: ")
    assert setting in caught.value.details()


@pytest.mark.parametrize(
    ("request_", "method"),
    [
        pytest.param(_simulate_gpus(6, 8), "Simulate", id="6 template nodes of 8 GPUs: 48 devices"),
        pytest.param(_estimate_gpus(6, 8), "EstimateScaleUp", id="a node group with room for 6 of 8 GPUs"),
    ],
)
async def test_template_devices_within_the_limit_are_answered(
    small_limits: LiveServer, request_: Any, method: str
) -> None:
    await small_limits.client.apply([make_node("n").capacity(cpu="1", pods="110").json()])
    stub = small_limits.client.simulation
    answer = await getattr(stub, method)(request_, timeout=10)
    assert answer.ByteSize() > 0


async def test_an_estimate_room_of_2_31_nodes_is_capped_as_cluster_autoscaler_caps_it() -> None:
    server = await start_live_server(Settings(limits_new_nodes_per_estimate=3))
    try:
        template = make_node("t").capacity(cpu="1", memory="4Gi", pods="110").json()
        pods = [make_pod(f"p{i}").req(cpu="1").json() for i in range(10)]
        response = await server.client.estimate_scale_up([pods], [("group", template, 0, INT32_MAX)])
        (estimate,) = response.estimates
        assert (estimate.node_count, len(estimate.scheduled), len(estimate.unscheduled)) == (3, 3, 7)
    finally:
        await server.client.close()
        await server.running.stop(0)


async def test_a_heavy_call_ends_at_its_deadline_and_the_server_answers_on(live: LiveServer) -> None:
    await live.client.apply([make_node(f"n{i:04d}").capacity(cpu="1", pods="110").json() for i in range(2000)])
    # 5,000 pods that fit nowhere but on the 5,000 template nodes: far more than 0.3 s of work.
    request = _simulate(5000)
    request.pods.extend(
        sc.PodReference(kubernetes_json=json.dumps(make_pod(f"p{i}").req(cpu="2").json()).encode()) for i in range(5000)
    )
    started = time.monotonic()
    with pytest.raises(PodfitError) as caught:
        await live.client._call(live.client.simulation.Simulate, request, 0.3)
    assert caught.value.code is grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - started < 1.5
    health = health_pb2_grpc.HealthStub(live.client._channel)
    answer = await health.Check(health_pb2.HealthCheckRequest(), timeout=2)
    assert answer.status == health_pb2.HealthCheckResponse.SERVING


def test_limits_are_settings(tmp_path: Any) -> None:
    path = tmp_path / "podfit.yaml"
    path.write_text("kind: PodfitConfiguration\nlimits: {drainNodes: 7, podsPerRequest: 20}\n")
    settings = resolve(["--config", str(path)], environ={"PODFIT_LIMITS_HYPOTHETICAL_NODES": "50"})
    assert (settings.limits.drain_nodes, settings.limits.pods_per_request) == (7, 20)
    assert settings.limits.hypothetical_nodes == 50
    assert resolve([], environ={}).limits.new_nodes_per_estimate == 1000
    with pytest.raises(SettingsError, match=r"limits\.drainNodes: 0 must be between 1 and 10000000"):
        resolve([], environ={"PODFIT_LIMITS_DRAIN_NODES": "0"})


def _long_simulate() -> sim.SimulateRequest:
    """5,000 pods that fit only on 5,000 template nodes: seconds of work on 2,000 cached nodes."""
    request = _simulate(5000)
    request.pods.extend(
        sc.PodReference(kubernetes_json=json.dumps(make_pod(f"p{i}").req(cpu="2").json()).encode()) for i in range(5000)
    )
    return request


async def _two_thousand_nodes(server: LiveServer) -> None:
    await server.client.apply([make_node(f"n{i:04d}").capacity(cpu="1", pods="110").json() for i in range(2000)])


async def _timed(call: Awaitable[T]) -> tuple[T | PodfitError, float]:
    """A call's own outcome (its answer, or the PodfitError it ended with) and how long it took."""
    started = time.monotonic()
    try:
        return await call, time.monotonic() - started
    except PodfitError as exc:
        return exc, time.monotonic() - started


def _ended_at_its_deadline(outcome: object, took: float, deadline: float) -> None:
    """The call ran until its deadline and ended there, with DEADLINE_EXCEEDED: no answer, no other error."""
    assert isinstance(outcome, PodfitError), f"answered before its deadline after {took:.2f} s: {outcome}"
    assert outcome.code is grpc.StatusCode.DEADLINE_EXCEEDED, (outcome.code, outcome.message)
    assert deadline - 0.1 < took < deadline + 1.0, f"ended {took:.2f} s in, its deadline was {deadline} s"


async def _until(condition: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Waits (on the event loop the in-process server shares) until ``condition`` holds."""
    ends = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < ends, f"{what}: not within {timeout} s"
        await asyncio.sleep(0.01)


async def test_health_and_stats_answer_while_a_heavy_call_runs(live: LiveServer) -> None:
    await _two_thousand_nodes(live)
    # _long_simulate takes seconds more than 3 s (about 18 s on the project's 2-core machine): it must run until
    # its deadline.
    heavy = asyncio.ensure_future(_timed(live.client._call(live.client.simulation.Simulate, _long_simulate(), 3.0)))
    health = health_pb2_grpc.HealthStub(live.client._channel)
    latencies = []
    await _until(lambda: live.running.service.gate.heavy_running, "the simulation runs")
    while not heavy.done() and len(latencies) < 60:
        started = time.monotonic()
        await health.Check(health_pb2.HealthCheckRequest(), timeout=2)
        await live.client.stats()
        latencies.append((time.monotonic() - started) / 2)
        await asyncio.sleep(0.02)
    _ended_at_its_deadline(*await heavy, deadline=3.0)
    assert len(latencies) >= 20, "the heavy call ended too soon to measure anything"
    latencies.sort()
    assert latencies[int(len(latencies) * 0.99) - 1] < 0.1, latencies[-5:]
    # The server runs in this process: its peak resident memory, the simulation's included.
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 1.5 * 2**20  # KiB


async def test_an_update_during_a_heavy_call_is_applied_without_waiting(live: LiveServer) -> None:
    await _two_thousand_nodes(live)
    heavy = asyncio.ensure_future(live.client._call(live.client.simulation.Simulate, _long_simulate(), 1.0))
    await _until(lambda: live.running.service.gate.heavy_running, "the simulation runs")
    started = time.monotonic()
    await live.client.apply([make_node("late").capacity(cpu="1", pods="110").json()])
    # The simulation reads a frozen snapshot: the update goes on beside it, long before its 1 s deadline.
    waited = time.monotonic() - started
    assert waited < 0.5, f"the update waited {waited:.2f} s for the simulation"
    assert live.running.service.gate.heavy_running
    with pytest.raises(PodfitError) as caught:
        await heavy
    assert caught.value.code is grpc.StatusCode.DEADLINE_EXCEEDED
    assert (await live.client.stats()).nodes == 2001


async def test_a_heavy_call_whose_client_leaves_frees_the_cache_at_once(live: LiveServer) -> None:
    await _two_thousand_nodes(live)
    request = _long_simulate()
    started = time.monotonic()
    heavy = asyncio.ensure_future(live.client._call(live.client.simulation.Simulate, request, 60))
    await asyncio.sleep(0.3)
    heavy.cancel()
    await live.client.apply([make_node("after").capacity(cpu="1", pods="110").json()])
    # The whole simulation takes seconds; the update waited for nothing, and the heavy-call thread is free
    # again within a second of the start.
    assert time.monotonic() - started < 1.0
    await _until(lambda: not live.running.service.gate.heavy_running, "the cancelled simulation stops", 1.0)


async def test_heavy_calls_beyond_the_waiting_limit_are_refused() -> None:
    server = await start_live_server(Settings(limits_heavy_calls_waiting=1))
    try:
        await _two_thousand_nodes(server)
        simulate = server.client.simulation.Simulate
        gate = server.running.service.gate
        started = time.monotonic()
        running = asyncio.ensure_future(_timed(server.client._call(simulate, _long_simulate(), 1.5)))
        await _until(lambda: gate.heavy_running, "the long simulation runs")
        sent = time.monotonic()
        waiting = asyncio.ensure_future(_timed(server.client._call(simulate, _simulate(1, pods=1), 20)))
        # The short one waits for it: the one heavy call allowed to wait.
        await _until(lambda: gate.waiting == 1, "the short simulation waits")
        with pytest.raises(PodfitError) as caught:
            await server.client._call(simulate, _simulate(1), 5)
        assert caught.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "heavy calls" in caught.value.message
        # The running call ends at its deadline; the waiting one is answered once the cache is free.
        _ended_at_its_deadline(*await running, deadline=1.5)
        answer, took = await waiting
        assert isinstance(answer, sim.SimulateResponse), f"the waiting call failed after {took:.2f} s: {answer}"
        assert [(p.name, bool(p.node_name)) for p in answer.placements] == [("p0", True)]
        answered = sent + took - started
        assert answered > 1.4, f"the waiting call was answered {answered:.2f} s in, before the running one ended"
    finally:
        await server.client.close()
        await server.running.stop(0)


def _estimate_of(pods: int) -> sim.EstimateScaleUpRequest:
    pod = _pod_ref("p")
    return sim.EstimateScaleUpRequest(groups=[sim.PodGroup(pods=[pod] * pods)])


# The issue's heavy questions at the default limits: each refused before any work.
DEFAULT_LIMITS = {
    "a 1,000,000-node Simulate": ("/podfit.v1.Simulation/Simulate", _simulate(1_000_000), "scenario.add_nodes"),
    "a 20,000-pod estimate": ("/podfit.v1.Simulation/EstimateScaleUp", _estimate_of(20_000), "groups"),
    "a drain of half a 5,000-node cluster": (
        "/podfit.v1.Simulation/SimulateDrain",
        sim.SimulateDrainRequest(node_names=[f"n{i}" for i in range(2500)]),
        "node_names",
    ),
}


@pytest.mark.parametrize("case", list(DEFAULT_LIMITS), ids=list(DEFAULT_LIMITS))
async def test_the_issues_heavy_questions_are_refused_at_the_default_limits(live: LiveServer, case: str) -> None:
    method, request, field = DEFAULT_LIMITS[case]
    call = live.client._channel.unary_unary(method, request_serializer=None, response_deserializer=None)
    started = time.monotonic()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(request.SerializeToString(), timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details().startswith(f"{field}: ")
    # Decoding the 20,000 pods before counting them took about 2 s; a refusal takes a fraction of that.
    assert time.monotonic() - started < 1.5
    health = health_pb2_grpc.HealthStub(live.client._channel)
    answer = await health.Check(health_pb2.HealthCheckRequest(), timeout=2)
    assert answer.status == health_pb2.HealthCheckResponse.SERVING
