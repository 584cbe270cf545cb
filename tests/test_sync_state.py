"""--wait-for-sync: decisions, readiness and the extender wait for a feeder's MarkSynced; every response
carries the server's epoch. Real servers on loopback (TLS, so cluster-autoscaler's expander runs too)."""

from __future__ import annotations

import json
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpcplugin import expander_pb2 as ex
from grpcplugin import expander_pb2_grpc as ex_grpc
from podfit.client import AsyncClient, PodfitError, schedule_request
from podfit.k8s import protobuf
from podfit.server.app import SERVICE_NAMES, RunningServer, create_server
from podfit.server.service import CACHE_NOT_SYNCED_MESSAGE
from podfit.server.settings import Settings, SettingsError, resolve
from podfit.v1 import cluster_cache_pb2 as cc

from tests.builders import make_node, make_pod

NODE = make_node("n1").capacity(cpu="4", memory="8Gi", pods="10")
PENDING = make_pod("p").req(cpu="1")
# A pod given by value, for the decisions that must not depend on what the cache holds.
GIVEN = make_pod("given").req(cpu="1").priority(5)


@dataclass
class Server:
    running: RunningServer
    client: AsyncClient
    channels: list[grpc.aio.Channel]
    health: health_pb2_grpc.HealthStub
    expander: ex_grpc.ExpanderStub
    http: aiohttp.ClientSession

    @property
    def epoch(self) -> str:
        return self.running.service.epoch

    @property
    def base_url(self) -> str:
        return f"https://localhost:{self.running.extender_port}"


async def start(pki: dict[str, Path], *, wait_for_sync: bool) -> Server:
    settings = Settings(
        tls_cert_file=str(pki["server_cert"]),
        tls_key_file=str(pki["server_key"]),
        ca_expander_addr="localhost:0",
        wait_for_sync=wait_for_sync,
        extender_bind=True,
    )
    running = await create_server(settings, addr="localhost:0", extender_addr="localhost:0")
    ca = pki["ca"].read_bytes()
    client = AsyncClient(f"localhost:{running.port}", tls=True, root_certificates=ca)
    credentials = grpc.ssl_channel_credentials(root_certificates=ca)
    main = grpc.aio.secure_channel(f"localhost:{running.port}", credentials)
    expander = grpc.aio.secure_channel(f"localhost:{running.ca_expander_port}", credentials)
    http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ssl.create_default_context(cafile=pki["ca"])))
    return Server(
        running, client, [main, expander], health_pb2_grpc.HealthStub(main), ex_grpc.ExpanderStub(expander), http
    )


async def stop(server: Server) -> None:
    await server.http.close()
    for channel in server.channels:
        await channel.close()
    await server.client.close()
    await server.running.stop(0)


@pytest.fixture
async def waiting(pki: dict[str, Path]) -> AsyncIterator[Server]:
    """A server started with --wait-for-sync, holding a node and a pending pod (fed before the sync)."""
    server = await start(pki, wait_for_sync=True)
    try:
        await server.client.apply([NODE.json(), PENDING.json()])
        yield server
    finally:
        await stop(server)


@pytest.fixture
async def ready_at_once(pki: dict[str, Path]) -> AsyncIterator[Server]:
    """A server started without --wait-for-sync (the quick start)."""
    server = await start(pki, wait_for_sync=False)
    try:
        await server.client.apply([NODE.json(), PENDING.json()])
        yield server
    finally:
        await stop(server)


# -- the decision RPCs -------------------------------------------------------------------------------


async def _schedule_stream(server: Server) -> Any:
    responses = [r async for r in server.client.schedule_stream([schedule_request(GIVEN.json())])]
    assert len(responses) == 1
    return responses[0]


async def _best_options(server: Server) -> Any:
    request = ex.BestOptionsRequest(
        options=[ex.Option(nodeGroupId="g", nodeCount=1, podBytes=[protobuf.encode(GIVEN.json())])],
        nodeBytesMap={"g": protobuf.encode(make_node("t").capacity(cpu="4", memory="8Gi", pods="10").json())},
    )
    try:
        return await server.expander.BestOptions(request)
    except grpc.RpcError as exc:
        raise PodfitError.from_rpc_error(exc) from None


