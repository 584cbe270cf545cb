"""podfit-server: the gRPC server with health checking, reflection, telemetry, auth and shutdown."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import signal
import ssl
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from aiohttp import web
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from grpcplugin import expander_pb2_grpc
from podfit.server.config import ConfigError, profiles_from_configuration
from podfit.server.service import SchedulingService
from podfit.server.settings import Settings, SettingsError, resolve
from podfit.server.telemetry import Telemetry, TelemetryInterceptor
from podfit.server.transport.ca_expander import ExpanderServicer
from podfit.server.transport.decoding import add_servicer
from podfit.server.transport.extender import start_extender
from podfit.server.transport.grpc_services import ClusterCacheServicer, SchedulerServicer, SimulationServicer
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
_OPEN_METHODS = ("/grpc.health.v1.Health/", "/grpc.reflection.")


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


class TokenAuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Requires 'authorization: Bearer <token>' on every call but health checks and reflection."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        if details.method.startswith(_OPEN_METHODS):
            return await continuation(details)
        metadata = dict(details.invocation_metadata or ())
        supplied = str(metadata.get("authorization", "")).encode()
        if hmac.compare_digest(supplied, self._expected):
            return await continuation(details)
        handler = await continuation(details)
        if handler is None:
            return None

        async def deny(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")

        async def deny_stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")
            yield  # pragma: no cover

        if handler.stream_stream:
            return grpc.stream_stream_rpc_method_handler(deny_stream)
        return grpc.unary_unary_rpc_method_handler(deny)


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

    async def stop(self, grace: float | None = None) -> None:
        """Graceful shutdown: report NOT_SERVING, keep serving until no unary RPC has been in flight
        for a moment (requests already queued in the transport get served too) or ``grace`` runs out,
        then stop, cancelling whatever is left (long-lived Streams) at the end of the grace period."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (grace or 0.0)
        await self.health.enter_graceful_shutdown()
        if self.extender is not None:
            await self.extender.cleanup()
        if self.ca_expander is not None:
            await self.ca_expander.stop(grace)
        quiet_checks = 0
        while grace and quiet_checks < 3 and loop.time() < deadline:
            await asyncio.sleep(0.01)
            quiet_checks = quiet_checks + 1 if self.telemetry.active_unary_rpcs == 0 else 0
        await self.server.stop(max(0.0, deadline - loop.time()) if grace else grace)
        await self.service.close()
        self.telemetry.shutdown()


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


async def _start_ca_expander(
    settings: Settings, service: SchedulingService, telemetry: Telemetry, options: list[tuple[str, int]]
) -> tuple[grpc.aio.Server, int]:
    """cluster-autoscaler's gRPC expander on a listener of its own: TLS with the server's certificate and
    no client certificate (cluster-autoscaler presents none), and nothing but BestOptions on it."""
    server = grpc.aio.server(interceptors=[TelemetryInterceptor(telemetry)], options=options)
    add_servicer(expander_pb2_grpc.add_ExpanderServicer_to_server, ExpanderServicer(service), server)
    credentials = grpc.ssl_server_credentials(
        [(_read(settings.tls_key_file, "tls.keyFile"), _read(settings.tls_cert_file, "tls.certFile"))]
    )
    port = server.add_secure_port(settings.ca_expander_addr, credentials)
    if port == 0:
        raise SettingsError(f"caExpander.addr: cannot listen on {settings.ca_expander_addr}")
    await server.start()
    return server, port


async def create_server(
    settings: Settings | None = None,
    *,
    addr: str | None = None,
    extender_addr: str | None = None,
    telemetry: Telemetry | None = None,
    service: SchedulingService | None = None,
) -> RunningServer:
    """Builds and starts the server; ``addr`` like "127.0.0.1:0" picks a free port (tests).

    The extender endpoint starts only when ``extender_addr`` (or the settings) names an address.
    """
    settings = settings or Settings()
    telemetry = telemetry or Telemetry.from_exporter_name(settings.telemetry_exporter)
    if service is None:
        profiles = profiles_from_configuration(settings.scheduler_configuration)
        service = SchedulingService(
            profiles,
            telemetry=telemetry,
            memo_ttl_seconds=settings.memo_ttl_seconds,
            memo_backend=settings.memo_backend,
            wait_for_sync=settings.wait_for_sync,
        )
    interceptors: list[grpc.aio.ServerInterceptor] = [TelemetryInterceptor(telemetry)]
    if settings.auth_token_file:
        token = _read(settings.auth_token_file, "auth.tokenFile").decode().strip()
        if not token:
            raise SettingsError("auth.tokenFile: the file is empty")
        interceptors.insert(0, TokenAuthInterceptor(token))
    options = [
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.max_send_message_length", settings.max_message_bytes),
        ("grpc.so_reuseport", 0),
    ]
    server = grpc.aio.server(interceptors=interceptors, options=options)
    # Registered through add_servicer: request bytes that do not decode are refused as INVALID_ARGUMENT.
    add_servicer(cluster_cache_pb2_grpc.add_ClusterCacheServicer_to_server, ClusterCacheServicer(service), server)
    add_servicer(scheduler_pb2_grpc.add_SchedulerServicer_to_server, SchedulerServicer(service), server)
    add_servicer(simulation_pb2_grpc.add_SimulationServicer_to_server, SimulationServicer(service), server)
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
    reflection.enable_server_reflection((*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    target = addr or settings.grpc_addr
    if settings.tls_cert_file:
        credentials = grpc.ssl_server_credentials(
            [(_read(settings.tls_key_file, "tls.keyFile"), _read(settings.tls_cert_file, "tls.certFile"))],
            root_certificates=_read(settings.tls_client_ca_file, "tls.clientCAFile")
            if settings.tls_client_ca_file
            else None,
            require_client_auth=bool(settings.tls_client_ca_file),
        )
        port = server.add_secure_port(target, credentials)
    else:
        port = server.add_insecure_port(target)
    if port == 0:
        raise SettingsError(f"grpcAddr: cannot listen on {target}")
    await server.start()
    running = RunningServer(server, port, service, health_servicer, telemetry)
    if settings.ca_expander_addr not in ("", "off"):
        try:
            running.ca_expander, running.ca_expander_port = await _start_ca_expander(
                settings, service, telemetry, options
            )
        except SettingsError:
            await server.stop(0)
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
            )
        except OSError as exc:
            await server.stop(0)
            raise SettingsError(f"extender.addr: cannot listen on {extender_target}: {exc.strerror}") from None
    if service.synced:
        await report_serving()
    return running


async def serve(settings: Settings) -> None:
    running = await create_server(settings)
    log.info(
        "podfit-server listening",
        extra={
            "addr": settings.grpc_addr,
            "port": running.port,
            "extender": settings.extender_addr if running.extender else "off",
            "ca_expander": settings.ca_expander_addr if running.ca_expander else "off",
            "profiles": sorted(running.service.engine.frameworks),
            "tls": bool(settings.tls_cert_file),
            "auth": bool(settings.auth_token_file),
            "wait_for_sync": settings.wait_for_sync,
            "server_epoch": running.service.epoch,
        },
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    log.info("shutting down: draining in-flight RPCs")
    await running.stop(settings.shutdown_grace_seconds)
    log.info("stopped")


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    try:
        settings = resolve(argv, environ)
        configure_logging(settings)
        profiles_from_configuration(settings.scheduler_configuration)
        asyncio.run(serve(settings))
    except (SettingsError, ConfigError) as exc:
        print(f"podfit-server: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
