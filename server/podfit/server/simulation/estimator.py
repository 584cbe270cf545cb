"""cluster-autoscaler's binpacking estimator over an overlay: how many new nodes of a group pending pods need.

Its behaviour, as cluster-autoscaler's ``BinpackingNodeEstimator`` with the decreasing pod orderer and
the threshold-based limiter:

- equivalence groups are tried in decreasing order of their exemplar's share of the template's cpu
  plus memory (ties keep their order); pods are placed only on new copies of the template, named
  ``<template>-e-<n>`` (each with its own copies of the template's ResourceSlices, and each placement
  reserving the pod's claims: simulation/templates.py); existing nodes are there for spreading and
  inter-pod affinity to count;
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

from collections.abc import Sequence
from dataclasses import dataclass, field

from podfit.server.budget import check_deadline
from podfit.server.cache.overlay import Overlay
from podfit.server.cache.snapshot import Snapshot
from podfit.server.engine import Engine
from podfit.server.model import Node, Pod
from podfit.server.model.objects import CPU, MEMORY
from podfit.server.simulation.placement import PredicateChecker
from podfit.server.simulation.templates import NodeTemplate, place, template_of


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


def estimate(
    engine: Engine,
    snapshot: Snapshot,
    template: Node | NodeTemplate,
    groups: Sequence[Sequence[Pod]],
    max_new_nodes: int,
    scheduler_name: str = "",
) -> Estimate:
    """New nodes of the template (and its ResourceSlices, copied onto each) the pending ``groups`` need
    (see the module docstring)."""
    model = template_of(template)
    template = model.node
    overlay = Overlay(snapshot)
    placer = PredicateChecker(engine, overlay, scheduler_name)
    order = sorted((i for i, pods in enumerate(groups) if pods), key=lambda i: -_share(groups[i][0], template))
    result = Estimate(node_count=0, group_order=list(order), scheduled_per_group=[0] * len(groups))
    # Node order as the predicate checker lists it: the cluster's nodes, then the new ones as added.
    listed = [info.name for info in snapshot.node_infos]
    existing = len(listed)
    with_pods: dict[str, list[str]] = {}
    last = ""
    added = 0

    def put(pod: Pod, name: str) -> None:
        place(engine, overlay, pod, name, scheduler_name)
        with_pods.setdefault(name, []).append(pod.key)
        result.scheduled.append(pod)

    def add_node() -> str:
        nonlocal last, added
        name = model.add_copy(overlay, f"e-{added}").name
        added += 1
        listed.append(name)
        last = name
        return name

    for group_index in order:
        pods = list(groups[group_index])
        placed_before = len(result.scheduled)
        remaining = pods
        for k, pod in enumerate(pods):
            check_deadline()
            name = placer.fits_any(pod, listed, range(existing, len(listed)))
            if name is None:
                remaining = pods[k:]
                break
            put(pod, name)
        else:
            remaining = []
        for pod in remaining:
            check_deadline()
            if last and placer.fits(pod, last):
                put(pod, last)
                continue
            if last and last not in with_pods:
                break  # it failed on an empty new node: a fresh one would fail too
            if max_new_nodes <= 0 or added >= max_new_nodes:
                break
            name = add_node()
            if not placer.fits(pod, name):
                break  # the node stays, empty
            put(pod, name)
        result.scheduled_per_group[group_index] = len(result.scheduled) - placed_before
    placed = {id(p) for p in result.scheduled}
    result.unscheduled = [p for pods in groups for p in pods if id(p) not in placed]
    result.nodes = with_pods
    result.node_count = len(with_pods)
    return result
