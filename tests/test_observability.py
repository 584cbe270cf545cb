"""What an operator sees: Prometheus /metrics, the Grafana dashboard built on it, the request and startup
logs, reflection v1 and v1alpha, and start-up failures and unreachable servers as one clear line."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from google.protobuf import descriptor_pb2, message_factory
from grpc_reflection.v1alpha import reflection_pb2
from podfit.client import PodfitError, cli, hints
from podfit.server.app import create_server
from podfit.server.metrics import start_metrics
from podfit.server.reflection import V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME, v1_file_descriptor
from podfit.server.settings import Settings, SettingsError, resolve
from podfit.v1 import scheduler_pb2 as sc
from prometheus_client.parser import text_string_to_metric_families

from tests.builders import make_node, make_pod
from tests.conftest import LiveServer

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "deploy" / "grafana" / "podfit-dashboard.json"
PODFIT_SERVER = str(Path(sys.executable).with_name("podfit-server"))
# Every listener on port 0 or off: the default ports may belong to a podfit-server already running here.
QUIET_PORTS = ("--grpc-addr", "127.0.0.1:0", "--extender-addr", "off", "--metrics-addr", "off")

Sample = tuple[str, tuple[tuple[str, str], ...]]


# -- /metrics ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "env", "document", "expected"),
    [
        pytest.param([], {}, "", "127.0.0.1:9464", id="loopback by default"),
        pytest.param([], {}, "metrics: {addr: 0.0.0.0:9464}", "0.0.0.0:9464", id="metrics.addr in the config file"),
        pytest.param([], {"PODFIT_METRICS_ADDR": "off"}, "metrics: {addr: 0.0.0.0:1}", "off", id="env over file"),
        pytest.param(["--metrics-addr", "[::1]:9100"], {"PODFIT_METRICS_ADDR": "off"}, "", "[::1]:9100", id="flag"),
    ],
)
def test_metrics_address_sources(
    tmp_path: Path, flags: list[str], env: dict[str, str], document: str, expected: str
) -> None:
    path = tmp_path / "podfit.yaml"
    path.write_text(f"kind: PodfitConfiguration\n{document}\n")
    assert resolve(["--config", str(path), *flags], env).metrics_addr == expected


@pytest.fixture
async def metered(live: LiveServer) -> AsyncIterator[tuple[LiveServer, str]]:
    """The live server with its /metrics listener, as podfit-server starts it."""
    registry = live.running.telemetry.prometheus_registry
    assert registry is not None
    runner, port = await start_metrics(registry, "127.0.0.1:0")
    yield live, f"http://127.0.0.1:{port}/metrics"
    await runner.cleanup()


async def scrape(url: str) -> dict[Sample, float]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = await response.text()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def exercise(live: LiveServer) -> None:
    """One of everything the metrics count: cache contents, decisions, a memo hit, an error, the extender."""
    await live.client.apply(
        [
            make_node("n1").capacity(cpu="2", memory="4Gi", pods="10").json(),
            make_node("n2").capacity(cpu="4", memory="8Gi", pods="10").json(),
            make_pod("bound").node("n1").req(cpu="1").json(),
            make_pod("gated").gates("example.com/wait").json(),
            make_pod("preemptor").nominated("n2").json(),
            make_pod("waiting").json(),
        ]
    )
    web = make_pod("web").req(cpu="1").json()
    await live.client.score(web)
    await live.client.score(web)  # the same pod at the same generation: the memo answers
    with pytest.raises(PodfitError):
        await live.client.get("Pod", "ghost")
    async with aiohttp.ClientSession() as session:
        for body in ({"Pod": web, "NodeNames": ["n1", "n2"]}, {}):
            async with session.post(f"{live.extender_url}/filter", json=body) as response:
                await response.read()


def metric(name: str, **labels: str) -> Sample:
    return name, tuple(sorted(labels.items()))


# What `exercise` must move, and to what (the series start at zero on a new server).
EXPECTED_AFTER_EXERCISE = {
    metric("podfit_rpc_duration_seconds_count", rpc_method="Apply", rpc_grpc_status_code="OK"): 1,
    metric("podfit_rpc_duration_seconds_count", rpc_method="Score", rpc_grpc_status_code="OK"): 2,
    metric("podfit_rpc_duration_seconds_count", rpc_method="Get", rpc_grpc_status_code="NOT_FOUND"): 1,
    metric("podfit_decision_duration_seconds_count", kind="score"): 1,
    metric("podfit_decision_duration_seconds_count", kind="filter"): 1,
    metric("podfit_decision_memo_hits_total"): 1,
    metric("podfit_decision_memo_misses_total"): 2,
    metric("podfit_extender_requests_total", verb="filter", code="200"): 1,
    metric("podfit_extender_requests_total", verb="filter", code="400"): 1,
    metric("podfit_cache_objects", kind="Node"): 2,
    metric("podfit_cache_objects", kind="Pod"): 4,
    metric("podfit_cache_generation"): 1,
    metric("podfit_scheduler_pending_pods", queue="gated"): 1,
    metric("podfit_scheduler_pending_pods", queue="nominated"): 1,
    metric("podfit_scheduler_pending_pods", queue="unbound"): 1,
    metric("podfit_rpc_in_flight"): 0,
}


async def test_metrics_endpoint_counts_what_the_server_did(metered: tuple[LiveServer, str]) -> None:
    live, url = metered
    before = await scrape(url)
    await exercise(live)
    after = await scrape(url)
    assert {key: after.get(key) for key in EXPECTED_AFTER_EXERCISE} == EXPECTED_AFTER_EXERCISE
    moved = {key for key in EXPECTED_AFTER_EXERCISE if before.get(key, 0.0) != after[key]}
    assert moved == {key for key, value in EXPECTED_AFTER_EXERCISE.items() if value != 0}
    assert after[metric("podfit_rpc_duration_seconds_sum", rpc_method="Score", rpc_grpc_status_code="OK")] > 0
    # Buckets are in seconds: a sub-second RPC lands below the 1 s boundary, not only in +Inf.
    assert after[metric("podfit_rpc_duration_seconds_bucket", rpc_method="Score", rpc_grpc_status_code="OK", le="1.0")]


async def test_other_paths_are_not_found(metered: tuple[LiveServer, str]) -> None:
    _, url = metered
    async with aiohttp.ClientSession() as session, session.get(url.replace("/metrics", "/other")) as response:
        assert response.status == 404


def _dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        if variable["type"] == "query":
            exprs.append(query["query"] if isinstance(query, dict) else query)
    return exprs


def test_every_dashboard_panel_queries_podfit_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert panels and len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    for panel in panels:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert re.search(r"\bpodfit_\w+", target["expr"]), f"{panel['title']}: {target['expr']}"
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]


async def test_dashboard_queries_exactly_the_metrics_a_live_server_exports(metered: tuple[LiveServer, str]) -> None:
    """Every metric the dashboard queries is in a live scrape (no panel can drift into emptiness), and every
    podfit metric family is on the dashboard."""
    live, url = metered
    await exercise(live)
    samples = await scrape(url)
    scraped = {name for name, _ in samples}
    queried = {m for expr in _dashboard_expressions() for m in re.findall(r"\bpodfit_\w+", expr)}
    assert sorted(queried - scraped) == []
    families = {re.sub(r"_(bucket|count|sum)$", "", name) for name in scraped if name.startswith("podfit_")}
    on_dashboard = {re.sub(r"_(bucket|count|sum)$", "", name) for name in queried}
    assert sorted(families - on_dashboard) == []


# -- the request log -----------------------------------------------------------------------------------


@pytest.fixture
def rpc_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Records of podfit.server.rpc at DEBUG."""
    caplog.set_level(logging.DEBUG, logger="podfit.server.rpc")
    return caplog


