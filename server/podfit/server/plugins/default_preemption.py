"""DefaultPreemption: when no node fits, find the node where evicting the fewest, least important
lower-priority pods makes room (kube-scheduler v1.35's PostFilter and preemption Evaluator).

Differences from one live attempt, by design: every Unschedulable node is dry-run (upstream samples
``max(minCandidateNodesAbsolute, minCandidateNodesPercentage% of them)`` from a random offset), and the
answer lists every node tied under the ranking (upstream picks one in map order). Nothing is evicted.
"""

from __future__ import annotations

import bisect
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
from podfit.server.cache.node_info import NodeInfo
from podfit.server.cache.snapshot import Snapshot
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.fit_error import fit_error
from podfit.server.framework.interfaces import PreemptionResult, PreFilterExtensions
from podfit.server.framework.profile import DEFAULT_PREEMPTION
from podfit.server.framework.runtime import Framework, outranking_nominated
from podfit.server.framework.status import Code, Status, unresolvable
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import LabelSelector, Pod, PodDisruptionBudget, ValidationError
from podfit.server.model.objects import PODS

REASON_NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
REASON_NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
REASON_NO_VICTIMS = "No preemption victims found for incoming pod"
REASON_NOT_HELPFUL = "Preemption is not helpful for scheduling"

DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE = 100
# Upstream adds MaxInt32+1 to every victim priority before summing, so that negative priorities do
# not make a node with more victims look cheaper.
_PRIORITY_OFFSET = 2**31


# A candidate's place in upstream's ranking, smaller is better: PDB violations, highest victim priority,
# offset priority sum, number of victims, and the negated earliest start among the highest-priority victims.
_Rank = tuple[int, int, int, int, float]
# The dry run gave up on a node once its victims so far ranked it below a candidate already found.
_OUTRANKED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("outranked by another candidate",))


@dataclass(frozen=True, slots=True)
class _Candidate:
    node_name: str
    # Most important first (victims[0] has the highest priority).
    victims: tuple[Pod, ...]
    num_pdb_violations: int
    rank: _Rank

    @classmethod
    def of(cls, node_name: str, victims: tuple[Pod, ...], num_pdb_violations: int, now: float) -> _Candidate:
        top = victims[0].priority
        # A pod without a start time counts as starting now (upstream's GetPodStartTime).
        earliest = min(now if p.start_time is None else p.start_time for p in victims if p.priority == top)
        total = sum(p.priority for p in victims) + _PRIORITY_OFFSET * len(victims)
        return cls(node_name, victims, num_pdb_violations, (num_pdb_violations, top, total, len(victims), -earliest))


class _Rows:
    """The batched dry run: the nodes it rules out (name, why), the smallest rank among its candidates
    and every node of that rank (in dry-run order). Victims are listed only for the node that wins."""

    def __init__(
        self,
        failures: list[tuple[str, Status]],
        rank: _Rank | None = None,
        tied: list[str] | None = None,
        pick: Callable[[str], _Candidate] | None = None,
    ) -> None:
        self.failures = failures
        self.rank = rank
        self.tied = tied or []
        self._pick = pick

    def candidate(self, name: str) -> _Candidate:
        assert self._pick is not None
        return self._pick(name)


class _RequestClasses:
    """Request sets numbered once per process: replicas share theirs, so a node's pods become small ints
    and the dry run turns each into a request vector once per call, not once per pod. If distinct sets
    pile up past the limit, the numbering starts over (a new epoch, which makes every node's kept order
    stale) before the next dry run: never during one, so every order a dry run uses shares its epoch."""

    LIMIT = 1 << 16

    def __init__(self) -> None:
        self.ids: dict[tuple[tuple[str, int], ...], int] = {}
        self.keys: list[tuple[tuple[str, int], ...]] = []
        self.epoch = 0

    def before_dry_run(self) -> None:
        if len(self.keys) >= self.LIMIT:
            self.ids, self.keys, self.epoch = {}, [], self.epoch + 1

    def of(self, requests: Mapping[str, int]) -> int:
        key = tuple(requests.items())
        found = self.ids.get(key)
        if found is None:
            found = self.ids[key] = len(self.keys)
            self.keys.append(key)
        return found


