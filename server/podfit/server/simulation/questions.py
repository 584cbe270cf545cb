"""What-if questions over a frozen snapshot: cluster-autoscaler's simulation, scale-up estimate, scale-down
planner and expander, each within the server's limits.

Each is a heavy reader: the transport runs it on the heavy-call thread, given the snapshot ``freeze`` took
on the event loop when its turn came, so decisions and updates go on beside it over newer generations.
Nothing here writes the cache; every scenario is a fork of the frozen snapshot.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from podfit.server.budget import Limits
from podfit.server.cache.cluster_cache import ClusterCache
from podfit.server.cache.snapshot import Snapshot
from podfit.server.engine import Engine
from podfit.server.model import Node, Pod
from podfit.server.simulation.drain import DrainOptions
from podfit.server.simulation.estimator import Estimate, estimate
from podfit.server.simulation.expander import ExpansionOption, OptionScore, best_options
from podfit.server.simulation.node_removal import Destinations, RemovalSimulation, simulate_removal
from podfit.server.simulation.scenario import Scenario, SimulationResult, simulate
from podfit.server.simulation.templates import NodeTemplate
from podfit.server.telemetry import Telemetry


@dataclasses.dataclass(frozen=True, slots=True)
class Frozen:
    """What a heavy read is given, taken on the event loop as its turn comes: the cache frozen at one
    generation (no later write touches it), and the bound pods of the nodes it drains."""

    snapshot: Snapshot
    bound: Mapping[str, list[Pod]] = dataclasses.field(default_factory=dict)

    @property
    def generation(self) -> int:
        return self.snapshot.generation


class WhatIf:
    """The what-if flows of one server: its cache (frozen per question), engine, limits and telemetry;
    ``resolve`` turns a pod given by reference into its record, ``require_synced`` refuses every
    question until the cache is synced (the service's own)."""

    def __init__(
        self,
        cache: ClusterCache,
        engine: Engine,
        limits: Limits,
        telemetry: Telemetry,
        resolve: Callable[[Any], tuple[Pod, bytes]],
        require_synced: Callable[[], None],
    ) -> None:
        self.cache = cache
        self.engine = engine
        self.limits = limits
        self.telemetry = telemetry
        self._resolve = resolve
        self._require_synced = require_synced

    def freeze(self, drained: Sequence[str] = ()) -> Frozen:
        """On the event loop, when a heavy read's turn comes: the snapshot it reads on its thread while
        decisions and updates go on (``ClusterCache.freeze``), with the bound pods of ``drained``."""
        cache = self.cache
        return Frozen(cache.freeze(), {name: cache.bound_pods(name) for name in drained})

    def _resolve_all(self, pods: Sequence[Any], path: str) -> list[Pod]:
        resolved = []
        for i, pod in enumerate(pods):
            try:
                resolved.append(self._resolve(pod)[0])
            except LookupError as exc:
                raise type(exc)(f"{path}[{i}]: {exc}") from None
        return resolved

    def simulate(
        self,
        frozen: Frozen,
        scenario: Scenario,
        pods: Sequence[Any],
        scheduler_name: str = "",
        version: str = "",
    ) -> SimulationResult:
        """A scenario and placements on a fork of ``frozen``; the cache never changes."""
        self._require_synced()
        limits = self.limits
        added = sum(count for _, count in scenario.add_nodes)
        limits.check("scenario.add_nodes", added, limits.hypothetical_nodes, "nodes added", "hypotheticalNodes")
        devices = sum(count * template_devices(template) for template, count in scenario.add_nodes)
        limits.check_template_devices("scenario.add_nodes", devices)
        limits.check_pods(len(pods))
        engine = self.engine.at_version(version)
        started = time.perf_counter()
        result = simulate(engine, frozen.snapshot, scenario, self._resolve_all(pods, "pods"), scheduler_name)
        self.telemetry.decision_latency(time.perf_counter() - started, "simulate")
        return result

    def estimate_scale_up(
        self,
        frozen: Frozen,
        groups: Sequence[Sequence[Any]],
        node_groups: Sequence[tuple[str, Node | NodeTemplate, int]],
        scheduler_name: str = "",
        version: str = "",
    ) -> tuple[int, list[tuple[str, Estimate]]]:
        """cluster-autoscaler's estimate per (node group id, template, max new nodes), each on its own
        fork of one snapshot: (the snapshot's generation, the estimates in order)."""
        self._require_synced()
        limits = self.limits
        total = sum(len(group) for group in groups)
        limits.check_grouped_pods(total)
        # As cluster-autoscaler's --max-nodes-per-scaleup caps a node group's room, never an error.
        node_groups = [(i, t, min(room, limits.new_nodes_per_estimate)) for i, t, room in node_groups]
        limits.check_template_devices("node_groups", sum(room * template_devices(t) for _, t, room in node_groups))
        engine = self.engine.at_version(version)
        started = time.perf_counter()
        pods = [self._resolve_all(group, f"groups[{i}].pods") for i, group in enumerate(groups)]
        snapshot = frozen.snapshot
        estimates = [
            (group_id, estimate(engine, snapshot, template, pods, max_new, scheduler_name))
            for group_id, template, max_new in node_groups
        ]
        self.telemetry.decision_latency(time.perf_counter() - started, "estimate")
        return snapshot.generation, estimates

    def simulate_drain(
        self,
        frozen: Frozen,
        node_names: Sequence[str],
        options: DrainOptions,
        now: float | None = None,
        scheduler_name: str = "",
        version: str = "",
        destinations: Destinations = Destinations.OTHER_NODES,
    ) -> RemovalSimulation:
        """cluster-autoscaler's scale-down planner over ``node_names`` on a fork of the current snapshot.
        ``now`` (seconds since the epoch) judges terminating pods; the server's clock when None."""
        self._require_synced()
        self.limits.check("node_names", len(node_names), self.limits.drain_nodes, "nodes", "drainNodes")
        engine = self.engine.at_version(version)
        started = time.perf_counter()
        # Terminal pods are in the cache but on no NodeInfo; the planner decides whether the drain rules see them.
        pods_of = {name: list(frozen.bound.get(name, ())) for name in node_names}
        result = simulate_removal(
            engine,
            frozen.snapshot,
            node_names,
            pods_of,
            options,
            time.time() if now is None else now,
            scheduler_name,
            destinations,
        )
        self.telemetry.decision_latency(time.perf_counter() - started, "drain")
        return result

    def best_expansion_options(
        self, frozen: Frozen, options: Sequence[ExpansionOption], scheduler_name: str = ""
    ) -> tuple[list[int], list[OptionScore]]:
        """cluster-autoscaler's gRPC expander: the best scale-up options by podfit's simulation."""
        self._require_synced()
        limits = self.limits
        limits.check_options(len(options))
        for i, option in enumerate(options):
            limits.check_option_pods(f"options[{i}].pod", len(option.pods))
        options = [dataclasses.replace(o, node_count=min(o.node_count, limits.new_nodes_per_estimate)) for o in options]
        limits.check_template_devices("options", sum(o.node_count * template_devices(o.template) for o in options))
        started = time.perf_counter()
        result = best_options(self.engine, frozen.snapshot, options, scheduler_name)
        self.telemetry.decision_latency(time.perf_counter() - started, "expander")
        return result


def template_devices(template: Node | NodeTemplate) -> int:
    """The devices one copy of ``template`` brings (0 for a plain Node)."""
    if not isinstance(template, NodeTemplate):
        return 0
    return sum(len(piece.devices) for piece in template.slices)
