"""Rules several plugins share (upstream's plugins/helper): taints and score arithmetic."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import numpy.typing as npt
from podfit.server.model import Taint, Toleration

TaintFilter = Callable[[Taint], bool]


def do_not_schedule_taints(taint: Taint) -> bool:
    """Taints that keep pods off a node: NoSchedule and NoExecute."""
    return taint.effect in ("NoSchedule", "NoExecute")


def find_untolerated_taint(
    taints: Iterable[Taint], tolerations: Sequence[Toleration], taint_filter: TaintFilter | None = None
) -> Taint | None:
    """The first taint (passing the filter) that no toleration tolerates (v1helper.FindMatchingUntoleratedTaint)."""
    for taint in taints:
        if taint_filter is not None and not taint_filter(taint):
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def default_normalize_score(max_priority: int, reverse: bool, scores: list[int]) -> None:
    """Scales scores in place so the highest becomes max_priority (plugins/helper.DefaultNormalizeScore).

    Integer arithmetic truncates toward zero as Go's does; with reverse, lower raw scores win and an
    all-zero list becomes all max_priority.
    """
    max_count = max((s for s in scores if s > 0), default=0)
    if max_count == 0:
        if reverse:
            scores[:] = [max_priority] * len(scores)
        return
    for i, score in enumerate(scores):
        scaled = go_div(max_priority * score, max_count)
        scores[i] = max_priority - scaled if reverse else scaled


def go_div(a: int, b: int) -> int:
    """Go's integer division: truncates toward zero (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def go_div_rows(a: npt.NDArray[np.int64], b: int) -> npt.NDArray[np.int64]:
    """go_div over an int64 column (numpy's // floors too)."""
    if b > 0 and (a >= 0).all():
        return a // b
    q = np.abs(a) // abs(b)
    return np.where((a >= 0) == (b > 0), q, -q)


def default_normalize_rows(max_priority: int, reverse: bool, scores: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """default_normalize_score over an int64 column, returning a new column."""
    # The largest positive score is the largest score, when that is positive.
    max_count = int(scores.max(initial=0))
    if max_count == 0:
        return np.full(len(scores), max_priority, dtype=np.int64) if reverse else scores.copy()
    scaled = go_div_rows(scores * max_priority, max_count)
    return max_priority - scaled if reverse else scaled
