"""Token roles end to end: each (role x RPC) through a real server, and the static token file's format."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from podfit.client import AsyncClient, PodfitError, schedule_request
from podfit.client import _requests as rq
from podfit.server.app import RunningServer, create_server
from podfit.server.auth import load_tokens_file
from podfit.server.settings import Settings, SettingsError
from podfit.v1 import cluster_cache_pb2 as cc

from tests.builders import make_node, make_pod

TOKENS = {"read": "decider-0123", "write": "feeder-4567", "admin": "operator-89ab"}
ROLES = ("read", "write", "admin")
RANK = {role: i for i, role in enumerate(ROLES)}


def _pod(name: str = "p") -> dict[str, Any]:
    return make_pod(name).req(cpu="1").json()


async def _reflect(client: AsyncClient) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(client._channel)

    async def ask() -> AsyncIterator[reflection_pb2.ServerReflectionRequest]:
        yield reflection_pb2.ServerReflectionRequest(list_services="")

    try:
        async for _ in stub.ServerReflectionInfo(ask(), metadata=client._metadata):
            pass
    except grpc.RpcError as exc:
        raise PodfitError.from_rpc_error(exc) from None


async def _drain(responses: AsyncIterator[Any]) -> None:
    async for _ in responses:
        pass


Call = Callable[[AsyncClient], Awaitable[Any]]
# (name, role the call needs, the call); the server holds nodes n1 and n2 and the pod "cached".
CALLS: list[tuple[str, str, Call]] = [
    ("Stats", "read", lambda c: c.stats()),
    ("Get", "read", lambda c: c.get("Node", "n1")),
    ("List", "read", lambda c: c.list("Node")),
    ("Filter", "read", lambda c: c.filter(_pod())),
    ("Score", "read", lambda c: c.score(_pod())),
    ("Schedule without assume", "read", lambda c: c.schedule(_pod())),
    ("Preempt", "read", lambda c: c.preempt(_pod())),
    ("Simulate", "read", lambda c: c.simulate([_pod()])),
    ("SimulateDrain", "read", lambda c: c.simulate_drain(["n1"])),
    (
        "EstimateScaleUp",
        "read",
        lambda c: c.estimate_scale_up([[_pod()]], [("g", make_node("t").capacity(cpu="4").json(), 0, 2)]),
    ),
    ("ScheduleStream without assume", "read", lambda c: _drain(c.schedule_stream([schedule_request(_pod())]))),
    ("Schedule with assume", "write", lambda c: c.schedule(_pod(), assume=True)),
    (
        "ScheduleStream with assume",
        "write",
        lambda c: _drain(c.schedule_stream([schedule_request(_pod(), assume=True)])),
    ),
    ("ScheduleBatch (always assumes)", "write", lambda c: c.schedule_batch([_pod()])),
    ("Apply", "write", lambda c: c.apply([make_node("n3").json()])),
    ("Replace", "write", lambda c: c.replace("Node", [])),
    ("Stream", "write", lambda c: _drain(c.stream([cc.StreamRequest(sequence=1, updates=rq.upserts([_pod()]))]))),
    ("MarkSynced", "write", lambda c: c.mark_synced("t")),
    ("server reflection", "admin", _reflect),
]
CASES = [(role, name, needed, call) for role in ROLES for name, needed, call in CALLS]


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[RunningServer]:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(
        "# token,role,name\n\n" + "".join(f"{token},{role},{role}-client\n" for role, token in TOKENS.items())
    )
    running = await create_server(Settings(auth_tokens_file=str(tokens)), addr="127.0.0.1:0", extender_addr="off")
    async with AsyncClient(f"127.0.0.1:{running.port}", token=TOKENS["admin"]) as admin:
        await admin.apply([make_node("n1").capacity(cpu="4").json(), make_node("n2").capacity(cpu="4").json()])
    yield running
    await running.stop(0)


@pytest.mark.parametrize(
    ("role", "name", "needed", "call"), CASES, ids=[f"{role} token, {name}" for role, name, _, _ in CASES]
)
async def test_each_role_may_call_exactly_what_it_needs(
    server: RunningServer, role: str, name: str, needed: str, call: Call
) -> None:
    async with AsyncClient(f"127.0.0.1:{server.port}", token=TOKENS[role]) as client:
        if RANK[role] >= RANK[needed]:
            await call(client)
            return
        generation = server.service.generation
        with pytest.raises(PodfitError) as info:
            await call(client)
    assert info.value.code is grpc.StatusCode.PERMISSION_DENIED
    assert f"needs the {needed} role" in info.value.message and f"'{role}-client' has {role}" in info.value.message
    assert TOKENS[role] not in info.value.message
    assert server.service.generation == generation, "a refused call changed the cache"


@pytest.mark.parametrize("token", [None, "", "not-a-token", TOKENS["read"] + "x", TOKENS["admin"].upper()], ids=repr)
@pytest.mark.parametrize(("name", "needed", "call"), [c for c in CALLS if c[0] in ("Stats", "Apply", "Stream")])
async def test_unknown_tokens_are_unauthenticated(
    server: RunningServer, token: str | None, name: str, needed: str, call: Call
) -> None:
    async with AsyncClient(f"127.0.0.1:{server.port}", token=token) as client:
        with pytest.raises(PodfitError) as info:
            await call(client)
    assert info.value.code is grpc.StatusCode.UNAUTHENTICATED


async def test_a_read_token_loses_its_stream_at_the_first_assume(server: RunningServer) -> None:
    """The role check sees each ScheduleStream request: earlier ones are answered, the assume is not made."""
    requests = [schedule_request(_pod("a")), schedule_request(_pod("b"), assume=True)]
    answers = []
    async with AsyncClient(f"127.0.0.1:{server.port}", token=TOKENS["read"]) as client:
        with pytest.raises(PodfitError) as info:
            async for answer in client.schedule_stream(requests):
                answers.append(answer)
        assert info.value.code is grpc.StatusCode.PERMISSION_DENIED
        assert "ScheduleStream with assume needs the write role" in info.value.message
        assert [a.selected_node for a in answers] == ["n1"]
        assert list((await client.list("Pod")).objects) == []


async def test_the_single_token_file_is_an_admin_token(tmp_path: Path) -> None:
    """--auth-token-file keeps its meaning: one token, full access (reflection included)."""
    (tmp_path / "token").write_text("only-token\n")
    running = await create_server(
        Settings(auth_token_file=str(tmp_path / "token")), addr="127.0.0.1:0", extender_addr="off"
    )
    try:
        async with AsyncClient(f"127.0.0.1:{running.port}", token="only-token") as client:
            await client.replace("Node", [])
            await _reflect(client)
    finally:
        await running.stop(0)


BAD_FILES = [
    ("no tokens", "# nothing\n\n", "holds no tokens"),
    ("a role podfit does not know", "s3cret-a,root\n", "line 1: role 'root' must be read, write or admin"),
    ("too many fields", "s3cret-a,read,n,extra\n", "line 1: must be token,role[,name]"),
    ("no role", "s3cret-a\n", "line 1: must be token,role[,name]"),
    ("an empty token", ",read,n\n", "line 1: the token must be non-empty"),
    ("a token with a space", "s3cret a,read\n", "line 1: the token must be non-empty, without spaces"),
    ("a token given twice", "s3cret-a,read,one\ns3cret-a,write,two\n", "line 2: the same token as 'one'"),
]


@pytest.mark.parametrize(("text", "message"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES])
def test_a_bad_token_file_is_refused_without_echoing_tokens(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text(text)
    with pytest.raises(SettingsError) as info:
        load_tokens_file(str(path))
    assert message in str(info.value) and "s3cret" not in str(info.value)


async def test_a_refusal_is_logged_once_by_token_name_never_by_token(
    server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="podfit")
    async with AsyncClient(f"127.0.0.1:{server.port}", token=TOKENS["read"]) as client:
        for _ in range(3):
            with pytest.raises(PodfitError):
                await client.replace("Node", [])
    denials = [r for r in caplog.records if r.getMessage().startswith("permission denied")]
    assert len(denials) == 1, "a client retrying in a loop must not flood the log"
    assert denials[0].token_name == "read-client"
    assert denials[0].method == "/podfit.v1.ClusterCache/Replace"
    assert not any(token in r.getMessage() for r in caplog.records for token in TOKENS.values())


async def test_refused_calls_count_in_the_rpc_metrics(server: RunningServer) -> None:
    """The telemetry interceptor sits outside the token check, so refusals show on /metrics by code."""
    from prometheus_client import generate_latest

    for token in (TOKENS["read"], "not-a-token"):
        async with AsyncClient(f"127.0.0.1:{server.port}", token=token) as client:
            with pytest.raises(PodfitError):
                await client.replace("Node", [])
    registry = server.telemetry.prometheus_registry
    assert registry is not None

    def counted(code: str) -> list[str]:
        return [
            line
            for line in generate_latest(registry).decode().splitlines()
            if line.startswith("podfit_rpc_duration_seconds_count")
            and 'rpc_method="Replace"' in line
            and f'rpc_grpc_status_code="{code}"' in line
        ]

    # The server records a call after its client has the answer: wait for it (under load it can lag).
    codes = ("PERMISSION_DENIED", "UNAUTHENTICATED")
    waited = 0.0
    while not all(counted(code) for code in codes) and waited < 10:
        await asyncio.sleep(0.05)
        waited += 0.05
    for code in codes:
        lines = counted(code)
        assert lines and lines[0].endswith(" 1.0"), (code, lines)


def test_every_podfit_rpc_has_a_role() -> None:
    """Unnamed methods need admin at run time; this makes adding an RPC a decision about its role."""
    from podfit.server.app import SERVICE_NAMES
    from podfit.server.auth import METHOD_ROLES
    from podfit.v1 import cluster_cache_pb2, scheduler_pb2, simulation_pb2

    methods = {
        f"/{service.full_name}/{method.name}"
        for module in (cluster_cache_pb2, scheduler_pb2, simulation_pb2)
        for service in module.DESCRIPTOR.services_by_name.values()
        if service.full_name in SERVICE_NAMES
        for method in service.methods
    }
    assert methods == set(METHOD_ROLES)
    assert {name.split()[0] for name, *_ in CALLS} >= {m.rsplit("/", 1)[1] for m in methods}, "each RPC is tested"


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [
        pytest.param([("authorization", f"Bearer {TOKENS['admin']}")], True, id="Bearer"),
        pytest.param([("authorization", f"bearer {TOKENS['admin']}")], True, id="the scheme in lower case"),
        pytest.param([("authorization", f"BEARER {TOKENS['admin']}")], True, id="the scheme in upper case"),
        pytest.param(
            [("authorization", f"Bearer {TOKENS['admin']}"), ("authorization", f"Bearer {TOKENS['read']}")],
            False,
            id="two authorization headers",
        ),
        pytest.param(
            [("authorization", f"Bearer {TOKENS['admin']}"), ("authorization", f"Bearer {TOKENS['admin']}")],
            False,
            id="the same token twice",
        ),
        pytest.param([("authorization", f"Basic {TOKENS['admin']}")], False, id="another scheme"),
    ],
)
async def test_the_authorization_header_is_read_as_rfc_6750_says(
    server: RunningServer, headers: list[tuple[str, str]], allowed: bool
) -> None:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        stats = channel.unary_unary(
            "/podfit.v1.ClusterCache/Stats",
            request_serializer=cc.StatsRequest.SerializeToString,
            response_deserializer=cc.StatsResponse.FromString,
        )
        if allowed:
            assert (await stats(cc.StatsRequest(), metadata=headers, timeout=5)).server_epoch
        else:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stats(cc.StatsRequest(), metadata=headers, timeout=5)
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        await channel.close()
