"""OpenTelemetry, wired once: a server interceptor traces, times and logs every RPC, the service records
decision latency and memo use, and observable gauges read the cache. Exporters: none (default), console,
otlp (when the exporter package is installed), or in-memory readers/exporters handed in by tests.

Every Telemetry also feeds a Prometheus reader on a registry of its own (podfit.server.metrics serves it
as /metrics): the reader is pull-only, so it costs nothing until something scrapes it, and a private
registry lets several servers (tests) coexist in one process."""

from __future__ import annotations

import collections
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import grpc
from opentelemetry import metrics, trace
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Status as SpanStatus
from opentelemetry.trace import StatusCode as SpanStatusCode
from podfit.k8s.limits import check_json
from prometheus_client import CollectorRegistry

if TYPE_CHECKING:
    from podfit.server.cache.cluster_cache import ClusterCache

_UNTRACED = ("/grpc.health.v1.Health/", "/grpc.reflection.")
rpc_log = logging.getLogger("podfit.server.rpc")
# Seconds, from a memoised answer (~50 us) to a drain simulation of a large cluster (~10 s); the SDK's
# default boundaries are made for milliseconds and would put every podfit RPC in the first bucket.
LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip


class Telemetry:
    """Tracer and instruments of one server; private providers, so several servers (tests) coexist."""

    def __init__(
        self,
        *,
        span_exporters: Sequence[SpanExporter] = (),
        metric_readers: Sequence[MetricReader] = (),
        batch_spans: bool = True,
        prometheus: bool = True,
    ) -> None:
        resource = Resource.create({"service.name": "podfit"})
        # Off when nothing will scrape it (--metrics-addr off): each reader aggregates every sample,
        # ~20 us per decision.
        self.prometheus_registry = CollectorRegistry() if prometheus else None
        readers = list(metric_readers)
        if self.prometheus_registry is not None:
            readers.append(PrometheusMetricReader(registry=self.prometheus_registry, scope_info_enabled=False))
        self.tracer_provider = TracerProvider(resource=resource)
        for exporter in span_exporters:
            processor = BatchSpanProcessor(exporter) if batch_spans else SimpleSpanProcessor(exporter)
            self.tracer_provider.add_span_processor(processor)
        self.meter_provider = MeterProvider(resource=resource, metric_readers=readers)
        # Without an exporter nobody reads spans: a no-op tracer makes the per-RPC span nearly free
        # (recording spans for nothing cost ~15% of Schedule throughput).
        self.tracer: trace.Tracer = (
            self.tracer_provider.get_tracer("podfit.server") if span_exporters else trace.NoOpTracer()
        )
        meter = self.meter_provider.get_meter("podfit.server")
        self._meter = meter
        self._rpc_duration = meter.create_histogram(
            "podfit.rpc.duration",
            unit="s",
            description="Server-side duration of each RPC, by method and gRPC status code",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        self._decision_duration = meter.create_histogram(
            "podfit.decision.duration",
            unit="s",
            description="Time to compute one scheduling decision, by kind",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        # Counters are plain ints read when metrics are collected: an SDK counter's add() walks every
        # reader's aggregation (~20-40 us), paid on each decision and request; an int costs ~0.1 us.
        self.memo_hits = 0
        self.memo_misses = 0
        self.extender_requests: collections.Counter[tuple[str, int]] = collections.Counter()
        # Unary RPCs being served now (the in-flight gauge; shutdown has its own count, podfit.server.lifecycle).
        self.active_unary_rpcs = 0
        meter.create_observable_counter(
            "podfit.decision.memo_hits",
            [lambda options: [metrics.Observation(self.memo_hits)]],
            description="Decisions answered from the memo",
        )
        meter.create_observable_counter(
            "podfit.decision.memo_misses",
            [lambda options: [metrics.Observation(self.memo_misses)]],
            description="Memoisable decisions the memo did not hold (computed)",
        )
        meter.create_observable_counter(
            "podfit.extender.requests",
            [self._observe_extender_requests],
            description="kube-scheduler extender requests, by verb and HTTP status code",
        )
        meter.create_observable_up_down_counter(
            "podfit.rpc.in_flight",
            [lambda options: [metrics.Observation(self.active_unary_rpcs)]],
            description="Unary RPCs being served",
        )
        self._cache: ClusterCache | None = None

    @classmethod
    def disabled(cls) -> Telemetry:
        return cls(prometheus=False)

    @classmethod
    def from_exporter_name(cls, name: str, interval_seconds: float = 60.0, *, prometheus: bool = True) -> Telemetry:
        """``none``, ``console`` or ``otlp`` (OTEL_EXPORTER_OTLP_* variables configure the endpoint)."""
        if name in ("", "none"):
            return cls(prometheus=prometheus)
        if name == "console":
            reader = PeriodicExportingMetricReader(
                ConsoleMetricExporter(), export_interval_millis=interval_seconds * 1000
            )
            return cls(span_exporters=[ConsoleSpanExporter()], metric_readers=[reader], prometheus=prometheus)
        if name == "otlp":
            try:
                from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
            except ImportError as exc:
                raise ValueError(
                    "telemetry.exporter: 'otlp' needs the 'otlp' extra (pip install 'podfit[otlp]')"
                ) from exc
            reader = PeriodicExportingMetricReader(OTLPMetricExporter(), export_interval_millis=interval_seconds * 1000)
            return cls(span_exporters=[OTLPSpanExporter()], metric_readers=[reader], prometheus=prometheus)
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
            # podfit has no scheduling queue: it knows the unbound pods it was fed. Each is counted once:
            # "gated" (schedulingGates, kube-scheduler's gated queue), else "nominated" (a preemptor with
            # status.nominatedNodeName, waiting for its victims to go), else "unbound".
            pods = cache.pending_pods
            gated = sum(1 for p in pods if p.scheduling_gates)
            nominated = sum(1 for p in pods if p.nominated_node_name and not p.scheduling_gates)
            return [
                metrics.Observation(gated, {"queue": "gated"}),
                metrics.Observation(nominated, {"queue": "nominated"}),
                metrics.Observation(len(pods) - gated - nominated, {"queue": "unbound"}),
            ]

        self._meter.create_observable_gauge("podfit.cache.objects", [objects], description="Cached objects by kind")
        self._meter.create_observable_gauge("podfit.cache.generation", [generation], description="Cache generation")
        self._meter.create_observable_gauge(
            "podfit.scheduler.pending_pods",
            [pending],
            description="Unbound pods in the cache by queue (gated, nominated, unbound)",
        )

    def decision_latency(self, seconds: float, kind: str) -> None:
        self._decision_duration.record(seconds, {"kind": kind})

    def memo_hit(self) -> None:
        self.memo_hits += 1

    def memo_miss(self) -> None:
        self.memo_misses += 1

    def extender_request(self, verb: str, status: int) -> None:
        self.extender_requests[verb, status] += 1

    def _observe_extender_requests(self, options: metrics.CallbackOptions) -> list[metrics.Observation]:
        return [
            metrics.Observation(count, {"verb": verb, "code": str(status)})
            for (verb, status), count in list(self.extender_requests.items())
        ]

    def unary_started(self, delta: int) -> None:
        self.active_unary_rpcs += delta

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


# Pods sent as JSON are named in the request log only up to this size.
_LOGGED_JSON_BYTES = 256 * 1024


def pod_of(request: Any) -> str:
    """namespace/name of the pod a request is about (its ``pod`` PodReference), "" when it names none."""
    reference: Any = getattr(request, "pod", None)
    try:
        source = reference.WhichOneof("source") if reference is not None else None
    except (AttributeError, TypeError, ValueError):
        return ""
    namespace = name = ""
    if source == "pod":
        namespace, name = reference.pod.metadata.namespace, reference.pod.metadata.name
    elif source == "cached":
        namespace, name = reference.cached.namespace, reference.cached.name
    elif source == "kubernetes_json":
        raw = reference.kubernetes_json
        if len(raw) > _LOGGED_JSON_BYTES:
            return ""  # not worth decoding again just to name the pod in a log line
        try:
            check_json(raw)  # hostile input reaches this log line too (it is logged when refused)
            metadata = json.loads(raw).get("metadata") or {}
            namespace, name = str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
        except (ValueError, AttributeError, RecursionError):
            return ""
    return f"{namespace or 'default'}/{name}" if name else ""


def log_rpc(method: str, request: Any, code: str, seconds: float, context: Any) -> None:
    """One line per RPC: DEBUG when it succeeded, INFO when it failed (with the status message sent)."""
    # A role refusal is logged by the token check, once a minute per token name and method: a decider
    # retrying a write must not put a line per call into the log.
    level = logging.DEBUG if code in ("OK", "PERMISSION_DENIED") else logging.INFO
    if not rpc_log.isEnabledFor(level):
        return
    pod = pod_of(request) if request is not None else ""
    details = ""
    if code != "OK" and hasattr(context, "details"):
        details = context.details() or ""
    duration_ms = round(seconds * 1000, 3)
    text = f"rpc {method}" + (f" pod={pod}" if pod else "") + f" code={code} duration_ms={duration_ms}"
    extra = {"method": method, "pod": pod, "code": code, "duration_ms": duration_ms}
    if details:
        text += f": {details}"
        extra["details"] = details
    rpc_log.log(level, text, extra=extra)


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

        def finish(
            span: Any, started: float, context: grpc.aio.ServicerContext, error: BaseException | None, request: Any
        ) -> None:
            seconds = time.perf_counter() - started
            code = context.code() if hasattr(context, "code") else None
            code_name = code.name if isinstance(code, grpc.StatusCode) else ("UNKNOWN" if error else "OK")
            span.set_attribute("rpc.grpc.status_code", code_name)
            if code_name != "OK":
                span.set_status(SpanStatus(SpanStatusCode.ERROR, code_name))
            span.end()
            telemetry.rpc_finished(name, code_name, seconds)
            log_rpc(method, request, code_name, seconds, context)

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
                    finish(span, started, context, error, request)

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
                    finish(span, started, context, error, None)

            return grpc.stream_stream_rpc_method_handler(
                stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler
