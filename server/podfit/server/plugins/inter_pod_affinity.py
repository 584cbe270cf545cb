"""InterPodAffinity: required pod (anti-)affinity as a filter, preferred terms as a score (upstream
plugins/interpodaffinity).

Symmetry is what makes this plugin cross-pod: existing pods' required anti-affinity repels the incoming
pod, and existing pods' affinity terms attract it when scoring. PreFilter and PreScore fold every pod
into counts per topology pair (label key, value) once, so Filter and Score only look up the node's labels.

The folding reads the pod index instead of every pod: matching pods per row for the incoming pod's terms,
and only those existing terms that can select the incoming pod (found by a label they require);
filter_rows / score_rows look the pair counts up per distinct label value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from podfit.server.cache.node_info import NodeInfo
from podfit.server.cache.pod_index import (
    FILTER_TERMS,
    PREFERRED_AFFINITY,
    PREFERRED_ANTI_AFFINITY,
    REQUIRED_AFFINITY,
    SCORE_TERMS,
    PodIndexView,
    PodQuery,
    merged_selector,
)
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import MAX_NODE_SCORE, Int32Array, Int64Array, IntpArray, PreFilterResult
from podfit.server.framework.profile import INTER_POD_AFFINITY
from podfit.server.framework.status import SKIP, Status, unresolvable, unschedulable
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import Node, Pod
from podfit.server.model.objects import Labels, LabelSelector, Namespace, PodAffinityTerm

if TYPE_CHECKING:
    from podfit.server.cache.node_table import LabelColumn, NodeTable
    from podfit.server.cache.snapshot import Snapshot

__all__ = ["AffinityTerm", "InterPodAffinity", "existing_term_matches", "merged_selector", "new", "resolve_term"]

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

_PRE_FILTER_KEY = "PreFilter" + INTER_POD_AFFINITY
_PRE_SCORE_KEY = "PreScore" + INTER_POD_AFFINITY
_ARG_NAMES = frozenset({"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods", "apiVersion", "kind"})

TopologyPair = tuple[str, str]
PairCounts = dict[TopologyPair, int]


# --------------------------------------------------------------------------------------------------
# Terms


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """An incoming pod's term resolved for matching (upstream fwk.AffinityTerm after PreFilter merged the
    namespaceSelector into the namespace set)."""

    topology_key: str
    # None matches no pod (a term without labelSelector).
    selector: LabelSelector | None
    # None: every namespace (namespaceSelector {}).
    namespaces: frozenset[str] | None
    weight: int = 0

    def matches(self, pod: Pod) -> bool:
        if self.namespaces is not None and pod.namespace not in self.namespaces:
            return False
        return self.selector is not None and self.selector.matches(pod.labels)


def resolve_term(term: PodAffinityTerm, pod: Pod, namespaces: Mapping[str, Namespace], weight: int = 0) -> AffinityTerm:
    """Namespaces a term of ``pod`` selects: ``namespaces`` plus those whose labels match a non-empty
    namespaceSelector; an empty selector means all namespaces; neither means the pod's own namespace."""
    ns_selector = term.namespace_selector
    if ns_selector is not None and ns_selector.empty:
        names: frozenset[str] | None = None
    elif not term.namespaces and ns_selector is None:
        names = frozenset((pod.namespace,))
    else:
        selected = set(term.namespaces)
        if ns_selector is not None:
            selected.update(ns.name for ns in namespaces.values() if ns_selector.matches(ns.labels))
        names = frozenset(selected)
    return AffinityTerm(term.topology_key, merged_selector(term, pod.labels), names, weight)


def existing_term_matches(term: PodAffinityTerm, owner: Pod, target: Pod, target_ns_labels: Labels) -> bool:
    """Whether a term of an existing pod (``owner``) selects ``target``; its namespaceSelector is evaluated
    against the labels of the target's namespace, as upstream does for existing pods' terms."""
    if term.namespaces or term.namespace_selector is not None:
        if target.namespace not in term.namespaces and (
            term.namespace_selector is None or not term.namespace_selector.matches(target_ns_labels)
        ):
            return False
    elif target.namespace != owner.namespace:
        return False
    selector = merged_selector(term, owner.labels)
    return selector is not None and selector.matches(target.labels)


def _matches_all(terms: Sequence[AffinityTerm], pod: Pod) -> bool:
    """podMatchesAllAffinityTerms: false for no terms."""
    if not terms:
        return False
    return all(t.matches(pod) for t in terms)


