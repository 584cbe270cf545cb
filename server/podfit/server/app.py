"""podfit-server: the gRPC server with health checking, reflection, telemetry, auth and shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import ssl
import sys
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
from aiohttp import web
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpcplugin import expander_pb2_grpc
from podfit.server import reflection
from podfit.server.auth import RoleAuthInterceptor, load_tokens
from podfit.server.config import ConfigError, profiles_from_configuration
from podfit.server.framework.profile import Profile
from podfit.server.lifecycle import Drain, sleep_unless, wait_until_quiet
from podfit.server.metrics import METRICS_PATH, start_metrics
from podfit.server.service import CacheNotSyncedError, SchedulingService
from podfit.server.settings import Settings, SettingsError, check_exposure, resolve
from podfit.server.startup import listen_error, preflight
from podfit.server.telemetry import Telemetry, TelemetryInterceptor
from podfit.server.transport.ca_expander import ExpanderServicer
from podfit.server.transport.decoding import add_servicer
from podfit.server.transport.extender import Binds, start_extender
from podfit.server.transport.forward import OwnerLink
from podfit.server.transport.grpc_services import ClusterCacheServicer, SchedulerServicer, SimulationServicer
from podfit.server.transport.probes import start_probes
from podfit.server.transport.stored_forms import PROTOBUF_FORMS
from podfit.server.transport.what_if import WHAT_IF_SOCKET, CaughtUp, WhatIfLink
from podfit.server.transport.workers import (
    INTERNAL_OPTIONS,
    Authenticated,
    Follower,
    Owner,
    available_cores,
    default_workers,
    read_token,
)
from podfit.v1 import (
    cluster_cache_pb2,
    cluster_cache_pb2_grpc,
    scheduler_pb2,
    scheduler_pb2_grpc,
    simulation_pb2,
    simulation_pb2_grpc,
)

log = logging.getLogger("podfit.server")
SERVICE_NAMES = (
    cluster_cache_pb2.DESCRIPTOR.services_by_name["ClusterCache"].full_name,
    scheduler_pb2.DESCRIPTOR.services_by_name["Scheduler"].full_name,
    simulation_pb2.DESCRIPTOR.services_by_name["Simulation"].full_name,
)
# grpc core queues calls that arrived before the (single-threaded) server took them, and past 1,000 of
# them starts cancelling new ones at random: a burst of a few thousand Schedule calls (a few seconds of
# work) lost calls with CANCELLED, which a client cannot tell from a shutdown. Queue them instead.
PENDING_CALL_LIMITS = [
    ("grpc.server.max_pending_requests", 20_000),
    ("grpc.server.max_pending_requests_hard_limit", 40_000),
]


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in (
            "addr",
            "port",
            "extender",
            "ca_expander",
            "generation",
            "nodes",
            "profiles",
            "tls",
            "auth",
            "wait_for_sync",
            "feeder",
            "server_epoch",
            "metrics",
            "method",
            "token_name",
            "probes",
            "pod",
            "code",
            "duration_ms",
            "details",
            "workers",
        ):
            if hasattr(record, key):
                entry[key] = getattr(record, key)
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure_logging(settings: Settings) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if settings.log_format == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger("podfit")
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    root.propagate = False


@dataclass
class RunningServer:
    server: grpc.aio.Server
    port: int
    service: SchedulingService
    health: health.aio.HealthServicer
    telemetry: Telemetry
    extender: web.AppRunner | None = None
    extender_port: int = 0
    ca_expander: grpc.aio.Server | None = None
    ca_expander_port: int = 0
    probes: web.AppRunner | None = None
    probe_port: int = 0

    drain: Drain = field(default_factory=Drain)
    # Set by a second SIGTERM/SIGINT: cut the shutdown delay and the drain short.
    hurry: asyncio.Event = field(default_factory=asyncio.Event)

    async def stop(
        self, grace: float | None = None, delay: float = 0.0, before_close: Awaitable[None] | None = None
    ) -> None:
        """Graceful shutdown (see podfit.server.lifecycle): NOT_SERVING at once (gRPC health and the
        extender's /readyz), everything still served for ``delay`` seconds while load balancers notice;
        then open streams end UNAVAILABLE, the calls that reached the server are answered, the ports
        close, and the server stops as soon as that is done; ``grace`` bounds the part after the delay.
        """
        self.service.shutting_down = True
        await self.health.enter_graceful_shutdown()
        await sleep_unless(delay, self.hurry)
        deadline = time.monotonic() + (grace or 0.0)
        self.drain.end_streams()
        closing = [self._stop_grpc(self.server, self.drain, deadline, bool(grace))]
        if self.ca_expander is not None:
            closing.append(self.ca_expander.stop(grace))
        if self.extender is not None:
            closing.append(self.extender.cleanup())
        await asyncio.gather(*closing)
        if before_close is not None:  # the decision workers, which still forward writes to this service
            await before_close
        await self.service.close()
        if self.probes is not None:  # last: readiness says NOT_SERVING for the whole drain
            await self.probes.cleanup()
        self.telemetry.shutdown()

    async def _stop_grpc(self, server: grpc.aio.Server, drain: Drain, deadline: float, graceful: bool) -> None:
        if graceful:
            # Answer what has arrived; then refuse stragglers (UNAVAILABLE) until none come, since the
            # calls grpc holds unanswered when the port closes are cancelled.
            answered = await wait_until_quiet(drain, deadline, self.hurry)
            drain.refuse()
            if not (answered and await wait_until_quiet(drain, deadline, self.hurry)):
                log.warning("shutdown grace period over with calls still arriving: the rest are cancelled")
        remaining = 0.0 if self.hurry.is_set() or not graceful else max(0.0, deadline - time.monotonic())
        stopping = asyncio.ensure_future(server.stop(remaining))
        hurried = asyncio.ensure_future(self.hurry.wait())
        await asyncio.wait((stopping, hurried), return_when=asyncio.FIRST_COMPLETED)
        hurried.cancel()
        if not stopping.done():
            await server.stop(0)  # a second signal: cancel what is left now
        await stopping


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise SettingsError(f"{what}: cannot read {path}: {exc.strerror}") from None


def _extender_ssl(settings: Settings) -> ssl.SSLContext | None:
    if not settings.tls_cert_file:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file)
    if settings.tls_client_ca_file:
        context.load_verify_locations(settings.tls_client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def register_services(
    server: grpc.aio.Server,
    service: SchedulingService,
    owner: OwnerLink | None = None,
    what_if: WhatIfLink | None = None,
) -> None:
    """The podfit.v1 services on ``server``; registered through add_servicer, so request bytes that do not
    decode are refused as INVALID_ARGUMENT. ``what_if``: where what-if questions go, when not here."""
    cache, scheduler = ClusterCacheServicer(service, owner), SchedulerServicer(service, owner)
    add_servicer(cluster_cache_pb2_grpc.add_ClusterCacheServicer_to_server, cache, server)
    add_servicer(scheduler_pb2_grpc.add_SchedulerServicer_to_server, scheduler, server)
    simulation = SimulationServicer(service, what_if)
    add_servicer(simulation_pb2_grpc.add_SimulationServicer_to_server, simulation, server)


def build_service(settings: Settings, telemetry: Telemetry) -> SchedulingService:
    return SchedulingService(
        profiles_from_settings(settings),
        forms=PROTOBUF_FORMS,
        telemetry=telemetry,
        memo_ttl_seconds=settings.memo_ttl_seconds,
        memo_backend=settings.memo_backend,
        memo_options=settings.memo_options,
        wait_for_sync=settings.wait_for_sync,
        limits=settings.limits,
    )


async def _start_ca_expander(
    settings: Settings,
    service: SchedulingService,
    telemetry: Telemetry,
    options: list[tuple[str, int]],
    what_if: WhatIfLink | None = None,
) -> tuple[grpc.aio.Server, int]:
    """cluster-autoscaler's gRPC expander on a listener of its own: TLS with the server's certificate and
    no client certificate (cluster-autoscaler presents none), and nothing but BestOptions on it."""
    server = grpc.aio.server(interceptors=[TelemetryInterceptor(telemetry)], options=options)
    add_servicer(expander_pb2_grpc.add_ExpanderServicer_to_server, ExpanderServicer(service, what_if), server)
    credentials = grpc.ssl_server_credentials(
        [(_read(settings.tls_key_file, "tls.keyFile"), _read(settings.tls_cert_file, "tls.certFile"))]
    )
    try:
        port = server.add_secure_port(settings.ca_expander_addr, credentials)
    except RuntimeError:  # grpc's "Failed to bind", whatever the cause
        port = 0
    if port == 0:
        raise listen_error("caExpander.addr", settings.ca_expander_addr, "--ca-expander-addr")
    await server.start()
    return server, port


async def create_server(
    settings: Settings | None = None,
    *,
    addr: str | None = None,
    extender_addr: str | None = None,
    telemetry: Telemetry | None = None,
    service: SchedulingService | None = None,
    owner: OwnerLink | None = None,
    reuse_port: bool = False,
    what_if: WhatIfLink | None = None,
    inner: Sequence[grpc.aio.ServerInterceptor] = (),
    binds: Binds | None = None,
) -> RunningServer:
    """Builds and starts the server; ``addr`` like "127.0.0.1:0" picks a free port (tests).

    The extender endpoint starts only when ``extender_addr`` (or the settings) names an address.
    ``reuse_port``: other processes of this server listen on the same ports (podfit.server.transport.workers);
    ``owner``: this process is a decision worker, forwarding its writes there; ``what_if``: what-if
    questions are answered by the what-if process (podfit.server.transport.what_if); ``inner``: interceptors
    innermost (the replicated log's owner holds each answer until the log has its writes); ``binds``: where
    the extender's bind verb writes (a replica of a group: the owner).
    """
    settings = settings or Settings()
    # The addresses actually bound, overrides included: no listener opens to other hosts unauthenticated.
    extender_addr = settings.extender_addr if extender_addr is None else extender_addr
    check_exposure(replace(settings, grpc_addr=addr or settings.grpc_addr, extender_addr=extender_addr))
    telemetry = telemetry or Telemetry.from_exporter_name(
        settings.telemetry_exporter, prometheus=settings.metrics_addr not in ("", "off")
    )
    if service is None:
        service = build_service(settings, telemetry)
    drain = Drain()
    # Telemetry outermost: refused calls count in the RPC metrics too (operators alert on them).
    interceptors: list[grpc.aio.ServerInterceptor] = [TelemetryInterceptor(telemetry)]
    tokens = load_tokens(settings)
    if tokens:
        interceptors.append(RoleAuthInterceptor(tokens))
    options = [
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.max_send_message_length", settings.max_message_bytes),
        ("grpc.so_reuseport", int(reuse_port)),
        *PENDING_CALL_LIMITS,
    ]
    # Innermost, so the streams it ends at shutdown are seen by the others as any UNAVAILABLE answer.
    server = grpc.aio.server(interceptors=[*interceptors, drain, *inner], options=options)
    register_services(server, service, owner, what_if)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)

    async def report_serving() -> None:
        # Readiness follows the cache: NOT_SERVING until it is synced (--wait-for-sync), then SERVING.
        for name in (*SERVICE_NAMES, ""):
            await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)

    for name in (*SERVICE_NAMES, ""):
        # Before the server starts, so no MarkSynced can come in between: SERVING once started and synced.
        await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    service.on_synced(report_serving)
    reflection.enable_server_reflection((*SERVICE_NAMES, health.SERVICE_NAME), server)
    target = addr or settings.grpc_addr
    if settings.tls_cert_file:
        credentials = grpc.ssl_server_credentials(
            [(_read(settings.tls_key_file, "tls.keyFile"), _read(settings.tls_cert_file, "tls.certFile"))],
            root_certificates=_read(settings.tls_client_ca_file, "tls.clientCAFile")
            if settings.tls_client_ca_file
            else None,
            require_client_auth=bool(settings.tls_client_ca_file),
        )
    secure = bool(settings.tls_cert_file)
    try:
        port = server.add_secure_port(target, credentials) if secure else server.add_insecure_port(target)
    except RuntimeError:  # grpc's "Failed to bind", whatever the cause (startup.preflight names the usual ones)
        port = 0
    if port == 0:
        raise listen_error("grpcAddr", target, "--grpc-addr")
    await server.start()
    running = RunningServer(server, port, service, health_servicer, telemetry, drain=drain)
    if settings.ca_expander_addr not in ("", "off"):
        try:
            running.ca_expander, running.ca_expander_port = await _start_ca_expander(
                settings, service, telemetry, options, what_if
            )
        except SettingsError:
            await running.stop(0)
            raise
    extender_target = extender_addr if extender_addr is not None else settings.extender_addr
    if extender_target not in ("", "off"):
        host, _, extender_port = extender_target.rpartition(":")
        try:
            running.extender, running.extender_port = await start_extender(
                service,
                host.strip("[]") or "0.0.0.0",
                int(extender_port),
                prefix=settings.extender_url_prefix,
                max_body_bytes=settings.extender_max_body_bytes,
                idle_timeout=settings.extender_idle_timeout_seconds,
                ssl_context=_extender_ssl(settings),
                bind=settings.extender_bind,
                # The bind verb writes: with it on, the owner alone serves the extender.
                reuse_port=reuse_port and not settings.extender_bind,
                binds=binds,
            )
        except OSError as exc:
            await running.stop(0)  # the ca-expander listener too, the memo and telemetry
            raise listen_error("extender.addr", extender_target, "--extender-addr", exc.strerror or "") from None
    if settings.probe_addr not in ("", "off"):
        try:
            running.probes, running.probe_port = await _start_probes(settings.probe_addr, health_servicer, service)
        except OSError as exc:
            await running.stop(0)
            raise listen_error("probeAddr", settings.probe_addr, "--probe-addr", exc.strerror or "") from None
    if service.synced:
        await report_serving()
    return running


async def _start_probes(
    addr: str, health_servicer: health.aio.HealthServicer, service: SchedulingService
) -> tuple[web.AppRunner, int]:
    """The plain-HTTP probe listener; readiness is the gRPC health of the whole server ("" service), so
    it follows the cache's sync and turns NOT_SERVING as soon as shutdown begins."""

    async def ready() -> str:
        reply = await health_servicer.Check(health_pb2.HealthCheckRequest(service=""), None)
        if reply.status == health_pb2.HealthCheckResponse.SERVING:
            return ""
        return str(CacheNotSyncedError()) if not service.synced else "the server is shutting down"

    host, _, port = addr.rpartition(":")
    return await start_probes(ready, host.strip("[]") or "0.0.0.0", int(port))


def _bound(addr: str, port: int) -> str:
    """HOST:PORT as listened on: the port the OS chose when ``addr`` asked for port 0."""
    return f"{addr.rpartition(':')[0]}:{port}"


async def _start_metrics_listener(
    settings: Settings, running: RunningServer, owner: Owner | None = None
) -> tuple[web.AppRunner | None, str]:
    """The /metrics listener (or None when off; with the owner's workers' figures merged in) and its URL
    for the startup line."""
    registry = running.telemetry.prometheus_registry
    if settings.metrics_addr in ("", "off") or registry is None:
        return None, "off"
    try:
        runner, port = await start_metrics(registry, settings.metrics_addr, owner.worker_metrics if owner else None)
    except OSError as exc:
        await running.stop(0)
        raise listen_error("metrics.addr", settings.metrics_addr, "--metrics-addr", exc.strerror or "") from None
    return runner, f"http://{_bound(settings.metrics_addr, port)}{METRICS_PATH}"


async def serve(settings: Settings, argv: Sequence[str] = ()) -> None:
    if settings.replicated_log:
        from podfit.server.replica_app import serve_replica

        await serve_replica(settings)
        return
    if settings.follow_owner:
        await (serve_what_if(settings) if settings.what_if_role else serve_worker(settings))
        return
    workers = settings.workers or default_workers()
    # What-if runs apart wherever there is a second core for it, whatever the count on the listeners.
    what_if = WhatIfLink() if runs_what_if_process(settings) else None
    running = await create_server(settings, reuse_port=workers > 1, what_if=what_if)
    running.service.workers = workers
    running.service.what_if_process = what_if is not None
    signalled = _on_signals(running)
    grpc_addr = _bound(settings.grpc_addr, running.port)
    extender = _bound(settings.extender_addr, running.extender_port) if running.extender else "off"
    ca_expander = _bound(settings.ca_expander_addr, running.ca_expander_port) if running.ca_expander else "off"
    probes = _bound(settings.probe_addr, running.probe_port) if running.probes else "off"
    owner = None
    if workers > 1 or what_if is not None:
        # Each worker listens where the owner does (the ports it was given, 0 included, resolved).
        command = [
            *(sys.executable, "-m", "podfit.server.app", *argv),
            *("--grpc-addr", grpc_addr, "--ca-expander-addr", ca_expander, "--probe-addr", "off"),
            *("--extender-addr", "off" if settings.extender_bind else extender, "--metrics-addr", "off"),
            *("--workers", str(workers)),
            *(() if what_if is not None else ("--no-what-if-process",)),
        ]
        owner = Owner(running.service, command, workers, what_if=what_if is not None)
        if what_if is not None:
            journal = owner.journal
            what_if.bind(owner.directory, owner.token, lambda: journal.position)
    metrics_runner, metrics_url = await _start_metrics_listener(settings, running, owner)
    if owner is not None:
        try:
            await owner.start(lambda server: register_services(server, running.service))
            await owner.wait_ready(signalled)
        except BaseException:
            await owner.stop()
            await running.stop(0)
            raise
    # The addresses are in the message itself, so the text format shows them as well as the JSON fields.
    log.info(
        f"podfit-server listening: grpc={grpc_addr} extender={extender} metrics={metrics_url} "
        f"ca_expander={ca_expander} probes={probes} workers={workers} what_if_process={what_if is not None}",
        extra={
            "addr": grpc_addr,
            "port": running.port,
            "extender": extender,
            "metrics": metrics_url,
            "ca_expander": ca_expander,
            "profiles": sorted(running.service.engine.frameworks),
            "tls": bool(settings.tls_cert_file),
            "auth": bool(settings.auth_token_file or settings.auth_tokens_file),
            "probes": probes,
            "wait_for_sync": settings.wait_for_sync,
            "server_epoch": running.service.epoch,
            "workers": workers,
            "what_if_process": what_if is not None,
        },
    )
    await _serve_until_signalled(running, settings, signalled, owner)
    if metrics_runner is not None:  # scraped through the shutdown, closed last
        await metrics_runner.cleanup()


def runs_what_if_process(settings: Settings) -> bool:
    """Whether the server runs a what-if process: asked for, and a second core to run it on."""
    return settings.what_if_process and available_cores() >= 2


async def serve_worker(settings: Settings) -> None:
    """A decision worker (podfit.server.transport.workers): loads the owner's cache, then listens beside it until
    the owner stops it (SIGTERM) or goes away."""
    # The owner's /metrics asks each worker for its figures (podfit.server.transport.workers).
    telemetry = Telemetry.from_exporter_name(settings.telemetry_exporter, prometheus=True)
    service = build_service(settings, telemetry)
    service.workers = settings.workers
    follower = Follower(service, settings.follow_owner, read_token(), telemetry.prometheus_registry)
    await follower.start()
    service.reservations = follower
    link = OwnerLink(follower)
    what_if = None
    if runs_what_if_process(settings):
        what_if = WhatIfLink()
        what_if.bind(follower.directory, follower.token, lambda: follower.position)
    # Stats answered here say what the server runs, as the owner's do.
    service.what_if_process = what_if is not None
    running = await create_server(
        settings, telemetry=telemetry, service=service, owner=link, reuse_port=True, what_if=what_if
    )
    signalled = _on_signals(running, follower.ended)
    await follower.listening()
    log.info("decision worker listening (pid %d) at generation %d", os.getpid(), service.generation)
    await signalled.wait()
    if follower.ended.is_set():
        # Its replica can no longer be kept current (every decision is refused OWNER_GONE already): there
        # is nothing to wait for, and a new worker starts from a new image if the owner is still there.
        settings = replace(settings, shutdown_delay_seconds=0.0)
    await _serve_until_signalled(running, settings, signalled)
    await follower.close()


async def serve_what_if(settings: Settings) -> None:
    """The what-if process (podfit.server.transport.what_if): a replica like a decision worker's that
    listens only on the owner's private directory and answers only what-if questions, each once its replica
    holds what its sender had; until the owner stops it (SIGTERM) or goes away."""
    telemetry = Telemetry.from_exporter_name(settings.telemetry_exporter, prometheus=True)
    service = build_service(settings, telemetry)
    service.workers = settings.workers
    follower = Follower(service, settings.follow_owner, read_token(), telemetry.prometheus_registry)
    await follower.start()
    server, path = await start_what_if_server(service, follower, telemetry)
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopped.set)
    ended = asyncio.ensure_future(follower.ended.wait())
    await follower.listening()
    log.info("what-if process listening (pid %d) at generation %d", os.getpid(), service.generation)
    await asyncio.wait([ended, asyncio.ensure_future(stopped.wait())], return_when=asyncio.FIRST_COMPLETED)
    # Questions in progress end within the grace period; the senders answer new ones themselves.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    await server.stop(settings.shutdown_grace_seconds)
    await service.close()
    await follower.close()


async def start_what_if_server(
    service: SchedulingService, follower: Follower, telemetry: Telemetry
) -> tuple[grpc.aio.Server, str]:
    """The what-if process's listener in the owner's private directory: the simulation services and the
    expander, for callers with the owner's token, each call once the replica holds what its sender had."""
    path = os.path.join(follower.directory, WHAT_IF_SOCKET)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # left by a what-if process that died
    server = grpc.aio.server(
        interceptors=[TelemetryInterceptor(telemetry), Authenticated(follower.token), CaughtUp(follower)],
        options=INTERNAL_OPTIONS,
    )
    add_servicer(simulation_pb2_grpc.add_SimulationServicer_to_server, SimulationServicer(service), server)
    add_servicer(expander_pb2_grpc.add_ExpanderServicer_to_server, ExpanderServicer(service), server)
    server.add_insecure_port(f"unix:{path}")
    await server.start()
    return server, path


def _on_signals(running: RunningServer, ended: asyncio.Event | None = None) -> asyncio.Event:
    """Set at SIGTERM/SIGINT (or once ``ended`` is); a second signal hurries the shutdown (no more delay
    or drain: what is still running is cancelled)."""
    signalled = asyncio.Event()
    loop = asyncio.get_running_loop()
    if ended is not None:
        ended_task = asyncio.create_task(ended.wait())
        ended_task.add_done_callback(lambda _: signalled.set())

    def on_signal() -> None:
        if signalled.is_set():
            log.warning("second signal: stopping now, cancelling what is still running")
            running.hurry.set()
        signalled.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal)
    return signalled


