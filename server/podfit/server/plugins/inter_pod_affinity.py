"""InterPodAffinity: required pod (anti-)affinity as a filter, preferred terms as a score (upstream
plugins/interpodaffinity).

Symmetry is what makes this plugin cross-pod: existing pods' required anti-affinity repels the incoming
pod, and existing pods' affinity terms attract it when scoring. PreFilter and PreScore fold every pod
into counts per topology pair (label key, value) once, so Filter and Score only look up the node's labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from podfit.server.cache.node_info import NodeInfo
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import MAX_NODE_SCORE, PreFilterResult
from podfit.server.framework.profile import INTER_POD_AFFINITY
from podfit.server.framework.status import SKIP, Status, unresolvable, unschedulable
from podfit.server.model import Node, Pod
from podfit.server.model.objects import Labels, LabelSelector, LabelSelectorRequirement, Namespace, PodAffinityTerm

if TYPE_CHECKING:
    from podfit.server.cache.snapshot import Snapshot

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


class _PreFilterState:
    __slots__ = ("affinity", "affinity_counts", "anti_affinity", "anti_affinity_counts", "existing_counts", "ns_labels")

    def __init__(
        self,
        affinity: tuple[AffinityTerm, ...],
        anti_affinity: tuple[AffinityTerm, ...],
        affinity_counts: PairCounts,
        anti_affinity_counts: PairCounts,
        existing_counts: PairCounts,
        ns_labels: Labels,
    ) -> None:
        self.affinity = affinity
        self.anti_affinity = anti_affinity
        # Pairs -> existing pods matching all the incoming pod's required affinity terms.
        self.affinity_counts = affinity_counts
        # Pairs -> existing pods matching one of the incoming pod's required anti-affinity terms (per term).
        self.anti_affinity_counts = anti_affinity_counts
        # Pairs -> existing pods' required anti-affinity terms that match the incoming pod.
        self.existing_counts = existing_counts
        self.ns_labels = ns_labels

    def clone(self) -> _PreFilterState:
        return _PreFilterState(
            self.affinity,
            self.anti_affinity,
            dict(self.affinity_counts),
            dict(self.anti_affinity_counts),
            dict(self.existing_counts),
            self.ns_labels,
        )

    def update_with_pod(self, incoming: Pod, other: Pod, node: Node, delta: int) -> None:
        labels = node.labels
        for term in other.required_anti_affinity:
            if existing_term_matches(term, other, incoming, self.ns_labels):
                _add(self.existing_counts, labels, term.topology_key, delta)
        if _matches_all(self.affinity, other):
            for t in self.affinity:
                _add(self.affinity_counts, labels, t.topology_key, delta)
        for t in self.anti_affinity:
            if t.matches(other):
                _add(self.anti_affinity_counts, labels, t.topology_key, delta)


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    # Topology key -> value -> summed weights.
    topology_score: dict[str, dict[str, int]]

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

        existing_counts: PairCounts = {}
        for info in snapshot.node_infos:
            if not info.pods_with_required_anti_affinity:
                continue
            labels = info.node.labels
            for existing in info.pods_with_required_anti_affinity.values():
                for term in existing.required_anti_affinity:
                    value = labels.get(term.topology_key)
                    if value is not None and existing_term_matches(term, existing, pod, ns_labels):
                        pair = (term.topology_key, value)
                        existing_counts[pair] = existing_counts.get(pair, 0) + 1

        affinity_counts, anti_affinity_counts = _incoming_counts(affinity, anti_affinity, snapshot.node_infos)
        if not existing_counts and not affinity and not anti_affinity:
            return None, SKIP
        state.write(
            _PRE_FILTER_KEY,
            _PreFilterState(affinity, anti_affinity, affinity_counts, anti_affinity_counts, existing_counts, ns_labels),
        )
        return None, None

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo, snapshot: Snapshot) -> None:
        state.read(_PRE_FILTER_KEY, _PreFilterState).update_with_pod(pod, pod_to_add, node_info.node, 1)

    def remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo, snapshot: Snapshot
    ) -> None:
        state.read(_PRE_FILTER_KEY, _PreFilterState).update_with_pod(pod, pod_to_remove, node_info.node, -1)

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        """The first failing check decides: affinity (unresolvable), own anti-affinity, then existing pods'."""
        s = state.read(_PRE_FILTER_KEY, _PreFilterState)
        labels = node_info.node.labels
        if not _satisfies_affinity(s, pod, labels):
            return unresolvable(REASON_AFFINITY)
        if s.anti_affinity_counts:
            for t in s.anti_affinity:
                value = labels.get(t.topology_key)
                if value is not None and s.anti_affinity_counts.get((t.topology_key, value), 0) > 0:
                    return unschedulable(REASON_ANTI_AFFINITY)
        existing = s.existing_counts
        if existing:
            if len(existing) < len(labels):
                for (key, value), count in existing.items():
                    if count > 0 and labels.get(key) == value:
                        return unschedulable(REASON_EXISTING_ANTI_AFFINITY)
            else:
                for pair in labels.items():
                    if existing.get(pair, 0) > 0:
                        return unschedulable(REASON_EXISTING_ANTI_AFFINITY)
        return None

    # -- PreScore / Score ------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], snapshot: Snapshot) -> Status | None:
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
        ns_labels = _namespace_labels(snapshot, pod.namespace)
        hard_weight = self.hard_pod_affinity_weight

        scores: dict[str, dict[str, int]] = {}

        def add(key: str, labels: Labels, weight: int) -> None:
            value = labels.get(key)
            if value is not None:
                by_value = scores.setdefault(key, {})
                by_value[value] = by_value.get(value, 0) + weight

        own_terms = preferred + preferred_anti
        # The namespaces the pod's preferred terms select (None: any), to pass over other pods cheaply.
        own_namespaces: frozenset[str] | None = frozenset()
        for t in own_terms:
            own_namespaces = None if own_namespaces is None or t.namespaces is None else own_namespaces | t.namespaces
        for info in snapshot.node_infos:
            labels = info.node.labels
            # Upstream passes over nodes without labels entirely.
            if not labels:
                continue
            if own_terms:
                for existing in info.pods.values():
                    if own_namespaces is not None and existing.namespace not in own_namespaces:
                        continue
                    for t in own_terms:
                        if t.matches(existing):
                            add(t.topology_key, labels, t.weight)
            # Symmetry: existing pods' terms that select the incoming pod.
            for existing in info.pods_with_affinity.values():
                if hard_weight > 0:
                    for term in existing.required_affinity:
                        if existing_term_matches(term, existing, pod, ns_labels):
                            add(term.topology_key, labels, hard_weight)
                for weighted in existing.preferred_affinity:
                    if existing_term_matches(weighted.term, existing, pod, ns_labels):
                        add(weighted.term.topology_key, labels, weighted.weight)
                for weighted in existing.preferred_anti_affinity:
                    if existing_term_matches(weighted.term, existing, pod, ns_labels):
                        add(weighted.term.topology_key, labels, -weighted.weight)

        if not scores:
            return SKIP
        state.write(_PRE_SCORE_KEY, _PreScoreState(scores))
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        s = state.read(_PRE_SCORE_KEY, _PreScoreState)
        labels = node_info.node.labels
        total = 0
        for key, by_value in s.topology_score.items():
            value = labels.get(key)
            if value is not None:
                total += by_value.get(value, 0)
        return total

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[int]) -> None:
        """Min-max scaling to 0..100, in float64 and truncated as upstream (negative raw scores occur)."""
        s = state.read(_PRE_SCORE_KEY, _PreScoreState)
        if not s.topology_score or not scores:
            return
        low, high = min(scores), max(scores)
        spread = high - low
        for i, raw in enumerate(scores):
            scores[i] = int(float(MAX_NODE_SCORE) * (float(raw - low) / float(spread))) if spread > 0 else 0


