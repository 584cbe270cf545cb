"""Scenarios: a what-if change of the cluster on an overlay, then pods placed one after another in it.

Answers "if I add three nodes of group A and cordon node X, where do these pods go?" without touching
the cache: the overlay is forked from one snapshot and dropped with the answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from podfit.server.budget import check_deadline
from podfit.server.cache.overlay import Overlay, OverlayError
from podfit.server.cache.snapshot import Snapshot
from podfit.server.engine import Decision, Engine
from podfit.server.model import Node, Pod, Taint, ValidationError
from podfit.server.model.objects import CPU, MEMORY, PODS
from podfit.server.simulation.templates import NodeTemplate, place, template_of


@dataclass(frozen=True)
class Scenario:
    """The changes, applied in field order; each names what it changes so errors can point at it."""

    remove_nodes: Sequence[str] = ()
    # (template, count): copies named "<template>-sim-<i>", i counting across all templates, each with its
    # own copies of the template's ResourceSlices (suffix "sim-<i>": see simulation/templates.py).
    add_nodes: Sequence[tuple[Node | NodeTemplate, int]] = ()
    cordon_nodes: Sequence[str] = ()
    taint_nodes: Sequence[tuple[str, Taint]] = ()
    # (namespace, name) of bound pods.
    remove_pods: Sequence[tuple[str, str]] = ()
    # Bound pods (node_name set).
    add_pods: Sequence[Pod] = ()


@dataclass
class Placement:
    pod: Pod
    node_name: str
    # The decision, kept when no node fits (its verdicts say why).
    decision: Decision | None = None
    message: str = ""


@dataclass
class Utilisation:
    node_name: str
    pods: list[str]
    cpu: float
    memory: float
    pods_fraction: float


@dataclass
class SimulationResult:
    base_generation: int
    placements: list[Placement] = field(default_factory=list)
    hypothetical_nodes: list[Utilisation] = field(default_factory=list)


def _apply(overlay: Overlay, scenario: Scenario) -> list[str]:
    """Applies the scenario; returns the hypothetical nodes' names. Errors carry the scenario's field path."""

    def at(path: str, change: Callable[[], object]) -> None:
        try:
            change()
        except OverlayError as exc:
            raise ValidationError(path, str(exc)) from None

    for i, name in enumerate(scenario.remove_nodes):
        at(f"scenario.remove_nodes[{i}]", partial(overlay.remove_node, name))
    added: list[str] = []
    for i, (given, count) in enumerate(scenario.add_nodes):
        if count < 0:
            raise ValidationError(f"scenario.add_nodes[{i}].count", "must not be negative")
        template = template_of(given)
        for _ in range(count):
            check_deadline()
            suffix = f"sim-{len(added)}"
            at(f"scenario.add_nodes[{i}]", partial(template.add_copy, overlay, suffix))
            added.append(f"{template.name}-{suffix}")
    for i, name in enumerate(scenario.cordon_nodes):
        info = overlay.node(name)
        if info is None:
            raise ValidationError(f"scenario.cordon_nodes[{i}]", f"node {name!r} is not in the cluster")
        overlay.update_node(dataclasses.replace(info.node, unschedulable=True))
    for i, (name, taint) in enumerate(scenario.taint_nodes):
        info = overlay.node(name)
        if info is None:
            raise ValidationError(f"scenario.taint_nodes[{i}].node_name", f"node {name!r} is not in the cluster")
        overlay.update_node(dataclasses.replace(info.node, taints=(*info.node.taints, taint)))
    if scenario.remove_pods:
        bound = {pod.key: pod for info in overlay.snapshot().node_infos for pod in info.pods.values()}
        for i, (namespace, name) in enumerate(scenario.remove_pods):
            pod = bound.get(f"{namespace or 'default'}/{name}")
            if pod is None:
                raise ValidationError(f"scenario.remove_pods[{i}]", f"pod {namespace}/{name} is not bound")
            overlay.remove_pod(pod)
    for i, pod in enumerate(scenario.add_pods):
        at(f"scenario.add_pods[{i}]", partial(overlay.bind_pod, pod))
    return added


def _fraction(used: int, capacity: int) -> float:
    return used / capacity if capacity > 0 else 0.0


def simulate(
    engine: Engine, snapshot: Snapshot, scenario: Scenario, pods: Sequence[Pod], scheduler_name: str = ""
) -> SimulationResult:
    """The scenario on a fork of ``snapshot``, then ``pods`` placed in order, each assumed where it went."""
    overlay = Overlay(snapshot)
    added = _apply(overlay, scenario)
    result = SimulationResult(base_generation=snapshot.generation)
    placed: dict[str, list[str]] = {name: [] for name in added}
    for pod in pods:
        check_deadline()
        decision, state, _ = engine.decide(pod, (), scheduler_name, snapshot=overlay.snapshot())
        if decision.selected:
            place(engine, overlay, pod, decision.selected, scheduler_name, state)
            placed.get(decision.selected, []).append(pod.key)
            result.placements.append(Placement(pod, decision.selected))
        else:
            result.placements.append(Placement(pod, "", decision, decision.message))
    for name in added:
        info = overlay.node(name)
        if info is None:
            continue
        allocatable = info.allocatable
        result.hypothetical_nodes.append(
            Utilisation(
                name,
                placed[name],
                _fraction(info.requested_amount(CPU), allocatable.get(CPU, 0)),
                _fraction(info.requested_amount(MEMORY), allocatable.get(MEMORY, 0)),
                _fraction(len(info.pods), allocatable.get(PODS, 0)),
            )
        )
    return result
