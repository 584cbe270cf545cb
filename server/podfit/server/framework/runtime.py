"""Runs a profile's plugins for one pod: kube-scheduler's frameworkImpl, minus the queueing and binding.

The results keep upstream's observable details: the first rejecting Filter plugin per node, PreFilter
rejections applied to every node, PreFilter node restrictions, skipped PreFilter/PreScore plugins,
and filtering "with nominated pods" (pods nominated to a node with at least the incoming pod's priority
reserve their room there).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
from podfit.server.cache.node_info import NodeInfo
from podfit.server.cache.node_table import NodeTable
from podfit.server.cache.snapshot import Snapshot
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import (
    NO_POST_FILTER,
    Int32Array,
    Int64Array,
    IntpArray,
    NormalizeScorePlugin,
    PostFilterPlugin,
    PreemptionResult,
    PreFilterExtensions,
    PreFilterResult,
)
from podfit.server.framework.profile import Profile
from podfit.server.framework.status import Code, FrameworkError, PluginError, Status
from podfit.server.model import Pod


@dataclass
class FilterOutcome:
    """Filter verdicts of the candidate nodes, kept as columns: ``codes[i]`` is 0 when ``nodes[i]``
    fits and k when it was rejected with ``status_table[k - 1]``."""

    codes: Int32Array = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    status_table: list[Status] = field(default_factory=list)
    # Set when PreFilter rejected the pod as a whole (then no Filter plugin ran).
    pre_filter_status: Status | None = None
    # The candidates' rows in the snapshot's NodeTable.
    rows: IntpArray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    # The candidates' names and NodeInfos as object arrays (in the order of rows).
    names: npt.NDArray[np.object_] = field(default_factory=lambda: np.empty(0, dtype=object))
    infos: npt.NDArray[np.object_] = field(default_factory=lambda: np.empty(0, dtype=object))

    @cached_property
    def statuses(self) -> dict[str, Status | None]:
        """Per node name: None when the node fits, else the rejecting status."""
        table = [None, *self.status_table]
        return {name: table[code] for name, code in zip(self.names.tolist(), self.codes.tolist(), strict=True)}

    @cached_property
    def feasible_index(self) -> IntpArray:
        return np.flatnonzero(self.codes == 0)

    @cached_property
    def feasible_rows(self) -> IntpArray:
        """The feasible candidates' rows; the candidates' own array when all fit (no gather)."""
        index = self.feasible_index
        return self.rows if len(index) == len(self.codes) else self.rows[index]

    @cached_property
    def feasible_names(self) -> npt.NDArray[np.object_]:
        index = self.feasible_index
        return self.names if len(index) == len(self.codes) else self.names[index]

    @cached_property
    def feasible(self) -> list[NodeInfo]:
        return list(self.infos[self.feasible_index].tolist())

    def __len__(self) -> int:
        return len(self.codes)


@dataclass
class NodeScores:
    node_name: str
    total: int
    # Plugin -> weighted, normalised score, in profile order.
    plugins: dict[str, int]


@dataclass
class ScoreTable:
    """Weighted scores of the feasible nodes as columns, in the order of ``names``."""

    names: npt.NDArray[np.object_]
    totals: Int64Array
    plugins: dict[str, Int64Array]

    def node_scores(self) -> list[NodeScores]:
        columns = {name: values.tolist() for name, values in self.plugins.items()}
        return [
            NodeScores(node, total, {name: values[i] for name, values in columns.items()})
            for i, (node, total) in enumerate(zip(self.names.tolist(), self.totals.tolist(), strict=True))
        ]


class Framework:
    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        # Capabilities resolved once: runtime-checkable protocol isinstance checks cost microseconds each.
        self._extensions = [p for p in profile.pre_filter if isinstance(p, PreFilterExtensions)]
        self._normalizers = {w.plugin.name for w in profile.score if isinstance(w.plugin, NormalizeScorePlugin)}
        # Row-local plugins (see ``_RowMemo``): the leading run of Filter plugins, and the Score plugins.
        local_filters = 0
        while local_filters < len(profile.filter) and getattr(profile.filter[local_filters], "row_local", False):
            local_filters += 1
        self._local_filters = profile.filter[:local_filters]
        self._other_filters = profile.filter[local_filters:]
        self._local_scores = {w.plugin.name for w in profile.score if getattr(w.plugin, "row_local", False)}
        # Of those, the ones that read only a row's Node (``reads_pods = False``): the leading run of the
        # row-local Filter plugins, and such Score plugins. Pods coming and going leave their answers be.
        node_filters = 0
        while node_filters < local_filters and not _reads_pods(profile.filter[node_filters]):
            node_filters += 1
        self._node_filters = profile.filter[:node_filters]
        self._pod_filters = profile.filter[node_filters:local_filters]
        self._node_scores = {
            w.plugin.name for w in profile.score if w.plugin.name in self._local_scores and not _reads_pods(w.plugin)
        }
        # Planning a run of identical pods (``podfit.server.framework.replicas``): every row-local Filter
        # plugin, and the Score plugins whose answers on a row change when a replica joins it.
        self.row_local_filters = [p for p in profile.filter if getattr(p, "row_local", False)]
        self._rescored = {name for name in self._local_scores if name not in self._normalizers}
        # Row memos per thread: the event loop's decisions and a batch on the heavy thread each keep their
        # own, so neither waits for nor disturbs the other's.
        self._memos = threading.local()

    # -- Replicas --------------------------------------------------------------------------------

    def rescored_per_row(self, plugin_name: str) -> bool:
        """Whether a replica joining a row changes this Score plugin's answer there and nowhere else."""
        return plugin_name in self._rescored

    def plans_replicas(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> bool:
        """Whether the replicas of ``pod`` can be placed from its decision (see ``framework.replicas``): every
        plugin that answers for it reads only its row or is unchanged by more replicas, the normalising ones
        normalise raw scores a replica cannot change, Reserve holds nothing a replica could contend for,
        and no nominated pod is filtered in."""
        if any(outranking_nominated(pod, pods) for pods in snapshot.nominated_pods.values()):
            return False
        for filter_plugin in self.profile.filter:
            if filter_plugin.name not in state.skip_filter and not _row_local_or_invariant(filter_plugin, state, pod):
                return False
        for weighted in self.profile.score:
            scorer = weighted.plugin
            if scorer.name in state.skip_score:
                continue
            if not _row_local_or_invariant(scorer, state, pod):
                return False
            if scorer.name in self._normalizers and _reads_pods(scorer) and not _invariant(scorer, state, pod):
                return False
        return all(_invariant(plugin, state, pod) for plugin in self.profile.reserve)

    # -- PreEnqueue ------------------------------------------------------------------------------

    def run_pre_enqueue(self, pod: Pod, snapshot: Snapshot) -> Status | None:
        for plugin in self.profile.pre_enqueue:
            status = plugin.pre_enqueue(pod, snapshot)
            if status is not None and status.code is not Code.SUCCESS:
                return status.with_plugin(plugin.name)
        return None

    # -- PreFilter / Filter ----------------------------------------------------------------------

    def run_pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None, tuple[str, ...]]:
        """(merged node restriction, rejection, plugins that restricted the nodes, sorted).

        As upstream: an UnschedulableAndUnresolvable PreFilter ends the phase at once, while an
        Unschedulable one lets the remaining PreFilters run (preemption needs their state) and is
        reported at the end.
        """
        result: PreFilterResult | None = None
        restricting: list[str] = []
        rejection: Status | None = None
        for plugin in self.profile.pre_filter:
            plugin_result, status = plugin.pre_filter(state, pod, snapshot)
            if status is not None:
                if status.code is Code.SKIP:
                    state.skip_filter.add(plugin.name)
                    continue
                if status.code is Code.UNSCHEDULABLE:
                    rejection = rejection or status.with_plugin(plugin.name)
                    continue
                if status.code is not Code.SUCCESS:
                    return None, status.with_plugin(plugin.name), ()
            if plugin_result is not None and plugin_result.node_names is not None:
                restricting.append(plugin.name)
                if result is None or result.node_names is None:
                    result = plugin_result
                else:
                    result = PreFilterResult(result.node_names & plugin_result.node_names)
                if not result.node_names:
                    # No node can satisfy every restriction: the pod is rejected as a whole.
                    names = sorted(restricting)
                    text = (
                        f"node(s) didn't satisfy plugin {names[0]}"
                        if len(names) == 1
                        else f"node(s) didn't satisfy plugin(s) [{' '.join(names)}] simultaneously"
                    )
                    return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (text,), ",".join(names)), ()
        if rejection is not None:
            return None, rejection, ()
        return result, None, tuple(sorted(restricting))

    def run_filter(
        self,
        state: CycleState,
        pod: Pod,
        table: NodeTable,
        rows: IntpArray,
        codes: Int32Array,
        statuses: list[Status],
        plugins: Sequence[Any] | None = None,
    ) -> None:
        """The Filter plugins (all, or ``plugins``) over ``rows`` where ``codes`` is still 0; each plugin
        sees only the rows every earlier plugin passed, and a rejection is an index into ``statuses``."""
        skip = state.skip_filter
        for plugin in self.profile.filter if plugins is None else plugins:
            if plugin.name in skip:
                continue
            pending = np.flatnonzero(codes == 0)
            if not len(pending):
                break
            try:
                plugin_codes, plugin_statuses = plugin.filter_rows(state, pod, table, rows[pending])
            except PluginError as exc:
                raise FrameworkError(f'running "{plugin.name}" filter plugin: {exc}') from None
            failed = plugin_codes > 0
            if failed.any():
                codes[pending[failed]] = plugin_codes[failed] + len(statuses)
                statuses.extend(s.with_plugin(plugin.name) for s in plugin_statuses)

    def filter_node(self, state: CycleState, pod: Pod, table: NodeTable, row: int) -> Status | None:
        """Filter of one row: the same plugins over a one-row slice."""
        codes = np.zeros(1, dtype=np.int32)
        statuses: list[Status] = []
        self.run_filter(state, pod, table, np.array([row], dtype=np.intp), codes, statuses)
        return statuses[int(codes[0]) - 1] if codes[0] else None

    def run_filter_with_nominated_pods(
        self, state: CycleState, pod: Pod, node_info: NodeInfo, snapshot: Snapshot, table: NodeTable | None = None
    ) -> Status | None:
        """Filters once with the higher-or-equal priority pods nominated to the node added, then
        (if that passed) once without them, so the pod fits either way.

        ``table`` holds ``node_info`` in a row: the snapshot's own table by default, or the scratch
        table a preemption dry run keeps its cloned NodeInfo in.
        """
        table = snapshot.table if table is None else table
        nominated = outranking_nominated(pod, snapshot.nominated_pods.get(node_info.name, ()))
        if nominated:
            state_with = state.clone()
            info_with = node_info.clone()
            for nominated_pod in nominated:
                info_with.add_pod(nominated_pod)
                self.run_add_pod(state_with, pod, nominated_pod, info_with, snapshot)
            scratch = snapshot.table.scratch()
            status = self.filter_node(state_with, pod, scratch, scratch.add(info_with))
            if status is not None:
                return status
        return self.filter_node(state, pod, table, table.row_of[node_info.name])

    def run_add_pod(
        self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo, snapshot: Snapshot
    ) -> None:
        for plugin in self._extensions:
            if plugin.name not in state.skip_filter:
                plugin.add_pod(state, pod, pod_to_add, node_info, snapshot)

    def run_remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo, snapshot: Snapshot
    ) -> None:
        for plugin in self._extensions:
            if plugin.name not in state.skip_filter:
                plugin.remove_pod(state, pod, pod_to_remove, node_info, snapshot)

    def find_nodes_that_fit(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        positions: IntpArray | None = None,
        signature: str | None = None,
    ) -> FilterOutcome:
        """PreFilter, then Filter over the candidates: every node of the snapshot, or those at
        ``positions`` in its name order. With the pod's scheduling ``signature``, row-local plugins
        reuse their earlier verdicts for every row whose generation has not moved."""
        if positions is None:
            rows, names, infos = snapshot.rows, snapshot.names, snapshot.info_array
        else:
            rows, names, infos = snapshot.rows[positions], snapshot.names[positions], snapshot.info_array[positions]
        outcome = FilterOutcome(codes=np.zeros(len(rows), dtype=np.int32), rows=rows, names=names, infos=infos)
        result, status, restricting = self.run_pre_filter(state, pod, snapshot)
        if status is not None:
            outcome.pre_filter_status = status
            outcome.status_table.append(status)
            outcome.codes[:] = 1
            return outcome
        codes, table = outcome.codes, outcome.status_table
        allowed = result.node_names if result is not None else None
        if allowed is not None:
            # The framework's absent-node status: the restricting plugins sorted, as upstream's sets.List.
            table.append(
                Status(
                    Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                    (f"node(s) didn't satisfy plugin(s) [{' '.join(restricting)}]",),
                    ",".join(restricting),
                )
            )
            codes[[i for i, name in enumerate(names.tolist()) if name not in allowed]] = len(table)
        # Nodes holding nominated pods that outrank the pod are filtered one by one, with them added.
        nominated = {name for name, pods in snapshot.nominated_pods.items() if outranking_nominated(pod, pods)}
        special = np.array([name in nominated for name in names.tolist()], dtype=bool) if nominated else None
        if special is not None:
            codes[special & (codes == 0)] = -1
        memo = self._row_memo(state, snapshot, signature)
        if memo is None:
            self.run_filter(state, pod, snapshot.table, rows, codes, table)
        else:
            memo.filter(self, state, pod, snapshot, rows, codes, table)
            self.run_filter(state, pod, snapshot.table, rows, codes, table, self._other_filters)
        if special is not None:
            for i in np.flatnonzero(codes == -1).tolist():
                verdict = self.run_filter_with_nominated_pods(state, pod, infos[i], snapshot)
                codes[i] = 0
                if verdict is not None:
                    table.append(verdict)
                    codes[i] = len(table)
        return outcome

    # -- PostFilter -----------------------------------------------------------------------------

    def run_post_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, statuses: Mapping[str, Status | None]
    ) -> PreemptionResult:
        """Upstream's RunPostFilterPlugins for a pod no node fits: the first plugin that succeeds, fails
        with an error or rejects as unresolvable answers; otherwise every plugin's reasons are joined.
        Does not run without nodes (schedulePod fails before PostFilter) or without PostFilter plugins."""
        plugins = [p for p in self.profile.post_filter if isinstance(p, PostFilterPlugin)]
        if not snapshot.node_infos or not plugins:
            return NO_POST_FILTER
        reasons: list[str] = []
        for plugin in plugins:
            result = plugin.post_filter(state, pod, snapshot, self, statuses)
            if result.code != Code.UNSCHEDULABLE.value:
                return result
            if result.message:
                reasons.append(result.message)
        return PreemptionResult("", (), 0, (), ", ".join(reasons), Code.UNSCHEDULABLE.value)

    # -- PreScore / Score ------------------------------------------------------------------------

    def run_reserve(self, state: CycleState, pod: Pod, node_name: str, snapshot: Snapshot) -> list[object]:
        """Reserve: the records every Reserve plugin holds for ``pod`` on ``node_name``, in plugin order,
        to be written with the pod by whoever makes the reservation (a Reserver)."""
        held: list[object] = []
        for plugin in self.profile.reserve:
            held.extend(plugin.reserve(state, pod, node_name, snapshot))
        return held

    def run_pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: IntpArray) -> None:
        for plugin in self.profile.pre_score:
            status = plugin.pre_score(state, pod, snapshot, rows)
            if status is not None and status.code is Code.SKIP:
                state.skip_score.add(plugin.name)

    def run_score(
        self, state: CycleState, pod: Pod, outcome: FilterOutcome, snapshot: Snapshot, signature: str | None = None
    ) -> ScoreTable:
        """Scores, normalises and weighs every feasible node, plugin by plugin (row-local raw scores
        reused per row as in ``find_nodes_that_fit``; normalisation always sees every feasible node)."""
        # Most decisions find every candidate feasible: then nothing is gathered (5,000 names cost 25 µs).
        rows, names = outcome.feasible_rows, outcome.feasible_names
        table = snapshot.table
        totals = np.zeros(len(rows), dtype=np.int64)
        plugins: dict[str, Int64Array] = {}
        memo = self._row_memo(state, snapshot, signature)
        for weighted in self.profile.score:
            plugin = weighted.plugin
            if plugin.name in state.skip_score:
                continue
            try:
                if memo is not None and plugin.name in self._local_scores:
                    raw = memo.score(plugin, state, pod, snapshot, rows, plugin.name in self._node_scores)
                else:
                    raw = plugin.score_rows(state, pod, table, rows)
            except PluginError as exc:
                raise FrameworkError(f'running Score plugins: plugin "{plugin.name}" failed with: {exc}') from None
            if plugin.name in self._normalizers:
                raw = plugin.normalize_rows(state, pod, raw)  # type: ignore[attr-defined]
            scores = raw * weighted.weight
            plugins[plugin.name] = scores
            totals += scores
        return ScoreTable(names, totals, plugins)

    def _row_memo(self, state: CycleState, snapshot: Snapshot, signature: str | None) -> _RowMemo | None:
        """The memo of a pod signature over the cache's own tables (overlays and scratch tables have none)."""
        if signature is None or snapshot.pod_index is not None:
            return None
        memos: OrderedDict[tuple[str, frozenset[str]], _RowMemo] | None = getattr(self._memos, "by_signature", None)
        if memos is None:
            memos = self._memos.by_signature = OrderedDict()
        key = (signature, frozenset(state.skip_filter))
        memo = memos.get(key)
        if memo is None or not memo.follows(snapshot):
            memo = memos[key] = _RowMemo(snapshot.table)
            if len(memos) > _MEMO_SIGNATURES:
                memos.popitem(last=False)
        else:
            memos.move_to_end(key)
        return memo


