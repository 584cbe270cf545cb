"""PodTopologySpread: keeps matching pods evenly spread over topology domains (upstream
plugins/podtopologyspread).

DoNotSchedule constraints filter, ScheduleAnyway constraints score. Pods without constraints get the
cluster-default ones (System: hostname and zone, ScheduleAnyway), selecting the pods of the Services,
ReplicaSets, StatefulSets and ReplicationControllers the pod belongs to. PreFilter and PreScore count
matching pods per domain once; Filter and Score then cost O(constraints) per node.

The counts come from the pod index (matching pods per row, kept across decisions; an overlay's view of it
for forked snapshots) summed per domain with numpy, and filter_rows / score_rows gather them by label code.
As upstream's countPodsMatchSelector, PreFilter, PreScore and Score do not count terminating pods (with a
deletionTimestamp); preemption's AddPod/RemovePod count every pod they are given, terminating or not, as
upstream's updateWithPod does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from podfit.server.cache.node_info import NodeInfo
from podfit.server.cache.pod_index import PodIndexView, PodQuery
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import (
    MAX_NODE_SCORE,
    Int32Array,
    Int64Array,
    IntpArray,
    PreFilterResult,
)
from podfit.server.framework.profile import POD_TOPOLOGY_SPREAD
from podfit.server.framework.status import SKIP, Status, unresolvable, unschedulable
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import Kind, Node, Pod, TopologySpreadConstraint, WorkloadSelector
from podfit.server.model.errors import ValidationError
from podfit.server.model.node_selectors import required_node_affinity_matches
from podfit.server.model.objects import Labels, LabelSelector, parse_label_selector
from podfit.server.plugins.helper import do_not_schedule_taints, find_untolerated_taint

if TYPE_CHECKING:
    from podfit.server.cache.node_table import LabelColumn, NodeTable
    from podfit.server.cache.snapshot import Snapshot

BoolArray = npt.NDArray[np.bool_]

REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
REASON_NODE_LABEL_NOT_MATCH = REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE = "topology.kubernetes.io/zone"

SYSTEM_DEFAULT_CONSTRAINTS = (
    TopologySpreadConstraint(
        max_skew=3, topology_key=LABEL_HOSTNAME, when_unsatisfiable=SCHEDULE_ANYWAY, label_selector=None
    ),
    TopologySpreadConstraint(
        max_skew=5, topology_key=LABEL_ZONE, when_unsatisfiable=SCHEDULE_ANYWAY, label_selector=None
    ),
)

_PRE_FILTER_KEY = "PreFilter" + POD_TOPOLOGY_SPREAD
_PRE_SCORE_KEY = "PreScore" + POD_TOPOLOGY_SPREAD
_MAX_INT32 = 2**31 - 1
_MAX_INT64 = 2**63 - 1
# Score of a node PreScore ignored (it lacks a topology key); NormalizeScore turns it into 0.
_INVALID_SCORE = -1
_ARG_NAMES = frozenset({"defaultConstraints", "defaultingType", "apiVersion", "kind"})


# --------------------------------------------------------------------------------------------------
# Constraints


@dataclass(frozen=True, slots=True)
class Constraint:
    """A constraint as the plugin uses it: selector merged with matchLabelKeys, defaults applied."""

    max_skew: int
    topology_key: str
    # None matches no pod (a constraint without labelSelector).
    selector: LabelSelector | None
    min_domains: int = 1
    honor_node_affinity: bool = True
    honor_node_taints: bool = False

    def matches(self, labels: Labels) -> bool:
        return self.selector is not None and self.selector.matches(labels)


def constraints_for_action(
    constraints: Iterable[TopologySpreadConstraint], pod_labels: Labels, action: str
) -> list[Constraint]:
    """The constraints with ``whenUnsatisfiable == action``; matchLabelKeys the pod carries are ANDed into
    the selector (kube-scheduler merges them itself; an already merged selector is unchanged in effect)."""
    result = []
    for c in constraints:
        if c.when_unsatisfiable != action:
            continue
        selector = c.label_selector
        if selector is not None and c.match_label_keys:
            extra = tuple((k, pod_labels[k]) for k in c.match_label_keys if k in pod_labels)
            if extra:
                selector = LabelSelector(extra + selector.match_labels, selector.match_expressions)
        result.append(
            Constraint(
                max_skew=c.max_skew,
                topology_key=c.topology_key,
                selector=selector,
                min_domains=1 if c.min_domains is None else c.min_domains,
                honor_node_affinity=(c.node_affinity_policy or HONOR) == HONOR,
                honor_node_taints=(c.node_taints_policy or IGNORE) == HONOR,
            )
        )
    return result


def _parse_group_version(api_version: str) -> tuple[str, str] | None:
    """schema.ParseGroupVersion: "" and "v1" have no group; more than one slash is an error."""
    if not api_version:
        return ("", "")
    parts = api_version.split("/")
    if len(parts) == 1:
        return ("", api_version)
    if len(parts) == 2:
        return (parts[0], parts[1])
    return None


_OWNER_KINDS = {
    ("", "v1", "ReplicationController"): Kind.REPLICATION_CONTROLLER,
    ("apps", "v1", "ReplicaSet"): Kind.REPLICA_SET,
    ("apps", "v1", "StatefulSet"): Kind.STATEFUL_SET,
}


def default_selector(pod: Pod, workloads: Sequence[WorkloadSelector]) -> LabelSelector | None:
    """helper.DefaultSelector: the union of the selectors of the Services selecting the pod and of its
    controller (ReplicationController, ReplicaSet or StatefulSet of the same name and namespace, found by
    the owner reference's apiVersion and kind). None when that selects nothing specific."""
    label_set: dict[str, str] = {}
    for w in workloads:
        selector = w.selector
        if (
            w.kind is Kind.SERVICE
            and w.namespace == pod.namespace
            and selector is not None
            and selector.matches(pod.labels)
        ):
            label_set.update(selector.match_labels)
    extra: LabelSelector | None = None
    owner = next((ref for ref in pod.owner_references if ref.controller), None)
    if owner is not None:
        gv = _parse_group_version(owner.api_version)
        kind = _OWNER_KINDS.get((gv[0], gv[1], owner.kind)) if gv is not None else None
        if kind is not None:
            found = next(
                (w for w in workloads if w.kind is kind and w.namespace == pod.namespace and w.name == owner.name),
                None,
            )
            if found is not None and found.selector is not None:
                if kind is Kind.REPLICATION_CONTROLLER:
                    label_set.update(found.selector.match_labels)
                else:
                    extra = found.selector
    match_labels = tuple(sorted(label_set.items()))
    if extra is not None:
        own = tuple(pair for pair in extra.match_labels if pair not in match_labels)
        selector = LabelSelector(match_labels + own, extra.match_expressions)
    else:
        selector = LabelSelector(match_labels)
    return None if selector.empty else selector


def _has_all_keys(labels: Labels, constraints: Sequence[Constraint]) -> bool:
    return all(c.topology_key in labels for c in constraints)


# --------------------------------------------------------------------------------------------------
# Cycle state


class _CriticalPaths:
    """The two domains with the fewest matching pods, updated exactly as upstream's criticalPaths (only the
    first, the minimum, is read; after add/remove it is an approximation upstream shares)."""

    __slots__ = ("nums", "values")

    def __init__(self, values: list[str] | None = None, nums: list[int] | None = None) -> None:
        self.values = values if values is not None else ["", ""]
        self.nums = nums if nums is not None else [_MAX_INT32, _MAX_INT32]

    @classmethod
    def of(cls, values: Sequence[str], nums: Sequence[int]) -> _CriticalPaths:
        """The paths ``update`` leaves after visiting the domains in order.

        Without a domain named "" (the initial placeholder), that is the first minimum and the first
        minimum of the rest, so domains need not be visited one by one.
        """
        path = cls()
        if "" in values:
            for value, num in zip(values, nums, strict=True):
                path.update(value, num)
            return path
        counts = np.asarray(nums, dtype=np.int64)
        for slot in (0, 1):
            if not len(counts):
                break
            first = int(np.argmin(counts))
            if counts[first] >= _MAX_INT32:
                break
            path.values[slot], path.nums[slot] = values[first], int(counts[first])
            counts = counts.copy()
            counts[first] = _MAX_INT64
        return path

    def update(self, value: str, num: int) -> None:
        values, nums = self.values, self.nums
        i = 0 if value == values[0] else 1 if value == values[1] else -1
        if i >= 0:
            nums[i] = num
            if nums[0] > nums[1]:
                values.reverse()
                nums.reverse()
        elif num < nums[0]:
            values[1], nums[1] = values[0], nums[0]
            values[0], nums[0] = value, num
        elif num < nums[1]:
            values[1], nums[1] = value, num

    def clone(self) -> _CriticalPaths:
        return _CriticalPaths(list(self.values), list(self.nums))


@dataclass(frozen=True, slots=True)
class _CodeCounts:
    """One constraint's domain counts by value code of the topology key's NodeTable column (``names`` is
    the column's value list); ``order`` lists the domains' codes in the order the dict form keeps."""

    names: list[str]
    by_code: Int64Array
    order: IntpArray | None = None

    def as_dict(self) -> dict[str, int]:
        assert self.order is not None
        names = self.names
        codes = self.order.tolist()
        return dict(zip([names[c] for c in codes], self.by_code[self.order].tolist(), strict=True))


class _PreFilterState:
    """Per constraint: domain -> matching pods. The counts stay arrays by value code until preemption's
    add_pod/remove_pod or a table with other value codes needs the dict form."""

    __slots__ = ("_counts", "_vectors", "constraints", "paths", "self_match", "sizes")

    def __init__(
        self,
        constraints: list[Constraint],
        counts: list[dict[str, int] | None],
        paths: list[_CriticalPaths],
        self_match: list[int],
        sizes: list[int],
        vectors: list[_CodeCounts | None],
    ) -> None:
        self.constraints = constraints
        # Per constraint: domain value -> matching pods (every eligible domain present, possibly 0);
        # None until built from the vector form.
        self._counts = counts
        self.paths = paths
        # Per constraint: 1 when the incoming pod matches the selector itself.
        self.self_match = self_match
        # Per constraint: how many domains are eligible (the dict's length).
        self.sizes = sizes
        # Per constraint: the counts by value code, while they agree with the dict form.
        self._vectors = vectors

    @property
    def counts(self) -> list[dict[str, int]]:
        counts = self._counts
        for i, by_value in enumerate(counts):
            if by_value is None:
                vector = self._vectors[i]
                assert vector is not None
                counts[i] = vector.as_dict()
        return counts  # type: ignore[return-value]

    def clone(self) -> _PreFilterState:
        return _PreFilterState(
            self.constraints,
            [None if c is None else dict(c) for c in self._counts],
            [p.clone() for p in self.paths],
            self.self_match,
            list(self.sizes),
            list(self._vectors),
        )

    def min_match(self, i: int) -> int:
        """The global minimum; 0 while fewer domains than minDomains are eligible."""
        if self.sizes[i] < self.constraints[i].min_domains:
            return 0
        return self.paths[i].nums[0]

    def code_counts(self, i: int, column: LabelColumn) -> Int64Array:
        """Constraint i's counts indexed by the column's value codes (0 for codes beyond known domains)."""
        vector = self._vectors[i]
        if vector is None or vector.names is not column.names:
            by_code = np.zeros(len(column.names), dtype=np.int64)
            for value, count in self.counts[i].items():
                code = column.values.get(value)
                if code is not None:
                    by_code[code] = count
            vector = self._vectors[i] = _CodeCounts(column.names, by_code)
        return vector.by_code

    def update_with_pod(self, incoming: Pod, other: Pod, info: NodeInfo, snapshot: Snapshot, delta: int) -> None:
        """Counts ``other`` in or out of its node's domains (preemption's AddPod/RemovePod). The node is a
        row of the snapshot's table (a dry run changes only its pods), judged by the same row kernels."""
        if other.namespace != incoming.namespace:
            return
        labels = info.node.labels
        if not _has_all_keys(labels, self.constraints):
            return
        node = _Rows(incoming, snapshot.table, np.array([snapshot.table.row_of[info.name]], dtype=np.intp))
        all_counts = self.counts
        for i, c in enumerate(self.constraints):
            included = node.includes(c)
            if not c.matches(other.labels) or (included is not None and not included[0]):
                continue
            value = labels[c.topology_key]
            counts = all_counts[i]
            counts[value] = counts.get(value, 0) + delta
            self.paths[i].update(value, counts[value])
            self.sizes[i] = len(counts)
            self._vectors[i] = None


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    constraints: list[Constraint]
    ignored_nodes: frozenset[str]
    # Per constraint (except hostname ones, counted in Score): domain value -> matching pods.
    counts: list[dict[str, int]]
    weights: list[float]
    # Computed over the NodeTable: per constraint, the counts by value code (not hostname ones) and, for
    # hostname ones, the matching pods per table row.
    code_counts: list[Int64Array | None] | None = None
    row_counts: list[Int64Array | None] | None = None

    def clone(self) -> _PreScoreState:
        return self


# --------------------------------------------------------------------------------------------------
# Nodes as NodeTable rows


class _Rows:
    """Some nodes as NodeTable rows, for one incoming pod: label codes and inclusion masks, each computed
    once (node affinity once per distinct combination of the labels it reads, taints once per taint list)."""

    __slots__ = ("_affinity", "_codes", "_taints", "pod", "rows", "table")

    def __init__(self, pod: Pod, table: NodeTable, rows: IntpArray) -> None:
        self.pod = pod
        self.table = table
        self.rows = rows
        self._codes: dict[str, Int32Array] = {}
        self._affinity: BoolArray | None = None
        self._taints: BoolArray | None = None

    def codes(self, key: str) -> Int32Array:
        codes = self._codes.get(key)
        if codes is None:
            codes = self._codes[key] = self.table.label_codes(key, self.rows)
        return codes

    def has_all(self, constraints: Sequence[Constraint]) -> BoolArray:
        mask = np.ones(len(self.rows), dtype=bool)
        for c in constraints:
            mask &= self.codes(c.topology_key) >= 0
        return mask

    def includes(self, c: Constraint) -> BoolArray | None:
        """Rows whose pods count for the constraint (None: all)."""
        mask: BoolArray | None = None
        if c.honor_node_affinity:
            if self._affinity is None:
                self._affinity = self._affinity_mask()
            mask = self._affinity
        if c.honor_node_taints:
            if self._taints is None:
                self._taints = self._taint_mask()
            mask = self._taints if mask is None else mask & self._taints
        return mask

    def _affinity_mask(self) -> BoolArray:
        pod, table, rows = self.pod, self.table, self.rows
        terms = pod.required_node_affinity
        if not pod.node_selector and terms is None:
            return np.ones(len(rows), dtype=bool)
        if terms is not None and any(t.match_fields for t in terms):
            infos = table.infos
            return np.fromiter(
                (required_node_affinity_matches(pod, infos[r].node) for r in rows.tolist()),
                dtype=bool,
                count=len(rows),
            )
        keys = sorted({*pod.node_selector, *(r.key for t in terms or () for r in t.match_expressions)})
        if not keys:
            return np.full(len(rows), required_node_affinity_matches(pod, Node(name="")), dtype=bool)
        names = [column.names if (column := table.labels.get(k)) is not None else [] for k in keys]
        unique, inverse = np.unique(np.stack([self.codes(k) for k in keys], axis=1), axis=0, return_inverse=True)
        verdicts = []
        for combo in unique.tolist():
            labels = {k: values[code] for k, values, code in zip(keys, names, combo, strict=True) if code >= 0}
            verdicts.append(required_node_affinity_matches(pod, Node(name="", labels=labels)))
        return np.array(verdicts, dtype=bool)[inverse.reshape(-1)]

    def _taint_mask(self) -> BoolArray:
        table = self.table
        sets = table.taint_set[self.rows]
        verdict = np.zeros(len(table.taint_sets), dtype=bool)
        for index in np.unique(sets).tolist():
            taint = find_untolerated_taint(table.taint_sets[index], self.pod.tolerations, do_not_schedule_taints)
            verdict[index] = taint is None
        return verdict[sets]


def _first_seen(codes: Int32Array | IntpArray, size: int) -> IntpArray:
    """The distinct codes (all below ``size``) in the order they first occur; O(n), unlike np.unique's sort."""
    n = len(codes)
    first = np.full(size, n, dtype=np.intp)
    np.minimum.at(first, codes, np.arange(n, dtype=np.intp))
    present = np.flatnonzero(first < n)
    return present[np.argsort(first[present], kind="stable")]


def _gather(by_code: Int64Array, codes: Int32Array, size: int) -> Int64Array:
    """by_code[code] per row, for codes of a column with ``size`` values; 0 for absent labels (-1, which
    indexes the zero padding at the end) and for codes the array does not reach."""
    padded = np.zeros(size + 1, dtype=np.int64)
    padded[: len(by_code)] = by_code
    return padded[codes]


def _selector_counts(
    index: PodIndexView, selector: LabelSelector | None, namespace: str, cache: dict[LabelSelector | None, Int64Array]
) -> Int64Array:
    """countPodsMatchSelector for every table row: pods of ``namespace`` the selector matches, terminating
    pods (with a deletionTimestamp) bypassed; empty and absent selectors count nothing."""
    counts = cache.get(selector)
    if counts is None:
        if selector is None or selector.empty:
            counts = np.zeros(index.capacity, dtype=np.int64)
        else:
            counts = index.pod_counts(PodQuery(((frozenset((namespace,)), selector),), skip_terminating=True))
        cache[selector] = counts
    return counts


# --------------------------------------------------------------------------------------------------
# Plugin


class PodTopologySpread:
    name = POD_TOPOLOGY_SPREAD

    def __init__(
        self,
        default_constraints: Sequence[TopologySpreadConstraint] = SYSTEM_DEFAULT_CONSTRAINTS,
        system_defaulted: bool = True,
    ) -> None:
        self.default_constraints = tuple(default_constraints)
        self.system_defaulted = system_defaulted

    def constraints(self, pod: Pod, action: str, snapshot: Snapshot) -> list[Constraint]:
        """The pod's own constraints for ``action``, or the cluster defaults when it has none."""
        if pod.topology_spread_constraints:
            return constraints_for_action(pod.topology_spread_constraints, pod.labels, action)
        defaults = constraints_for_action(self.default_constraints, pod.labels, action)
        if not defaults:
            return []
        selector = default_selector(pod, snapshot.workloads)
        if selector is None:
            return []
        return [replace(c, selector=selector) for c in defaults]

    # -- PreFilter / Filter ----------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        constraints = self.constraints(pod, DO_NOT_SCHEDULE, snapshot)
        if not constraints:
            return None, SKIP
        self_match = [1 if c.matches(pod.labels) else 0 for c in constraints]
        s = self._pre_filter_rows(pod, constraints, self_match, snapshot.table, snapshot.rows, snapshot.index())
        state.write(_PRE_FILTER_KEY, s)
        return None, None

    def _pre_filter_rows(
        self,
        pod: Pod,
        constraints: list[Constraint],
        self_match: list[int],
        table: NodeTable,
        rows: IntpArray,
        index: PodIndexView,
    ) -> _PreFilterState:
        """The same counts over the NodeTable: matching pods per row from the pod index, summed per domain
        over the rows that carry every key and pass the inclusion policies. Domains keep the order in which
        the nodes (by name) first show them, as the node-by-node count does."""
        nodes = _Rows(pod, table, rows)
        eligible = nodes.has_all(constraints)
        matched: dict[LabelSelector | None, Int64Array] = {}
        vectors: list[_CodeCounts | None] = []
        paths, sizes = [], []
        for c in constraints:
            mask = eligible
            included = nodes.includes(c)
            if included is not None:
                mask = mask & included
            column = table.labels.get(c.topology_key)
            names = column.names if column is not None else []
            codes = nodes.codes(c.topology_key)[mask]
            pods = _selector_counts(index, c.selector, pod.namespace, matched)[rows[mask]]
            by_code = np.bincount(codes, weights=pods, minlength=len(names)).astype(np.int64)
            order = _first_seen(codes, len(names))
            vectors.append(_CodeCounts(names, by_code, order))
            paths.append(_CriticalPaths.of([names[k] for k in order.tolist()], by_code[order].tolist()))
            sizes.append(len(order))
        return _PreFilterState(constraints, [None] * len(constraints), paths, self_match, sizes, vectors)

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo, snapshot: Snapshot) -> None:
        state.read(_PRE_FILTER_KEY, _PreFilterState).update_with_pod(pod, pod_to_add, node_info, snapshot, 1)

    def remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo, snapshot: Snapshot
    ) -> None:
        state.read(_PRE_FILTER_KEY, _PreFilterState).update_with_pod(pod, pod_to_remove, node_info, snapshot, -1)

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        """Filter over table rows: per constraint a gather of the domain's count; the first failing
        constraint decides, as in Filter."""
        s = state.read(_PRE_FILTER_KEY, _PreFilterState)
        result = np.zeros(len(rows), dtype=np.int32)
        for i, c in enumerate(s.constraints):
            column = table.labels.get(c.topology_key)
            if column is None:
                verdict = np.ones(len(rows), dtype=np.int32)
            else:
                codes = column.codes[rows]
                skew = _gather(s.code_counts(i, column), codes, len(column.names)) + (s.self_match[i] - s.min_match(i))
                verdict = (skew > c.max_skew).astype(np.int32) * 2
                verdict[codes < 0] = 1
            result = verdict if i == 0 else np.where(result == 0, verdict, result)
        return result, [unresolvable(REASON_NODE_LABEL_NOT_MATCH), unschedulable(REASON_CONSTRAINTS_NOT_MATCH)]

    # -- PreScore / Score ------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: IntpArray) -> Status | None:
        """Counts matching pods over all nodes, per domain present among the feasible nodes.

        Own constraints (or List defaults) require a node to carry every topology key to be scored; with
        the System defaults a node lacking the zone label is still scored for hostname spreading.
        """
        if not snapshot.node_infos:
            return SKIP
        constraints = self.constraints(pod, SCHEDULE_ANYWAY, snapshot)
        if not constraints:
            return SKIP
        require_all = bool(pod.topology_spread_constraints) or not self.system_defaulted
        index = snapshot.index()
        s = self._pre_score_rows(pod, constraints, require_all, rows, snapshot.table, snapshot.rows, index)
        state.write(_PRE_SCORE_KEY, s)
        return None

    def _pre_score_rows(
        self,
        pod: Pod,
        constraints: list[Constraint],
        require_all: bool,
        feasible: IntpArray,
        table: NodeTable,
        rows: IntpArray,
        index: PodIndexView,
    ) -> _PreScoreState:
        """The same over the NodeTable. A node without the key belongs to domain "" (System defaults only),
        which shares the code of a real "" label value when some node has one."""
        scored, every = _Rows(pod, table, feasible), _Rows(pod, table, rows)
        kept = scored.has_all(constraints) if require_all else np.ones(len(feasible), dtype=bool)
        infos = table.infos
        ignored = frozenset(infos[r].name for r in feasible[~kept].tolist())
        eligible = every.has_all(constraints) if require_all else np.ones(len(rows), dtype=bool)
        matched: dict[LabelSelector | None, Int64Array] = {}
        counts: list[dict[str, int]] = []
        weights: list[float] = []
        code_counts: list[Int64Array | None] = []
        row_counts: list[Int64Array | None] = []
        for c in constraints:
            if c.topology_key == LABEL_HOSTNAME:
                weights.append(math.log(float(int(kept.sum()) + 2)))
                counts.append({})
                code_counts.append(None)
                row_counts.append(_selector_counts(index, c.selector, pod.namespace, matched).copy())
                continue
            column = table.labels.get(c.topology_key)
            names = [*(column.names if column is not None else []), ""]
            blank = column.values.get("", len(names) - 1) if column is not None else 0
            domains = _domains(scored.codes(c.topology_key)[kept], blank)
            present = np.zeros(len(names), dtype=bool)
            present[domains] = True
            all_domains = _domains(every.codes(c.topology_key), blank)
            mask = eligible & present[all_domains]
            included = every.includes(c)
            if included is not None:
                mask &= included
            pods = _selector_counts(index, c.selector, pod.namespace, matched)[rows[mask]]
            by_domain = np.bincount(all_domains[mask], weights=pods, minlength=len(names)).astype(np.int64)
            order = _first_seen(domains, len(names)).tolist()
            counts.append(dict(zip([names[d] for d in order], by_domain[order].tolist(), strict=True)))
            weights.append(math.log(float(len(order) + 2)))
            by_code = by_domain[:-1].copy()
            code_counts.append(by_code)
            row_counts.append(None)
        return _PreScoreState(constraints, ignored, counts, weights, code_counts, row_counts)

    def score_rows(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray) -> Int64Array:
        """Score over table rows, with the same float64 operations in the same order, then rounded alike."""
        s = state.read(_PRE_SCORE_KEY, _PreScoreState)
        total = np.zeros(len(rows), dtype=np.float64)
        for i, c in enumerate(s.constraints):
            codes = table.label_codes(c.topology_key, rows)
            present = codes >= 0
            if c.topology_key == LABEL_HOSTNAME:
                assert s.row_counts is not None
                per_row = s.row_counts[i]
                assert per_row is not None
                count = per_row[rows]
            else:
                column = table.labels.get(c.topology_key)
                if column is None:
                    continue
                by_code = s.code_counts[i] if s.code_counts is not None else None
                if by_code is None or len(by_code) != len(column.names):
                    by_code = np.array([s.counts[i].get(v, 0) for v in column.names], dtype=np.int64)
                count = _gather(by_code, codes, len(column.names))
            term = count.astype(np.float64) * s.weights[i] + float(c.max_skew - 1)
            total = np.where(present, total + term, total)
        scores = _round_half_away_rows(total)
        if s.ignored_nodes:
            infos = table.infos
            ignored = np.fromiter(
                (infos[r].name in s.ignored_nodes for r in rows.tolist()),
                dtype=bool,
                count=len(rows),
            )
            scores[ignored] = _INVALID_SCORE
        return scores

    def normalize_rows(self, state: CycleState, pod: Pod, scores: Int64Array) -> Int64Array:
        valid = scores != _INVALID_SCORE
        if not valid.any():
            return np.zeros(len(scores), dtype=np.int64)
        low = int(scores[valid].min())
        high = max(0, int(scores[valid].max()))
        if high == 0:
            return np.where(valid, MAX_NODE_SCORE, 0).astype(np.int64)
        return np.where(valid, MAX_NODE_SCORE * (high + low - scores) // high, 0).astype(np.int64)


def _domains(codes: Int32Array, blank: int) -> IntpArray:
    """Value codes as PreScore's domains: nodes without the key (-1) join domain "" (code ``blank``)."""
    domains = codes.astype(np.intp)
    domains[domains < 0] = blank
    return domains


def _round_half_away(x: float) -> int:
    """Go's math.Round (halves away from zero), for the non-negative raw scores."""
    floor = math.floor(x)
    return int(floor) + 1 if x - floor >= 0.5 else int(floor)


def _round_half_away_rows(x: npt.NDArray[np.float64]) -> Int64Array:
    """_round_half_away over a column, with the same float operations."""
    floor = np.floor(x)
    return floor.astype(np.int64) + (x - floor >= 0.5)


# --------------------------------------------------------------------------------------------------
# Arguments

_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _valid_label_key(key: str) -> bool:
    """metav1validation.ValidateLabelName: an optional DNS-subdomain prefix and a 63-character name."""
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        return False
    has_prefix = prefix or key.startswith("/")
    if has_prefix and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return 0 < len(name) <= 63 and _LABEL_NAME.fullmatch(name) is not None


def _parse_default_constraint(value: Any, path: str) -> TopologySpreadConstraint:
    if isinstance(value, TopologySpreadConstraint):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"{path}: must be an object")
    max_skew = value.get("maxSkew", 0)
    if isinstance(max_skew, bool) or not isinstance(max_skew, int):
        raise ValueError(f"{path}.maxSkew: must be an integer")
    min_domains = value.get("minDomains")
    if min_domains is not None and (isinstance(min_domains, bool) or not isinstance(min_domains, int)):
        raise ValueError(f"{path}.minDomains: must be an integer")
    keys = value.get("matchLabelKeys") or ()
    if not isinstance(keys, list | tuple) or not all(isinstance(k, str) for k in keys):
        raise ValueError(f"{path}.matchLabelKeys: must be a list of strings")
    strings = {}
    for field in ("topologyKey", "whenUnsatisfiable", "nodeAffinityPolicy", "nodeTaintsPolicy"):
        item = value.get(field) or ""
        if not isinstance(item, str):
            raise ValueError(f"{path}.{field}: must be a string")
        strings[field] = item
    try:
        selector = parse_label_selector(value.get("labelSelector"), f"{path}.labelSelector")
    except ValidationError as exc:
        raise ValueError(str(exc)) from exc
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=strings["topologyKey"],
        when_unsatisfiable=strings["whenUnsatisfiable"],
        label_selector=selector,
        min_domains=min_domains,
        node_affinity_policy=strings["nodeAffinityPolicy"],
        node_taints_policy=strings["nodeTaintsPolicy"],
        match_label_keys=tuple(keys),
    )