Call = Callable[[Server], Awaitable[Any]]

DECISIONS: list[Any] = [
    pytest.param(lambda s: s.client.filter(GIVEN.json()), id="Filter"),
    pytest.param(lambda s: s.client.score(GIVEN.json()), id="Score"),
    pytest.param(lambda s: s.client.schedule("default/p"), id="Schedule"),
    pytest.param(_schedule_stream, id="ScheduleStream"),
    pytest.param(lambda s: s.client.schedule_batch([GIVEN.json()]), id="ScheduleBatch"),
    pytest.param(lambda s: s.client.preempt(GIVEN.json()), id="Preempt"),
    pytest.param(lambda s: s.client.simulate([GIVEN.json()]), id="Simulate"),
    pytest.param(
        lambda s: s.client.estimate_scale_up([[GIVEN.json()]], [("g", NODE.json(), 0, 3)]), id="EstimateScaleUp"
    ),
    pytest.param(lambda s: s.client.simulate_drain(["n1"]), id="SimulateDrain"),
    pytest.param(_best_options, id="cluster-autoscaler expander BestOptions"),
]


@pytest.mark.parametrize("call", DECISIONS)
async def test_a_decision_is_refused_until_the_cache_is_synced(waiting: Server, call: Call) -> None:
    with pytest.raises(PodfitError) as info:
        await call(waiting)
    assert info.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert info.value.reason == "CACHE_NOT_SYNCED"
    assert info.value.message == CACHE_NOT_SYNCED_MESSAGE
    await waiting.client.mark_synced("test-feeder")
    answer = await call(waiting)
    if hasattr(answer, "server_epoch"):
        assert answer.server_epoch == waiting.epoch


@pytest.mark.parametrize("call", DECISIONS)
async def test_without_wait_for_sync_a_decision_is_answered_at_once(ready_at_once: Server, call: Call) -> None:
    answer = await call(ready_at_once)
    if hasattr(answer, "server_epoch"):
        assert answer.server_epoch == ready_at_once.epoch


# -- cache writes and reads ---------------------------------------------------------------------------


async def _stream(server: Server) -> Any:
    pod = cc.ClusterObject(kubernetes_json=json.dumps(make_pod("streamed").json()).encode())
    batch = cc.StreamRequest(sequence=7, updates=[cc.Update(upsert=pod)])
    acks = [ack async for ack in server.client.stream([batch])]
    assert [(a.sequence, a.applied_count, a.error) for a in acks] == [(7, 1, "")]
    return acks[0]


CACHE_CALLS: list[Any] = [
    pytest.param(lambda s: s.client.apply([make_pod("q").json()]), id="Apply"),
    pytest.param(lambda s: s.client.replace("Node", [NODE.json()]), id="Replace"),
    pytest.param(_stream, id="Stream"),
    pytest.param(lambda s: s.client.get("Pod", "p"), id="Get"),
    pytest.param(lambda s: s.client.list("Pod"), id="List"),
    pytest.param(lambda s: s.client.stats(), id="Stats"),
    pytest.param(lambda s: s.client.mark_synced("test-feeder"), id="MarkSynced"),
]


@pytest.mark.parametrize("call", CACHE_CALLS)
async def test_cache_writes_and_reads_work_before_the_sync(waiting: Server, call: Call) -> None:
    answer = await call(waiting)
    assert answer.server_epoch == waiting.epoch


async def test_stats_report_whether_the_cache_is_synced(waiting: Server) -> None:
    assert not (await waiting.client.stats()).synced
    await waiting.client.mark_synced("test-feeder")
    assert (await waiting.client.stats()).synced


# -- MarkSynced -----------------------------------------------------------------------------------------


async def test_mark_synced_is_idempotent_and_logged_once(waiting: Server, caplog: pytest.LogCaptureFixture) -> None:
    generation = (await waiting.client.stats()).generation
    with caplog.at_level(logging.INFO, logger="podfit.server"):
        first = await waiting.client.mark_synced("feeder-a")
        second = await waiting.client.mark_synced("feeder-b")
    assert (first.generation, first.server_epoch) == (generation, waiting.epoch)
    assert (second.generation, second.server_epoch) == (generation, waiting.epoch)
    assert (await waiting.client.stats()).generation == generation
    synced = [r for r in caplog.records if r.levelno == logging.INFO and "cache synced" in r.getMessage()]
    assert len(synced) == 1
    assert (getattr(synced[0], "feeder", None), getattr(synced[0], "generation", None)) == ("feeder-a", generation)


