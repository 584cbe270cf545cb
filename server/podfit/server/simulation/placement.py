"""cluster-autoscaler's scheduler-based predicate checker over an overlay.

cluster-autoscaler does not score: it asks whether a pod fits, node by node, and takes the first node
that does, starting where its last successful search stopped (a round robin that spreads placements).
Both its binpacking estimator and its node-removal simulation place pods this way, so both use this.

Filter verdicts are per node and PreFilter never depends on which nodes are candidates, so the nodes
are filtered in round-robin order a chunk at a time and the search stops at the first chunk holding a
fit: on a large cluster with room, a placement filters a few dozen nodes, not all of them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from podfit.server.budget import check_deadline
from podfit.server.cache.overlay import Overlay
from podfit.server.cache.snapshot import Snapshot
from podfit.server.engine import Engine
from podfit.server.framework.interfaces import IntpArray
from podfit.server.model import Pod

FIRST_CHUNK = 64


class PredicateChecker:
    """PreFilter and Filter per pod, and the round-robin position that persists across pods."""

    def __init__(self, engine: Engine, overlay: Overlay, scheduler_name: str) -> None:
        self.engine = engine
        self.overlay = overlay
        self.scheduler_name = scheduler_name
        self.last_index = 0

    def _first_fit(self, pod: Pod, snapshot: Snapshot, positions: IntpArray) -> int | None:
        """The index in ``positions`` (snapshot positions, in the order to try) of the first schedulable
        node the pod fits, or None (also when PreFilter rejects the pod or it is gated)."""
        start, chunk = 0, FIRST_CHUNK
        while start < len(positions):
            check_deadline()
            part = positions[start : start + chunk]
            decision, _, outcome = self.engine.decide(
                pod, (), self.scheduler_name, score=False, snapshot=snapshot, positions=part
            )
            if outcome is None or outcome.pre_filter_status is not None or decision.gated:
                return None
            fits = np.flatnonzero((outcome.codes == 0) & ~snapshot.table.unschedulable[outcome.rows])
            if len(fits):
                return start + int(fits[0])
            start += len(part)
            chunk = len(positions)
        return None

    def fits_any(self, pod: Pod, order: Sequence[str], positions: Sequence[int]) -> str | None:
        """FitsAnyNodeMatching: ``order`` is every node as the checker lists them, ``positions`` (indexes
        into it) the ones the pod may go to. The first that fits, going round from where the last
        placement left off."""
        if not positions:
            return None
        size, start = len(order), self.last_index
        candidates = sorted(positions, key=lambda position: (position - start) % size)
        snapshot = self.overlay.snapshot()
        hit = self._first_fit(pod, snapshot, _positions(snapshot, [order[c] for c in candidates]))
        if hit is None:
            return None
        self.last_index = (candidates[hit] + 1) % size
        return order[candidates[hit]]

    def fits_any_position(self, pod: Pod, positions: IntpArray) -> str | None:
        """FitsAnyNodeMatching when the checker lists the nodes in the snapshot's own name order:
        ``positions`` (sorted) are the candidates' places in it. Spares the name lookups of ``fits_any``."""
        if not len(positions):
            return None
        snapshot = self.overlay.snapshot()
        split = int(np.searchsorted(positions, self.last_index))
        rotated = np.concatenate((positions[split:], positions[:split]))
        hit = self._first_fit(pod, snapshot, rotated)
        if hit is None:
            return None
        position = int(rotated[hit])
        self.last_index = (position + 1) % len(snapshot.names)
        return str(snapshot.names[position])

    def fits(self, pod: Pod, name: str) -> bool:
        snapshot = self.overlay.snapshot()
        return self._first_fit(pod, snapshot, _positions(snapshot, [name])) == 0


def _positions(snapshot: Snapshot, names: Sequence[str]) -> IntpArray:
    """The named nodes' positions in the snapshot's (sorted) name order, by binary search: an overlay that
    adds nodes one at a time would otherwise build a name -> position dict per snapshot."""
    return np.searchsorted(snapshot.names, np.array(names, dtype=object)).astype(np.intp)