def _validate_default_constraints(constraints: Sequence[TopologySpreadConstraint]) -> None:
    """ValidatePodTopologySpreadArgs for .defaultConstraints."""
    for i, c in enumerate(constraints):
        path = f"defaultConstraints[{i}]"
        if c.max_skew <= 0:
            raise ValueError(f"{path}.maxSkew: Invalid value: {c.max_skew}: not in valid range (0, inf)")
        if not c.topology_key:
            raise ValueError(f"{path}.topologyKey: Required value: can not be empty")
        if not _valid_label_key(c.topology_key):
            raise ValueError(f"{path}.topologyKey: Invalid value: {c.topology_key!r}: not a valid label name")
        if not c.when_unsatisfiable:
            raise ValueError(f"{path}.whenUnsatisfiable: Required value: can not be empty")
        if c.when_unsatisfiable not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise ValueError(
                f"{path}.whenUnsatisfiable: Unsupported value: {c.when_unsatisfiable!r}: "
                f'supported values: "{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"'
            )
        if c.label_selector is not None:
            raise ValueError(
                f"{path}.labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod"
            )
        for other in constraints[:i]:
            if other.topology_key == c.topology_key and other.when_unsatisfiable == c.when_unsatisfiable:
                raise ValueError(
                    f"defaultConstraints[{i}]: Duplicate value: {{{c.topology_key}, {c.when_unsatisfiable}}}"
                )


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> PodTopologySpread:
    unknown = sorted(set(args) - _ARG_NAMES)
    if unknown:
        raise ValueError(f"PodTopologySpreadArgs: unknown field(s) {', '.join(unknown)}")
    defaulting = args.get("defaultingType") or SYSTEM_DEFAULTING
    if defaulting not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
        raise ValueError(
            f"defaultingType: Unsupported value: {defaulting!r}: "
            f'supported values: "{SYSTEM_DEFAULTING}", "{LIST_DEFAULTING}"'
        )
    raw = args.get("defaultConstraints") or []
    if not isinstance(raw, list | tuple):
        raise ValueError("defaultConstraints: must be a list")
    constraints = [_parse_default_constraint(item, f"defaultConstraints[{i}]") for i, item in enumerate(raw)]
    if defaulting == SYSTEM_DEFAULTING and constraints:
        raise ValueError(f"defaultingType: Invalid value: {defaulting!r}: when .defaultConstraints are not empty")
    _validate_default_constraints(constraints)
    if defaulting == SYSTEM_DEFAULTING:
        return PodTopologySpread(SYSTEM_DEFAULT_CONSTRAINTS, system_defaulted=True)
    return PodTopologySpread(constraints, system_defaulted=False)
