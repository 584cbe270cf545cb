"""The scheduling cycle: one pod over one snapshot, as kube-scheduler's ``schedule_one.go`` runs it.

PreEnqueue, PreFilter and Filter, PreScore and Score, and the selection come from the engine's framework
for the pod's profile; then, when a node was chosen and the caller reserves, Reserve: every Reserve plugin
says what it holds for the pod on that node, and the caller's ``Reserver`` writes it with the pod. When
nothing fits, PostFilter runs on the same CycleState and snapshot, and completes the FailedScheduling text.
The cycle reads its snapshot and nothing else; only the Reserver writes.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

from podfit.server.cache.snapshot import Snapshot
from podfit.server.engine import Decision, Engine
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import BytesArray, PreemptionResult
from podfit.server.framework.replicas import ReplicaPlan, Replicas
from podfit.server.framework.runtime import FilterOutcome
from podfit.server.model import Pod
from podfit.server.reserver import Reserver
from podfit.server.telemetry import Telemetry


@dataclasses.dataclass(slots=True)
class ScheduleResult:
    """One Schedule answer: the decision's outcome, and either the reservation or the preemption answer.

    ``decision`` holds every node's verdict and scores; a batch asked for no details drops it right
    after summarising it (a decision over 5,000 nodes holds a few hundred KB of columns)."""

    pod: Pod
    decision: Decision | None
    generation: int
    gated: bool = False
    message: str = ""
    selected: str = ""
    best_count: int = 0
    feasible_count: int = 0
    candidate_count: int = 0
    # The generation that holds the reservation; 0 when the pod was not assumed.
    assumed_generation: int = 0
    # DefaultPreemption's answer when nothing fits, the pod is not gated and preemption was wanted.
    preemption: PreemptionResult | None = None
    # kube-scheduler's FailedScheduling event text when nothing fits (see Decision).
    unschedulable_message: str = ""
    # The kube-scheduler release that answered.
    kube_scheduler_version: str = ""
    # When asked and a node was selected: this decision, kept to plan the identical pods after this one.
    replicas: Replicas | None = None

    @classmethod
    def of(cls, pod: Pod, decision: Decision) -> ScheduleResult:
        return cls(
            pod,
            decision,
            generation=decision.generation,
            gated=decision.gated,
            message=decision.message,
            selected=decision.selected,
            best_count=decision.best_count,
            feasible_count=decision.feasible_count,
            candidate_count=decision.candidate_count,
            preemption=decision.post_filter,
            unschedulable_message=decision.unschedulable_message,
            kube_scheduler_version=decision.kube_scheduler_version,
        )


class SchedulingCycle:
    """Scheduling cycles answered by one engine (one kube-scheduler version), timed into telemetry."""

    __slots__ = ("engine", "telemetry")

    def __init__(self, engine: Engine, telemetry: Telemetry) -> None:
        self.engine = engine
        self.telemetry = telemetry

    def decide(
        self,
        pod: Pod,
        snapshot: Snapshot,
        node_names: Sequence[str] = (),
        scheduler_name: str = "",
        *,
        score: bool = True,
        signature: str | None = None,
        encoded: BytesArray | None = None,
    ) -> tuple[Decision, CycleState, FilterOutcome | None]:
        """Up to the selection: PreEnqueue, Filter and (with ``score``) Score over ``snapshot``."""
        started = time.perf_counter()
        decided = self.engine.decide(
            pod, node_names, scheduler_name, score=score, snapshot=snapshot, signature=signature, encoded=encoded
        )
        self.telemetry.decision_latency(time.perf_counter() - started, "score" if score else "filter")
        return decided

    def score(
        self,
        decision: Decision,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        signature: str,
        scheduler_name: str = "",
    ) -> Decision:
        """Score: the rest of a ``decide(score=False)`` cycle, on its snapshot and state (a new Decision)."""
        started = time.perf_counter()
        scored = self.engine.score(decision, state, pod, snapshot, signature, scheduler_name)
        self.telemetry.decision_latency(time.perf_counter() - started, "score-after-filter")
        return scored

    def schedule(
        self,
        pod: Pod,
        source: bytes,
        snapshot: Snapshot,
        node_names: Sequence[str] = (),
        scheduler_name: str = "",
        *,
        reserver: Reserver | None = None,
        preempt: bool = True,
        signature: str | None = None,
        decided: Decision | None = None,
        replicas: bool = False,
    ) -> ScheduleResult:
        """The whole cycle: decide (or take the memo's ``decided``), then Reserve through ``reserver`` when
        a node was selected and one is given, or PostFilter (when ``preempt``) when nothing fits. With
        ``replicas``, the result keeps the decision to plan the identical pods after this one from
        (``Replicas.plan``, then ``place``)."""
        if decided is None:
            decision, state, outcome = self.decide(pod, snapshot, node_names, scheduler_name, signature=signature)
        else:
            decision, state, outcome = decided, CycleState(), None
        result = ScheduleResult.of(pod, decision)
        if decision.selected:
            if replicas and outcome is not None and decision.score_table is not None:
                framework = self.engine.framework_for(pod, scheduler_name)
                result.replicas = Replicas(framework, state, pod, outcome, decision.score_table)
            if reserver is not None:
                held = self.reserve(state, pod, decision.selected, snapshot, scheduler_name)
                result.assumed_generation = reserver.reserve(pod, source, decision.selected, held)
        elif outcome is not None:
            result.preemption = self.explain(decision, pod, state, snapshot, scheduler_name, post_filter=preempt)
            result.unschedulable_message = decision.unschedulable_message
        return result

    def place(
        self,
        pod: Pod,
        source: bytes,
        plan: ReplicaPlan,
        snapshot: Snapshot,
        reserver: Reserver,
        scheduler_name: str = "",
    ) -> ScheduleResult:
        """The next pod of ``plan`` (identical to the one decided, over ``snapshot`` holding every pod placed
        since): its answer, as deciding it would give, and its Reserve."""
        placement = plan.placements.popleft()
        result = ScheduleResult(
            pod,
            None,
            generation=snapshot.generation,
            selected=placement.node_name,
            best_count=placement.best_count,
            feasible_count=plan.feasible_count,
            candidate_count=plan.candidate_count,
            kube_scheduler_version=self.engine.release_for(scheduler_name, pod),
        )
        held = self.reserve(plan.state, pod, placement.node_name, snapshot, scheduler_name)
        result.assumed_generation = reserver.reserve(pod, source, placement.node_name, held)
        return result

    def reserve(
        self, state: CycleState, pod: Pod, node_name: str, snapshot: Snapshot, scheduler_name: str = ""
    ) -> list[object]:
        """Reserve: what the profile's Reserve plugins hold for ``pod`` on ``node_name``."""
        return self.engine.framework_for(pod, scheduler_name).run_reserve(state, pod, node_name, snapshot)

    def explain(
        self,
        decision: Decision,
        pod: Pod,
        state: CycleState,
        snapshot: Snapshot,
        scheduler_name: str = "",
        *,
        post_filter: bool = True,
    ) -> PreemptionResult | None:
        """PostFilter for a decision where nothing fits (see ``Engine.explain``), timed."""
        started = time.perf_counter()
        result = self.engine.explain(decision, pod, state, snapshot, scheduler_name, post_filter=post_filter)
        if result is not None:
            self.telemetry.decision_latency(time.perf_counter() - started, "preempt")
        return result