def _namespace_labels(snapshot: Snapshot, namespace: str) -> Labels:
    ns = snapshot.namespaces.get(namespace)
    return ns.labels if ns is not None else {}


def _add(counts: PairCounts, labels: Labels, key: str, delta: int) -> None:
    """Adds to the node's pair for ``key``, dropping pairs that reach zero (nodes without the key add nothing)."""
    value = labels.get(key)
    if value is None:
        return
    pair = (key, value)
    total = counts.get(pair, 0) + delta
    if total:
        counts[pair] = total
    else:
        counts.pop(pair, None)


# --------------------------------------------------------------------------------------------------
# Cycle state


def _pair_arrays(counts: PairCounts, table: NodeTable) -> dict[str, Int64Array]:
    """Pair counts as one array per topology key, indexed by the key's NodeTable value codes."""
    arrays: dict[str, Int64Array] = {}
    for (key, value), count in counts.items():
        column = table.labels.get(key)
        code = column.values.get(value) if column is not None else None
        if column is None or code is None:
            continue
        by_code = arrays.get(key)
        if by_code is None:
            by_code = arrays[key] = np.zeros(len(column.names), dtype=np.int64)
        by_code[code] = count
    return arrays


def _pair_lookup(counts: PairCounts, key: str, column: LabelColumn, codes: Int32Array) -> Int64Array:
    """counts[(key, value)] for each code of the column, 0 for -1 (no such label). Whichever is smaller
    is walked: the pairs (placed by value code) or the distinct codes (looked up and broadcast), so a
    one-row table costs one lookup and a cluster with few matching pods a few."""
    if not counts:
        return np.zeros(len(codes), dtype=np.int64)
    if len(counts) < len(codes):
        values = column.values
        by_code = np.zeros(len(column.names) + 1, dtype=np.int64)  # the last entry serves code -1
        for (pair_key, value), count in counts.items():
            code = values.get(value) if pair_key == key else None
            if code is not None:
                by_code[code] = count
        return by_code[codes]
    distinct, inverse = np.unique(codes, return_inverse=True)
    names = column.names
    found = [counts.get((key, names[code]), 0) if code >= 0 else 0 for code in distinct.tolist()]
    return np.array(found, dtype=np.int64)[inverse.reshape(-1)]


def _lookup(by_code: Int64Array | None, codes: Int32Array) -> Int64Array:
    """by_code[code] per row; 0 for absent labels (-1), codes beyond the array and no array at all."""
    if by_code is None:
        return np.zeros(len(codes), dtype=np.int64)
    padded = np.zeros(len(by_code) + 1, dtype=np.int64)
    padded[: len(by_code)] = by_code
    return padded[np.where((codes >= 0) & (codes < len(by_code)), codes, len(by_code))]


# Pair counts by value code per topology key: (the label column's value list, counts by code).
PairColumns = dict[str, tuple[list[str], Int64Array]]


class _PairSums:
    """Weighted pod counts per topology pair, summed over table rows into arrays by value code."""

    __slots__ = ("sums", "table", "touched")

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.sums: dict[str, Int64Array] = {}
        # Codes some pod counted for (a pair can sum to 0 and still exist, as in the node-by-node form).
        self.touched: dict[str, npt.NDArray[np.bool_]] = {}

    def add(self, key: str, rows: IntpArray, counts: Int64Array, weight: int = 1) -> None:
        column = self.table.labels.get(key)
        if column is None:
            return
        codes = column.codes[rows]
        hit = (codes >= 0) & (counts != 0)
        if not hit.any():
            return
        size = len(column.names)
        if key not in self.sums:
            self.sums[key] = np.zeros(size, dtype=np.int64)
            self.touched[key] = np.zeros(size, dtype=bool)
        codes = codes[hit]
        weights = counts[hit] * weight
        self.sums[key] += np.bincount(codes, weights=weights, minlength=size).astype(np.int64)
        self.touched[key][codes] = True

    def columns(self) -> PairColumns:
        """The sums by value code per key, with the value dictionary they index."""
        return {key: (self.table.labels[key].names, sums) for key, sums in self.sums.items()}

    def by_key(self) -> dict[str, dict[str, int]]:
        """Key -> value -> sum, for every pair some pod counted for."""
        result: dict[str, dict[str, int]] = {}
        for key, sums in self.sums.items():
            names = self.table.labels[key].names
            codes = np.flatnonzero(self.touched[key])
            result[key] = dict(zip([names[c] for c in codes.tolist()], sums[codes].tolist(), strict=True))
        return result