async def _serve_until_signalled(
    running: RunningServer, settings: Settings, signalled: asyncio.Event, owner: Owner | None = None
) -> None:
    """Serves until ``signalled``, then shuts down gracefully. The owner's workers stop with it, each
    draining its own calls while the owner still answers their writes."""
    await signalled.wait()
    started = time.monotonic()
    log.info(
        "shutting down: NOT_SERVING for %.1f s, then draining for at most %.1f s",
        settings.shutdown_delay_seconds,
        settings.shutdown_grace_seconds,
    )
    # The workers stop beside the owner's listeners, and the service closes only once they are gone.
    budget = settings.shutdown_delay_seconds + settings.shutdown_grace_seconds + 5
    workers = asyncio.ensure_future(owner.stop(budget)) if owner is not None else None
    await running.stop(settings.shutdown_grace_seconds, delay=settings.shutdown_delay_seconds, before_close=workers)
    log.info("stopped after %.2f s (%d calls served in all)", time.monotonic() - started, running.drain.started)


def profiles_from_settings(settings: Settings) -> dict[str, Profile]:
    """The profiles of the configuration, each at its version (profileVersions, else the server's)."""
    return profiles_from_configuration(
        settings.scheduler_configuration,
        settings.kube_scheduler_version,
        settings.feature_gate_overrides,
        settings.profile_versions,
    )


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    try:
        settings = resolve(argv, environ)
        configure_logging(settings)
        profiles_from_settings(settings)
        preflight(settings)
        asyncio.run(serve(settings, list(sys.argv[1:] if argv is None else argv)))
    except (SettingsError, ConfigError) as exc:
        print(f"podfit-server: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