async def test_mark_synced_on_a_server_synced_from_the_start_changes_nothing(ready_at_once: Server) -> None:
    answer = await ready_at_once.client.mark_synced()
    assert answer.generation == (await ready_at_once.client.stats()).generation
    assert (await ready_at_once.client.filter(GIVEN.json())).feasible_count == 1


# -- readiness ------------------------------------------------------------------------------------------


async def _health(server: Server, service: str) -> Any:
    return (await server.health.Check(health_pb2.HealthCheckRequest(service=service))).status


HEALTH_NAMES = [pytest.param("", id="overall"), *(pytest.param(name, id=name) for name in SERVICE_NAMES)]


@pytest.mark.parametrize("service", HEALTH_NAMES)
async def test_grpc_health_is_not_serving_until_synced(waiting: Server, service: str) -> None:
    assert await _health(waiting, service) == health_pb2.HealthCheckResponse.NOT_SERVING
    await waiting.client.mark_synced("test-feeder")
    assert await _health(waiting, service) == health_pb2.HealthCheckResponse.SERVING


@pytest.mark.parametrize("service", HEALTH_NAMES)
async def test_grpc_health_is_serving_at_once_without_wait_for_sync(ready_at_once: Server, service: str) -> None:
    assert await _health(ready_at_once, service) == health_pb2.HealthCheckResponse.SERVING


async def _get(server: Server, path: str) -> tuple[int, str]:
    async with server.http.get(server.base_url + path) as response:
        return response.status, await response.text()


async def test_readyz_answers_503_until_synced_while_healthz_stays_200(waiting: Server) -> None:
    status, text = await _get(waiting, "/readyz")
    assert status == 503 and "cache not synced" in text
    assert await _get(waiting, "/healthz") == (200, "ok")
    await waiting.client.mark_synced("test-feeder")
    assert await _get(waiting, "/readyz") == (200, "ok")
    assert await _get(waiting, "/healthz") == (200, "ok")


async def test_readyz_answers_200_at_once_without_wait_for_sync(ready_at_once: Server) -> None:
    assert await _get(ready_at_once, "/readyz") == (200, "ok")


# -- the kube-scheduler extender ------------------------------------------------------------------------

EXTENDER_VERBS: list[Any] = [
    pytest.param("filter", {"Pod": GIVEN.json(), "NodeNames": ["n1"]}, id="filter"),
    pytest.param("prioritize", {"Pod": GIVEN.json(), "NodeNames": ["n1"]}, id="prioritize"),
    pytest.param("preempt", {"Pod": GIVEN.json(), "NodeNameToMetaVictims": {"n1": {"Pods": []}}}, id="preempt"),
    pytest.param("bind", {"PodName": "p", "PodNamespace": "default", "Node": "n1"}, id="bind"),
]


async def _post(server: Server, verb: str, args: dict[str, Any]) -> tuple[int, Any]:
    async with server.http.post(f"{server.base_url}/scheduler/{verb}", data=json.dumps(args)) as response:
        return response.status, await response.json()


@pytest.mark.parametrize(("verb", "args"), EXTENDER_VERBS)
async def test_an_extender_verb_answers_503_until_synced(waiting: Server, verb: str, args: dict[str, Any]) -> None:
    status, body = await _post(waiting, verb, args)
    assert status == 503
    assert body["Error"] == f"{verb}: {CACHE_NOT_SYNCED_MESSAGE}"
    assert body["reason"] == "CACHE_NOT_SYNCED"
    await waiting.client.mark_synced("test-feeder")
    status, body = await _post(waiting, verb, args)
    assert status == 200, body


@pytest.mark.parametrize(("verb", "args"), EXTENDER_VERBS)
async def test_an_extender_verb_answers_at_once_without_wait_for_sync(
    ready_at_once: Server, verb: str, args: dict[str, Any]
) -> None:
    status, body = await _post(ready_at_once, verb, args)
    assert status == 200, body


