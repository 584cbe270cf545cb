"""cluster-autoscaler's scheduler-based predicate checker over an overlay.

cluster-autoscaler does not score: it asks whether a pod fits, node by node, and takes the first node
that does, starting where its last successful search stopped (a round robin that spreads placements).
Both its binpacking estimator and its node-removal simulation place pods this way, so both use this.
"""

from __future__ import annotations

from collections.abc import Sequence

from podfit.server.cache.overlay import Overlay
from podfit.server.engine import Engine
from podfit.server.model import Pod


class PredicateChecker:
    """PreFilter once per pod, Filter per node, and the round-robin position that persists across pods."""

    def __init__(self, engine: Engine, overlay: Overlay, scheduler_name: str) -> None:
        self.engine = engine
        self.overlay = overlay
        self.scheduler_name = scheduler_name
        self.last_index = 0

    def _fits(self, pod: Pod, names: Sequence[str]) -> dict[str, bool] | None:
        """Filter verdicts of the named nodes, or None when PreFilter rejects the pod."""
        decision, _, outcome = self.engine.decide(
            pod, list(names), self.scheduler_name, score=False, snapshot=self.overlay.snapshot()
        )
        if outcome is None or outcome.pre_filter_status is not None or decision.gated:
            return None
        return {name: status is None for name, status in outcome.statuses.items()}

    def fits_any(self, pod: Pod, order: Sequence[str], positions: Sequence[int]) -> str | None:
        """FitsAnyNodeMatching: ``order`` is every node as the checker lists them, ``positions`` the ones
        the pod may go to. The first that fits, going round from where the last placement left off."""
        size = len(order)
        if not positions:
            return None
        start = self.last_index
        candidates = sorted(positions, key=lambda position: (position - start) % size)
        verdicts = self._fits(pod, [order[position] for position in candidates])
        if verdicts is None:
            return None
        for position in candidates:
            name = order[position]
            info = self.overlay.node(name)
            if info is None or info.node.unschedulable:
                continue
            if verdicts.get(name):
                self.last_index = (position + 1) % size
                return name
        return None

    def fits(self, pod: Pod, name: str) -> bool:
        verdicts = self._fits(pod, [name])
        return bool(verdicts and verdicts.get(name))
