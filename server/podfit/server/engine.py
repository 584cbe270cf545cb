"""The decision engine: the profiles of one kube-scheduler version, and pure decisions over a snapshot.

This is the one place that turns "a pod and a snapshot" into Filter / Score / PostFilter answers. It
never changes the cache and remembers nothing between calls: a scheduling cycle
(``podfit.server.cycle``) goes on to Reserve, and the service's memo wraps it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import cast

import numpy as np
from podfit.k8s.limits import echo
from podfit.server.cache.cluster_cache import ClusterCache
from podfit.server.cache.snapshot import Snapshot
from podfit.server.config import ConfigError, profile_at
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.fit_error import outcome_fit_error
from podfit.server.framework.interfaces import NO_POST_FILTER, BytesArray, IntpArray, PreemptionResult, VictimSelector
from podfit.server.framework.profile import Profile
from podfit.server.framework.runtime import FilterOutcome, Framework, NodeScores, ScoreTable
from podfit.server.framework.status import Code, FrameworkError, Status
from podfit.server.framework.versions import parse_version
from podfit.server.model import Pod, ValidationError
from podfit.server.model.objects import DEFAULT_SCHEDULER_NAME


def pod_signature(pod: Pod) -> str:
    """What a decision about ``pod`` depends on, minus its identity: identical replicas share it.

    Pickled rather than printed: a few microseconds instead of tens, paid by every pod of a batch. Equal
    bytes mean equal fields; equal pods that pickle differently (dicts filled in another order) only miss
    the memo. A field that cannot be pickled falls back to its printed form.
    """
    fields = tuple(getattr(pod, name) for name in _SIGNED_FIELDS)
    try:
        data = pickle.dumps(fields, pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        data = repr(fields).encode()
    return hashlib.blake2b(data, digest_size=16).hexdigest()


# Every Pod field but its identity (name, uid, resourceVersion) and start time.
_SIGNED_FIELDS = tuple(
    f.name for f in dataclasses.fields(Pod) if f.name not in ("name", "uid", "resource_version", "start_time")
)


class UnknownProfileError(LookupError):
    """No profile serves the requested scheduler name."""


class UnknownNodeError(ValidationError):
    """A candidate named is no node of the snapshot (``node_names[i]``)."""


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
    # The kube-scheduler release the answer reproduces (the profile's version).
    kube_scheduler_version: str = ""
    gated: bool = False
    # The PreEnqueue message when gated; the framework error's text when ``failed``.
    message: str = ""
    # A plugin failed with an error: kube-scheduler aborts the attempt (no verdicts when Filter failed,
    # every verdict but no scores when Score did).
    failed: bool = False
    outcome: FilterOutcome | None = None
    score_table: ScoreTable | None = None
    # PostFilter's answer, once ``Engine.explain`` ran it for a decision where nothing fits.
    post_filter: PreemptionResult | None = None

    @property
    def unschedulable_message(self) -> str:
        """When no candidate fits and the pod is not gated: kube-scheduler's FailedScheduling event text,
        ending with PostFilter's message once PostFilter ran. Built on demand, so the many decisions a
        simulation makes never pay for it."""
        if self.gated or self.outcome is None:
            return ""
        return outcome_fit_error(self.outcome, self.post_filter.message if self.post_filter is not None else "")

    @property
    def explained(self) -> bool:
        """Whether the answer is complete for a Filter: something fits, the pod is gated, or PostFilter ran."""
        return self.gated or self.outcome is None or bool(self.feasible_count) or self.post_filter is not None

    @cached_property
    def verdicts(self) -> list[Verdict]:
        """Every candidate node, by name."""
        if self.outcome is None:
            return []
        return [Verdict(name, status) for name, status in self.outcome.statuses.items()]

    @property
    def candidate_count(self) -> int:
        return 0 if self.outcome is None else len(self.outcome)

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

    @cached_property
    def selected(self) -> str:
        """The first of ``best`` by name, found without listing the ties (thousands on an empty cluster)."""
        table = self.score_table
        if table is None or not len(table.totals):
            return ""
        return cast(str, table.names[int(table.totals.argmax())])

    @cached_property
    def best_count(self) -> int:
        table = self.score_table
        if table is None or not len(table.totals):
            return 0
        return int(np.count_nonzero(table.totals == table.totals.max()))


class Engine:
    """Pure decisions: profiles run over a snapshot the caller chooses (the cache's current one by
    default). Nothing here writes to the cache or keeps state between calls."""

    def __init__(self, cache: ClusterCache, profiles: Mapping[str, Profile]) -> None:
        self.cache = cache
        self.frameworks = {name: Framework(profile) for name, profile in profiles.items()}
        # The same profiles built at another kube-scheduler version, by minor version (see at_version).
        self._at_version: dict[str, Engine] = {}

    def at_version(self, version: str) -> Engine:
        """This engine answering as kube-scheduler ``version`` (``v1.35``, ``v1.37.2`` ...): every profile
        built at that version, once, over the same cache. "" is this engine (each profile's own version).
        An unsupported version is a ValidationError at ``kube_scheduler_version``."""
        if not version:
            return self
        target = parse_version(version)
        engine = self._at_version.get(target.name)
        if engine is None:
            try:
                profiles = {name: profile_at(f.profile, target) for name, f in self.frameworks.items()}
            except ConfigError as exc:
                # The server's configuration (its feature gates) cannot be answered at that version.
                raise ValidationError("kube_scheduler_version", f"cannot answer as {target.release}: {exc}") from None
            engine = Engine(self.cache, profiles)
            # A profile already at that version keeps its framework (and the framework's row memo).
            for name, framework in self.frameworks.items():
                if profiles[name] is framework.profile:
                    engine.frameworks[name] = framework
            self._at_version[target.name] = engine
        return engine

    def release_for(self, scheduler_name: str = "", pod: Pod | None = None) -> str:
        """The release that answers for ``pod`` (or, without one, for ``scheduler_name`` or the default
        profile); "" when no profile serves it."""
        name = scheduler_name or (pod.scheduler_name if pod is not None else "") or DEFAULT_SCHEDULER_NAME
        framework = self.frameworks.get(name)
        return framework.profile.version.release if framework is not None else ""

    def framework_for(self, pod: Pod, scheduler_name: str = "") -> Framework:
        name = scheduler_name or pod.scheduler_name
        framework = self.frameworks.get(name)
        if framework is None:
            known = ", ".join(sorted(self.frameworks))
            raise UnknownProfileError(f"no profile for scheduler name {echo(name)} (profiles: {known})")
        return framework

    def candidate_positions(
        self, snapshot: Snapshot, node_names: Sequence[str], encoded: BytesArray | None = None
    ) -> IntpArray | None:
        """Where the named nodes stand in the snapshot's name order (None: every node, which is what
        kube-scheduler's extender calls usually name), sorted by name. ``encoded``: the same names as
        UTF-8, when the caller has them so (found in one search instead of a lookup per name)."""
        if not node_names:
            return None
        positions = snapshot.names_index().find(encoded) if encoded is not None else None
        if positions is None:
            known = snapshot.positions()
            try:
                positions = np.array(list(map(known.__getitem__, node_names)), dtype=np.intp)
            except KeyError:
                i = next(i for i, name in enumerate(node_names) if name not in known)
                raise UnknownNodeError(f"node_names[{i}]", f"node {echo(node_names[i])} is not in the cache") from None
        positions.sort()
        every = len(snapshot.names)
        if len(positions) == every and (len(positions) < 2 or bool((positions[1:] != positions[:-1]).all())):
            return None
        return positions

    def decide(
        self,
        pod: Pod,
        node_names: Sequence[str] = (),
        scheduler_name: str = "",
        *,
        score: bool = True,
        snapshot: Snapshot | None = None,
        signature: str | None = None,
        positions: IntpArray | None = None,
        encoded: BytesArray | None = None,
    ) -> tuple[Decision, CycleState, FilterOutcome | None]:
        """Filter (and optionally score) ``pod`` against the candidates, at one cache generation.

        ``signature`` (``pod_signature(pod)``, computed when not given) lets row-local plugins reuse
        what they answered for an identical pod on every node that has not changed since. Simulations
        that already hold the candidates' ``positions`` in the snapshot's name order pass those instead
        of names; the outcome keeps their order."""
        framework = self.framework_for(pod, scheduler_name)
        snapshot = snapshot or self.cache.snapshot()
        if positions is None:
            positions = self.candidate_positions(snapshot, node_names, encoded)
        decision = Decision(generation=snapshot.generation, kube_scheduler_version=framework.profile.version.release)
        state = CycleState()
        gate = framework.run_pre_enqueue(pod, snapshot)
        if gate is not None:
            decision.gated = True
            decision.message = f"{gate.plugin}: {gate.message}"
            return decision, state, None
        if signature is None:
            signature = pod_signature(pod)
        try:
            outcome = framework.find_nodes_that_fit(state, pod, snapshot, positions, signature)
        except FrameworkError as exc:
            decision.failed, decision.message = True, str(exc)
            return decision, state, None
        decision.outcome = outcome
        if score:
            self._score(framework, decision, state, pod, snapshot, signature)
        return decision, state, outcome

    def score(
        self,
        decision: Decision,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        signature: str,
        scheduler_name: str = "",
    ) -> Decision:
        """The scores of a ``decide(score=False)`` answer, on its snapshot and CycleState: a new Decision,
        the one a one-step ``decide`` gives. A caller can then answer the filter before paying for scores."""
        scored = dataclasses.replace(decision)
        if decision.outcome is not None and not decision.failed:
            self._score(self.framework_for(pod, scheduler_name), scored, state, pod, snapshot, signature)
        return scored

    @staticmethod
    def _score(
        framework: Framework, decision: Decision, state: CycleState, pod: Pod, snapshot: Snapshot, signature: str
    ) -> None:
        outcome = decision.outcome
        if outcome is None or not len(outcome.feasible_index):
            return
        framework.run_pre_score(state, pod, snapshot, outcome.feasible_rows)
        try:
            decision.score_table = framework.run_score(state, pod, outcome, snapshot, signature)
        except FrameworkError as exc:
            decision.failed, decision.message = True, str(exc)

    def preempt(
        self, pod: Pod, node_names: Sequence[str] = (), scheduler_name: str = "", *, snapshot: Snapshot | None = None
    ) -> PreemptionResult:
        """Filters without scoring and, when no node fits, runs DefaultPreemption's PostFilter."""
        snapshot = snapshot or self.cache.snapshot()
        _, state, outcome = self.decide(pod, node_names, scheduler_name, score=False, snapshot=snapshot)
        if outcome is None:
            return NO_POST_FILTER
        return self.post_filter(pod, state, outcome, snapshot, scheduler_name)

    def post_filter(
        self, pod: Pod, state: CycleState, outcome: FilterOutcome, snapshot: Snapshot, scheduler_name: str = ""
    ) -> PreemptionResult:
        """DefaultPreemption's PostFilter for a pod no candidate fits, reusing the CycleState and filter
        outcome of the ``decide`` call that found so (on the same ``snapshot``)."""
        framework = self.framework_for(pod, scheduler_name)
        if len(outcome.feasible_index):
            return NO_POST_FILTER
        return framework.run_post_filter(state, pod, snapshot, outcome.statuses)

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
        """For a decision where nothing fits: runs PostFilter (unless ``post_filter`` is off, as a Schedule
        with preemption disabled) on the decision's own state and snapshot, and completes its
        ``unschedulable_message`` with the PostFilter message, as kube-scheduler's scheduling cycle does.
        Returns the PostFilter answer (None when it did not run)."""
        outcome = decision.outcome
        if outcome is None or decision.gated or len(outcome.feasible_index) or not post_filter:
            return None
        decision.post_filter = self.post_filter(pod, state, outcome, snapshot, scheduler_name)
        return decision.post_filter

    def victims_on_nodes(
        self, pod: Pod, node_names: Sequence[str], scheduler_name: str = "", *, snapshot: Snapshot | None = None
    ) -> dict[str, tuple[list[Pod], int]]:
        """For each named node where preemption could help: DefaultPreemption's victims and PDB
        violations on that node alone (what an extender's preempt verb is asked to confirm)."""
        framework = self.framework_for(pod, scheduler_name)
        snapshot = snapshot or self.cache.snapshot()
        plugin = next((p for p in framework.profile.post_filter if isinstance(p, VictimSelector)), None)
        if plugin is None or pod.preemption_policy == "Never":
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
