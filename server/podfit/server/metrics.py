"""Prometheus ``GET /metrics`` on a listener of its own (--metrics-addr).

The instruments are Telemetry's OpenTelemetry ones; its Prometheus reader renders them at scrape time,
so the endpoint adds no work per RPC. A listener of its own because the gRPC port speaks only HTTP/2
and the extender's may be TLS or off, while Prometheus scrapes plain HTTP. Nothing here names a pod or
a node: labels are methods, codes, kinds, queues and verbs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

METRICS_PATH = "/metrics"


def build_app(registry: CollectorRegistry) -> web.Application:
    async def scrape(request: web.Request) -> web.Response:
        response = web.Response(body=generate_latest(registry))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    app = web.Application()
    app.router.add_get(METRICS_PATH, scrape)
    return app


async def start_metrics(registry: CollectorRegistry, addr: str) -> tuple[web.AppRunner, int]:
    """Serves ``registry`` on ``addr`` (HOST:PORT; port 0 picks one): (runner, bound port).

    Raises OSError when the address cannot be bound."""
    host, _, port = addr.rpartition(":")
    runner = web.AppRunner(build_app(registry), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host.strip("[]") or "0.0.0.0", int(port), reuse_address=True)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    sockets: Sequence[Any] = getattr(site._server, "sockets", None) or []
    return runner, int(sockets[0].getsockname()[1]) if sockets else int(port)
