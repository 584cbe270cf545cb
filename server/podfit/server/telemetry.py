"""OpenTelemetry, wired once: a server interceptor traces and times every RPC, the service records
decision latency, and observable gauges read the cache. Exporters: none (default), console, otlp
(when the exporter package is installed), or in-memory readers/exporters handed in by tests."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import grpc
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Status as SpanStatus
from opentelemetry.trace import StatusCode as SpanStatusCode

if TYPE_CHECKING:
    from podfit.server.cache.cluster_cache import ClusterCache

_UNTRACED = ("/grpc.health.v1.Health/", "/grpc.reflection.")


class Telemetry:
    """Tracer and instruments of one server; private providers, so several servers (tests) coexist."""

    def __init__(
        self,
        *,
        span_exporters: Sequence[SpanExporter] = (),
        metric_readers: Sequence[MetricReader] = (),
        batch_spans: bool = True,
    ) -> None:
        resource = Resource.create({"service.name": "podfit"})
        self.tracer_provider = TracerProvider(resource=resource)
        for exporter in span_exporters:
            processor = BatchSpanProcessor(exporter) if batch_spans else SimpleSpanProcessor(exporter)
            self.tracer_provider.add_span_processor(processor)
        self.meter_provider = MeterProvider(resource=resource, metric_readers=list(metric_readers))
        # Without an exporter nobody reads spans: a no-op tracer makes the per-RPC span nearly free
        # (recording spans for nothing cost ~15% of Schedule throughput).
        self.tracer: trace.Tracer = (
            self.tracer_provider.get_tracer("podfit.server") if span_exporters else trace.NoOpTracer()
        )
        meter = self.meter_provider.get_meter("podfit.server")
        self._meter = meter
        self._rpc_duration = meter.create_histogram(
            "podfit.rpc.duration", unit="s", description="Server-side duration of each RPC"
        )
        self._decision_duration = meter.create_histogram(
            "podfit.decision.duration", unit="s", description="Time to compute one scheduling decision"
        )
        self._memo_hits = meter.create_counter(
            "podfit.decision.memo_hits", description="Decisions answered from the memo"
        )
        self._in_flight = meter.create_up_down_counter("podfit.rpc.in_flight", description="Unary RPCs being served")
        # Unary RPCs being served now (the in-flight gauge; shutdown has its own count, podfit.server.lifecycle).
        self.active_unary_rpcs = 0
        self._cache: ClusterCache | None = None

    @classmethod
    def disabled(cls) -> Telemetry:
        return cls()

    @classmethod
    def from_exporter_name(cls, name: str, interval_seconds: float = 60.0) -> Telemetry:
        """``none``, ``console`` or ``otlp`` (OTEL_EXPORTER_OTLP_* variables configure the endpoint)."""
        if name in ("", "none"):
            return cls()
        if name == "console":
            reader = PeriodicExportingMetricReader(
                ConsoleMetricExporter(), export_interval_millis=interval_seconds * 1000
            )
            return cls(span_exporters=[ConsoleSpanExporter()], metric_readers=[reader])
        if name == "otlp":
            try:
                from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
            except ImportError as exc:
                raise ValueError(
                    "telemetry.exporter: 'otlp' needs the 'otlp' extra (pip install 'podfit[otlp]')"
                ) from exc
            reader = PeriodicExportingMetricReader(OTLPMetricExporter(), export_interval_millis=interval_seconds * 1000)
            return cls(span_exporters=[OTLPSpanExporter()], metric_readers=[reader])
        raise ValueError(f"telemetry.exporter: {name!r} must be none, console or otlp")

    def observe_cache(self, cache: ClusterCache) -> None:
        """Registers gauges that read the cache when metrics are collected (no work per update)."""
        if self._cache is not None:
            return
        self._cache = cache
        from podfit.server.model import Kind

        def objects(options: metrics.CallbackOptions) -> list[metrics.Observation]:
            return [metrics.Observation(cache.count(kind), {"kind": kind.value}) for kind in Kind]

        def generation(options: metrics.CallbackOptions) -> list[metrics.Observation]:
            return [metrics.Observation(cache.generation)]

        def pending(options: metrics.CallbackOptions) -> list[metrics.Observation]:
            pods = cache.pending_pods
            gated = sum(1 for p in pods if p.scheduling_gates)
            return [
                metrics.Observation(gated, {"queue": "gated"}),
                metrics.Observation(len(pods) - gated, {"queue": "active"}),
            ]

        self._meter.create_observable_gauge("podfit.cache.objects", [objects], description="Cached objects by kind")
        self._meter.create_observable_gauge("podfit.cache.generation", [generation], description="Cache generation")
        self._meter.create_observable_gauge(
            "podfit.scheduler.pending_pods",
            [pending],
            description="Pending pods by queue, like kube-scheduler's scheduler_pending_pods",
        )

    def decision_latency(self, seconds: float, operation: str) -> None:
        self._decision_duration.record(seconds, {"operation": operation})

    def memo_hit(self) -> None:
        self._memo_hits.add(1)

    def unary_started(self, delta: int) -> None:
        self.active_unary_rpcs += delta
        self._in_flight.add(delta)

    def rpc_finished(self, method: str, code: str, seconds: float) -> None:
        self._rpc_duration.record(seconds, {"rpc.method": method, "rpc.grpc.status_code": code})

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def annotate(**attributes: Any) -> None:
    """Adds attributes (pod, node counts, outcome) to the current RPC's span."""
    span = trace.get_current_span()
    if span.is_recording():
        for key, value in attributes.items():
            span.set_attribute(f"podfit.{key}", value)


class TelemetryInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """A span and a duration sample per RPC; health and reflection calls are left out."""

    def __init__(self, telemetry: Telemetry) -> None:
        self._telemetry = telemetry

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(_UNTRACED):
            return handler
        telemetry = self._telemetry
        service, _, name = method.lstrip("/").partition("/")

        def start() -> tuple[Any, float]:
            span = telemetry.tracer.start_span(
                method.lstrip("/"),
                kind=trace.SpanKind.SERVER,
                attributes={"rpc.system": "grpc", "rpc.service": service, "rpc.method": name},
            )
            return span, time.perf_counter()

        def finish(span: Any, started: float, context: grpc.aio.ServicerContext, error: BaseException | None) -> None:
            code = context.code() if hasattr(context, "code") else None
            code_name = code.name if isinstance(code, grpc.StatusCode) else ("UNKNOWN" if error else "OK")
            span.set_attribute("rpc.grpc.status_code", code_name)
            if code_name != "OK":
                span.set_status(SpanStatus(SpanStatusCode.ERROR, code_name))
            span.end()
            telemetry.rpc_finished(name, code_name, time.perf_counter() - started)

        if handler.unary_unary:
            inner = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                span, started = start()
                telemetry.unary_started(1)
                error: BaseException | None = None
                try:
                    with trace.use_span(span, end_on_exit=False):
                        return await inner(request, context)
                except BaseException as exc:
                    error = exc
                    raise
                finally:
                    telemetry.unary_started(-1)
                    finish(span, started, context, error)

            return grpc.unary_unary_rpc_method_handler(
                unary,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_stream:
            inner_stream = handler.stream_stream

            async def stream(request_iterator: Any, context: grpc.aio.ServicerContext) -> Any:
                span, started = start()
                error: BaseException | None = None
                try:
                    with trace.use_span(span, end_on_exit=False):
                        async for response in inner_stream(request_iterator, context):
                            yield response
                except BaseException as exc:
                    error = exc
                    raise
                finally:
                    finish(span, started, context, error)

            return grpc.stream_stream_rpc_method_handler(
                stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler
