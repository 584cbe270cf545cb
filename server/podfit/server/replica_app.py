"""podfit-server as one replica of a group on a replicated log (``--replicated-log``): the process around
``podfit.server.transport.replicated.Replica`` — its listeners, readiness, and what changes when it
becomes the owner or stops being it. One process per replica (no decision workers, no what-if process:
the replicas are the scale-out)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from dataclasses import replace

from grpc_health.v1 import health_pb2
from podfit.server.app import (
    SERVICE_NAMES,
    _bound,
    _on_signals,
    _serve_until_signalled,
    _start_metrics_listener,
    build_service,
    create_server,
    register_services,
)
from podfit.server.settings import Settings, SettingsError
from podfit.server.telemetry import Telemetry
from podfit.server.transport.election import SERVICE_ACCOUNT, KubeAccess
from podfit.server.transport.forward import OwnerLink
from podfit.server.transport.replicated import (
    Durable,
    KubeLease,
    Replica,
    ReplicaBinds,
    ReplicationSettings,
    read_key,
    start_peer_server,
)

log = logging.getLogger("podfit.server")
# The exit status of an owner that lost its lease or was fenced: it starts again as a replica.
DEPOSED_EXIT = 3


def kubernetes_lease(settings: Settings, environ: Mapping[str, str] | None = None) -> KubeLease | None:
    """The coordination.k8s.io/v1 Lease the owner is elected with, or None for the engine's KV lease:
    ``replication.election`` if set; otherwise a Lease when running in a cluster (a service-account token
    and KUBERNETES_SERVICE_HOST) or when ``replication.kubeconfig`` names a file, the engine's KV elsewhere."""
    choice = settings.replication_election
    in_cluster = KubeAccess.in_cluster_available(environ)
    if choice == "engine" or (not choice and not (in_cluster or settings.replication_kubeconfig)):
        return None
    if settings.replication_kubeconfig:
        try:
            access = KubeAccess.from_kubeconfig(settings.replication_kubeconfig)
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
    elif in_cluster:
        access = KubeAccess.in_cluster(environ)
    else:
        raise SettingsError(
            "replication.election kubernetes: needs replication.kubeconfig, or a pod with a service account token"
        )
    namespace = settings.replication_lease_namespace
    if not namespace and in_cluster and (SERVICE_ACCOUNT / "namespace").is_file():
        namespace = (SERVICE_ACCOUNT / "namespace").read_text().strip()
    return KubeLease(access, namespace or "default", settings.replication_lease_name)


async def serve_replica(settings: Settings) -> None:
    telemetry = Telemetry.from_exporter_name(
        settings.telemetry_exporter, prometheus=settings.metrics_addr not in ("", "off")
    )
    service = build_service(settings, telemetry)
    ready_now = asyncio.Event()
    holder: dict[str, object] = {}
    deposed: list[str] = []

    async def on_ready(ready: bool) -> None:
        if ready:
            ready_now.set()
        else:
            ready_now.clear()
        running = holder.get("running")
        if running is None:
            return
        serving = ready and service.synced and not service.shutting_down
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in (*SERVICE_NAMES, ""):
            await running.health.set(name, status)  # type: ignore[attr-defined]

    def on_promoted() -> None:
        service.reservations = None

    def on_deposed(why: str) -> None:
        deposed.append(why)

    replication = ReplicationSettings(
        urls=[url.strip() for url in settings.replicated_log.split(",") if url.strip()],
        key=read_key(settings.replication_key_file),
        tls_files=(
            settings.replication_tls_ca_file,
            settings.replication_tls_cert_file,
            settings.replication_tls_key_file,
        ),
        address=settings.replica_addr,
        lease_seconds=settings.replication_lease_seconds,
        snapshot_entries=settings.replication_snapshot_entries,
        kubernetes_lease=kubernetes_lease(settings),
    )
    replica = Replica(service, replication, on_ready, on_promoted, on_deposed)
    await replica.start()
    service.reservations = replica
    link = OwnerLink(replica)
    running = await create_server(
        replace(settings, workers=1),
        telemetry=telemetry,
        service=service,
        owner=link,
        inner=[Durable(replica)],
        binds=ReplicaBinds(replica),
    )
    holder["running"] = running

    async def after_synced() -> None:
        await on_ready(ready_now.is_set())

    service.on_synced(after_synced)
    await on_ready(ready_now.is_set())
    peer = await start_peer_server(replica, service, lambda server: register_services(server, service))
    signalled = _on_signals(running, replica.ended)
    metrics_runner, metrics_url = await _start_metrics_listener(settings, running)
    grpc_addr = _bound(settings.grpc_addr, running.port)
    probes = _bound(settings.probe_addr, running.probe_port) if running.probes else "off"
    log.info(
        f"podfit-server listening: grpc={grpc_addr} probes={probes} metrics={metrics_url} "
        f"replica={settings.replica_addr} engine={settings.replicated_log}",
        extra={"addr": grpc_addr, "port": running.port, "probes": probes, "server_epoch": service.epoch},
    )
    await signalled.wait()
    if replica.ended.is_set():
        settings = replace(settings, shutdown_delay_seconds=0.0)
    await _serve_until_signalled(running, settings, signalled)
    await peer.stop(0)
    await replica.close()
    if metrics_runner is not None:
        await metrics_runner.cleanup()
    if deposed:
        log.error("exiting: no longer the owner (%s)", deposed[0])
        os._exit(DEPOSED_EXIT)