AFFINITY, ANTI_AFFINITY, EXISTING = 0, 1, 2


def _pairs_of(columns: PairColumns) -> PairCounts:
    """The non-zero pairs of sums by value code."""
    pairs: PairCounts = {}
    for key, (names, sums) in columns.items():
        codes = np.flatnonzero(sums)
        pairs.update(zip([(key, names[c]) for c in codes.tolist()], sums[codes].tolist(), strict=True))
    return pairs


class _PreFilterState:
    """Three pair counts: existing pods matching all the incoming pod's required affinity terms
    (AFFINITY), matching one of its required anti-affinity terms, per term (ANTI_AFFINITY), and existing
    pods' required anti-affinity terms that match the incoming pod (EXISTING).

    PreFilter leaves them as sums by value code (``columns``), which Filter gathers over any table
    sharing the value dictionaries. The (key, value) -> count dict form is built only when needed:
    preemption's AddPod/RemovePod edit it (and drop the columns), other tables look values up in it."""

    __slots__ = ("_pairs", "affinity", "anti_affinity", "columns", "ns_labels")

    def __init__(
        self,
        affinity: tuple[AffinityTerm, ...],
        anti_affinity: tuple[AffinityTerm, ...],
        ns_labels: Labels,
        columns: tuple[PairColumns, PairColumns, PairColumns] | None,
        pairs: list[PairCounts | None] | None = None,
    ) -> None:
        self.affinity = affinity
        self.anti_affinity = anti_affinity
        self.ns_labels = ns_labels
        self.columns = columns
        self._pairs: list[PairCounts | None] = pairs if pairs is not None else [None, None, None]

    def counts(self, which: int) -> PairCounts:
        pairs = self._pairs[which]
        if pairs is None:
            assert self.columns is not None
            pairs = self._pairs[which] = _pairs_of(self.columns[which])
        return pairs

    def any(self, which: int) -> bool:
        pairs = self._pairs[which]
        if pairs is not None or self.columns is None:
            return bool(pairs)
        return any(sums.any() for _, sums in self.columns[which].values())

    def keys(self, which: int) -> list[str]:
        """Topology keys with counts (a superset: keys whose counts reached zero may remain)."""
        if self.columns is not None:
            return sorted(self.columns[which])
        return sorted({key for key, _ in self.counts(which)})

    def lookup(self, which: int, key: str, table: NodeTable, rows: IntpArray) -> Int64Array:
        """The count of each row's (key, value) pair, 0 for rows without the key."""
        column = table.labels.get(key)
        if column is None:
            return np.zeros(len(rows), dtype=np.int64)
        codes = column.codes[rows]
        if self.columns is not None:
            entry = self.columns[which].get(key)
            if entry is None:
                return np.zeros(len(rows), dtype=np.int64)
            if entry[0] is column.names:
                return _lookup(entry[1], codes)
        return _pair_lookup(self.counts(which), key, column, codes)

    def clone(self) -> _PreFilterState:
        pairs = [None if p is None else dict(p) for p in self._pairs]
        return _PreFilterState(self.affinity, self.anti_affinity, self.ns_labels, self.columns, pairs)

    def update_with_pod(self, incoming: Pod, other: Pod, node: Node, delta: int) -> None:
        existing, affinity, anti_affinity = self.counts(EXISTING), self.counts(AFFINITY), self.counts(ANTI_AFFINITY)
        self.columns = None
        labels = node.labels
        for term in other.required_anti_affinity:
            if existing_term_matches(term, other, incoming, self.ns_labels):
                _add(existing, labels, term.topology_key, delta)
        if _matches_all(self.affinity, other):
            for t in self.affinity:
                _add(affinity, labels, t.topology_key, delta)
        for t in self.anti_affinity:
            if t.matches(other):
                _add(anti_affinity, labels, t.topology_key, delta)


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    # Topology key -> value -> summed weights.
    topology_score: dict[str, dict[str, int]]
    # The same by value code of the key's NodeTable column, when PreScore ran over the table.
    by_code: dict[str, Int64Array] | None = None

    def clone(self) -> _PreScoreState:
        return self


# --------------------------------------------------------------------------------------------------
# Plugin


