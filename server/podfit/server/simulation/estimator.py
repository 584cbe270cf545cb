"""cluster-autoscaler's binpacking estimator over an overlay: how many new nodes of a group pending pods need.

Its behaviour, as cluster-autoscaler's ``BinpackingNodeEstimator`` with the decreasing pod orderer and
the threshold-based limiter:

- equivalence groups are tried in decreasing order of their exemplar's share of the template's cpu
  plus memory (ties keep their order); pods are placed only on new copies of the template, named
  ``<template>-e-<n>``; existing nodes are there for spreading and inter-pod affinity to count;
- a pod first tries the new nodes so far (one PreFilter, then Filter node by node from where the last
  placement left off: the predicate checker's round robin); the first pod of a group that fits none
  of them ends that phase for the group;
- the group's remaining pods then try the newest node, and otherwise a fresh node while the limiter
  allows (at most ``max_new_nodes``; 0 or less allows none). A pod that fits no fresh node ends the
  group, and the node added for it stays, empty; a pod that fails on an empty newest node ends the
  group without adding another;
- nodes left empty are not counted.

Nothing touches the cache: the new nodes and placements live in one overlay, dropped afterwards.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from podfit.server.cache.overlay import Overlay
from podfit.server.cache.snapshot import Snapshot
from podfit.server.engine import Engine
from podfit.server.model import Node, Pod
from podfit.server.model.objects import CPU, MEMORY

HOSTNAME = "kubernetes.io/hostname"


@dataclass
class Estimate:
    node_count: int
    scheduled: list[Pod] = field(default_factory=list)
    unscheduled: list[Pod] = field(default_factory=list)
    # Indexes into the groups given, in the order they were tried; and per group given, how many were placed.
    group_order: list[int] = field(default_factory=list)
    scheduled_per_group: list[int] = field(default_factory=list)
    # The new nodes that received pods, with their pods' keys.
    nodes: dict[str, list[str]] = field(default_factory=dict)


def _share(pod: Pod, template: Node) -> float:
    """The decreasing orderer's score: the exemplar's cpu and memory requests over the template's
    allocatable. (cluster-autoscaler sums the containers alone; the effective requests used here also
    count init containers and overhead.)"""
    score = 0.0
    cpu, memory = template.allocatable.get(CPU, 0), template.allocatable.get(MEMORY, 0)
    if cpu > 0:
        score += float(pod.requests.get(CPU, 0)) / float(cpu)
    if memory > 0:
        score += float(pod.requests.get(MEMORY, 0)) / float(memory)
    return score


class _Placer:
    """The predicate checker over the overlay: PreFilter once per pod, Filter per node, and the round robin
    position that persists across pods."""

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

    def fits_any(self, pod: Pod, order: Sequence[str], first: int) -> str | None:
        """FitsAnyNodeMatching over the new nodes, ``order[first:]`` (the checker's list has the cluster's
        nodes first): the first that fits, going round from where the last placement left off."""
        size = len(order)
        start = self.last_index
        # The new nodes in round-robin order from ``start``.
        candidates = sorted(range(first, size), key=lambda position: (position - start) % size)
        if not candidates:
            return None
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


def estimate(
    engine: Engine,
    snapshot: Snapshot,
    template: Node,
    groups: Sequence[Sequence[Pod]],
    max_new_nodes: int,
    scheduler_name: str = "",
) -> Estimate:
    """New nodes of the template the pending ``groups`` need (see the module docstring)."""
    overlay = Overlay(snapshot)
    placer = _Placer(engine, overlay, scheduler_name)
    order = sorted((i for i, pods in enumerate(groups) if pods), key=lambda i: -_share(groups[i][0], template))
    result = Estimate(node_count=0, group_order=list(order), scheduled_per_group=[0] * len(groups))
    # Node order as the predicate checker lists it: the cluster's nodes, then the new ones as added.
    listed = [info.name for info in snapshot.node_infos]
    existing = len(listed)
    with_pods: dict[str, list[str]] = {}
    last = ""
    added = 0

    def place(pod: Pod, name: str) -> None:
        overlay.bind_pod(dataclasses.replace(pod, node_name=name, nominated_node_name=""))
        with_pods.setdefault(name, []).append(pod.key)
        result.scheduled.append(pod)

    def add_node() -> str:
        nonlocal last, added
        name = f"{template.name}-e-{added}"
        overlay.add_node(dataclasses.replace(template, name=name, uid="", labels={**template.labels, HOSTNAME: name}))
        added += 1
        listed.append(name)
        last = name
        return name

    for group_index in order:
        pods = list(groups[group_index])
        placed_before = len(result.scheduled)
        remaining = pods
        for k, pod in enumerate(pods):
            name = placer.fits_any(pod, listed, existing)
            if name is None:
                remaining = pods[k:]
                break
            place(pod, name)
        else:
            remaining = []
        for pod in remaining:
            if last and placer.fits(pod, last):
                place(pod, last)
                continue
            if last and last not in with_pods:
                break  # it failed on an empty new node: a fresh one would fail too
            if max_new_nodes <= 0 or added >= max_new_nodes:
                break
            name = add_node()
            if not placer.fits(pod, name):
                break  # the node stays, empty
            place(pod, name)
        result.scheduled_per_group[group_index] = len(result.scheduled) - placed_before
    placed = {id(p) for p in result.scheduled}
    result.unscheduled = [p for pods in groups for p in pods if id(p) not in placed]
    result.nodes = with_pods
    result.node_count = len(with_pods)
    return result