# Pod signatures whose row columns are kept (each holds a few int64 columns over the table).
_MEMO_SIGNATURES = 64


def _reads_pods(plugin: Any) -> bool:
    return bool(getattr(plugin, "reads_pods", True))


def _invariant(plugin: Any, state: CycleState, pod: Pod) -> bool:
    """A plugin's own word that copies of ``pod`` placed anywhere change none of its answers for it."""
    check = getattr(plugin, "replica_invariant", None)
    return bool(check is not None and check(state, pod))


def _row_local_or_invariant(plugin: Any, state: CycleState, pod: Pod) -> bool:
    return bool(getattr(plugin, "row_local", False)) or _invariant(plugin, state, pod)


class _RowMemo:
    """What row-local plugins answered for one pod signature, per table row, and the cache generation
    the answers reflect. A row whose NodeInfo generation is above that generation has changed since
    (pods came or went, the node was replaced, the row was reused) and is evaluated again; every other
    row's answer stands, because a row-local plugin reads nothing but the row and the pod. A burst of
    replicas with assume so re-evaluates the one row each assume changed, not the cluster; and plugins
    that read only the row's Node (not its pods) not even that row, unless its Node changed.
    """

    __slots__ = (
        "_epoch",
        "_filter_generation",
        "_last_stale",
        "_score_generation",
        "_statuses",
        "codes",
        "newest",
        "node_codes",
        "scores",
        "table",
    )

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        # The leading row-local Filter plugins' first rejection per row (0 = all passed), and that of the
        # ones among them that read only the Node.
        self.codes = np.zeros(0, dtype=np.int32)
        self.node_codes = np.zeros(0, dtype=np.int32)
        self._statuses: dict[Status, int] = {}
        self._filter_generation = -1
        # Raw row-local scores per plugin, per row.
        self.scores: dict[str, Int64Array] = {}
        self._score_generation: dict[str, int] = {}
        self._epoch = table.epoch
        self._last_stale: tuple[NodeTable, tuple[int, int], IntpArray] | None = None
        # The newest generation answered from.
        self.newest = -1

    def follows(self, snapshot: Snapshot) -> bool:
        """Whether this memo can answer over ``snapshot``: its own table, or a later table of the same cache
        (a freeze hands the cache a fork of its table, with the same row generations), at a generation no
        older than any answered. A frozen generation older than that starts a memo of its own."""
        table = snapshot.table
        if table is self.table:
            return True
        same_cache = getattr(table, "lineage", None) is getattr(self.table, "lineage", False)
        if not same_cache or snapshot.generation < self.newest:
            return False
        self.table = table
        return True

    def _stale(self, generation: int, size: int) -> IntpArray | None:
        """Rows to evaluate again (None: all of them)."""
        table = self.table
        if self._epoch != table.epoch:
            # The cache undid batches: generation numbers were issued again, so none can be trusted.
            self._epoch, self._filter_generation, self._score_generation = table.epoch, -1, {}
            return None
        if generation < 0 or size != table.capacity:
            return None
        # The filter and every scorer ask for the same rows within a decision: found once.
        last = self._last_stale
        if last is not None and last[0] is table and last[1] == (generation, table.writes):
            return last[2]
        stale = np.flatnonzero((table.row_generation > generation) & table.live)
        self._last_stale = (table, (generation, table.writes), stale)
        return stale

    def filter(
        self,
        framework: Framework,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        rows: IntpArray,
        codes: Int32Array,
        statuses: list[Status],
    ) -> None:
        table = self.table
        generation = self._filter_generation
        stale = self._stale(generation, len(self.codes))
        if stale is None:
            self.codes = np.zeros(table.capacity, dtype=np.int32)
            self.node_codes = np.zeros(table.capacity, dtype=np.int32)
            self._statuses = {}
            stale = snapshot.rows
            node_stale = stale
        else:
            node_stale = self._node_changed(stale, generation)
        if len(node_stale) and framework._node_filters:
            self.node_codes[node_stale] = self._run(framework, state, pod, node_stale, framework._node_filters)
        if len(stale):
            prefix = self.node_codes.take(stale)
            self.codes[stale] = prefix
            passing = stale[prefix == 0]
            if len(passing) and framework._pod_filters:
                self.codes[passing] = self._run(framework, state, pod, passing, framework._pod_filters)
        self._filter_generation = snapshot.generation
        self.newest = max(self.newest, snapshot.generation)
        local = self.codes[rows]
        hit = (codes == 0) & (local > 0)
        codes[hit] = local[hit] + len(statuses)
        statuses.extend(self._statuses)

    def _node_changed(self, stale: IntpArray, generation: int) -> IntpArray:
        """Of the ``stale`` rows, those whose Node changed since ``generation``: a row whose Node changed is a
        row that changed (the Node's generation is the row's then), so only the stale rows need looking at."""
        return stale[self.table.node_generation.take(stale) > generation]

    def _run(
        self, framework: Framework, state: CycleState, pod: Pod, rows: IntpArray, plugins: Sequence[Any]
    ) -> Int32Array:
        """``plugins``' first rejection on ``rows``, as codes into this memo's statuses (0 = all passed)."""
        fresh = np.zeros(len(rows), dtype=np.int32)
        found: list[Status] = []
        framework.run_filter(state, pod, self.table, rows, fresh, found, plugins)
        known = self._statuses
        remap = np.array([0, *(known.setdefault(s, len(known) + 1) for s in found)], dtype=np.int32)
        return remap[fresh]

    def score(
        self, plugin: Any, state: CycleState, pod: Pod, snapshot: Snapshot, rows: IntpArray, node_only: bool = False
    ) -> Int64Array:
        """A row-local plugin's raw scores of ``rows``; with ``node_only`` it reads only each row's Node."""
        column = self.scores.get(plugin.name)
        generation = self._score_generation.get(plugin.name, -1)
        stale = None if column is None else self._stale(generation, len(column))
        if column is None or stale is None:
            column = self.scores[plugin.name] = np.zeros(self.table.capacity, dtype=np.int64)
            stale = snapshot.rows
        elif node_only and len(stale):
            stale = self._node_changed(stale, generation)
        if len(stale):
            column[stale] = plugin.score_rows(state, pod, self.table, stale)
        self._score_generation[plugin.name] = snapshot.generation
        self.newest = max(self.newest, snapshot.generation)
        return column.take(rows)


def outranking_nominated(pod: Pod, nominated: Sequence[Pod]) -> list[Pod]:
    """The pods nominated to a node that reserve their room against ``pod``: at least its priority."""
    return [p for p in nominated if p.priority >= pod.priority and not _same_pod(p, pod)]


def _same_pod(a: Pod, b: Pod) -> bool:
    if a.uid and b.uid:
        return a.uid == b.uid
    return a.key == b.key
