"""NodeResourcesBalancedAllocation: favours nodes whose resource utilisations stay close to each other
once the pod is placed (100 x (1 - standard deviation of the requested/allocatable fractions)).

Unlike NodeResourcesFit's scoring it uses the real requests (no 100m / 200Mi stand-ins), so a pod that
requests none of the resources is skipped altogether.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from podfit.server.cache.node_info import NodeInfo
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import MAX_NODE_SCORE
from podfit.server.framework.profile import NODE_RESOURCES_BALANCED_ALLOCATION
from podfit.server.framework.status import SKIP, Status
from podfit.server.model import Pod
from podfit.server.plugins.node_resources_fit import (
    DEFAULT_RESOURCES,
    ResourceAllocationScorer,
    check_fields,
    parse_resources,
)

if TYPE_CHECKING:
    from podfit.server.cache.snapshot import Snapshot

_ARGS = "NodeResourcesBalancedAllocationArgs"


def balanced_resource_score(requested: list[int], allocatable: list[int]) -> int:
    """Float arithmetic in upstream's order, truncated toward zero like Go's int64()."""
    fractions: list[float] = []
    total = 0.0
    for req, alloc in zip(requested, allocatable, strict=True):
        if alloc == 0:
            continue
        fraction = min(float(req) / float(alloc), 1.0)
        total += fraction
        fractions.append(fraction)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / len(fractions)
        squares = 0.0
        for fraction in fractions:
            squares = squares + (fraction - mean) * (fraction - mean)
        std = math.sqrt(squares / len(fractions))
    return int((1 - std) * float(MAX_NODE_SCORE))


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    pod_requests: tuple[int, ...]

    def clone(self) -> _PreScoreState:
        return self


class NodeResourcesBalancedAllocation:
    name = NODE_RESOURCES_BALANCED_ALLOCATION

    def __init__(self, scorer: ResourceAllocationScorer) -> None:
        self.scorer = scorer

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], snapshot: Snapshot) -> Status | None:
        requests = self.scorer.pod_requests(pod)
        if not any(requests):
            return SKIP
        state.write(self.name, _PreScoreState(requests))
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        pre = state.get(self.name)
        requests = pre.pod_requests if isinstance(pre, _PreScoreState) else self.scorer.pod_requests(pod)
        if not any(requests):
            return 0
        return self.scorer.score(node_info, requests)


def new(args: Mapping[str, Any]) -> NodeResourcesBalancedAllocation:
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
    return NodeResourcesBalancedAllocation(
        ResourceAllocationScorer(resources, balanced_resource_score, use_requested=True)
    )