class InterPodAffinity:
    name = INTER_POD_AFFINITY

    def __init__(
        self, hard_pod_affinity_weight: int = 1, ignore_preferred_terms_of_existing_pods: bool = False
    ) -> None:
        self.hard_pod_affinity_weight = hard_pod_affinity_weight
        self.ignore_preferred_terms_of_existing_pods = ignore_preferred_terms_of_existing_pods

    # -- PreFilter / Filter ----------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        namespaces = snapshot.namespaces
        affinity = tuple(resolve_term(t, pod, namespaces) for t in pod.required_affinity)
        anti_affinity = tuple(resolve_term(t, pod, namespaces) for t in pod.required_anti_affinity)
        ns_labels = _namespace_labels(snapshot, pod.namespace)

        index = snapshot.index()
        table, rows = snapshot.table, snapshot.rows
        existing = _PairSums(table)
        for term, term_rows in index.existing_terms(FILTER_TERMS, pod.labels):
            if term.selects(pod.namespace, pod.labels, ns_labels):
                existing.add(term.topology_key, *term_rows.arrays())
        affinity_sums, anti_affinity_sums = _incoming_counts_rows(affinity, anti_affinity, table, rows, index)
        columns = (affinity_sums.columns(), anti_affinity_sums.columns(), existing.columns())
        s = _PreFilterState(affinity, anti_affinity, ns_labels, columns)
        if not s.any(EXISTING) and not affinity and not anti_affinity:
            return None, SKIP
        state.write(_PRE_FILTER_KEY, s)
        return None, None

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo, snapshot: Snapshot) -> None:
        state.read(_PRE_FILTER_KEY, _PreFilterState).update_with_pod(pod, pod_to_add, node_info.node, 1)

    def remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo, snapshot: Snapshot
    ) -> None:
        state.read(_PRE_FILTER_KEY, _PreFilterState).update_with_pod(pod, pod_to_remove, node_info.node, -1)

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        """Filter over table rows: the same three checks in the same order, as gathers of pair counts."""
        s = state.read(_PRE_FILTER_KEY, _PreFilterState)
        result = np.zeros(len(rows), dtype=np.int32)
        if s.affinity:
            missing = np.zeros(len(rows), dtype=bool)
            pods_exist = np.ones(len(rows), dtype=bool)
            for t in s.affinity:
                missing |= table.label_codes(t.topology_key, rows) < 0
                pods_exist &= s.lookup(AFFINITY, t.topology_key, table, rows) > 0
            # With no matching pod anywhere, a pod matching its own terms may start the group.
            first_of_group = not s.any(AFFINITY) and _matches_all(s.affinity, pod)
            result[missing if first_of_group else missing | ~pods_exist] = 1
        pending = result == 0
        if s.any(ANTI_AFFINITY):
            for t in s.anti_affinity:
                hit = pending & (s.lookup(ANTI_AFFINITY, t.topology_key, table, rows) > 0)
                result[hit] = 2
                pending &= ~hit
        if s.any(EXISTING):
            for key in s.keys(EXISTING):
                hit = pending & (s.lookup(EXISTING, key, table, rows) > 0)
                result[hit] = 3
                pending &= ~hit
        statuses = [
            unresolvable(REASON_AFFINITY),
            unschedulable(REASON_ANTI_AFFINITY),
            unschedulable(REASON_EXISTING_ANTI_AFFINITY),
        ]
        return result, statuses

    # -- PreScore / Score ------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: IntpArray) -> Status | None:
        """Sums weights per topology pair over all pods in the cluster (not only the feasible nodes').

        Skips when nothing matched anywhere. ``ignorePreferredTermsOfExistingPods`` only matters for pods
        without preferred terms (then it skips outright), as upstream.
        """
        has_constraints = bool(pod.preferred_affinity or pod.preferred_anti_affinity)
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return SKIP
        namespaces = snapshot.namespaces
        preferred = tuple(resolve_term(w.term, pod, namespaces, w.weight) for w in pod.preferred_affinity)
        preferred_anti = tuple(resolve_term(w.term, pod, namespaces, -w.weight) for w in pod.preferred_anti_affinity)
        own_terms = preferred + preferred_anti
        ns_labels = _namespace_labels(snapshot, pod.namespace)
        sums = self._topology_sums(pod, own_terms, ns_labels, snapshot.table, snapshot.rows, snapshot.index())
        scores, by_code = sums.by_key(), sums.sums
        if not scores:
            return SKIP
        state.write(_PRE_SCORE_KEY, _PreScoreState(scores, by_code))
        return None

    def _topology_sums(
        self,
        pod: Pod,
        own_terms: tuple[AffinityTerm, ...],
        ns_labels: Labels,
        table: NodeTable,
        rows: IntpArray,
        index: PodIndexView,
    ) -> _PairSums:
        """The same sums over the NodeTable: the pod's terms' matches per row from the pod index, and the
        existing pods' terms that select the pod, found through the labels they require."""
        sums = _PairSums(table)
        for t in own_terms:
            sums.add(t.topology_key, rows, index.pod_counts(PodQuery(((t.namespaces, t.selector),)))[rows], t.weight)
        hard_weight = self.hard_pod_affinity_weight
        for term, term_rows in index.existing_terms(SCORE_TERMS, pod.labels):
            if term.kind == REQUIRED_AFFINITY:
                if hard_weight <= 0:
                    continue
                weight = hard_weight
            elif term.kind == PREFERRED_AFFINITY:
                weight = term.weight
            else:
                assert term.kind == PREFERRED_ANTI_AFFINITY
                weight = -term.weight
            if term.selects(pod.namespace, pod.labels, ns_labels):
                sums.add(term.topology_key, *term_rows.arrays(), weight)
        return sums

    def score_rows(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray) -> Int64Array:
        s = state.read(_PRE_SCORE_KEY, _PreScoreState)
        total = np.zeros(len(rows), dtype=np.int64)
        by_code = s.by_code
        if by_code is None or any(len(table.labels[k].names) != len(a) for k, a in by_code.items()):
            by_code = _pair_arrays(
                {(key, value): n for key, by_value in s.topology_score.items() for value, n in by_value.items()}, table
            )
        for key, sums in by_code.items():
            total += _lookup(sums, table.label_codes(key, rows))
        return total

    def normalize_rows(self, state: CycleState, pod: Pod, scores: Int64Array) -> Int64Array:
        s = state.read(_PRE_SCORE_KEY, _PreScoreState)
        if not s.topology_score or not len(scores):
            return scores
        low, high = int(scores.min()), int(scores.max())
        spread = high - low
        if spread <= 0:
            return np.zeros(len(scores), dtype=np.int64)
        scaled = float(MAX_NODE_SCORE) * ((scores - low).astype(np.float64) / float(spread))
        return scaled.astype(np.int64)