_CLASSES = _RequestClasses()
_ORDER = "DefaultPreemption.order"


@dataclass(frozen=True, slots=True)
class _Order:
    """A node's pods most important first, as preemption reprieves them: priority descending, then the
    earliest start, a pod without a start time last (upstream counts it as starting now). Kept in the
    NodeInfo until its pods change, so a dry run over every node re-sorts only the nodes that changed."""

    pods: tuple[Pod, ...]
    # -priority, ascending: the pods of lower priority than a preemptor are a suffix found by bisection.
    neg_priorities: tuple[int, ...]
    classes: tuple[int, ...]
    # Start times, NaN for none.
    starts: tuple[float, ...]
    # The order holds at any instant after the latest start time (-inf when no pod has one).
    latest_start: float
    epoch: int

    @classmethod
    def of(cls, pods: Iterable[Pod], now: float = math.inf) -> _Order:
        ordered = tuple(sorted(pods, key=lambda p: (-p.priority, now if p.start_time is None else p.start_time)))
        starts = tuple(math.nan if p.start_time is None else p.start_time for p in ordered)
        return cls(
            ordered,
            tuple(-p.priority for p in ordered),
            tuple(_CLASSES.of(p.requests) for p in ordered),
            starts,
            max((t for t in starts if not math.isnan(t)), default=-math.inf),
            _CLASSES.epoch,
        )

    @classmethod
    def on(cls, info: NodeInfo, now: float) -> _Order:
        derived = info.derived
        order = derived.get(_ORDER) if derived else None
        if not isinstance(order, _Order) or order.epoch != _CLASSES.epoch:
            order = cls.of(info.pods.values())
            if info.derived is None:
                info.derived = {}
            info.derived[_ORDER] = order
        if order.latest_start >= now:  # a start time not reached yet (a skewed clock): sort as of now
            return cls.of(info.pods.values(), now)
        return order


def _int_arg(args: Mapping[str, Any], key: str, default: int) -> int:
    value = args.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(key, f"must be an integer, not {value!r}")
    return value


