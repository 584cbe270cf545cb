"""The decision engine: pure decisions over a given cache snapshot.

This is the one place that turns "a pod and a snapshot" into Filter / Score / PostFilter answers. It
never changes the cache (no assume) and remembers nothing between calls (no memo): that is
``podfit.server.service.SchedulingService``'s job, which the transports call.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import cast

import numpy as np
from podfit.server.cache.cluster_cache import ClusterCache
from podfit.server.cache.node_info import NodeInfo
from podfit.server.cache.snapshot import Snapshot
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.profile import DEFAULT_PREEMPTION, Profile
from podfit.server.framework.runtime import FilterOutcome, Framework, NodeScores, ScoreTable
from podfit.server.framework.status import Code, Status
from podfit.server.model import Pod, ValidationError
from podfit.server.plugins.default_preemption import DefaultPreemption, PreemptionResult

# PostFilter did not run: the pod is gated, some node fits, or the cluster has no nodes.
NO_POST_FILTER = PreemptionResult("", (), 0, (), "", "")


class UnknownProfileError(LookupError):
    """No profile serves the requested scheduler name."""


@dataclass
class Verdict:
    node_name: str
    status: Status | None

    @property
    def fits(self) -> bool:
        return self.status is None


@dataclass
class Decision:
    """One decision's answer. Verdicts and scores stay columnar (numpy) until a transport asks for
    them as objects, so a caller that only wants the selected node never pays for 5,000 of them."""

    generation: int
    gated: bool = False
    message: str = ""
    outcome: FilterOutcome | None = None
    score_table: ScoreTable | None = None

    @cached_property
    def verdicts(self) -> list[Verdict]:
        """Every candidate node, by name."""
        if self.outcome is None:
            return []
        return [Verdict(name, status) for name, status in self.outcome.statuses.items()]

    @property
    def candidate_count(self) -> int:
        return 0 if self.outcome is None else len(self.outcome.nodes)

    @property
    def feasible_count(self) -> int:
        return 0 if self.outcome is None else len(self.outcome.feasible_index)

    @cached_property
    def scores(self) -> list[NodeScores]:
        """Feasible nodes, best first (total descending, then name)."""
        if self.score_table is None:
            return []
        scores = self.score_table.node_scores()
        scores.sort(key=lambda s: (-s.total, s.node_name))
        return scores

    @cached_property
    def best(self) -> list[str]:
        """Feasible nodes with the highest total, by name."""
        table = self.score_table
        if table is None or not len(table.totals):
            return []
        top = table.totals.max()
        # Candidates, and so the table's names, are ordered by name already.
        return cast(list[str], table.names[table.totals == top].tolist())

    def rejections(self) -> dict[str, Status]:
        """Only the rejected candidates and their statuses (cheap when most nodes fit)."""
        outcome = self.outcome
        if outcome is None:
            return {}
        table = outcome.status_table
        failed = np.flatnonzero(outcome.codes)
        return dict(
            zip(outcome.names[failed].tolist(), [table[c - 1] for c in outcome.codes[failed].tolist()], strict=True)
        )

    def totals(self) -> dict[str, int]:
        """Feasible node -> total score, without building per-plugin breakdowns."""
        table = self.score_table
        if table is None:
            return {}
        return dict(zip(table.names.tolist(), table.totals.tolist(), strict=True))

    @property
    def selected(self) -> str:
        return self.best[0] if self.best else ""


class Engine:
    """Pure decisions: profiles run over a snapshot the caller chooses (the cache's current one by
    default). Nothing here writes to the cache or keeps state between calls."""

    def __init__(self, cache: ClusterCache, profiles: Mapping[str, Profile]) -> None:
        self.cache = cache
        self.frameworks = {name: Framework(profile) for name, profile in profiles.items()}

    def framework_for(self, pod: Pod, scheduler_name: str = "") -> Framework:
        name = scheduler_name or pod.scheduler_name
        framework = self.frameworks.get(name)
        if framework is None:
            known = ", ".join(sorted(self.frameworks))
            raise UnknownProfileError(f"no profile for scheduler name {name!r} (profiles: {known})")
        return framework

    def candidate_nodes(self, snapshot: Snapshot, node_names: Sequence[str]) -> Sequence[NodeInfo]:
        """Every node (the snapshot's own sequence, which the runtime recognises) or the named ones,
        ordered by name."""
        if not node_names or (
            len(node_names) == len(snapshot.node_infos)
            and len(set(node_names)) == len(node_names)
            and all(name in snapshot.node_info_map for name in node_names)
        ):
            # Every node (kube-scheduler's extender calls usually name them all): the snapshot's own
            # sequence, whose rows and names the runtime already has as arrays.
            return snapshot.node_infos
        nodes = []
        for i, name in enumerate(node_names):
            info = snapshot.get(name)
            if info is None:
                raise ValidationError(f"node_names[{i}]", f"node {name!r} is not in the cache")
            nodes.append(info)
        return sorted(nodes, key=lambda n: n.name)

    def decide(
        self,
        pod: Pod,
        node_names: Sequence[str] = (),
        scheduler_name: str = "",
        *,
        score: bool = True,
        snapshot: Snapshot | None = None,
    ) -> tuple[Decision, CycleState, FilterOutcome | None]:
        """Filter (and optionally score) ``pod`` against the candidates, at one cache generation."""
        framework = self.framework_for(pod, scheduler_name)
        snapshot = snapshot or self.cache.snapshot()
        nodes = self.candidate_nodes(snapshot, node_names)
        decision = Decision(generation=snapshot.generation)
        state = CycleState()
        gate = framework.run_pre_enqueue(pod)
        if gate is not None:
            decision.gated = True
            decision.message = f"{gate.plugin}: {gate.message}"
            return decision, state, None
        outcome = framework.find_nodes_that_fit(state, pod, snapshot, nodes)
        decision.outcome = outcome
        if score and len(outcome.feasible_index):
            framework.run_pre_score(state, pod, outcome.feasible, snapshot)
            decision.score_table = framework.run_score(state, pod, outcome, snapshot)
        return decision, state, outcome

    def preempt(
        self, pod: Pod, node_names: Sequence[str] = (), scheduler_name: str = "", *, snapshot: Snapshot | None = None
    ) -> PreemptionResult:
        """Filters without scoring and, when no node fits, runs DefaultPreemption's PostFilter."""
        framework = self.framework_for(pod, scheduler_name)
        snapshot = snapshot or self.cache.snapshot()
        _, state, outcome = self.decide(pod, node_names, scheduler_name, score=False, snapshot=snapshot)
        if outcome is None or outcome.feasible:
            return NO_POST_FILTER
        plugin = next((p for p in framework.profile.post_filter if p.name == DEFAULT_PREEMPTION), None)
        if not isinstance(plugin, DefaultPreemption):
            return NO_POST_FILTER
        return plugin.post_filter(
            state, pod, snapshot, framework, outcome.statuses, pre_filter_status=outcome.pre_filter_status
        )

    def post_filter(
        self, pod: Pod, state: CycleState, outcome: FilterOutcome, snapshot: Snapshot, scheduler_name: str = ""
    ) -> PreemptionResult:
        """DefaultPreemption's PostFilter for a pod no candidate fits, reusing the CycleState and filter
        outcome of the ``decide`` call that found so (on the same ``snapshot``)."""
        framework = self.framework_for(pod, scheduler_name)
        if outcome.feasible:
            return NO_POST_FILTER
        plugin = next((p for p in framework.profile.post_filter if p.name == DEFAULT_PREEMPTION), None)
        if not isinstance(plugin, DefaultPreemption):
            return NO_POST_FILTER
        return plugin.post_filter(
            state, pod, snapshot, framework, outcome.statuses, pre_filter_status=outcome.pre_filter_status
        )

    def victims_on_nodes(
        self, pod: Pod, node_names: Sequence[str], scheduler_name: str = "", *, snapshot: Snapshot | None = None
    ) -> dict[str, tuple[list[Pod], int]]:
        """For each named node where preemption could help: DefaultPreemption's victims and PDB
        violations on that node alone (what an extender's preempt verb is asked to confirm)."""
        framework = self.framework_for(pod, scheduler_name)
        snapshot = snapshot or self.cache.snapshot()
        plugin = next((p for p in framework.profile.post_filter if p.name == DEFAULT_PREEMPTION), None)
        if not isinstance(plugin, DefaultPreemption) or pod.preemption_policy == "Never":
            return {}
        _, state, outcome = self.decide(pod, node_names, scheduler_name, score=False, snapshot=snapshot)
        if outcome is None:
            return {}
        result: dict[str, tuple[list[Pod], int]] = {}
        now = time.time()
        for name in node_names:
            status = outcome.statuses.get(name)
            info = snapshot.get(name)
            if status is None or status.code is not Code.UNSCHEDULABLE or info is None:
                continue
            victims, violations, failure = plugin.select_victims_on_node(
                state, pod, info, snapshot, framework, snapshot.pdbs, now
            )
            if failure is None and victims:
                result[name] = (victims, violations)
        return result
