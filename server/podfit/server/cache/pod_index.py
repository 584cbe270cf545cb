"""Cluster-wide indexes of bound pods for the cross-pod plugins (PodTopologySpread, InterPodAffinity).

Their PreFilter/PreScore ask, over every node, how many pods a selector matches, or which existing pods'
affinity terms select the incoming pod; walking every pod per decision costs ~100 ms at 50,000 pods.
Here the pods of each NodeTable row are grouped by (namespace, labels, terminating), so a selector is
evaluated once per distinct label set, and per-row match counts are memoised per query. Existing pods'
affinity terms are grouped the same way and found through a label they require, so only terms that can
select the incoming pod are evaluated. Terminating pods (with a deletionTimestamp) are indexed like the
others; a query that bypasses them, as PodTopologySpread's countPodsMatchSelector does, skips their groups.

The index follows the cache lazily, per decision: a row is re-read when its NodeInfo carries a generation
above the last sync (the cache stamps NodeInfo.generation when it creates a NodeInfo and whenever its pods
change), and emptied when its node has left the table.
An overlay (a fork of a snapshot) answers through ``OverlayPodIndex``: the base index, with the rows the
overlay changed read again from its own NodeInfos, so a fork never re-indexes the cluster.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np
import numpy.typing as npt
from podfit.server.model import Pod
from podfit.server.model.objects import Labels, LabelSelector, LabelSelectorRequirement, PodAffinityTerm

if TYPE_CHECKING:
    from podfit.server.cache.node_info import NodeInfo
    from podfit.server.cache.node_table import NodeTable

K = TypeVar("K")
V = TypeVar("V")
# An ExistingTerm as plain tuples (kind, weight, topology key, namespaces, namespace selector, owner
# namespace, merged selector): hashed in C, where the records' dataclass hashes cost seconds per 50k pods.
TermKey = tuple[object, ...]
Int64Array = npt.NDArray[np.int64]
IntpArray = npt.NDArray[np.intp]
# (namespace, labels, terminating): terminating pods carry a deletionTimestamp.
GroupKey = tuple[str, frozenset[tuple[str, str]], bool]
Anchor = tuple[str, str]
# (namespaces, selector): pods in the namespaces (None: any) that the selector (None: none) matches.
Clause = tuple[frozenset[str] | None, LabelSelector | None]

# Kinds of existing pods' terms. Required anti-affinity serves Filter; the others serve Score.
REQUIRED_AFFINITY = 0
REQUIRED_ANTI_AFFINITY = 1
PREFERRED_AFFINITY = 2
PREFERRED_ANTI_AFFINITY = 3
FILTER_TERMS = 0
SCORE_TERMS = 1
_MAX_QUERIES = 64
_MAX_VERDICTS = 100_000


def merged_selector(term: PodAffinityTerm, pod_labels: Labels) -> LabelSelector | None:
    """The term's labelSelector with matchLabelKeys / mismatchLabelKeys merged in as kube-apiserver does
    on pod creation (``key In [value]`` / ``key NotIn [value]`` for keys the pod carries).

    kube-scheduler only ever sees merged terms; merging here lets pods stored unmerged behave the same.
    A requirement already in the selector is not added again, so merged terms come out unchanged.
    A nil selector stays nil (it matches nothing either way).
    """
    selector = term.label_selector
    if selector is None or not (term.match_label_keys or term.mismatch_label_keys):
        return selector
    expressions = list(selector.match_expressions)
    for keys, operator in ((term.match_label_keys, "In"), (term.mismatch_label_keys, "NotIn")):
        for key in keys:
            value = pod_labels.get(key)
            if value is None:
                continue
            requirement = LabelSelectorRequirement(key, operator, (value,))
            if requirement not in expressions:
                expressions.append(requirement)
    if len(expressions) == len(selector.match_expressions):
        return selector
    return LabelSelector(selector.match_labels, tuple(expressions))


def selector_anchors(selector: LabelSelector) -> tuple[Anchor, ...] | None:
    """Label pairs of which every label set the selector matches carries one (None: no such pairs)."""
    if selector.match_labels:
        return (selector.match_labels[0],)
    for requirement in selector.match_expressions:
        if requirement.operator == "In":
            return tuple((requirement.key, value) for value in requirement.values)
    return None


@dataclass(frozen=True, slots=True)
class PodQuery:
    """Pods that every clause matches; no clauses match no pod (podMatchesAllAffinityTerms).

    With ``skip_terminating``, pods with a deletionTimestamp match nothing (PodTopologySpread's
    countPodsMatchSelector bypasses them; InterPodAffinity counts them)."""

    clauses: tuple[Clause, ...]
    skip_terminating: bool = False

    def matches(self, namespace: str, labels: Labels, terminating: bool = False) -> bool:
        if not self.clauses or (terminating and self.skip_terminating):
            return False
        for namespaces, selector in self.clauses:
            if namespaces is not None and namespace not in namespaces:
                return False
            if selector is None or not selector.matches(labels):
                return False
        return True


@dataclass(frozen=True, slots=True)
class ExistingTerm:
    """An affinity term of bound pods, resolved as it selects other pods; equal terms of pods in the same
    namespace (with the same merged selector) share one entry."""

    kind: int
    weight: int
    topology_key: str
    namespaces: tuple[str, ...]
    namespace_selector: LabelSelector | None
    owner_namespace: str
    selector: LabelSelector

    def selects(self, namespace: str, labels: Labels, namespace_labels: Labels) -> bool:
        """Whether the term selects a pod of ``namespace`` with ``labels`` (namespace_labels: its namespace's)."""
        if self.namespaces or self.namespace_selector is not None:
            if namespace not in self.namespaces and (
                self.namespace_selector is None or not self.namespace_selector.matches(namespace_labels)
            ):
                return False
        elif namespace != self.owner_namespace:
            return False
        return self.selector.matches(labels)


def _selector_key(selector: LabelSelector | None) -> tuple[object, ...] | None:
    if selector is None:
        return None
    return (selector.match_labels, tuple((r.key, r.operator, r.values) for r in selector.match_expressions))


# What an ExistingTerm is built from: kind, weight, the term, the owner's namespace, the merged selector.
TermSpec = tuple[int, int, PodAffinityTerm, str, LabelSelector]


def pod_terms(pod: Pod) -> Iterator[tuple[TermKey, TermSpec]]:
    """The pod's affinity terms as other pods see them (terms without a selector select nothing and are
    left out), keyed; the ExistingTerm itself is built only for keys the index does not hold yet."""
    for term in pod.required_affinity:
        yield from _term_key(pod, REQUIRED_AFFINITY, 0, term)
    for term in pod.required_anti_affinity:
        yield from _term_key(pod, REQUIRED_ANTI_AFFINITY, 0, term)
    for weighted in pod.preferred_affinity:
        yield from _term_key(pod, PREFERRED_AFFINITY, weighted.weight, weighted.term)
    for weighted in pod.preferred_anti_affinity:
        yield from _term_key(pod, PREFERRED_ANTI_AFFINITY, weighted.weight, weighted.term)


def _term_key(pod: Pod, kind: int, weight: int, term: PodAffinityTerm) -> tuple[tuple[TermKey, TermSpec], ...]:
    selector = merged_selector(term, pod.labels)
    if selector is None:
        return ()
    key = (
        kind,
        weight,
        term.topology_key,
        term.namespaces,
        _selector_key(term.namespace_selector),
        pod.namespace,
        _selector_key(selector),
    )
    return ((key, (kind, weight, term, pod.namespace, selector)),)


def _existing_term(spec: TermSpec) -> ExistingTerm:
    kind, weight, term, owner_namespace, selector = spec
    return ExistingTerm(
        kind, weight, term.topology_key, term.namespaces, term.namespace_selector, owner_namespace, selector
    )


class RowCounts:
    """Row -> positive count, with numpy views rebuilt after changes."""

    __slots__ = ("_arrays", "counts")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self._arrays: tuple[IntpArray, Int64Array] | None = None

    def add(self, row: int, delta: int) -> None:
        total = self.counts.get(row, 0) + delta
        if total:
            self.counts[row] = total
        else:
            self.counts.pop(row, None)
        self._arrays = None

    def arrays(self) -> tuple[IntpArray, Int64Array]:
        if self._arrays is None:
            n = len(self.counts)
            self._arrays = (
                np.fromiter(self.counts.keys(), dtype=np.intp, count=n),
                np.fromiter(self.counts.values(), dtype=np.int64, count=n),
            )
        return self._arrays


class _Group:
    __slots__ = ("labels", "namespace", "rows", "terminating")

    def __init__(self, key: GroupKey) -> None:
        self.namespace = key[0]
        self.labels: Labels = dict(key[1])
        self.terminating = key[2]
        self.rows = RowCounts()


class _QueryCounts:
    """A memoised query: matching pods per table row, and its verdict per label group."""

    __slots__ = ("counts", "query", "verdicts")

    def __init__(self, query: PodQuery, capacity: int) -> None:
        self.query = query
        self.counts: Int64Array = np.zeros(capacity, dtype=np.int64)
        self.verdicts: dict[GroupKey, bool] = {}

    def matches(self, key: GroupKey, group: _Group) -> bool:
        verdict = self.verdicts.get(key)
        if verdict is None:
            if len(self.verdicts) >= _MAX_VERDICTS:
                self.verdicts.clear()
            verdict = self.verdicts[key] = self.query.matches(group.namespace, group.labels, group.terminating)
        return verdict


class PodIndex:
    """Bound pods per NodeTable row, grouped by (namespace, labels), and their affinity terms."""

    def __init__(self) -> None:
        self.generation = -1
        # The table's removal count at the last sync (-1: never synced).
        self._removals = -1
        self._reset(0)

    def _reset(self, capacity: int) -> None:
        """Empties the index for ``capacity`` rows."""
        # Rows whose pods are indexed.
        self._indexed: npt.NDArray[np.bool_] = np.zeros(capacity, dtype=bool)
        self._row_groups: list[dict[GroupKey, int]] = [{} for _ in range(capacity)]
        self._row_terms: list[dict[TermKey, int]] = [{} for _ in range(capacity)]
        self._groups: dict[GroupKey, _Group] = {}
        self._groups_by_namespace: dict[str, set[GroupKey]] = {}
        self._groups_by_label: dict[Anchor, set[GroupKey]] = {}
        self._terms: dict[TermKey, tuple[ExistingTerm, RowCounts]] = {}
        # Per family (FILTER_TERMS, SCORE_TERMS): anchor -> terms, and terms without an anchor.
        self._terms_by_anchor: tuple[dict[Anchor, set[TermKey]], ...] = ({}, {})
        self._unanchored: tuple[set[TermKey], ...] = (set(), set())
        self._queries: OrderedDict[PodQuery, _QueryCounts] = OrderedDict()

    # -- following the cache ---------------------------------------------------------------------

    def sync(self, table: NodeTable, nodes: Sequence[NodeInfo], rows: IntpArray, generation: int) -> None:
        """Re-reads the rows whose NodeInfo changed since the last sync (all of them when most did).

        ``nodes`` are all the table's NodeInfos and ``rows`` their rows. A NodeInfo created or changed after
        the last sync carries a higher generation; rows indexed then but no longer live are emptied.
        """
        if generation == self.generation and len(self._indexed) == table.capacity:
            return
        grow = table.capacity - len(self._indexed)
        if grow > 0:
            self._indexed = np.concatenate([self._indexed, np.zeros(grow, dtype=bool)])
            self._row_groups.extend({} for _ in range(grow))
            self._row_terms.extend({} for _ in range(grow))
            for entry in self._queries.values():
                entry.counts = np.concatenate([entry.counts, np.zeros(grow, dtype=np.int64)])
        if grow <= 0 and table.removals == self._removals and len(rows) == len(table.row_of):
            # No row was emptied since the last sync and ``rows`` are every live row: the changed rows
            # are all live, and rows added since are among them (one pass instead of four).
            live = self._indexed
            found = np.flatnonzero(table.row_generation > self.generation)
            live[found] = True
            changed, gone = found.tolist(), []
        else:
            live = np.zeros(table.capacity, dtype=bool)
            live[rows] = True
            changed = rows[table.row_generation[rows] > self.generation].tolist()
            gone = np.flatnonzero(self._indexed & ~live).tolist()
        self._removals = table.removals
        if (len(changed) + len(gone)) * 2 > len(rows):
            # Mostly new (first use, bulk loads): rebuilding is cheaper than diffing row by row.
            self._reset(table.capacity)
            changed, gone = rows.tolist(), []
        infos = table.infos
        # A rebuild allocates a few objects per pod; collecting cycles meanwhile would only rescan them.
        collecting = gc.isenabled() and len(changed) > 64
        if collecting:
            gc.disable()
        try:
            for row in gone:
                self._reindex(row, None)
            for row in changed:
                self._reindex(row, infos[row])
        finally:
            if collecting:
                gc.enable()
        self._indexed = live
        self.generation = generation

    def _reindex(self, row: int, info: NodeInfo | None) -> None:
        groups, terms, specs = _row_contents(info)
        old_groups = self._row_groups[row]
        if groups != old_groups:
            for key in old_groups.keys() | groups.keys():
                delta = groups.get(key, 0) - old_groups.get(key, 0)
                if delta:
                    self._add_group(key, row, delta)
            self._row_groups[row] = groups
            for entry in self._queries.values():
                entry.counts[row] = sum(n for key, n in groups.items() if entry.matches(key, self._groups[key]))
        old_terms = self._row_terms[row]
        if terms != old_terms:
            for term in old_terms.keys() | terms.keys():
                delta = terms.get(term, 0) - old_terms.get(term, 0)
                if delta:
                    self._add_term(term, row, delta, specs)
            self._row_terms[row] = terms

    def _add_group(self, key: GroupKey, row: int, delta: int) -> None:
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(key)
            self._groups_by_namespace.setdefault(key[0], set()).add(key)
            for pair in key[1]:
                self._groups_by_label.setdefault(pair, set()).add(key)
        group.rows.add(row, delta)
        if not group.rows.counts:
            del self._groups[key]
            _discard(self._groups_by_namespace, key[0], key)
            for pair in key[1]:
                _discard(self._groups_by_label, pair, key)

    def _add_term(self, key: TermKey, row: int, delta: int, specs: dict[TermKey, TermSpec]) -> None:
        entry = self._terms.get(key)
        if entry is None:
            entry = self._terms[key] = (_existing_term(specs[key]), RowCounts())
            family, anchors = _term_family(entry[0])
            if anchors is None:
                self._unanchored[family].add(key)
            for anchor in anchors or ():
                self._terms_by_anchor[family].setdefault(anchor, set()).add(key)
        term, rows = entry
        rows.add(row, delta)
        if not rows.counts:
            del self._terms[key]
            family, anchors = _term_family(term)
            if anchors is None:
                self._unanchored[family].discard(key)
            for anchor in anchors or ():
                _discard(self._terms_by_anchor[family], anchor, key)

    # -- reads -----------------------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        """The table rows covered (the length of pod_counts arrays)."""
        return len(self._indexed)

    def pod_counts(self, query: PodQuery) -> Int64Array:
        """Per table row: the bound pods the query matches. Shared and kept up to date: do not modify."""
        entry = self._queries.get(query)
        if entry is not None:
            self._queries.move_to_end(query)
            return entry.counts
        entry = _QueryCounts(query, self.capacity)
        for key in self._candidates(query):
            group = self._groups[key]
            if entry.matches(key, group):
                rows, values = group.rows.arrays()
                entry.counts[rows] += values
        self._queries[query] = entry
        if len(self._queries) > _MAX_QUERIES:
            self._queries.popitem(last=False)
        return entry.counts

    def _candidates(self, query: PodQuery) -> Iterable[GroupKey]:
        """Label groups that may match: the smallest family of groups some clause confines matches to."""
        best: list[set[GroupKey]] | None = None
        for namespaces, selector in query.clauses:
            if selector is None:
                return ()
            options: list[list[set[GroupKey]]] = []
            anchors = selector_anchors(selector)
            if anchors is not None:
                options.append([self._groups_by_label.get(a, set()) for a in anchors])
            if namespaces is not None:
                options.append([self._groups_by_namespace.get(ns, set()) for ns in namespaces])
            for sets in options:
                if best is None or sum(map(len, sets)) < sum(map(len, best)):
                    best = sets
        if best is None:
            return list(self._groups)
        return list(chain.from_iterable(best))

    def existing_terms(self, family: int, labels: Labels) -> list[tuple[ExistingTerm, RowCounts]]:
        """Existing pods' terms of a family that may select a pod with ``labels`` (callers check selects())."""
        terms = self._terms
        return [terms[key] for key in self.existing_keys(family, labels)]

    def existing_keys(self, family: int, labels: Labels) -> set[TermKey]:
        anchored = self._terms_by_anchor[family]
        found: set[TermKey] = set(self._unanchored[family])
        for pair in labels.items():
            keys = anchored.get(pair)
            if keys:
                found.update(keys)
        return found

    def term(self, key: TermKey) -> tuple[ExistingTerm, RowCounts] | None:
        return self._terms.get(key)

    def row_terms(self, row: int) -> dict[TermKey, int]:
        """The affinity terms of a row's pods as indexed (empty for rows beyond the index)."""
        return self._row_terms[row] if row < len(self._row_terms) else {}


class PodIndexView(Protocol):
    """What the cross-pod plugins read: a PodIndex, or an overlay's view of one."""

    @property
    def capacity(self) -> int: ...

    def pod_counts(self, query: PodQuery) -> Int64Array: ...

    def existing_terms(self, family: int, labels: Labels) -> list[tuple[ExistingTerm, RowCounts]]: ...


def _row_contents(info: NodeInfo | None) -> tuple[dict[GroupKey, int], dict[TermKey, int], dict[TermKey, TermSpec]]:
    """A row's pods grouped by (namespace, labels, terminating), and its pods' affinity terms, as the index
    keeps them."""
    groups: dict[GroupKey, int] = {}
    terms: dict[TermKey, int] = {}
    specs: dict[TermKey, TermSpec] = {}
    if info is not None:
        for pod in info.pods.values():
            group = (pod.namespace, frozenset(pod.labels.items()), pod.deletion_timestamp is not None)
            groups[group] = groups.get(group, 0) + 1
        for pod in info.pods_with_affinity.values():
            for term, spec in pod_terms(pod):
                terms[term] = terms.get(term, 0) + 1
                specs[term] = spec
    return groups, terms, specs


class OverlayPodIndex:
    """A base index with some rows replaced: ``rows`` maps a row to the overlay's NodeInfo there (None when
    the overlay emptied it). Work is proportional to the changed rows' pods, never to the cluster; an
    overlay that goes on changing rows ``update``s the same view, so a long simulation (one placement
    after another) reads each changed row once per change rather than every changed row per read."""

    def __init__(self, base: PodIndex, capacity: int, rows: dict[int, NodeInfo | None]) -> None:
        self._base = base
        self._capacity = capacity
        self._groups: dict[int, dict[GroupKey, int]] = {}
        self._terms: dict[int, dict[TermKey, int]] = {}
        self._specs: dict[TermKey, TermSpec] = {}
        self._queries: dict[PodQuery, Int64Array] = {}
        self.update(rows)

    def update(self, rows: Mapping[int, NodeInfo | None]) -> None:
        """Reads these rows again, keeping the pod counts already asked for current."""
        for row, info in rows.items():
            groups, terms, specs = _row_contents(info)
            self._groups[row], self._terms[row] = groups, terms
            self._specs.update(specs)
            for query, counts in self._queries.items():
                counts[row] = _row_count(query, groups)

    @property
    def capacity(self) -> int:
        return self._capacity

    def pod_counts(self, query: PodQuery) -> Int64Array:
        counts = self._queries.get(query)
        if counts is None:
            base = self._base.pod_counts(query)
            counts = np.zeros(self._capacity, dtype=np.int64)
            counts[: len(base)] = base
            for row, groups in self._groups.items():
                counts[row] = _row_count(query, groups)
            self._queries[query] = counts
        return counts

    def existing_terms(self, family: int, labels: Labels) -> list[tuple[ExistingTerm, RowCounts]]:
        base = self._base
        old = {row: base.row_terms(row) for row in self._terms}
        touched = {key for terms in (*old.values(), *self._terms.values()) for key in terms}
        keys = base.existing_keys(family, labels)
        for key in touched - keys:
            spec = self._specs.get(key)
            if spec is None:
                continue  # only the base held it, and the base does not offer it for these labels
            family_of, anchors = _term_family(_existing_term(spec))
            if family_of == family and (anchors is None or any(labels.get(k) == v for k, v in anchors)):
                keys.add(key)
        found: list[tuple[ExistingTerm, RowCounts]] = []
        for key in keys:
            entry = base.term(key)
            if key not in touched:
                if entry is not None:
                    found.append(entry)
                continue
            counts = RowCounts()
            if entry is not None:
                counts.counts = dict(entry[1].counts)
            for row, terms in self._terms.items():
                delta = terms.get(key, 0) - old[row].get(key, 0)
                if delta:
                    counts.add(row, delta)
            if counts.counts:
                found.append((entry[0] if entry is not None else _existing_term(self._specs[key]), counts))
        return found


def _row_count(query: PodQuery, groups: Mapping[GroupKey, int]) -> int:
    """The pods of one row's groups that the query matches."""
    return sum(n for (ns, labels, terminating), n in groups.items() if query.matches(ns, dict(labels), terminating))


def _term_family(term: ExistingTerm) -> tuple[int, tuple[Anchor, ...] | None]:
    return FILTER_TERMS if term.kind == REQUIRED_ANTI_AFFINITY else SCORE_TERMS, selector_anchors(term.selector)


def _discard(index: dict[K, set[V]], key: K, item: V) -> None:
    items = index.get(key)
    if items is not None:
        items.discard(item)
        if not items:
            del index[key]


_INDEXES: weakref.WeakKeyDictionary[NodeTable, PodIndex] = weakref.WeakKeyDictionary()


def index_of(table: NodeTable, nodes: Sequence[NodeInfo], rows: IntpArray, generation: int) -> PodIndex:
    """The index over ``table`` (built on first use), synced to ``generation``; ``nodes`` are the
    table's NodeInfos and ``rows`` their rows. Also re-syncs to a lower generation after the cache undid
    batches."""
    index = _INDEXES.get(table)
    if index is None:
        index = _INDEXES[table] = PodIndex()
        index.sync(table, nodes, rows, generation)
        # A whole-cluster structure that lives as long as the cache, built by the first decision that needs
        # it: set aside from the cyclic collector as the cache sets its records aside, or every full
        # collection walks it inside a decision (tens of ms at 50,000 pods). Not for a frozen snapshot's
        # index, built by a reader on its thread and dropped with the snapshot.
        if threading.current_thread() is threading.main_thread():
            gc.freeze()
        return index
    index.sync(table, nodes, rows, generation)
    return index


def move_index(old: NodeTable, new: NodeTable) -> None:
    """Hands ``old``'s index to ``new``, a fork of it that the cache writes from now on (``freeze``): the
    decisions keep their index, and a reader of ``old`` builds its own if it needs one."""
    index = _INDEXES.pop(old, None)
    if index is not None:
        _INDEXES[new] = index


def resync(table: NodeTable, nodes: Sequence[NodeInfo], rows: IntpArray, generation: int) -> None:
    """Syncs the table's index, if one was built, to ``generation`` (lower than the index's when the
    cache went back to it by undoing tentative batches)."""
    index = _INDEXES.get(table)
    if index is not None:
        index.sync(table, nodes, rows, generation)
