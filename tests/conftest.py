"""Shared fixtures: a real podfit server on a loopback port with in-memory telemetry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from podfit.client import AsyncClient
from podfit.server.app import RunningServer, create_server
from podfit.server.settings import Settings
from podfit.server.telemetry import Telemetry


@dataclass
class LiveServer:
    running: RunningServer
    client: AsyncClient
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.running.port}"

    @property
    def extender_url(self) -> str:
        return f"http://127.0.0.1:{self.running.extender_port}/scheduler"


async def start_live_server(settings: Settings | None = None, **client_options: object) -> LiveServer:
    spans = InMemorySpanExporter()
    metrics = InMemoryMetricReader()
    telemetry = Telemetry(span_exporters=[spans], metric_readers=[metrics], batch_spans=False)
    running = await create_server(
        settings or Settings(), addr="127.0.0.1:0", extender_addr="127.0.0.1:0", telemetry=telemetry
    )
    client = AsyncClient(f"127.0.0.1:{running.port}", **client_options)  # type: ignore[arg-type]
    return LiveServer(running, client, spans, metrics)


@pytest.fixture
async def live() -> AsyncIterator[LiveServer]:
    server = await start_live_server()
    yield server
    await server.client.close()
    await server.running.stop(0)
