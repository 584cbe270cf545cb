"""Locked-down endpoints: the extender's bind (off by default, fit-checked), extender mTLS, probes on a
plain listener under mTLS, and loopback-only listening when nothing authenticates callers."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from podfit.client import AsyncClient
from podfit.server.app import RunningServer, create_server, main
from podfit.server.settings import Settings, SettingsError, resolve
from podfit.server.transport.extender import BIND_DISABLED

from tests.builders import make_node, make_pod
from tests.conftest import start_live_server

BIND = {"PodName": "p", "PodNamespace": "default", "PodUID": "uid-default-p", "Node": "n1"}


async def _post(url: str, body: Any, ssl_context: ssl.SSLContext | bool = True) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.post(url, json=body, ssl=ssl_context) as response:
        return response.status, await response.json(content_type=None)


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


# -- bind ------------------------------------------------------------------------------------------------

BIND_CASES = [
    # (name, n1's cpu, pods already on n1 (cpu each), bound afterwards, what Error says)
    ("a pod that fits is bound", "2", ["500m"], True, ""),
    ("a node without the capacity refuses the pod", "2", ["1500m"], False, "does not fit node n1: Insufficient cpu"),
    ("a full node refuses the pod", "1", ["1"], False, "Insufficient cpu"),
]


@pytest.mark.parametrize(
    ("cpu", "running_pods", "bound", "error"), [c[1:] for c in BIND_CASES], ids=[c[0] for c in BIND_CASES]
)
async def test_bind_checks_the_pod_still_fits(cpu: str, running_pods: list[str], bound: bool, error: str) -> None:
    live = await start_live_server(Settings(extender_bind=True))
    try:
        await live.client.apply(
            [make_node("n1").capacity(cpu=cpu, memory="4Gi", pods="10").json()]
            + [make_pod(f"busy{i}").node("n1").req(cpu=c).json() for i, c in enumerate(running_pods)]
            + [make_pod("p").req(cpu="1").json()]
        )
        generation = live.running.service.generation
        status, body = await _post(f"{live.extender_url}/bind", BIND)
        assert status == 200
        assert (body["Error"] == "") is bound and error in body["Error"]
        node = (await live.client.get("Pod", "p")).object.pod.spec.node_name
        assert node == ("n1" if bound else "")
        assert (live.running.service.generation > generation) is bound
    finally:
        await live.client.close()
        await live.running.stop(0)


async def test_bind_is_off_unless_enabled() -> None:
    live = await start_live_server(Settings())
    try:
        await live.client.apply([make_node("n1").json(), make_pod("p").req(cpu="1").json()])
        status, body = await _post(f"{live.extender_url}/bind", BIND)
        assert (status, body) == (403, {"Error": f"bind: {BIND_DISABLED}"})
        assert (await live.client.get("Pod", "p")).object.pod.spec.node_name == ""
    finally:
        await live.client.close()
        await live.running.stop(0)


# -- mTLS on the extender, probes on their own listener -----------------------------------------------


def _client_ssl(pki: dict[str, Path], with_cert: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki["ca"]))
    if with_cert:
        context.load_cert_chain(str(pki["client_cert"]), str(pki["client_key"]))
    return context


@pytest.fixture
async def mtls(pki: dict[str, Path]) -> AsyncIterator[RunningServer]:
    settings = Settings(
        tls_cert_file=str(pki["server_cert"]),
        tls_key_file=str(pki["server_key"]),
        tls_client_ca_file=str(pki["ca"]),
        wait_for_sync=True,
        probe_addr="127.0.0.1:0",
    )
    running = await create_server(settings, addr="localhost:0", extender_addr="localhost:0")
    yield running
    await running.stop(0)


def _mtls_client(running: RunningServer, pki: dict[str, Path]) -> AsyncClient:
    return AsyncClient(
        f"localhost:{running.port}",
        tls=True,
        root_certificates=pki["ca"].read_bytes(),
        client_certificate=pki["client_cert"].read_bytes(),
        client_key=pki["client_key"].read_bytes(),
    )


async def test_the_extender_demands_a_client_certificate_when_a_client_ca_is_set(
    mtls: RunningServer, pki: dict[str, Path]
) -> None:
    url = f"https://localhost:{mtls.extender_port}/scheduler/filter"
    args = {"Pod": make_pod("p").json(), "NodeNames": []}
    with pytest.raises(aiohttp.ClientError):
        await _post(url, args, _client_ssl(pki, with_cert=False))
    async with _mtls_client(mtls, pki) as client:
        await client.mark_synced("test")
    status, body = await _post(url, args, _client_ssl(pki, with_cert=True))
    assert (status, body["Error"]) == (200, "")


async def test_probes_answer_without_a_client_certificate_and_follow_sync(
    mtls: RunningServer, pki: dict[str, Path]
) -> None:
    probes = f"http://127.0.0.1:{mtls.probe_port}"
    # The gRPC port wants a client certificate: a certificate-less health check (as kubelet's) fails.
    credentials = grpc.ssl_channel_credentials(pki["ca"].read_bytes())
    async with grpc.aio.secure_channel(f"localhost:{mtls.port}", credentials) as channel:
        with pytest.raises(grpc.aio.AioRpcError):
            await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=3)
    assert await _get(f"{probes}/healthz") == (200, "ok")
    status, text = await _get(f"{probes}/readyz")
    assert (status, text) == (503, "not ready: cache not synced: waiting for a feeder's initial sync (podfit feed)")
    async with _mtls_client(mtls, pki) as client:
        await client.mark_synced("test")
    assert await _get(f"{probes}/readyz") == (200, "ok")
    # Nothing but the two probes: no decisions, no data.
    for path in ("/scheduler/filter", "/metrics", "/"):
        assert (await _get(f"{probes}{path}"))[0] == 404


async def test_readiness_fails_as_soon_as_shutdown_begins() -> None:
    running = await create_server(Settings(probe_addr="127.0.0.1:0"), addr="127.0.0.1:0", extender_addr="off")
    url = f"http://127.0.0.1:{running.probe_port}/readyz"
    assert (await _get(url))[0] == 200
    await running.health.enter_graceful_shutdown()
    assert await _get(url) == (503, "not ready: the server is shutting down")
    await running.stop(0)
    with pytest.raises(aiohttp.ClientError):
        await _get(url)


# -- who may listen where ----------------------------------------------------------------------------------

EXPOSURE = [
    # (name, flags, the refusal's start or None when podfit-server starts)
    ("the defaults listen on loopback", [], None),
    ("a wildcard gRPC address with nothing authenticating", ["--grpc-addr", "0.0.0.0:50051"], "grpcAddr: 0.0.0.0"),
    ("an IPv6 wildcard", ["--grpc-addr", "[::]:50051"], "grpcAddr: [::]:50051"),
    ("a host name may be any interface", ["--grpc-addr", "podfit.example:50051"], "grpcAddr: podfit.example"),
    ("a wildcard extender", ["--extender-addr", "0.0.0.0:8888"], "extender.addr: 0.0.0.0:8888"),
    ("localhost", ["--grpc-addr", "localhost:50051", "--extender-addr", "[::1]:8888"], None),
    ("said explicitly", ["--grpc-addr", "0.0.0.0:50051", "--extender-addr", "0.0.0.0:8888", "--insecure-listen-any"],
     None),
    ("a token authenticates gRPC callers", ["--grpc-addr", "0.0.0.0:50051", "--auth-tokens-file", "t"], None),
    ("the legacy token too", ["--grpc-addr", "0.0.0.0:50051", "--auth-token-file", "t"], None),
    ("but kube-scheduler sends no token to the extender",
     ["--extender-addr", "0.0.0.0:8888", "--auth-tokens-file", "t"], "extender.addr: 0.0.0.0:8888"),
    ("TLS alone authenticates only the server",
     ["--grpc-addr", "0.0.0.0:50051", "--tls-cert-file", "c", "--tls-key-file", "k"], "grpcAddr: 0.0.0.0"),
    ("client certificates authenticate both",
     ["--grpc-addr", "0.0.0.0:1", "--extender-addr", "0.0.0.0:2", "--tls-cert-file", "c", "--tls-key-file", "k",
      "--tls-client-ca-file", "ca"], None),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "refusal"), [c[1:] for c in EXPOSURE], ids=[c[0] for c in EXPOSURE])
def test_only_loopback_unless_callers_are_authenticated(argv: list[str], refusal: str | None) -> None:
    if refusal is None:
        resolve(argv, {})
        return
    with pytest.raises(SettingsError) as info:
        resolve(argv, {})
    assert str(info.value).startswith(refusal)
    assert "--insecure-listen-any" in str(info.value)


def test_a_refused_address_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--grpc-addr", "0.0.0.0:0"], {}) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("podfit-server: grpcAddr: 0.0.0.0:0 is reachable from other hosts")


def test_the_environment_may_allow_listening_widely() -> None:
    settings = resolve([], {"PODFIT_GRPC_ADDR": "0.0.0.0:50051", "PODFIT_INSECURE_LISTEN_ANY": "true"})
    assert settings.grpc_addr == "0.0.0.0:50051" and settings.insecure_listen_any


async def test_create_server_refuses_an_unauthenticated_wildcard_too() -> None:
    """Embedding podfit (create_server) gets the same guard as the command line."""
    for addr, extender_addr, refusal in (
        ("0.0.0.0:0", "off", "grpcAddr: 0.0.0.0:0 is reachable from other hosts"),
        ("127.0.0.1:0", "[::]:0", "extender.addr: [::]:0 is reachable from other hosts"),
    ):
        with pytest.raises(SettingsError) as info:
            await create_server(Settings(), addr=addr, extender_addr=extender_addr)
        assert str(info.value).startswith(refusal)
