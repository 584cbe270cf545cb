"""Choosing among cluster-autoscaler's scale-up options (its gRPC expander) with podfit's simulation.

Each option says: add ``node_count`` nodes to a node group and these pods will run. podfit checks the
claim on a fork of the snapshot: the option's pods are placed on ``node_count`` fresh copies of the
group's template exactly as cluster-autoscaler's binpacking estimator places them (``estimate``: its
group order, only new nodes as destinations, existing pods counted by spreading and inter-pod
affinity, every scheduling rule of the profile). The best options are then, in this order:

1. the most pods placed (an option whose template cannot take its pods is worth less than it claims);
2. the least waste: the new nodes' unrequested share of CPU plus their unrequested share of memory,
   cluster-autoscaler's least-waste score (over all ``node_count`` nodes the option would add);
3. the fewest new nodes.

Every option tied on all three is returned, in request order, so that the autoscaler's next expander
(or its random choice) breaks the tie as it would without podfit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from podfit.server.budget import check_deadline
from podfit.server.cache.snapshot import Snapshot
from podfit.server.engine import Engine
from podfit.server.model import Node, Pod
from podfit.server.model.objects import CPU, MEMORY
from podfit.server.simulation.estimator import estimate
from podfit.server.simulation.templates import NodeTemplate, template_of


@dataclass(frozen=True)
class ExpansionOption:
    node_group_id: str
    node_count: int
    pods: Sequence[Pod]
    # The group's template node, with the ResourceSlices of one such node when it has devices.
    template: Node | NodeTemplate


@dataclass(frozen=True, order=True)
class OptionScore:
    """Smaller is better: (pods not placed, waste, nodes added)."""

    unplaced: int
    waste: float
    node_count: int


def _waste(template: Node, node_count: int, placed: Sequence[Pod]) -> float:
    waste = 0.0
    for resource in (CPU, MEMORY):
        total = template.allocatable.get(resource, 0) * node_count
        if total > 0:
            requested = sum(pod.requests.get(resource, 0) for pod in placed)
            waste += max(0.0, 1.0 - requested / total)
    return waste


def score_option(engine: Engine, snapshot: Snapshot, option: ExpansionOption, scheduler_name: str = "") -> OptionScore:
    """The option's pods on its new nodes (see the module docstring), as a score."""
    count = max(option.node_count, 0)
    result = estimate(engine, snapshot, option.template, [[pod] for pod in option.pods], count, scheduler_name)
    node = template_of(option.template).node
    return OptionScore(len(result.unscheduled), _waste(node, count, result.scheduled), count)


def best_options(
    engine: Engine, snapshot: Snapshot, options: Sequence[ExpansionOption], scheduler_name: str = ""
) -> tuple[list[int], list[OptionScore]]:
    """The indexes of the best options (ties in request order), and every option's score."""
    scores = []
    for option in options:
        check_deadline()
        scores.append(score_option(engine, snapshot, option, scheduler_name))
    if not scores:
        return [], scores
    best = min(scores)
    return [i for i, score in enumerate(scores) if score == best], scores