def _incoming_counts_rows(
    affinity: tuple[AffinityTerm, ...],
    anti_affinity: tuple[AffinityTerm, ...],
    table: NodeTable,
    rows: IntpArray,
    index: PodIndexView,
) -> tuple[_PairSums, _PairSums]:
    """Existing pods matching the incoming pod's required terms, per topology pair: pods matching all the
    affinity terms count for every affinity term, anti-affinity terms count one by one (matching pods per
    row from the pod index)."""
    affinity_sums, anti_affinity_sums = _PairSums(table), _PairSums(table)
    if affinity:
        matching_all = index.pod_counts(PodQuery(tuple((t.namespaces, t.selector) for t in affinity)))[rows]
        for t in affinity:
            affinity_sums.add(t.topology_key, rows, matching_all)
    for t in anti_affinity:
        anti_affinity_sums.add(t.topology_key, rows, index.pod_counts(PodQuery(((t.namespaces, t.selector),)))[rows])
    return affinity_sums, anti_affinity_sums


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> InterPodAffinity:
    unknown = sorted(set(args) - _ARG_NAMES)
    if unknown:
        raise ValueError(f"InterPodAffinityArgs: unknown field(s) {', '.join(unknown)}")
    weight = args.get("hardPodAffinityWeight", 1)
    if weight is None:
        weight = 1
    if isinstance(weight, bool) or not isinstance(weight, int):
        raise ValueError(f"hardPodAffinityWeight: must be an integer, not {weight!r}")
    if not 0 <= weight <= 100:
        raise ValueError(f"hardPodAffinityWeight: Invalid value: {weight}: not in valid range [0, 100]")
    ignore = args.get("ignorePreferredTermsOfExistingPods", False)
    if ignore is None:
        ignore = False
    if not isinstance(ignore, bool):
        raise ValueError(f"ignorePreferredTermsOfExistingPods: must be a boolean, not {ignore!r}")
    return InterPodAffinity(weight, ignore)
