"""cluster-autoscaler's node-removal simulation: can these nodes go, and where would their pods move?

Nodes are taken in the order given, on one overlay of one snapshot, as cluster-autoscaler's scale-down
simulation takes its candidates:

1. the node's pods (in the order the cache received them, terminal ones included) go through the drain
   rules (``drain.pods_to_move``) with the PDB budgets left by the nodes removed before it: a blocking
   pod makes the node unremovable (BlockedByPod);
2. otherwise every pod leaves the node, which stays as a pod-less ghost tainted
   ``ToBeDeletedByClusterAutoscaler:NoSchedule`` so that topology domains keep counting it; each pod to
   move is placed, first fit in round robin (``PredicateChecker``), on a node outside the request (the
   requested nodes are all going, so none is a destination). Terminal pods need no place;
3. a pod no node takes makes the node unremovable (NoPlaceToMovePods) and its changes are undone;
   a removable node's moves stay, and its pods count down the PDB budgets for the nodes after it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from podfit.server.budget import check_deadline
from podfit.server.cache.overlay import Overlay
from podfit.server.cache.snapshot import Snapshot
from podfit.server.engine import Engine
from podfit.server.model import Pod, Taint, ValidationError
from podfit.server.simulation.drain import DrainOptions, DrainResult, PdbTracker, pdb_can_remove, pods_to_move
from podfit.server.simulation.placement import PredicateChecker

# cluster-autoscaler's taint on nodes it is deleting (taints.ToBeDeletedTaint).
TO_BE_DELETED_TAINT = Taint("ToBeDeletedByClusterAutoscaler", "", "NoSchedule")
BLOCKED_BY_POD = "BlockedByPod"
NO_PLACE_TO_MOVE_PODS = "NoPlaceToMovePods"


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


def simulate_removal(
    engine: Engine,
    snapshot: Snapshot,
    node_names: Sequence[str],
    pods_of: Mapping[str, Sequence[Pod]],
    options: DrainOptions,
    now: float,
    scheduler_name: str = "",
) -> RemovalSimulation:
    """The nodes' removal on a fork of ``snapshot`` (see the module docstring). ``pods_of`` gives each
    node's pods as the cache holds them, terminal pods included (the snapshot's nodes carry only live ones)."""
    for i, name in enumerate(node_names):
        if snapshot.get(name) is None:
            raise ValidationError(f"node_names[{i}]", f"node {name!r} is not in the cluster")
        if name in node_names[:i]:
            raise ValidationError(f"node_names[{i}]", f"node {name!r} is named twice")
    overlay = Overlay(snapshot)
    checker = PredicateChecker(engine, overlay, scheduler_name)
    tracker = PdbTracker(snapshot.pdbs)
    # No node comes or goes in the overlay, so its snapshots keep the base's name order.
    known = snapshot.positions()
    destinations = np.setdiff1d(
        np.arange(len(snapshot.names), dtype=np.intp), np.array([known[name] for name in node_names], dtype=np.intp)
    )
    result = RemovalSimulation(base_generation=snapshot.generation)
    for name in node_names:
        check_deadline()
        drain = pods_to_move(pods_of.get(name, ()), snapshot.controllers, tracker, options, now)
        removal = NodeRemoval(name, drain)
        result.nodes.append(removal)
        if drain.blocking is not None:
            removal.unremovable_reason = BLOCKED_BY_POD
            continue
        undo: list[Callable[[], object]] = []
        info = overlay.node(name)
        assert info is not None
        original = info.node
        for pod in list(info.pods.values()):
            overlay.remove_pod(pod)
            undo.append(partial(overlay.bind_pod, pod))
        overlay.update_node(dataclasses.replace(original, taints=(*original.taints, TO_BE_DELETED_TAINT)))
        undo.append(partial(overlay.update_node, original))
        for pod in drain.pods_to_move:
            if pod.terminal:
                removal.destinations[pod.key] = ""
                continue
            moved = dataclasses.replace(pod, node_name="", nominated_node_name="")
            target = checker.fits_any_position(moved, destinations)
            if target is None:
                removal.unremovable_reason = NO_PLACE_TO_MOVE_PODS
                removal.unplaced = pod
                break
            placed = dataclasses.replace(moved, node_name=target)
            overlay.bind_pod(placed)
            undo.append(partial(overlay.remove_pod, placed))
            removal.destinations[pod.key] = target
        if removal.unremovable_reason:
            removal.destinations.clear()
            for step in reversed(undo):
                step()
            continue
        pdb_can_remove(tracker, drain.pods_to_move, remove=True)
    return result