class DefaultPreemption:
    name = DEFAULT_PREEMPTION

    def __init__(
        self,
        min_candidate_nodes_percentage: int = DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE,
        min_candidate_nodes_absolute: int = DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE,
        success_message: bool = False,
    ) -> None:
        # Upstream's ValidateDefaultPreemptionArgs.
        if not 0 <= min_candidate_nodes_percentage <= 100:
            raise ValidationError("minCandidateNodesPercentage", "not in valid range [0, 100]")
        if min_candidate_nodes_absolute < 0:
            raise ValidationError("minCandidateNodesAbsolute", "not in valid range [0, inf)")
        if min_candidate_nodes_percentage == 0 and min_candidate_nodes_absolute == 0:
            raise ValidationError(
                "minCandidateNodesPercentage", "cannot be zero at the same time as minCandidateNodesAbsolute"
            )
        # Stored for configuration round trips; the answers dry-run every candidate (see module doc).
        self.min_candidate_nodes_percentage = min_candidate_nodes_percentage
        self.min_candidate_nodes_absolute = min_candidate_nodes_absolute
        # From v1.37 a nomination says where and how many it evicts (``preemption_success_message``).
        self.success_message = success_message

    def post_filter(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        framework: Framework,
        statuses: Mapping[str, Status | None],
    ) -> PreemptionResult:
        """The PostFilter phase for a pod no node fits; ``statuses`` are the per-node Filter verdicts."""
        num_nodes = len(snapshot.node_infos)

        def rejected(message: str, code: Code = Code.UNSCHEDULABLE) -> PreemptionResult:
            return PreemptionResult("", (), 0, (), f"preemption: {message}", code.value)

        reason = _not_eligible(pod, snapshot, statuses)
        if reason:
            return rejected(reason)

        now = time.time()
        candidates, rows, failures, errors = self._dry_run(state, pod, snapshot, framework, statuses, now)
        if not candidates and rows.rank is None:
            if errors:
                # An aggregate of the dry-run errors; PostFilter stops at an Error, dropping other reasons.
                text = errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
                return rejected(text, Code.ERROR)
            return rejected(_fit_error(num_nodes, failures))
        # pickOneNodeForPreemption: its criteria, applied in turn while several nodes are tied, select the
        # candidates of the smallest rank; all of them, by name (upstream takes the first in map order).
        ranks = [c.rank for c in candidates]
        top = min(ranks) if rows.rank is None else min([*ranks, rows.rank])
        by_name = {c.node_name: c for c, rank in zip(candidates, ranks, strict=True) if rank == top}
        ties = sorted([*by_name, *(rows.tied if rows.rank == top else ())])
        best = by_name[ties[0]] if ties[0] in by_name else rows.candidate(ties[0])
        return PreemptionResult(
            nominated_node=best.node_name,
            victims=best.victims,
            num_pdb_violations=best.num_pdb_violations,
            node_ties=tuple(ties),
            message=(
                f"preemption: found a potential placement for pod on node {best.node_name}, "
                f"preempting {len(best.victims)} victims"
                if self.success_message
                else ""
            ),
            code=Code.SUCCESS.value,
        )

    # -- dry run ---------------------------------------------------------------------------------

    def _dry_run(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        framework: Framework,
        statuses: Mapping[str, Status | None],
        now: float,
    ) -> tuple[list[_Candidate], _Rows, dict[str, Status], list[str]]:
        """Candidates that may rank first (those of the batched rows apart), the statuses of nodes where
        preemption cannot help, and errors.

        Every Unschedulable node is a potential candidate. Nodes are tried in order of their least
        important lower-priority pod, and a node is dropped as soon as a lower bound of its rank is
        strictly worse than a candidate already found: it could never be among the best, and the
        failure statuses only matter when there is no candidate at all.
        """
        candidates: list[_Candidate] = []
        failures: dict[str, Status] = {}
        potential: list[tuple[int, int, NodeInfo, _Order, int]] = []
        unschedulable, threshold = Code.UNSCHEDULABLE, -pod.priority
        _CLASSES.before_dry_run()
        for index, info in enumerate(snapshot.node_infos):
            name = info.node.name
            verdict = statuses.get(name)
            if verdict is None or verdict.code is not unschedulable:
                continue
            order = _Order.on(info, now)
            first = bisect.bisect_right(order.neg_priorities, threshold)  # where pods of lower priority start
            if first == len(order.pods):
                failures[name] = unresolvable(REASON_NO_VICTIMS)
                continue
            potential.append((-order.neg_priorities[-1], index, info, order, first))
        potential.sort(key=lambda entry: entry[:2])
        budgets = _Budgets(snapshot.pdbs)
        rows = _Rows([])
        if self._batchable(state, framework):
            # Nodes holding outranking nominated pods are filtered with those added: one by one, below.
            nominated = {name for name, pods in snapshot.nominated_pods.items() if outranking_nominated(pod, pods)}
            batch = [entry[2:] for entry in potential if entry[2].node.name not in nominated]
            rows = self._select_victims_rows(state, pod, batch, snapshot, framework, budgets, now)
            failures.update(rows.failures)
            potential = [entry for entry in potential if entry[2].node.name in nominated]
        best = rows.rank
        for lowest, _, info, order, first in potential:
            if best is not None and (0, lowest, lowest + _PRIORITY_OFFSET, 1, -math.inf) > best:
                continue
            victims, violations, status = self._select_victims(
                state, pod, info, list(order.pods[first:]), snapshot, framework, budgets, now, best
            )
            if status is _OUTRANKED:
                continue
            best = self._record(info, victims, violations, status, candidates, failures, now, best)
        errors: list[str] = []
        if any(status.code is Code.ERROR for status in failures.values()):
            errors = [
                status.message
                for info in snapshot.node_infos
                if (status := failures.get(info.name)) is not None and status.code is Code.ERROR
            ]
        return candidates, rows, failures, errors

    @staticmethod
    def _record(
        info: NodeInfo,
        victims: list[Pod],
        violations: int,
        status: Status | None,
        candidates: list[_Candidate],
        failures: dict[str, Status],
        now: float,
        best: _Rank | None,
    ) -> _Rank | None:
        """Files one node's dry run as a candidate or a failure; returns the best rank so far."""
        if status is None and victims:
            candidate = _Candidate.of(info.name, tuple(victims), violations, now)
            candidates.append(candidate)
            rank = candidate.rank
            return rank if best is None else min(best, rank)
        if status is None:
            status = Status(Code.ERROR, (f'expected at least one victim pod on node "{info.name}"',))
        failures[info.name] = status
        return best

    @staticmethod
    def _batchable(state: CycleState, framework: Framework) -> bool:
        """Whether every active Filter plugin reads only its row's columns and no PreFilter state follows
        the removed pods: then each node's dry run is independent of the others' and of the NodeInfo, and
        all nodes can run in lockstep over one table of their rows."""
        skip = state.skip_filter
        profile = framework.profile
        if any(p.name not in skip for p in profile.pre_filter if isinstance(p, PreFilterExtensions)):
            return False
        return all(
            p.name in skip or (getattr(p, "row_local", False) and not getattr(p, "reads_node_info", False))
            for p in profile.filter
        )

    def _select_victims_rows(
        self,
        state: CycleState,
        pod: Pod,
        nodes: Sequence[tuple[NodeInfo, _Order, int]],
        snapshot: Snapshot,
        framework: Framework,
        budgets: _Budgets,
        now: float,
    ) -> _Rows:
        """``_select_victims`` for many nodes at once (see ``_batchable``), each given with its order and
        where its lower-priority pods start. Their rows are copied into one table; every lower-priority
        pod is taken off its row's aggregates, then the pods are offered back in lockstep — the k-th pod
        of every node in one Filter pass — each staying a victim where the pod no longer fits with it
        back. Ranks are computed over all rows at once; victims are listed for the winner alone."""
        if not nodes:
            return _Rows([])
        base = snapshot.table
        names = [info.node.name for info, _, _ in nodes]
        row_of = base.row_of
        table = base.subset(np.array([row_of[name] for name in names], dtype=np.intp))
        count = len(nodes)
        # Per node: its lower-priority pods in reprieve order (PDB-violating first), and how many violate.
        orders: list[Sequence[Pod]] = []
        classes: list[Sequence[int]] = []
        starts: list[Sequence[float]] = []
        negated: list[Sequence[int]] = []
        violating_counts = np.zeros(count, dtype=np.intp)
        if not budgets:
            for _, order, first in nodes:
                orders.append(order.pods[first:])
                classes.append(order.classes[first:])
                starts.append(order.starts[first:])
                negated.append(order.neg_priorities[first:])
        else:
            for i, (_, order, first) in enumerate(nodes):
                lower = order.pods[first:]
                position = {id(p): k for k, p in enumerate(lower, first)}
                violating, non_violating = budgets.split(lower)
                reordered = violating + non_violating
                at = [position[id(p)] for p in reordered]
                orders.append(reordered)
                classes.append([order.classes[k] for k in at])
                starts.append([order.starts[k] for k in at])
                negated.append([order.neg_priorities[k] for k in at])
                violating_counts[i] = len(violating)
        lengths = np.fromiter(map(len, orders), dtype=np.intp, count=count)
        offsets = np.zeros(count + 1, dtype=np.intp)
        np.cumsum(lengths, out=offsets[1:])
        total = int(offsets[-1])
        node_of = np.repeat(np.arange(count, dtype=np.intp), lengths)
        class_of = np.fromiter(chain.from_iterable(classes), dtype=np.intp, count=total)
        priority = -np.fromiter(chain.from_iterable(negated), dtype=np.int64, count=total)
        start = np.fromiter(chain.from_iterable(starts), dtype=np.float64, count=total)
        start[np.isnan(start)] = now
        protected = (np.arange(total, dtype=np.intp) - offsets[node_of]) < violating_counts[node_of]

        # One request vector per request class in use.
        used, local = np.unique(class_of, return_inverse=True)
        keys = [_CLASSES.keys[c] for c in used.tolist()]
        for key in keys:
            for name, _ in key:
                table.resource_column(name)
        resources = table.resources
        vectors = np.zeros((len(keys), table.requested.shape[1]), dtype=np.int64)
        for c, key in enumerate(keys):
            for name, amount in key:
                vectors[c, resources[name]] = amount
        vectors[:, resources[PODS]] = 1
        pod_vectors = vectors[local]
        removed = np.zeros((count, vectors.shape[1]), dtype=np.int64)
        np.add.at(removed, node_of, pod_vectors)
        table.requested = table.requested - removed
        table.pod_count = table.requested[:, resources[PODS]].copy()

        failures: list[tuple[str, Status]] = []
        all_rows = np.arange(count, dtype=np.intp)
        codes = np.zeros(count, dtype=np.int32)
        statuses: list[Status] = []
        framework.run_filter(state, pod, table, all_rows, codes, statuses)
        for i in np.flatnonzero(codes).tolist():
            failures.append((names[i], statuses[codes[i] - 1]))
        active = np.flatnonzero(codes == 0)
        victim = np.zeros(total, dtype=bool)
        step = 0
        while True:
            rows = active[lengths[active] > step]
            if not len(rows):
                break
            offered = offsets[rows] + step
            added = pod_vectors[offered]
            table.requested[rows] += added
            table.pod_count[rows] += 1
            verdict = np.zeros(len(rows), dtype=np.int32)
            framework.run_filter(state, pod, table, rows, verdict, [])
            back = verdict > 0
            victim[offered[back]] = True
            table.requested[rows[back]] -= added[back]
            table.pod_count[rows[back]] -= 1
            step += 1

        # Every row's rank (see _Rank), from its victims.
        chosen = np.flatnonzero(victim)
        owner = node_of[chosen]
        victims_count = np.bincount(owner, minlength=count)
        violations = np.bincount(owner, weights=protected[chosen], minlength=count).astype(np.int64)
        sums = np.zeros(count, dtype=np.int64)
        np.add.at(sums, owner, priority[chosen] + _PRIORITY_OFFSET)
        top = np.full(count, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(top, owner, priority[chosen])
        at_top = priority[chosen] == top[owner]
        earliest = np.full(count, np.inf)
        np.minimum.at(earliest, owner[at_top], start[chosen][at_top])
        for i in active[victims_count[active] == 0].tolist():
            name = names[i]
            failures.append((name, Status(Code.ERROR, (f'expected at least one victim pod on node "{name}"',))))
        ranked = active[victims_count[active] > 0]
        if not len(ranked):
            return _Rows(failures)
        keys_by_rank = (-earliest[ranked], victims_count[ranked], sums[ranked], top[ranked], violations[ranked])
        first_row = ranked[np.lexsort(keys_by_rank)[0]]
        tied = ranked[
            (violations[ranked] == violations[first_row])
            & (top[ranked] == top[first_row])
            & (sums[ranked] == sums[first_row])
            & (victims_count[ranked] == victims_count[first_row])
            & (earliest[ranked] == earliest[first_row])
        ]
        rank: _Rank = (
            int(violations[first_row]),
            int(top[first_row]),
            int(sums[first_row]),
            int(victims_count[first_row]),
            -float(earliest[first_row]),
        )
        tied_rows = {names[i]: i for i in tied.tolist()}

        def pick(name: str) -> _Candidate:
            i = tied_rows[name]
            picked = [orders[i][k] for k in np.flatnonzero(victim[offsets[i] : offsets[i + 1]]).tolist()]
            if violating_counts[i] and violating_counts[i] < lengths[i]:
                picked.sort(key=lambda p: (-p.priority, now if p.start_time is None else p.start_time))
            return _Candidate.of(name, tuple(picked), int(violations[i]), now)

        return _Rows(failures, rank, list(tied_rows), pick)

    def select_victims_on_node(
        self,
        state: CycleState,
        pod: Pod,
        node_info: NodeInfo,
        snapshot: Snapshot,
        framework: Framework,
        pdbs: Sequence[PodDisruptionBudget],
        now: float,
    ) -> tuple[list[Pod], int, Status | None]:
        """The fewest, least important victims on one node: (victims, PDB violations, failure or None).

        Works on copies of the NodeInfo and CycleState, so the snapshot and ``state`` stay untouched.
        """
        lower = [p for p in node_info.pods.values() if p.priority < pod.priority]
        if not lower:
            return [], 0, unresolvable(REASON_NO_VICTIMS)
        return self._select_victims(state, pod, node_info, lower, snapshot, framework, _Budgets(pdbs), now, None)

    def _select_victims(
        self,
        state: CycleState,
        pod: Pod,
        node_info: NodeInfo,
        lower: list[Pod],
        snapshot: Snapshot,
        framework: Framework,
        budgets: _Budgets,
        now: float,
        beaten_by: _Rank | None,
    ) -> tuple[list[Pod], int, Status | None]:
        """Upstream's SelectVictimsOnNode over the node's lower-priority pods ``lower``. Returns the
        ``_OUTRANKED`` status as soon as the victims found so far rank the node below ``beaten_by``."""
        # The node's clone lives in a one-row scratch table, so Filter runs the same row kernels on it.
        info = node_info.clone()
        table = snapshot.table.scratch()
        table.add(info)
        state = state.clone()
        for victim in lower:
            info.remove_pod(victim)
            framework.run_remove_pod(state, pod, victim, info, snapshot)
        table.refresh(info)
        # If the pod does not fit even with every lower-priority pod gone, this node cannot help
        # (upstream deliberately ignores affinity of the pod to its own victims here).
        status = framework.run_filter_with_nominated_pods(state, pod, info, snapshot, table)
        if status is not None:
            return [], 0, status

        def importance(p: Pod) -> tuple[int, float]:
            return (-p.priority, now if p.start_time is None else p.start_time)

        lower = sorted(lower, key=importance)
        violating, non_violating = budgets.split(lower)
        victims: list[Pod] = []
        violations = top = total = 0

        def reprieved(p: Pod) -> bool:
            nonlocal top, total
            info.add_pod(p)
            table.refresh(info)
            framework.run_add_pod(state, pod, p, info, snapshot)
            if framework.run_filter_with_nominated_pods(state, pod, info, snapshot, table) is None:
                return True
            info.remove_pod(p)
            table.refresh(info)
            framework.run_remove_pod(state, pod, p, info, snapshot)
            top = p.priority if not victims else max(top, p.priority)
            total += p.priority + _PRIORITY_OFFSET
            victims.append(p)
            return False

        def outranked() -> bool:
            # Every component only grows as victims are added: a lower bound of the final rank.
            return beaten_by is not None and (violations, top, total, len(victims), -math.inf) > beaten_by

        # Reprieve PDB-protected pods first, most important first, then the rest.
        for p in violating:
            if not reprieved(p):
                violations += 1
                if outranked():
                    return [], 0, _OUTRANKED
        for p in non_violating:
            if not reprieved(p) and outranked():
                return [], 0, _OUTRANKED
        if violating and non_violating:
            victims.sort(key=importance)
        return victims, violations, None


def _not_eligible(pod: Pod, snapshot: Snapshot, statuses: Mapping[str, Status | None]) -> str:
    """PodEligibleToPreemptOthers: why the pod may not preempt ("" when it may).

    Never with preemptionPolicy Never; nor while its nominated node, unless Filter found that node
    UnschedulableAndUnresolvable, holds a lower-priority pod that is terminating because the scheduler
    preempted it (the victims of its earlier preemption). A nominated node without a Filter verdict
    counts as UnschedulableAndUnresolvable, as upstream's NodeToStatus reports absent nodes.
    """
    if pod.preemption_policy == "Never":
        return REASON_NOT_ELIGIBLE_NEVER
    name = pod.nominated_node_name
    if not name:
        return ""
    status = statuses.get(name)
    if status is None or status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
        return ""
    info = snapshot.get(name)
    if info is not None and any(
        p.priority < pod.priority and p.deletion_timestamp is not None and p.preempted_by_scheduler
        for p in info.pods.values()
    ):
        return REASON_NOT_ELIGIBLE_TERMINATING
    return ""


class _Budgets:
    """The PDBs as preemption judges them: selector, namespace, status.disruptionsAllowed and
    status.disruptedPods.

    A PDB whose selector is absent, empty or unparsable matches nothing (upstream's
    LabelSelectorAsSelector then Empty()). A pod listed in a budget's disruptedPods is already charged
    to it: its eviction takes nothing more from that budget (filterPodsWithPDBViolation).
    """

    def __init__(self, pdbs: Sequence[PodDisruptionBudget]) -> None:
        self._by_namespace: dict[str, list[tuple[int, LabelSelector, frozenset[str]]]] = {}
        self._allowed: list[int] = []
        for pdb in pdbs:
            selector = pdb.selector
            if selector is None or selector.empty or not _valid(selector):
                continue
            entry = (len(self._allowed), selector, pdb.disrupted_pods)
            self._by_namespace.setdefault(pdb.namespace, []).append(entry)
            self._allowed.append(pdb.disruptions_allowed)

    def __bool__(self) -> bool:
        """Whether any budget can count against an eviction."""
        return bool(self._allowed)

    def split(self, pods: Sequence[Pod]) -> tuple[list[Pod], list[Pod]]:
        """(violating, non-violating), order kept: evicting the pods in order, each matching budget
        that does not list the pod in disruptedPods loses one allowed disruption, and a pod whose
        eviction takes some budget below zero violates."""
        if not self._allowed:
            return [], list(pods)
        allowed = list(self._allowed)
        violating: list[Pod] = []
        non_violating: list[Pod] = []
        for pod in pods:
            violated = False
            if pod.labels:
                for index, selector, disrupted in self._by_namespace.get(pod.namespace, ()):
                    if selector.matches(pod.labels) and pod.name not in disrupted:
                        allowed[index] -= 1
                        if allowed[index] < 0:
                            violated = True
            (violating if violated else non_violating).append(pod)
        return violating, non_violating


def _valid(selector: LabelSelector) -> bool:
    for req in selector.match_expressions:
        if req.operator in ("In", "NotIn") and not req.values:
            return False
        if req.operator in ("Exists", "DoesNotExist") and req.values:
            return False
    return True


def _fit_error(num_nodes: int, failures: Mapping[str, Status]) -> str:
    """FitError.Error() for the dry run: nodes never dry-run (or never candidates) count as
    "Preemption is not helpful for scheduling"."""
    reasons: Counter[str] = Counter()
    for status in failures.values():
        for reason in status.reasons:
            reasons[reason] += 1
    if len(failures) < num_nodes:
        reasons[REASON_NOT_HELPFUL] += num_nodes - len(failures)
    return fit_error(num_nodes, reasons)


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> DefaultPreemption:
    return DefaultPreemption(
        _int_arg(args, "minCandidateNodesPercentage", DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE),
        _int_arg(args, "minCandidateNodesAbsolute", DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE),
        features.preemption_success_message,
    )
