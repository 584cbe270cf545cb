"""Hostile input through a real server: refused as INVALID_ARGUMENT (HTTP 400) at the offending field,
never INTERNAL/UNKNOWN/RESOURCE_EXHAUSTED/500, and a bad Stream batch never ends the stream."""

from __future__ import annotations

import asyncio
import json
import logging
import resource
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from podfit.k8s import limits
from podfit.server.settings import Settings, SettingsError, resolve
from podfit.server.transport.errors import REJECTED_LOG, RateLimitedLog
from podfit.server.transport.stored_forms import PROTOBUF_FORMS
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import scheduler_pb2 as sc
from podfit.v1 import simulation_pb2 as sim

from tests.builders import make_node, make_pod
from tests.conftest import LiveServer, start_live_server

HUGE = "x" * 70_000
# name -> (kubernetes_json, what the refusal must say)
HOSTILE_JSON: dict[str, tuple[bytes, str]] = {
    "5000 nested arrays": (b"[" * 5000, "nests 5000 levels deep"),
    "deep nesting inside a pod's spec": (
        b'{"kind":"Pod","metadata":{"name":"p"},"spec":{"x":' + b"[" * 3000 + b"]" * 3000 + b"}}",
        "levels deep",
    ),
    "an unpaired surrogate in a key": (b'{"kind":"Pod","metadata":{"name":"p"},"\\ud800":1}', "surrogate"),
    "an unpaired surrogate in a value": (b'{"kind":"Pod","metadata":{"name":"\\udc00"}}', "surrogate"),
    "a 70 KB kind echoed back": (json.dumps({"kind": HUGE}).encode(), "70000 bytes"),
    "a 70 KB quantity echoed back": (
        json.dumps(make_pod("p").req(cpu=HUGE).json()).encode(),
        "",
    ),
}


def _pod_ref(raw: bytes) -> sc.PodReference:
    return sc.PodReference(kubernetes_json=raw)


# rpc name -> (method path, request class' response class, request built from a hostile kubernetes_json,
#              the field path the refusal must start with)
RPCS: dict[str, tuple[str, Any, Callable[[bytes], Any], str]] = {
    "Apply": (
        "/podfit.v1.ClusterCache/Apply",
        cc.ApplyResponse,
        lambda raw: cc.ApplyRequest(updates=[cc.Update(upsert=cc.ClusterObject(kubernetes_json=raw))]),
        "updates[0].upsert",
    ),
    "Replace": (
        "/podfit.v1.ClusterCache/Replace",
        cc.ReplaceResponse,
        lambda raw: cc.ReplaceRequest(kind=cc.OBJECT_KIND_POD, objects=[cc.ClusterObject(kubernetes_json=raw)]),
        "objects[0]",
    ),
    "Filter": (
        "/podfit.v1.Scheduler/Filter",
        sc.FilterResponse,
        lambda raw: sc.FilterRequest(pod=_pod_ref(raw)),
        "pod",
    ),
    "Score": ("/podfit.v1.Scheduler/Score", sc.ScoreResponse, lambda raw: sc.ScoreRequest(pod=_pod_ref(raw)), "pod"),
    "Schedule": (
        "/podfit.v1.Scheduler/Schedule",
        sc.ScheduleResponse,
        lambda raw: sc.ScheduleRequest(pod=_pod_ref(raw), assume=True),
        "pod",
    ),
    "ScheduleBatch": (
        "/podfit.v1.Scheduler/ScheduleBatch",
        sc.ScheduleBatchResponse,
        lambda raw: sc.ScheduleBatchRequest(pods=[_pod_ref(raw)]),
        "pods[0]",
    ),
    "Preempt": (
        "/podfit.v1.Scheduler/Preempt",
        sc.PreemptResponse,
        lambda raw: sc.PreemptRequest(pod=_pod_ref(raw)),
        "pod",
    ),
    "Simulate": (
        "/podfit.v1.Simulation/Simulate",
        sim.SimulateResponse,
        lambda raw: sim.SimulateRequest(pods=[_pod_ref(raw)]),
        "pods[0]",
    ),
    "EstimateScaleUp": (
        "/podfit.v1.Simulation/EstimateScaleUp",
        sim.EstimateScaleUpResponse,
        lambda raw: sim.EstimateScaleUpRequest(groups=[sim.PodGroup(pods=[_pod_ref(raw)])]),
        "groups[0].pods[0]",
    ),
}