def _pod_json(name: str, namespace: str) -> dict[str, Any]:
    return make_pod(name, namespace).req(cpu="100m").json()


_DEEP = sc.PodReference(kubernetes_json=b'{"metadata": {"name": "deep"}, "spec": ' + b"[" * 200_000)


@pytest.mark.parametrize(
    ("call", "level", "method", "pod", "code"),
    [
        pytest.param(
            lambda c: c.score(_pod_json("web", "shop")),
            logging.DEBUG,
            "/podfit.v1.Scheduler/Score",
            "shop/web",
            "OK",
            id="a pod sent by value is named by its namespace and name",
        ),
        pytest.param(
            lambda c: c.schedule("default/ghost"),
            logging.INFO,
            "/podfit.v1.Scheduler/Schedule",
            "default/ghost",
            "NOT_FOUND",
            id="a failed call is logged at INFO with the cached pod it named",
        ),
        pytest.param(
            lambda c: c.filter(_DEEP),
            logging.INFO,
            "/podfit.v1.Scheduler/Filter",
            "",
            "INVALID_ARGUMENT",
            id="hostile JSON is logged like any refusal, without decoding it again",
        ),
        pytest.param(
            lambda c: c.stats(),
            logging.DEBUG,
            "/podfit.v1.ClusterCache/Stats",
            "",
            "OK",
            id="a call about no pod names none",
        ),
    ],
)
async def test_one_log_line_per_rpc(
    live: LiveServer, rpc_log: pytest.LogCaptureFixture, call: Any, level: int, method: str, pod: str, code: str
) -> None:
    await live.client.apply([make_node("n1").capacity(cpu="2", memory="4Gi", pods="10").json()])
    rpc_log.records.clear()
    with contextlib.suppress(PodfitError):
        await call(live.client)
    # The server logs after sending its answer: the Apply's line may land after the clear().
    (record,) = [r for r in rpc_log.records if getattr(r, "method", "") == method]
    assert (record.levelno, record.pod, record.code) == (level, pod, code)  # type: ignore[attr-defined]
    assert record.duration_ms > 0  # type: ignore[attr-defined]
    assert method in record.getMessage() and f"code={code}" in record.getMessage()
    if code == "NOT_FOUND":
        assert "not in the cache" in record.details  # type: ignore[attr-defined]
    elif code != "OK":
        assert "nests" in record.details  # type: ignore[attr-defined]


