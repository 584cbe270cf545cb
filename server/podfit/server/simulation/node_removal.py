"""cluster-autoscaler's scale-down planner: can these nodes go, and where would their pods move?

The nodes are taken in the order given, on one overlay of one snapshot, as the planner takes its
candidates in one pass (``Planner.UpdateClusterState`` driving ``RemovalSimulator.SimulateNodeRemoval``):

1. first, what the scale-down loop never lists is left out of the overlay and of every node's pods:
   pods in phase Succeeded or Failed (``skip_terminal_pods``) and expendable pods (``is_expendable``).
   They never block, never move, take no room and count for no affinity or spreading;
2. the node's pods (in the order the cache received them, then the pods moved onto it, in the order
   they arrived) go through the drain rules (``drain.pods_to_move``) with the PDB budgets left by the
   nodes removed before it: a blocking pod makes the node unremovable (BlockedByPod);
3. otherwise only the pods to move leave the node: it stays in the overlay, untainted, with its
   DaemonSet, mirror and long-terminating pods, which keep counting for inter-pod (anti-)affinity and
   topology spreading. Each pod to move is placed, first fit in round robin over every node in name
   order (``PredicateChecker``), on a destination (``Destinations``);
4. a pod no node takes makes the node unremovable (NoPlaceToMovePods) and its moves are undone (the
   round-robin position is not). A removable node's moves stay, and all its pods to move count down
   every matching PDB budget for the nodes after it, even when the PDB check said no (the budget may go
   below zero: the planner only notes the removal as risky).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from podfit.server.budget import check_deadline
from podfit.server.cache.overlay import Overlay
from podfit.server.cache.snapshot import Snapshot
from podfit.server.engine import Engine
from podfit.server.model import Pod, ValidationError
from podfit.server.simulation.drain import DrainOptions, DrainResult, PdbTracker, pods_to_move
from podfit.server.simulation.placement import PredicateChecker

BLOCKED_BY_POD = "BlockedByPod"
NO_PLACE_TO_MOVE_PODS = "NoPlaceToMovePods"


class Destinations(enum.Enum):
    """Which nodes may receive the pods of the node being removed."""

    # podfit's rule: no node of the request, since they are all going; only the other nodes.
    OTHER_NODES = "other-nodes"
    # cluster-autoscaler's own: every node but the one being simulated and those already found removable.
    ALL_BUT_REMOVED = "all-but-removed"


@dataclass
class NodeRemoval:
    node_name: str
    drain: DrainResult
    # "" when removable, else BLOCKED_BY_POD or NO_PLACE_TO_MOVE_PODS.
    unremovable_reason: str = ""
    # Pod key -> the node it moves to ("" for a terminal pod, which needs none).
    destinations: dict[str, str] = field(default_factory=dict)
    # NoPlaceToMovePods: the first pod no node took.
    unplaced: Pod | None = None

    @property
    def removable(self) -> bool:
        return not self.unremovable_reason


@dataclass
class RemovalSimulation:
    base_generation: int
    nodes: list[NodeRemoval] = field(default_factory=list)


def is_expendable(pod: Pod, cutoff: int) -> bool:
    """core/utils.IsExpendablePod: a priority below the cutoff, and the default preemption policy."""
    return pod.has_priority and pod.priority < cutoff and pod.preemption_policy == "PreemptLowerPriority"


def left_out(pod: Pod, options: DrainOptions) -> bool:
    """Whether the scale-down loop never lists the pod (step 1)."""
    return (options.skip_terminal_pods and pod.terminal) or is_expendable(pod, options.expendable_pods_priority_cutoff)


def simulate_removal(
    engine: Engine,
    snapshot: Snapshot,
    node_names: Sequence[str],
    pods_of: Mapping[str, Sequence[Pod]],
    options: DrainOptions,
    now: float,
    scheduler_name: str = "",
    destinations: Destinations = Destinations.OTHER_NODES,
) -> RemovalSimulation:
    """The nodes' removal on a fork of ``snapshot`` (see the module docstring). ``pods_of`` gives each
    node's pods as the cache holds them, terminal pods included (the snapshot's nodes carry only live ones)."""
    for i, name in enumerate(node_names):
        if snapshot.get(name) is None:
            raise ValidationError(f"node_names[{i}]", f"node {name!r} is not in the cluster")
        if name in node_names[:i]:
            raise ValidationError(f"node_names[{i}]", f"node {name!r} is named twice")
    overlay = Overlay(snapshot)
    cutoff = options.expendable_pods_priority_cutoff
    for info in snapshot.node_infos:
        for pod in [p for p in info.pods.values() if is_expendable(p, cutoff)]:
            overlay.remove_pod(pod)
    checker = PredicateChecker(engine, overlay, scheduler_name)
    tracker = PdbTracker(snapshot.pdbs)
    # No node comes or goes in the overlay, so its snapshots keep the base's name order.
    known = snapshot.positions()
    everywhere = np.arange(len(snapshot.names), dtype=np.intp)
    gone = [known[name] for name in node_names] if destinations is Destinations.OTHER_NODES else []
    # Each node's pods as the drain rules see them: the listed ones, then those moved onto it.
    listed = {name: [p for p in pods_of.get(name, ()) if not left_out(p, options)] for name in node_names}
    result = RemovalSimulation(base_generation=snapshot.generation)
    for name in node_names:
        check_deadline()
        drain = pods_to_move(listed[name], snapshot.controllers, tracker, options, now)
        removal = NodeRemoval(name, drain)
        result.nodes.append(removal)
        if drain.blocking is not None:
            removal.unremovable_reason = BLOCKED_BY_POD
            continue
        targets = np.setdiff1d(everywhere, np.array([*gone, known[name]], dtype=np.intp))
        undo: list[Callable[[], object]] = []
        moving = [pod for pod in drain.pods_to_move if not pod.terminal]
        for pod in moving:
            overlay.remove_pod(pod)
            undo.append(partial(overlay.bind_pod, pod))
        removal.destinations = {pod.key: "" for pod in drain.pods_to_move if pod.terminal}
        for pod in moving:
            moved = dataclasses.replace(pod, node_name="", nominated_node_name="")
            target = checker.fits_any_position(moved, targets)
            if target is None:
                removal.unremovable_reason = NO_PLACE_TO_MOVE_PODS
                removal.unplaced = pod
                break
            placed = dataclasses.replace(moved, node_name=target)
            overlay.bind_pod(placed)
            undo.append(partial(overlay.remove_pod, placed))
            if target in listed:
                listed[target].append(placed)
                undo.append(listed[target].pop)
            removal.destinations[pod.key] = target
        if removal.unremovable_reason:
            removal.destinations.clear()
            for step in reversed(undo):
                step()
            continue
        tracker.remove_pods(drain.pods_to_move)
        gone.append(known[name])
    return result
