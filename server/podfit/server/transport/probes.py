"""Liveness and readiness over plain HTTP on a listener of their own (``probeAddr``).

With a client CA configured, the gRPC port and the extender port demand a client certificate, which
kubelet's ``httpGet``/``grpc`` probes cannot present. This listener serves only ``/healthz`` and
``/readyz`` (status text, no cluster data), so it needs neither TLS nor authentication; bind it to the
pod IP (or loopback for an exec probe) rather than exposing it through a Service.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web

Ready = Callable[[], Awaitable[str]]


def build_probe_app(ready: Ready) -> web.Application:
    """``ready`` returns "" when ready, else why not (answered as 503)."""
    app = web.Application(client_max_size=1024)

    async def healthz(request: web.Request) -> web.Response:
        """Liveness: the process answers; 200 whether or not the cache is synced."""
        return web.Response(text="ok")

    async def readyz(request: web.Request) -> web.Response:
        """Readiness: 200 while the server reports SERVING (the cache synced, not shutting down)."""
        reason = await ready()
        return web.Response(text=f"not ready: {reason}", status=503) if reason else web.Response(text="ok")

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


async def start_probes(ready: Ready, host: str, port: int) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(build_probe_app(ready), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    sockets: Sequence[Any] = getattr(site._server, "sockets", None) or []
    return runner, int(sockets[0].getsockname()[1]) if sockets else port