# -- the epoch ------------------------------------------------------------------------------------------


async def test_every_response_of_one_server_carries_the_same_epoch(ready_at_once: Server) -> None:
    client = ready_at_once.client
    answers = [
        await client.apply([make_pod("e").json()]),
        await client.stats(),
        await client.get("Pod", "p"),
        await client.filter(GIVEN.json()),
        await client.schedule(GIVEN.json(), view="full"),
        await client.mark_synced(),
    ]
    epochs = {a.server_epoch for a in answers}
    assert epochs == {ready_at_once.epoch}
    assert len(ready_at_once.epoch) == 32 and int(ready_at_once.epoch, 16) >= 0
    batch = await client.schedule_batch([make_pod("b1").req(cpu="1").json(), "default/p"])
    assert {batch.server_epoch, *(r.server_epoch for r in batch.results)} == {ready_at_once.epoch}


async def test_two_servers_have_different_epochs(pki: dict[str, Path]) -> None:
    first, second = await start(pki, wait_for_sync=False), await start(pki, wait_for_sync=False)
    try:
        epochs = [(await s.client.stats()).server_epoch for s in (first, second)]
    finally:
        await stop(first)
        await stop(second)
    assert epochs[0] and epochs[1] and epochs[0] != epochs[1]


# -- the setting ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "environ", "yaml", "expected"),
    [
        pytest.param([], {}, None, False, id="off by default"),
        pytest.param(["--wait-for-sync"], {}, None, True, id="the flag turns it on"),
        pytest.param([], {"PODFIT_WAIT_FOR_SYNC": "true"}, None, True, id="env true"),
        pytest.param([], {"PODFIT_WAIT_FOR_SYNC": "TRUE"}, None, True, id="env TRUE, case-insensitive"),
        pytest.param([], {"PODFIT_WAIT_FOR_SYNC": "1"}, None, True, id="env 1"),
        pytest.param([], {"PODFIT_WAIT_FOR_SYNC": "false"}, None, False, id="env false"),
        pytest.param([], {"PODFIT_WAIT_FOR_SYNC": "0"}, None, False, id="env 0"),
        pytest.param([], {}, "waitForSync: true", True, id="YAML true"),
        pytest.param([], {}, "waitForSync: false", False, id="YAML false"),
        pytest.param([], {"PODFIT_WAIT_FOR_SYNC": "0"}, "waitForSync: true", False, id="env over YAML"),
        pytest.param(["--no-wait-for-sync"], {"PODFIT_WAIT_FOR_SYNC": "1"}, None, False, id="flag over env"),
    ],
)  # fmt: skip
def test_wait_for_sync_is_read_from_flag_env_and_yaml(
    tmp_path: Path, argv: list[str], environ: dict[str, str], yaml: str | None, expected: bool
) -> None:
    if yaml is not None:
        path = tmp_path / "podfit.yaml"
        path.write_text(f"kind: PodfitConfiguration\n{yaml}\n")
        argv = ["--config", str(path), *argv]
    assert resolve(argv, environ).wait_for_sync is expected


@pytest.mark.parametrize(
    ("environ", "yaml", "message"),
    [
        pytest.param({"PODFIT_WAIT_FOR_SYNC": "maybe"}, None, "PODFIT_WAIT_FOR_SYNC: 'maybe' must be true or false",
                     id="env not a boolean"),
        pytest.param({}, "waitForSync: sometimes", "PodfitConfiguration.waitForSync: 'sometimes' must be true or false",
                     id="YAML not a boolean"),
    ],
)  # fmt: skip
def test_an_invalid_wait_for_sync_is_refused_naming_its_source(
    tmp_path: Path, environ: dict[str, str], yaml: str | None, message: str
) -> None:
    argv: list[str] = []
    if yaml is not None:
        path = tmp_path / "podfit.yaml"
        path.write_text(f"kind: PodfitConfiguration\n{yaml}\n")
        argv = ["--config", str(path)]
    with pytest.raises(SettingsError) as info:
        resolve(argv, environ)
    assert message in str(info.value)
