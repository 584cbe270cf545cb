"""The feeder's metrics: OpenTelemetry instruments (exported by whatever MeterProvider the caller set up)
and the same numbers as a plain snapshot (``Feeder.stats``) for logs and tests."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from opentelemetry import metrics

# Seconds: a healthy feeder acknowledges within milliseconds, a stalled one in tens of seconds.
_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


@dataclass(frozen=True)
class FeederStats:
    """Counts since the feeder started, and where podfit stands."""

    events: int = 0
    relists: int = 0
    reconnects: int = 0
    resyncs: int = 0
    refused_updates: int = 0
    skipped_objects: int = 0
    # Lag of the last acknowledged event and the largest seen: its arrival from the watch to podfit's ack.
    last_lag_seconds: float = 0.0
    max_lag_seconds: float = 0.0
    # Wall-clock time (time.time()) of the last watch event received, and of the last acknowledgement.
    last_event_time: float = 0.0
    last_ack_time: float = 0.0
    # The podfit generation that contains everything acknowledged so far, and the server's epoch.
    generation: int = 0
    server_epoch: str = ""
    synced: bool = False
    # Events received and not yet acknowledged, and how long the oldest of those sent has waited.
    pending: int = 0
    behind_seconds: float = 0.0

    def summary(self) -> str:
        return (
            f"generation={self.generation} epoch={self.server_epoch or '-'} synced={self.synced} "
            f"events={self.events} pending={self.pending} lag={self.last_lag_seconds:.3f}s "
            f"max_lag={self.max_lag_seconds:.3f}s behind={self.behind_seconds:.1f}s relists={self.relists} "
            f"reconnects={self.reconnects} resyncs={self.resyncs} refused={self.refused_updates} "
            f"skipped={self.skipped_objects}"
        )


class FeederMetrics:
    """``podfit.feeder.*`` instruments; counters carry a ``kind`` attribute where one applies."""

    def __init__(self, meter_provider: metrics.MeterProvider | None = None) -> None:
        meter = (meter_provider or metrics.get_meter_provider()).get_meter("podfit.feed")
        self._stats = FeederStats()
        self._lag = meter.create_histogram(
            "podfit.feeder.lag_seconds",
            unit="s",
            description="Time from a watch event's arrival to podfit's acknowledgement of it",
            explicit_bucket_boundaries_advisory=list(_LAG_BUCKETS),
        )
        self._events = meter.create_counter("podfit.feeder.events", description="Watch events acknowledged by podfit")
        self._relists = meter.create_counter("podfit.feeder.relists", description="Relists of a kind after 410 Gone")
        self._reconnects = meter.create_counter(
            "podfit.feeder.reconnects", description="Re-watches after a dropped watch, or re-opened podfit streams"
        )
        self._resyncs = meter.create_counter(
            "podfit.feeder.resyncs", description="Full resyncs after podfit restarted (new server epoch)"
        )
        self._refused = meter.create_counter(
            "podfit.feeder.refused_updates", description="Updates podfit refused as invalid (logged, then dropped)"
        )
        self._skipped = meter.create_counter(
            "podfit.feeder.skipped_objects", description="Objects that could not be converted (logged, not sent)"
        )
        meter.create_observable_gauge(
            "podfit.feeder.generation",
            [lambda options: [metrics.Observation(self._stats.generation)]],
            description="The podfit generation containing every acknowledged event",
        )
        meter.create_observable_gauge(
            "podfit.feeder.behind_seconds",
            [lambda options: [metrics.Observation(self.behind_seconds())]],
            unit="s",
            description="Age of the oldest event not yet acknowledged (0 when caught up)",
        )
        self._oldest_pending: float | None = None

    @property
    def stats(self) -> FeederStats:
        return replace(self._stats, behind_seconds=self.behind_seconds())

    def behind_seconds(self) -> float:
        oldest = self._oldest_pending
        return 0.0 if oldest is None else max(0.0, time.monotonic() - oldest)

    def _update(self, **changes: object) -> None:
        self._stats = replace(self._stats, **changes)  # type: ignore[arg-type]

    def received(self, count: int = 1) -> None:
        self._update(last_event_time=time.time(), pending=self._stats.pending + count)

    def pending_since(self, oldest: float | None) -> None:
        self._oldest_pending = oldest

    def acknowledged(self, kind_counts: dict[str, int], lags: list[float], generation: int) -> None:
        for kind, count in kind_counts.items():
            self._events.add(count, {"kind": kind})
        for lag in lags:
            self._lag.record(lag)
        last = lags[-1] if lags else self._stats.last_lag_seconds
        self._update(
            events=self._stats.events + len(lags),
            pending=max(0, self._stats.pending - len(lags)),
            last_lag_seconds=last,
            max_lag_seconds=max([self._stats.max_lag_seconds, *lags]),
            last_ack_time=time.time(),
            generation=max(generation, self._stats.generation) if generation else self._stats.generation,
        )

    def dropped_pending(self, count: int) -> None:
        self._update(pending=max(0, self._stats.pending - count))

    def relisted(self, kind: str) -> None:
        self._relists.add(1, {"kind": kind})
        self._update(relists=self._stats.relists + 1)

    def reconnected(self, kind: str) -> None:
        self._reconnects.add(1, {"kind": kind})
        self._update(reconnects=self._stats.reconnects + 1)

    def resynced(self) -> None:
        self._resyncs.add(1)
        self._update(resyncs=self._stats.resyncs + 1)

    def refused(self, kind: str, count: int = 1) -> None:
        self._refused.add(count, {"kind": kind})
        self._update(refused_updates=self._stats.refused_updates + count)

    def skipped(self, kind: str) -> None:
        self._skipped.add(1, {"kind": kind})
        self._update(skipped_objects=self._stats.skipped_objects + 1)

    def synced(self, generation: int, epoch: str) -> None:
        self._update(synced=True, generation=generation, server_epoch=epoch)

    def unsynced(self) -> None:
        self._update(synced=False)
