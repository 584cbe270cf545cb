"""TaintToleration: NoSchedule/NoExecute taints the pod does not tolerate keep it off a node; untolerated
PreferNoSchedule taints lower the node's score."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import MAX_NODE_SCORE, Int32Array, Int64Array, IntpArray
from podfit.server.framework.profile import TAINT_TOLERATION
from podfit.server.framework.status import Status, unresolvable
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import Pod, Taint, Toleration
from podfit.server.plugins.helper import (
    default_normalize_rows,
    do_not_schedule_taints,
    find_untolerated_taint,
)

if TYPE_CHECKING:
    from podfit.server.cache.node_table import NodeTable
    from podfit.server.cache.snapshot import Snapshot

REASON_UNTOLERATED = "node(s) had untolerated taint(s)"
_PRE_SCORE_KEY = "PreScore" + TAINT_TOLERATION
_REJECTED = unresolvable(REASON_UNTOLERATED)
# Up to this many interned taint lists, evaluating every one beats finding the distinct ones among the rows.
_EVALUATE_ALL_TAINT_SETS = 32

D = TypeVar("D", bound=np.generic)


def _per_taint_set(
    table: NodeTable, rows: IntpArray, dtype: type[D], verdict: Callable[[tuple[Taint, ...]], int]
) -> npt.NDArray[D]:
    """``verdict`` of each row's taint list, computed once per distinct list and broadcast to the rows."""
    sets = table.taint_set.take(rows)
    if len(table.taint_sets) <= _EVALUATE_ALL_TAINT_SETS:
        return np.array([verdict(taints) for taints in table.taint_sets], dtype=dtype).take(sets)
    distinct, inverse = np.unique(sets, return_inverse=True)
    return np.array([verdict(table.taint_sets[i]) for i in distinct.tolist()], dtype=dtype).take(inverse)


def _untolerated_prefer_no_schedule(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    count = 0
    for taint in taints:
        if taint.effect == "PreferNoSchedule" and not any(t.tolerates(taint) for t in tolerations):
            count += 1
    return count


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    # Only tolerations that can tolerate a PreferNoSchedule taint (that effect, or any effect).
    tolerations: tuple[Toleration, ...]

    def clone(self) -> _PreScoreState:
        return self


def _prefer_no_schedule_tolerations(pod: Pod) -> tuple[Toleration, ...]:
    return tuple(t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule"))


class TaintToleration:
    # Filter and Score of a row read only that row: results survive until the row's generation moves.
    row_local = True
    # ...and only its Node: pods coming and going leave them standing.
    reads_pods = False
    name = TAINT_TOLERATION

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        tolerations = pod.tolerations

        def rejects(taints: tuple[Taint, ...]) -> int:
            return find_untolerated_taint(taints, tolerations, do_not_schedule_taints) is not None

        return _per_taint_set(table, rows, np.int32, rejects), [_REJECTED]

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: IntpArray) -> Status | None:
        # Never skips: every feasible node gets a score, even when no node has a PreferNoSchedule taint.
        state.write(_PRE_SCORE_KEY, _PreScoreState(_prefer_no_schedule_tolerations(pod)))
        return None

    def score_rows(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray) -> Int64Array:
        tolerations = _score_tolerations(state, pod)

        def count(taints: tuple[Taint, ...]) -> int:
            return _untolerated_prefer_no_schedule(taints, tolerations)

        return _per_taint_set(table, rows, np.int64, count)

    def normalize_rows(self, state: CycleState, pod: Pod, scores: Int64Array) -> Int64Array:
        return default_normalize_rows(MAX_NODE_SCORE, True, scores)


def _score_tolerations(state: CycleState, pod: Pod) -> tuple[Toleration, ...]:
    pre = state.get(_PRE_SCORE_KEY)
    return pre.tolerations if isinstance(pre, _PreScoreState) else _prefer_no_schedule_tolerations(pod)


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> TaintToleration:
    return TaintToleration()