def _incoming_counts(
    affinity: tuple[AffinityTerm, ...], anti_affinity: tuple[AffinityTerm, ...], node_infos: Iterable[NodeInfo]
) -> tuple[PairCounts, PairCounts]:
    """Existing pods matching the incoming pod's required terms, per topology pair: pods matching all the
    affinity terms count for every affinity term, anti-affinity terms count one by one."""
    affinity_counts: PairCounts = {}
    anti_affinity_counts: PairCounts = {}
    terms = affinity + anti_affinity
    if not terms:
        return affinity_counts, anti_affinity_counts
    keys = {t.topology_key for t in terms}
    # The namespaces any term selects (None: any), to pass over other pods cheaply.
    namespaces: frozenset[str] | None = frozenset()
    for t in terms:
        namespaces = None if namespaces is None or t.namespaces is None else namespaces | t.namespaces
    for info in node_infos:
        labels = info.node.labels
        # Pods on a node without any of the terms' keys count nowhere.
        if not any(k in labels for k in keys):
            continue
        for existing in info.pods.values():
            if namespaces is not None and existing.namespace not in namespaces:
                continue
            if affinity:
                for t in affinity:
                    if not t.matches(existing):
                        break
                else:
                    for t in affinity:
                        _add(affinity_counts, labels, t.topology_key, 1)
            for t in anti_affinity:
                if t.matches(existing):
                    _add(anti_affinity_counts, labels, t.topology_key, 1)
    return affinity_counts, anti_affinity_counts


def _satisfies_affinity(s: _PreFilterState, pod: Pod, labels: Labels) -> bool:
    """Every term's key must be on the node; a domain without matching pods fails unless no pod in the
    cluster matches and the pod matches its own terms (the first pod of a self-affine group)."""
    pods_exist = True
    for t in s.affinity:
        value = labels.get(t.topology_key)
        if value is None:
            return False
        if s.affinity_counts.get((t.topology_key, value), 0) <= 0:
            pods_exist = False
    if pods_exist:
        return True
    return not s.affinity_counts and _matches_all(s.affinity, pod)


def new(args: Mapping[str, Any]) -> InterPodAffinity:
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