async def test_health_checks_are_not_logged(live: LiveServer, rpc_log: pytest.LogCaptureFixture) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    async with grpc.aio.insecure_channel(live.target) as channel:
        await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        await live.client.stats()
    assert [getattr(r, "method", "") for r in rpc_log.records] == ["/podfit.v1.ClusterCache/Stats"]


# -- podfit-server as a process: startup line, C-core noise, failures ---------------------------------


def _server_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PODFIT_", "GRPC_"))}
    return {**env, **extra}


class ServerProcess:
    """podfit-server through its console script, its stderr collected line by line."""

    def __init__(self, *args: str, **env: str) -> None:
        self.process = subprocess.Popen(
            [PODFIT_SERVER, *QUIET_PORTS, *args],
            env=_server_env(**env),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines:
                if text in line:
                    return line
            if self.process.poll() is not None:
                self._reader.join(5)
                break
            time.sleep(0.05)
        raise AssertionError(f"no {text!r} on stderr; got {self.lines}")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._reader.join(5)
        return code


# Lines gRPC's C core (through absl) writes on its own: "E1124 10:06:35.516801 1331 add_port.cc:83] ...".
C_CORE_LINE = re.compile(r"^[DIWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\]|absl::InitializeLog")


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_startup_line_names_every_listen_address(log_format: str) -> None:
    server = ServerProcess(
        "--extender-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", PODFIT_LOG_FORMAT=log_format
    )  # fmt: skip
    try:
        line = server.wait_for("podfit-server listening")
        found = dict(re.findall(r"\b(grpc|extender|metrics)=(\S+)", line))
        assert set(found) == {"grpc", "extender", "metrics"}, line
        for name in ("grpc", "extender"):
            assert re.fullmatch(r"127\.0\.0\.1:[1-9]\d*", found[name]), line
        assert re.fullmatch(r"http://127\.0\.0\.1:[1-9]\d*/metrics", found["metrics"]), line
        if log_format == "json":
            entry = json.loads(line)
            assert (entry["addr"], entry["extender"], entry["metrics"]) == (
                found["grpc"],
                found["extender"],
                found["metrics"],
            )
        with urllib.request.urlopen(found["metrics"], timeout=10) as response:
            assert b"podfit_cache_generation 0.0" in response.read()
    finally:
        code = server.stop()
    assert code == 0
    assert [line for line in server.lines if C_CORE_LINE.search(line)] == []


def test_a_plaintext_client_leaves_no_core_lines_in_a_tls_servers_log(pki: dict[str, Path]) -> None:
    """gRPC's core logs every failed handshake ("I1124 ... ssl_transport_security.cc:2563] Handshake failed")
    unless GRPC_VERBOSITY keeps it quiet: a probe or a misconfigured client would fill the log."""
    server = ServerProcess("--tls-cert-file", str(pki["server_cert"]), "--tls-key-file", str(pki["server_key"]))
    try:
        port = int(json.loads(server.wait_for("podfit-server listening"))["port"])
        for _ in range(2):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as plaintext:
                plaintext.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                assert plaintext.recv(100) == b""  # the server hangs up: not TLS
    finally:
        code = server.stop()
    assert code == 0
    assert [line for line in server.lines if C_CORE_LINE.search(line)] == []
    assert '"msg": "stopped after' in server.lines[-1]


@pytest.fixture(scope="module")
def busy_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def _failure_cases(tmp: Path, busy: int, pki: dict[str, Path]) -> dict[str, tuple[list[str], list[str]]]:
    (tmp / "garbage.pem").write_text("not a certificate\n")
    (tmp / "unknown-field.yaml").write_text("apiVersion: podfit.dev/v1\nkind: PodfitConfiguration\nbogus: 1\n")
    (tmp / "not-yaml.yaml").write_text("grpcAddr: [\n")
    (tmp / "bad-exporter.yaml").write_text(
        "apiVersion: podfit.dev/v1\nkind: PodfitConfiguration\ntelemetry:\n  exporter: bogus\n"
    )
    tls = ["--tls-cert-file", str(pki["server_cert"]), "--tls-key-file", str(pki["server_key"])]
    return {
        "grpc port in use": (["--grpc-addr", f"127.0.0.1:{busy}"], ["grpcAddr: cannot listen", "--grpc-addr"]),
        "extender port in use": (
            ["--extender-addr", f"127.0.0.1:{busy}"],
            ["extender.addr: cannot listen", "--extender-addr"],
        ),
        "metrics port in use": (["--metrics-addr", f"127.0.0.1:{busy}"], ["metrics.addr: cannot listen"]),
        "every port in use, named at once": (
            [
                "--grpc-addr",
                f"127.0.0.1:{busy}",
                "--extender-addr",
                f"localhost:{busy}",
                "--metrics-addr",
                f"0.0.0.0:{busy}",
            ],
            ["3 listeners cannot open", "grpcAddr: cannot", "extender.addr: cannot", "metrics.addr: cannot"],
        ),
        "a missing certificate file": (
            ["--tls-cert-file", str(tmp / "absent.pem"), "--tls-key-file", str(pki["server_key"])],
            ["tls.certFile: cannot read", "No such file"],
        ),
        "a certificate that is not PEM": (
            ["--tls-cert-file", str(tmp / "garbage.pem"), "--tls-key-file", str(pki["server_key"])],
            ["tls.certFile/tls.keyFile", "not a PEM certificate chain"],
        ),
        "the key of another certificate": (
            ["--tls-cert-file", str(pki["server_cert"]), "--tls-key-file", str(pki["client_key"])],
            ["tls.certFile/tls.keyFile", "belongs to the certificate"],
        ),
        "a client CA that is not PEM": (
            [*tls, "--tls-client-ca-file", str(tmp / "garbage.pem")],
            ["tls.clientCAFile", "no PEM CA certificate"],
        ),
        "an unknown config field": (
            ["--config", str(tmp / "unknown-field.yaml")],
            ["PodfitConfiguration.bogus: unknown field"],
        ),
        "a config that is not YAML": (["--config", str(tmp / "not-yaml.yaml")], ["is not valid YAML"]),
        "a metrics address without a port": (["--metrics-addr", "localhost"], ["metrics.addr", "HOST:PORT or off"]),
        "an unknown telemetry exporter in the config": (
            ["--config", str(tmp / "bad-exporter.yaml")],
            ["telemetry.exporter: 'bogus' must be none, console or otlp"],
        ),
    }


FAILURES = [
    "grpc port in use",
    "extender port in use",
    "metrics port in use",
    "every port in use, named at once",
    "a missing certificate file",
    "a certificate that is not PEM",
    "the key of another certificate",
    "a client CA that is not PEM",
    "an unknown config field",
    "a config that is not YAML",
    "a metrics address without a port",
    "an unknown telemetry exporter in the config",
]


@pytest.mark.parametrize("case", FAILURES)
def test_a_bad_start_is_one_line_and_a_nonzero_exit(
    case: str, tmp_path: Path, busy_port: int, pki: dict[str, Path]
) -> None:
    args, fragments = _failure_cases(tmp_path, busy_port, pki)[case]
    result = subprocess.run(
        [PODFIT_SERVER, *QUIET_PORTS, *args], env=_server_env(), capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("podfit-server: ")
    for fragment in fragments:
        assert fragment in lines[0]


async def test_a_failed_start_closes_the_listeners_it_had_opened(busy_port: int, pki: dict[str, Path]) -> None:
    """An extender port in use fails the start after the cluster-autoscaler expander listened: that port
    must be free again (an embedding program or a test retries on it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        expander_port = probe.getsockname()[1]
    settings = Settings(
        tls_cert_file=str(pki["server_cert"]),
        tls_key_file=str(pki["server_key"]),
        ca_expander_addr=f"127.0.0.1:{expander_port}",
    )
    with pytest.raises(SettingsError, match=r"extender\.addr: cannot listen"):
        await create_server(settings, addr="127.0.0.1:0", extender_addr=f"127.0.0.1:{busy_port}")
    with socket.socket() as again:
        again.bind(("127.0.0.1", expander_port))  # EADDRINUSE while the expander still listens


def test_every_failure_case_is_listed(tmp_path: Path, pki: dict[str, Path]) -> None:
    assert sorted(_failure_cases(tmp_path, 1, pki)) == sorted(FAILURES)


# -- the CLI against a server speaking the other protocol ---------------------------------------------


@pytest.fixture(scope="module")
def servers(pki: dict[str, Path]) -> Iterator[dict[str, int]]:
    """A plaintext and a TLS podfit-server: their gRPC ports."""
    plain = ServerProcess()
    tls = ServerProcess("--tls-cert-file", str(pki["server_cert"]), "--tls-key-file", str(pki["server_key"]))
    try:
        ports = {}
        for name, server in (("plain", plain), ("tls", tls)):
            line = server.wait_for("podfit-server listening")
            ports[name] = int(json.loads(line)["port"])
        yield ports
    finally:
        plain.stop()
        tls.stop()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("host", "server", "tls", "hint"),
    [
        pytest.param("127.0.0.1", "tls", False, hints.TLS_SERVER, id="a plaintext client meets a TLS server"),
        pytest.param("localhost", "plain", True, hints.PLAINTEXT_SERVER, id="a TLS client meets a plaintext server"),
        pytest.param("127.0.0.1", "tls", True, hints.WRONG_NAME, id="the certificate does not name the target host"),
        pytest.param("127.0.0.1", "closed", False, hints.NOTHING_LISTENS, id="nothing listens on the port"),
    ],
)
def test_cli_names_the_flag_to_change(
    servers: dict[str, int],
    pki: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    host: str,
    server: str,
    tls: bool,
    hint: str,
) -> None:
    target = f"{host}:{servers[server] if server != 'closed' else _closed_port()}"
    tls_flags = ["--ca-file", str(pki["ca"])] if tls else []
    code = cli.main(["--target", target, *tls_flags, "stats"])
    assert code == 1
    assert capsys.readouterr().err.splitlines() == [f"podfit: UNAVAILABLE: cannot talk to {target}: {hint}"]


def test_cli_keeps_grpc_core_lines_off_stderr(servers: dict[str, int], pki: dict[str, Path]) -> None:
    """Through the console script, as a user runs it: gRPC's core logs a failed TLS handshake on its own
    ("I1124 ... ssl_transport_security.cc:2563] Handshake failed ...") unless told not to."""
    target = f"localhost:{servers['plain']}"
    result = subprocess.run(
        [str(Path(sys.executable).with_name("podfit")), "--target", target, "--ca-file", str(pki["ca"]), "stats"],
        env=_server_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"podfit: UNAVAILABLE: cannot talk to {target}: {hints.PLAINTEXT_SERVER}"]


def test_cli_reaches_the_tls_server_by_its_certificates_name(
    servers: dict[str, int], pki: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The hints' control: the flags they suggest do connect."""
    assert cli.main(["--target", f"localhost:{servers['tls']}", "--ca-file", str(pki["ca"]), "stats"]) == 0
    assert capsys.readouterr().err == ""


# -- reflection v1 and v1alpha ----------------------------------------------------------------------------


def _reflection_messages(version: str) -> tuple[Any, Any]:
    if version == "v1alpha":
        return reflection_pb2.ServerReflectionRequest, reflection_pb2.ServerReflectionResponse
    messages = v1_file_descriptor().message_types_by_name
    return (
        message_factory.GetMessageClass(messages["ServerReflectionRequest"]),
        message_factory.GetMessageClass(messages["ServerReflectionResponse"]),
    )


@pytest.mark.parametrize(("version", "service"), [("v1", V1_SERVICE_NAME), ("v1alpha", V1ALPHA_SERVICE_NAME)])
async def test_reflection_lists_and_describes_podfit(live: LiveServer, version: str, service: str) -> None:
    request, response = _reflection_messages(version)
    async with grpc.aio.insecure_channel(live.target) as channel:
        call = channel.stream_stream(
            f"/{service}/ServerReflectionInfo",
            request_serializer=request.SerializeToString,
            response_deserializer=response.FromString,
        )

        async def ask() -> AsyncIterator[Any]:
            yield request(list_services="")
            yield request(file_containing_symbol="podfit.v1.Scheduler")
            yield request(file_containing_symbol=service)

        answers = [answer async for answer in call(ask())]
    listed = {s.name for s in answers[0].list_services_response.service}
    assert {"podfit.v1.Scheduler", "podfit.v1.ClusterCache", "podfit.v1.Simulation", service} <= listed
    assert {V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME} <= listed
    scheduler, reflection = (
        [descriptor_pb2.FileDescriptorProto.FromString(raw) for raw in a.file_descriptor_response.file_descriptor_proto]
        for a in answers[1:]
    )
    assert "Scheduler" in {s.name for f in scheduler for s in f.service}
    (own,) = [f for f in reflection if f.package == service.rpartition(".")[0]]
    (method,) = own.service[0].method
    assert method.input_type == f".{own.package}.ServerReflectionRequest"