@pytest.fixture
async def channel(live: LiveServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(live.target) as channel:
        yield channel


def _field_violation(error: grpc.aio.AioRpcError) -> str:
    status = rpc_status.from_call(error)
    assert status is not None, "INVALID_ARGUMENT must carry google.rpc details"
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            return bad.field_violations[0].field
    raise AssertionError("no BadRequest detail")


@pytest.mark.parametrize("rpc", list(RPCS), ids=list(RPCS))
@pytest.mark.parametrize("case", list(HOSTILE_JSON), ids=list(HOSTILE_JSON))
async def test_hostile_kubernetes_json_is_invalid_argument_at_its_field(
    channel: grpc.aio.Channel, rpc: str, case: str
) -> None:
    path, response, build, field = RPCS[rpc]
    raw, says = HOSTILE_JSON[case]
    call = channel.unary_unary(
        path, request_serializer=lambda m: m.SerializeToString(), response_deserializer=response.FromString
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(build(raw), timeout=10)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    assert says in caught.value.details()
    assert len(caught.value.details()) < 1200, "an echoed value must be capped"
    assert _field_violation(caught.value).startswith(field)


UNDECODABLE = {
    "a truncated length": b"\x0a\xff\xff\x01",
    "a field number 0": b"\x00\x01",
    "an invalid wire type": b"\x0f",
}
UNARY_METHODS = [
    "/podfit.v1.ClusterCache/Apply",
    "/podfit.v1.ClusterCache/Replace",
    "/podfit.v1.ClusterCache/Get",
    "/podfit.v1.ClusterCache/List",
    "/podfit.v1.ClusterCache/MarkSynced",
    "/podfit.v1.Scheduler/Filter",
    "/podfit.v1.Scheduler/Score",
    "/podfit.v1.Scheduler/Schedule",
    "/podfit.v1.Scheduler/ScheduleBatch",
    "/podfit.v1.Scheduler/Preempt",
    "/podfit.v1.Simulation/Simulate",
    "/podfit.v1.Simulation/EstimateScaleUp",
    "/podfit.v1.Simulation/SimulateDrain",
]


@pytest.mark.parametrize("method", UNARY_METHODS, ids=[m.rsplit("/", 1)[1] for m in UNARY_METHODS])
@pytest.mark.parametrize("case", list(UNDECODABLE), ids=list(UNDECODABLE))
async def test_undecodable_request_bytes_are_invalid_argument(
    channel: grpc.aio.Channel, method: str, case: str
) -> None:
    call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(UNDECODABLE[case], timeout=10)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    assert "cannot be decoded" in caught.value.details()


async def test_undecodable_bytes_are_located_at_the_broken_field(channel: grpc.aio.Channel) -> None:
    good = cc.Update(upsert=cc.ClusterObject(kubernetes_json=b"{}")).SerializeToString()
    # updates[1] claims 100 bytes of ClusterObject but holds 2.
    body = b"\x0a" + bytes([len(good)]) + good + b"\x0a\x04\x0a\x64\x01\x02"
    call = channel.unary_unary("/podfit.v1.ClusterCache/Apply", request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(body, timeout=10)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert _field_violation(caught.value) == "updates[1].upsert"


def _batch(sequence: int, *objects: dict[str, Any]) -> bytes:
    updates = [cc.Update(upsert=cc.ClusterObject(kubernetes_json=json.dumps(o).encode())) for o in objects]
    return cc.StreamRequest(sequence=sequence, updates=updates).SerializeToString()


def _hostile_batch(sequence: int, raw: bytes) -> bytes:
    update = cc.Update(upsert=cc.ClusterObject(kubernetes_json=raw))
    return cc.StreamRequest(sequence=sequence, updates=[update]).SerializeToString()


BAD_BATCHES: dict[str, tuple[bytes, str]] = {
    "deep JSON": (_hostile_batch(2, b"[" * 5000), "updates[0].upsert.kubernetes_json"),
    "a surrogate key": (_hostile_batch(2, HOSTILE_JSON["an unpaired surrogate in a key"][0]), "updates[0].upsert"),
    "a 70 KB echoed value": (_hostile_batch(2, HOSTILE_JSON["a 70 KB kind echoed back"][0]), "updates[0].upsert.kind"),
    "undecodable bytes": (b"\x08\x02" + b"\x12\x64\x01", "updates"),
    "an empty update": (cc.StreamRequest(sequence=2, updates=[cc.Update()]).SerializeToString(), "updates[0]"),
}


@pytest.mark.parametrize("case", list(BAD_BATCHES), ids=list(BAD_BATCHES))
async def test_a_bad_batch_is_refused_in_band_and_the_stream_goes_on(
    live: LiveServer, channel: grpc.aio.Channel, case: str
) -> None:
    bad, field = BAD_BATCHES[case]
    requests = [
        _batch(1, make_node("n1").capacity(cpu="4", memory="8Gi", pods="10").json()),
        bad,
        _batch(3, make_pod("after").json()),
        _batch(4, make_pod("later").node("n1").json()),
    ]

    async def send() -> AsyncIterator[bytes]:
        for request in requests:
            yield request

    stream = channel.stream_stream(
        "/podfit.v1.ClusterCache/Stream", request_serializer=None, response_deserializer=cc.StreamResponse.FromString
    )
    acks = [ack async for ack in stream(send(), timeout=20)]
    assert [a.sequence for a in acks] == [1, 2, 3, 4]
    assert [bool(a.error) for a in acks] == [False, True, False, False]
    assert acks[1].error_field.startswith(field), acks[1].error_field
    assert len(acks[1].error) < 1200
    listed = await live.client.list("Pod")
    assert sorted(o.pod.metadata.name for o in listed.objects) == ["after", "later"]


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 5000,
        b'{"Pod":' + b"[" * 5000 + b"}",
        b'{"Pod":{"metadata":{"name":"p"},"spec":{"x":' + b"[" * 500 + b"]" * 500 + b'}},"NodeNames":["n"]}',
        b'{"Pod":{"metadata":{"name":"\\ud800"}},"NodeNames":["n"]}',
        b'{"Pod":{"metadata":{"name":"p"}},"NodeNameToVictims":' + b"[" * 900 + b"]" * 900 + b"}",
        b'{"Pod":{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"'
        + HUGE.encode()
        + b'"}}}]}},"NodeNames":["n"]}',
        b"\xff\xfe",
    ],
    ids=[
        "a deep top level",
        "a deep Pod",
        "deep nesting in an unknown pod field",
        "a surrogate",
        "deep victims",
        "a 70 KB quantity",
        "not UTF-8",
    ],
)
@pytest.mark.parametrize("verb", ["filter", "prioritize", "preempt", "bind"])
async def test_hostile_extender_bodies_are_400_with_an_error(live: LiveServer, verb: str, body: bytes) -> None:
    async with aiohttp.ClientSession() as session, session.post(f"{live.extender_url}/{verb}", data=body) as response:
        assert response.status == 400, await response.text()
        answer = await response.json()
    assert answer["Error"].startswith(f"{verb}: ")
    assert len(answer["Error"]) < 1200


async def test_extender_body_over_the_limit_is_413() -> None:
    server = await start_live_server(Settings(extender_max_body_bytes=4096))
    try:
        body = json.dumps({"Pod": make_pod("p").json(), "NodeNames": ["n"] * 2000}).encode()
        async with aiohttp.ClientSession() as session, session.post(f"{server.extender_url}/filter", data=body) as r:
            assert r.status == 413
            assert "extender.maxBodyBytes (4096 bytes)" in (await r.json())["Error"]
    finally:
        await server.client.close()
        await server.running.stop(0)


def _connections_affordable(wanted: int) -> int:
    """``wanted`` connections (two descriptors each, both ends are in this process) if the descriptor
    limit can be raised that far, else 200."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = 2 * wanted + 512
    if soft < needed and (hard == resource.RLIM_INFINITY or hard >= needed):
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
        soft = needed
    return wanted if soft >= needed else 200


async def test_idle_and_half_sent_extender_connections_are_closed() -> None:
    """1,000 connections (on a descriptor limit that allows them), half idle, half stuck in their headers."""
    server = await start_live_server(Settings(extender_idle_timeout_seconds=0.5))
    connections: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        for i in range(_connections_affordable(1000)):
            reader, writer = await asyncio.open_connection("127.0.0.1", server.running.extender_port)
            if i % 2:  # half of them start a request and never finish its headers
                writer.write(b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\n")
            connections.append((reader, writer))
        ends = await asyncio.wait_for(asyncio.gather(*(reader.read() for reader, _ in connections)), timeout=20)
        assert all(end == b"" for end in ends)
    finally:
        for _, writer in connections:
            writer.close()
        await server.client.close()
        await server.running.stop(0)


async def test_rejected_input_is_logged_as_one_line_without_a_traceback(
    channel: grpc.aio.Channel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="podfit.server")
    REJECTED_LOG.reset()
    call = channel.unary_unary("/podfit.v1.ClusterCache/Apply", request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.aio.AioRpcError):
        await call(RPCS["Apply"][2](b"[" * 5000).SerializeToString(), timeout=10)
    lines = [r for r in caplog.records if "rejected" in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].exc_info is None
    assert "\n" not in lines[0].getMessage()
    assert "updates[0].upsert.kubernetes_json" in lines[0].getMessage()


def test_a_flood_of_rejections_is_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("podfit.test.flood")
    caplog.set_level(logging.INFO, logger="podfit.test.flood")
    limited = RateLimitedLog(logger, burst=3, interval=3600)
    let_through = [limited(logging.INFO, "rejected %d", i) for i in range(100)]
    assert let_through.count(True) == 3
    assert len(caplog.records) == 3
    assert limited.suppressed == 97


async def test_undecodable_bytes_on_schedule_stream_end_it_with_invalid_argument(channel: grpc.aio.Channel) -> None:
    """ScheduleStream answers in order and ends at an invalid request (as documented), never UNKNOWN."""

    async def send() -> AsyncIterator[bytes]:
        yield b"\x0a\xff\xff\x01"

    stream = channel.stream_stream("/podfit.v1.Scheduler/ScheduleStream", request_serializer=None)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in stream(send(), timeout=10):
            pass
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert _field_violation(caught.value) == "pod"


@pytest.mark.parametrize(
    ("argv", "env", "yaml_text"),
    [
        (["--extender-max-body-bytes", "4096", "--extender-idle-timeout-seconds", "2.5"], {}, ""),
        ([], {"PODFIT_EXTENDER_MAX_BODY_BYTES": "4096", "PODFIT_EXTENDER_IDLE_TIMEOUT_SECONDS": "2.5"}, ""),
        ([], {}, "kind: PodfitConfiguration\nextender: {maxBodyBytes: 4096, idleTimeoutSeconds: 2.5}\n"),
    ],
    ids=["flags", "environment", "config file"],
)
def test_extender_limits_are_settings(tmp_path: Path, argv: list[str], env: dict[str, str], yaml_text: str) -> None:
    if yaml_text:
        (tmp_path / "podfit.yaml").write_text(yaml_text)
        argv = ["--config", str(tmp_path / "podfit.yaml")]
    settings = resolve(argv, env)
    assert (settings.extender_max_body_bytes, settings.extender_idle_timeout_seconds) == (4096, 2.5)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PODFIT_EXTENDER_MAX_BODY_BYTES": "10"}, "extender.maxBodyBytes: must be at least 1024"),
        ({"PODFIT_EXTENDER_IDLE_TIMEOUT_SECONDS": "0"}, "extender.idleTimeoutSeconds: must be greater than 0"),
    ],
    ids=["a body limit too small", "no idle timeout"],
)
def test_bad_extender_limits_are_refused(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as info:
        resolve([], env)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("raw", "depth"),
    [
        (b"", 0),
        (b'"[[[{"', 0),
        (b'{"a":"]]]\\"]]\\\\","b":[[[1]]]}', 4),
        (b'{"a":"\\\\"}', 1),
        (b"[" * 100 + b"]" * 100, 100),
        (b"[]" * 500, 1),
    ],
    ids=[
        "nothing",
        "brackets inside a string",
        "escaped quotes and backslashes",
        "an escaped backslash ends a string",
        "exactly the limit",
        "many brackets, shallow",
    ],
)
def test_json_depth_counts_nesting_outside_strings(raw: bytes, depth: int) -> None:
    assert limits.json_depth(raw) == depth
    limits.check_json(raw)  # at most the limit: accepted


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"[" * 101 + b"]" * 101, "nests 101 levels deep"),
        (b'{"a":"\\ud800"}', "surrogate"),
        (b'{"a":"\\uDFFF"}', "surrogate"),
        (b'{"a":"x\\udc00\\ud800"}', "surrogate"),
    ],
    ids=["one over the limit", "a high surrogate alone", "a low surrogate alone", "a pair in the wrong order"],
)
def test_check_json_refuses_what_cannot_be_decoded_safely(raw: bytes, says: str) -> None:
    with pytest.raises(limits.UntrustedInputError) as caught:
        limits.check_json(raw, "kubernetes_json")
    assert caught.value.field == "kubernetes_json"
    assert says in caught.value.message


def test_a_surrogate_pair_is_accepted() -> None:
    limits.check_json(b'{"emoji":"\\ud83d\\ude00"}')


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("short", "'short'"),
        ("x" * 300, "'" + "x" * 199 + "… (300 bytes)"),
        ("\ud800", "'\\ud800'"),
        ("é" * 250, "'" + "é" * 199 + "… (500 bytes)"),
    ],
    ids=[
        "short values are quoted whole",
        "long values are cut with their size",
        "surrogates are escaped",
        "size in UTF-8 bytes",
    ],
)
def test_echo_caps_and_cleans_values(value: str, expected: str) -> None:
    assert limits.echo(value) == expected
    limits.echo(value).encode("utf-8")


async def test_a_stream_that_ends_mid_feed_leaves_no_reader_behind() -> None:
    """A feeder that goes away with a full window of batches unread: the task reading its requests must
    end with the stream, not wait forever to queue the end marker (holding up to a window of batches)."""
    from podfit.server.config import default_profile
    from podfit.server.service import SchedulingService
    from podfit.server.transport.grpc_services import STREAM_WINDOW, ClusterCacheServicer

    servicer = ClusterCacheServicer(SchedulingService({"default-scheduler": default_profile()}, forms=PROTOBUF_FORMS))

    async def batches() -> AsyncIterator[cc.StreamRequest]:
        for sequence in range(1, 10 * STREAM_WINDOW):
            yield cc.StreamRequest(sequence=sequence)

    before = asyncio.all_tasks()
    responses = servicer.Stream(batches(), None)
    assert (await anext(responses)).sequence == 1
    for _ in range(5):  # let the reader fill the window
        await asyncio.sleep(0)
    await responses.aclose()
    for _ in range(5):
        await asyncio.sleep(0)
    left = [t for t in asyncio.all_tasks() - before if not t.done() and t is not asyncio.current_task()]
    assert left == []


def _node_created_in(seconds: int, nanos: int = 0) -> cc.ClusterObject:
    obj = cc.ClusterObject()
    obj.node.metadata.name = "n"
    obj.node.metadata.creation_timestamp.seconds = seconds
    obj.node.metadata.creation_timestamp.nanos = nanos
    return obj


YEAR_10000 = 253402300800
BEFORE_YEAR_1 = -62135596801


def _pdb_disrupted_at(seconds: int) -> cc.ClusterObject:
    obj = cc.ClusterObject()
    obj.pod_disruption_budget.metadata.name = "budget"
    obj.pod_disruption_budget.status.disrupted_pods["web-1"].seconds = seconds
    return obj


def _drain_at(seconds: int, nanos: int) -> sim.SimulateDrainRequest:
    request = sim.SimulateDrainRequest(node_names=["n1"])
    request.now.seconds, request.now.nanos = seconds, nanos
    return request


def _pod_json(cpu: str) -> cc.ClusterObject:
    pod = make_pod("q").req(cpu=cpu).json()
    return cc.ClusterObject(kubernetes_json=json.dumps(pod).encode())


def _apply_node_version(version: str) -> cc.ApplyRequest:
    node = make_node("n1").json()
    node["metadata"]["resourceVersion"] = version
    return cc.ApplyRequest(updates=[cc.Update(upsert=cc.ClusterObject(kubernetes_json=json.dumps(node).encode()))])


# Input that once answered INTERNAL: (method, request, the field the refusal names).
ONCE_INTERNAL: dict[str, tuple[str, Any, str]] = {
    "a typed node created in year 10000": (
        "/podfit.v1.ClusterCache/Replace",
        cc.ReplaceRequest(kind=cc.OBJECT_KIND_NODE, objects=[_node_created_in(YEAR_10000)]),
        "objects[0].node.metadata.creationTimestamp",
    ),
    "a timestamp with nanos -1": (
        "/podfit.v1.ClusterCache/Replace",
        cc.ReplaceRequest(kind=cc.OBJECT_KIND_NODE, objects=[_node_created_in(0, -1)]),
        "objects[0].node.metadata.creationTimestamp",
    ),
    "a PDB's disrupted pod before year 1": (
        "/podfit.v1.ClusterCache/Replace",
        cc.ReplaceRequest(kind=cc.OBJECT_KIND_POD_DISRUPTION_BUDGET, objects=[_pdb_disrupted_at(BEFORE_YEAR_1)]),
        "objects[0].pod_disruption_budget.status.disruptedPods.web-1",
    ),
    "a Simulate template created in year 10000": (
        "/podfit.v1.Simulation/Simulate",
        sim.SimulateRequest(
            scenario=sim.Scenario(add_nodes=[sim.HypotheticalNodes(template=_node_created_in(YEAR_10000), count=1)])
        ),
        "scenario.add_nodes[0].template.node.metadata.creationTimestamp",
    ),
    "a drain at nanos -1": ("/podfit.v1.Simulation/SimulateDrain", _drain_at(0, -1), "now"),
    "a drain in year 10000": ("/podfit.v1.Simulation/SimulateDrain", _drain_at(YEAR_10000, 0), "now"),
    "a quantity of 4,301 digits": (
        "/podfit.v1.ClusterCache/Replace",
        cc.ReplaceRequest(kind=cc.OBJECT_KIND_POD, objects=[_pod_json("1" + "0" * 4300)]),
        "objects[0].pod.spec.containers[0].resources.requests.cpu",
    ),
    "a fraction of 4,303 digits": (
        "/podfit.v1.ClusterCache/Replace",
        cc.ReplaceRequest(kind=cc.OBJECT_KIND_POD, objects=[_pod_json("0." + "0" * 4300 + "1")]),
        "objects[0].pod.spec.containers[0].resources.requests.cpu",
    ),
    "a resourceVersion of superscript two": (
        "/podfit.v1.ClusterCache/Apply",
        _apply_node_version("²"),
        "updates[0].upsert.node.metadata.resourceVersion",
    ),
    "a resourceVersion of a circled one": (
        "/podfit.v1.ClusterCache/Apply",
        _apply_node_version("①"),
        "updates[0].upsert.node.metadata.resourceVersion",
    ),
    "a resourceVersion of an Arabic-Indic three": (
        "/podfit.v1.ClusterCache/Apply",
        _apply_node_version("٣"),
        "updates[0].upsert.node.metadata.resourceVersion",
    ),
}


@pytest.mark.parametrize("case", list(ONCE_INTERNAL), ids=list(ONCE_INTERNAL))
async def test_input_that_once_answered_internal_is_invalid_argument_at_its_field(
    live: LiveServer, channel: grpc.aio.Channel, case: str
) -> None:
    method, request, field = ONCE_INTERNAL[case]
    # A cached node of resourceVersion 1, so that a later version is compared with it.
    node = make_node("n1").capacity(cpu="4", memory="8Gi", pods="10").json()
    node["metadata"]["resourceVersion"] = "1"
    await live.client.apply([node])
    call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(request.SerializeToString(), timeout=10)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    assert _field_violation(caught.value) == field
    assert (await live.client.stats()).generation == 1


async def test_a_batch_with_the_largest_sequence_and_a_truncated_field_is_refused_in_band(
    live: LiveServer, channel: grpc.aio.Channel
) -> None:
    largest = 2**64 - 1
    truncated = b"\x08" + b"\xff" * 9 + b"\x01" + b"\x12\x0a\x01"
    dated = cc.StreamRequest(sequence=5, updates=[cc.Update(upsert=_node_created_in(YEAR_10000))]).SerializeToString()

    async def send() -> AsyncIterator[bytes]:
        for request in (truncated, dated, _batch(6, make_pod("after").json())):
            yield request

    stream = channel.stream_stream(
        "/podfit.v1.ClusterCache/Stream", request_serializer=None, response_deserializer=cc.StreamResponse.FromString
    )
    acks = [ack async for ack in stream(send(), timeout=20)]
    assert [a.sequence for a in acks] == [largest, 5, 6]
    assert [a.error_field for a in acks] == ["updates[0]", "updates[0].upsert.node.metadata.creationTimestamp", ""]
    assert [o.pod.metadata.name for o in (await live.client.list("Pod")).objects] == ["after"]


HEAD = b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


async def _exchange(port: int, request: bytes, trickle: bytes = b"", every: float = 0.0) -> bytes:
    """Sends ``request``, then ``trickle`` one byte every ``every`` seconds until an answer comes; the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        for byte in trickle:
            try:
                first = await asyncio.wait_for(reader.read(65536), timeout=every)
            except TimeoutError:
                writer.write(bytes([byte]))
                continue
            return first + await asyncio.wait_for(reader.read(), timeout=10)
        return await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()


async def test_a_corrupt_deflate_body_is_a_400(live: LiveServer, caplog: pytest.LogCaptureFixture) -> None:
    body = b"this is not deflate"
    request = HEAD + b"Content-Encoding: deflate\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body
    answer = await _exchange(live.running.extender_port, request)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:80]
    assert b"request body cannot be read" in answer
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_trickling_body_is_dropped_after_the_idle_timeout() -> None:
    server = await start_live_server(Settings(extender_idle_timeout_seconds=0.5))
    try:
        started = asyncio.get_running_loop().time()
        request = HEAD + b"Content-Length: 100\r\n\r\n"
        answer = await _exchange(server.running.extender_port, request, trickle=b" " * 20, every=0.2)
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:80]
        assert asyncio.get_running_loop().time() - started < 3
    finally:
        await server.client.close()
        await server.running.stop(0)


async def test_a_client_that_leaves_is_neither_an_error_nor_a_500(
    live: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="podfit.server")
    _reader, writer = await asyncio.open_connection("127.0.0.1", live.running.extender_port)
    writer.write(HEAD + b'Content-Length: 100\r\n\r\n{"Pod":')
    await writer.drain()
    writer.close()
    await asyncio.sleep(0.3)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("closed the connection" in r.getMessage() for r in caplog.records)
