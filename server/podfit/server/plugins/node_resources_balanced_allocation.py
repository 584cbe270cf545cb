"""NodeResourcesBalancedAllocation: favours nodes whose resource utilisations stay close to each other.

The balance of a node is 100 x (1 - standard deviation of the requested/allocatable fractions). Up to
v1.35 the score is the balance with the pod placed; from v1.37 (``balanced_allocation_scores_change``)
it is how much the pod changes it: 50 + (50 + with - without) / 2, 75 for no change, towards 100 as the
pod improves the balance and towards 50 as it worsens it.

Unlike NodeResourcesFit's scoring it uses the real requests (no 100m / 200Mi stand-ins), so a pod that
requests none of the resources is skipped altogether.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import MAX_NODE_SCORE, Int64Array, IntpArray
from podfit.server.framework.profile import NODE_RESOURCES_BALANCED_ALLOCATION
from podfit.server.framework.status import SKIP, Status
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import Pod
from podfit.server.plugins.node_resources_fit import (
    DEFAULT_RESOURCES,
    ResourceAllocationScorer,
    ResourceRows,
    check_fields,
    parse_resources,
)

if TYPE_CHECKING:
    from podfit.server.cache.node_table import NodeTable
    from podfit.server.cache.snapshot import Snapshot

FloatArray = npt.NDArray[np.float64]

_ARGS = "NodeResourcesBalancedAllocationArgs"


def balanced_resource_score_rows(inputs: Sequence[ResourceRows], n: int) -> Int64Array:
    """Upstream's balancedResourceScorer over rows: float arithmetic in upstream's order, truncated toward
    zero like Go's int64().

    A resource a row skips (allocatable 0) adds an exact 0.0 to that row's running sums, which leaves
    them unchanged, so the sums keep upstream's order. Rows differ in how many resources count, and
    the count picks the formula.
    """
    fractions: list[FloatArray] = []
    for resource in inputs:
        # int64 -> float64 rounds like Python's float(int), and a uniform allocatable divides as the
        # same float64; rows not counting divide by 1 and are masked below.
        if resource.uniform is not None:
            divisor: FloatArray | float = float(max(resource.uniform, 1))
        else:
            divisor = np.maximum(resource.allocatable, 1).astype(np.float64)
        # Python-int rows (huge amounts) divide as float(int) / float, like float64 rows.
        fractions.append(np.minimum(resource.requested / divisor, 1.0).astype(np.float64))
    std = np.zeros(n, dtype=np.float64)
    if all(resource.counts_everywhere for resource in inputs):
        if len(fractions) == 2:
            std = np.abs((fractions[0] - fractions[1]) / 2)
        elif len(fractions) > 2:
            std = _spread(fractions, None, float(len(fractions)))
        return _to_score(std)
    counted = [resource.allocatable > 0 for resource in inputs]
    count = np.sum(counted, axis=0, dtype=np.int64)
    # Some rows skip some resources: the first two counted fractions (for rows counting exactly two).
    first = np.zeros(n, dtype=np.float64)
    second = np.zeros(n, dtype=np.float64)
    seen = np.zeros(n, dtype=np.int64)
    for fraction, counts in zip(fractions, counted, strict=True):
        first = np.where(counts & (seen == 0), fraction, first)
        second = np.where(counts & (seen == 1), fraction, second)
        seen += counts
    two = np.abs((first - second) / 2)
    many = _spread(fractions, counted, np.maximum(count, 1).astype(np.float64))
    std = np.where(count == 2, two, np.where(count > 2, many, 0.0))
    return _to_score(std)


def balance_change_score_rows(inputs: Sequence[ResourceRows], n: int) -> Int64Array:
    """Upstream v1.37's balancedResourceScorer: the balance with the pod against the balance without it,
    over the same resources (a scalar the pod does not request counts in neither)."""
    with_pod = balanced_resource_score_rows(inputs, n)
    without_pod = balanced_resource_score_rows([r._replace(requested=r.allocated) for r in inputs], n)
    half = MAX_NODE_SCORE // 2
    # The dividend is in [0, 100]: floor division is Go's truncation.
    return half + (half + with_pod - without_pod) // 2


def _spread(
    fractions: Sequence[FloatArray], counted: Sequence[npt.NDArray[np.bool_]] | None, count: FloatArray | float
) -> FloatArray:
    """The population standard deviation, summing in resource order as upstream's loop does."""
    total: FloatArray | float = 0.0
    for i, fraction in enumerate(fractions):
        total = total + (fraction if counted is None else np.where(counted[i], fraction, 0.0))
    mean = total / count
    squares: FloatArray | float = 0.0
    for i, fraction in enumerate(fractions):
        square = (fraction - mean) * (fraction - mean)
        squares = squares + (square if counted is None else np.where(counted[i], square, 0.0))
    return np.sqrt(np.asarray(squares / count, dtype=np.float64))


def _to_score(std: FloatArray) -> Int64Array:
    """int((1 - std) * 100.0): float64 to int64 truncates toward zero, like Go's int64()."""
    return ((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    pod_requests: tuple[int, ...]

    def clone(self) -> _PreScoreState:
        return self


class NodeResourcesBalancedAllocation:
    # Filter and Score of a row read only that row: results survive until the row's generation moves.
    row_local = True
    name = NODE_RESOURCES_BALANCED_ALLOCATION

    def __init__(self, scorer: ResourceAllocationScorer) -> None:
        self.scorer = scorer

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: IntpArray) -> Status | None:
        requests = self.scorer.pod_requests(pod)
        if not any(requests):
            return SKIP
        state.write(self.name, _PreScoreState(requests))
        return None

    def _pod_requests(self, state: CycleState, pod: Pod) -> tuple[int, ...]:
        pre = state.get(self.name)
        return pre.pod_requests if isinstance(pre, _PreScoreState) else self.scorer.pod_requests(pod)

    def score_rows(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray) -> Int64Array:
        requests = self._pod_requests(state, pod)
        if not any(requests):
            return np.zeros(len(rows), dtype=np.int64)
        return self.scorer.score_rows(table, rows, requests)


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> NodeResourcesBalancedAllocation:
    check_fields(args, _ARGS, ("resources",))
    path = f"{_ARGS}.resources"
    resources = parse_resources(args.get("resources"), path) or list(DEFAULT_RESOURCES)
    seen: set[str] = set()
    for i, spec in enumerate(resources):
        if spec.name in seen:
            raise ValueError(f'{path}[{i}].name: Duplicate value: "{spec.name}"')
        seen.add(spec.name)
        if spec.weight != 1:
            raise ValueError(f"{path}[{i}].weight: Invalid value: {spec.weight}: must be 1")
    scorer = balance_change_score_rows if features.balanced_allocation_scores_change else balanced_resource_score_rows
    return NodeResourcesBalancedAllocation(ResourceAllocationScorer(resources, use_requested=True, row_scorer=scorer))
