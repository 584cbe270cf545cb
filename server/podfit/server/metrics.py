"""Prometheus ``GET /metrics`` on a listener of its own (--metrics-addr).

The instruments are Telemetry's OpenTelemetry ones; its Prometheus reader renders them at scrape time,
so the endpoint adds no work per RPC. A listener of its own because the gRPC port speaks only HTTP/2
and the extender's may be TLS or off, while Prometheus scrapes plain HTTP. Nothing here names a pod or
a node: labels are methods, codes, kinds, queues and verbs.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

METRICS_PATH = "/metrics"
# Families every process reports alike (each holds the same cache, and OpenTelemetry's target_info):
# the owner's figures are the server's.
REPLICATED = ("podfit_cache_", "podfit_scheduler_", "target")
# The expositions of a server's decision workers, gathered at scrape time (podfit.server.transport.workers): those
# running, and the last of those that went away, whose counters and histograms stay counted so that the
# server's never fall back.
Gatherer = Callable[[], Awaitable[tuple[list[bytes], list[bytes]]]]


class _Merged:
    """The owner's families with its decision workers' added in: counters, histograms and the in-flight
    gauge summed sample by sample, so the server reads as one target with the names and labels a single
    process has."""

    def __init__(self, registry: CollectorRegistry, workers: Sequence[bytes], retired: Sequence[bytes]) -> None:
        self.registry = registry
        self.workers = workers
        self.retired = retired

    def collect(self) -> Iterator[Metric]:
        families = {family.name: copy.deepcopy(family) for family in self.registry.collect()}
        for exposition, gone in [*((e, False) for e in self.workers), *((e, True) for e in self.retired)]:
            for family in text_string_to_metric_families(exposition.decode()):
                if family.name.startswith(REPLICATED) or (gone and family.type == "gauge"):
                    continue
                mine = families.setdefault(family.name, family)
                if mine is family:
                    continue
                index = {(s.name, tuple(sorted(s.labels.items()))): i for i, s in enumerate(mine.samples)}
                for sample in family.samples:
                    if sample.name.endswith("_created"):
                        continue
                    at = index.get((sample.name, tuple(sorted(sample.labels.items()))))
                    if at is None:
                        mine.samples.append(sample)
                    else:
                        mine.samples[at] = mine.samples[at]._replace(value=mine.samples[at].value + sample.value)
        yield from families.values()


def exposition(registry: CollectorRegistry, workers: Sequence[bytes] = (), retired: Sequence[bytes] = ()) -> bytes:
    if not workers and not retired:
        return bytes(generate_latest(registry))
    merged = CollectorRegistry(auto_describe=False)
    merged.register(_Merged(registry, workers, retired))
    return bytes(generate_latest(merged))


def retire(total: bytes, last: bytes) -> bytes:
    """``total`` (the summed counters and histograms of the workers that went away) with ``last``, one
    more worker's final figures, added in: one exposition however often workers restart."""
    merged = CollectorRegistry(auto_describe=False)
    merged.register(_Merged(CollectorRegistry(auto_describe=False), (), [e for e in (total, last) if e]))
    return bytes(generate_latest(merged))


def build_app(registry: CollectorRegistry, workers: Gatherer | None = None) -> web.Application:
    async def scrape(request: web.Request) -> web.Response:
        running, retired = await workers() if workers is not None else ([], [])
        response = web.Response(body=exposition(registry, running, retired))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    app = web.Application()
    app.router.add_get(METRICS_PATH, scrape)
    return app


async def start_metrics(
    registry: CollectorRegistry, addr: str, workers: Gatherer | None = None
) -> tuple[web.AppRunner, int]:
    """Serves ``registry`` (with ``workers``' expositions merged in) on ``addr`` (HOST:PORT; port 0 picks
    one): (runner, bound port).

    Raises OSError when the address cannot be bound."""
    host, _, port = addr.rpartition(":")
    runner = web.AppRunner(build_app(registry, workers), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host.strip("[]") or "0.0.0.0", int(port), reuse_address=True)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    sockets: Sequence[Any] = getattr(site._server, "sockets", None) or []
    return runner, int(sockets[0].getsockname()[1]) if sockets else int(port)
