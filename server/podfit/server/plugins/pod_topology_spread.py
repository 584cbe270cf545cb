"""PodTopologySpread: keeps matching pods evenly spread over topology domains (upstream
plugins/podtopologyspread).

DoNotSchedule constraints filter, ScheduleAnyway constraints score. Pods without constraints get the
cluster-default ones (System: hostname and zone, ScheduleAnyway), selecting the pods of the Services,
ReplicaSets, StatefulSets and ReplicationControllers the pod belongs to. PreFilter and PreScore count
matching pods per domain once; Filter and Score then cost O(constraints) per node.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from podfit.server.cache.node_info import NodeInfo
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import MAX_NODE_SCORE, PreFilterResult
from podfit.server.framework.profile import POD_TOPOLOGY_SPREAD
from podfit.server.framework.status import SKIP, Status, unresolvable, unschedulable
from podfit.server.model import Kind, Node, Pod, TopologySpreadConstraint, WorkloadSelector
from podfit.server.model.errors import ValidationError
from podfit.server.model.objects import Labels, LabelSelector, parse_label_selector
from podfit.server.plugins.helper import do_not_schedule_taints, find_untolerated_taint, required_node_affinity_matches

if TYPE_CHECKING:
    from podfit.server.cache.snapshot import Snapshot

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

    def includes_node(self, pod: Pod, node: Node) -> bool:
        """nodeAffinityPolicy / nodeTaintsPolicy: whether the node's pods count for this constraint."""
        if self.honor_node_affinity and not required_node_affinity_matches(pod, node):
            return False
        return not (
            self.honor_node_taints and find_untolerated_taint(node.taints, pod.tolerations, do_not_schedule_taints)
        )


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


def count_matching(pods: Iterable[Pod], selector: LabelSelector | None, namespace: str) -> int:
    """countPodsMatchSelector: pods of ``namespace`` the selector matches; an empty selector counts nothing."""
    if selector is None or selector.empty:
        return 0
    matches = selector.matches
    return sum(1 for p in pods if p.namespace == namespace and matches(p.labels))


def _has_all_keys(labels: Labels, constraints: Sequence[Constraint]) -> bool:
    return all(c.topology_key in labels for c in constraints)


def _selector_groups(constraints: Sequence[Constraint]) -> list[int]:
    """For each constraint, the index of the first constraint with an equal selector (shared counting)."""
    groups = []
    for i, c in enumerate(constraints):
        groups.append(next(j for j in range(i + 1) if constraints[j].selector == c.selector))
    return groups


class _NodeInclusion:
    """Evaluates a node's inclusion policies at most once per node across constraints."""

    __slots__ = ("_affinity", "_taints", "node", "pod")

    def __init__(self, pod: Pod, node: Node) -> None:
        self.pod = pod
        self.node = node
        self._affinity: bool | None = None
        self._taints: bool | None = None

    def includes(self, c: Constraint) -> bool:
        if c.honor_node_affinity:
            if self._affinity is None:
                self._affinity = required_node_affinity_matches(self.pod, self.node)
            if not self._affinity:
                return False
        if c.honor_node_taints:
            if self._taints is None:
                taint = find_untolerated_taint(self.node.taints, self.pod.tolerations, do_not_schedule_taints)
                self._taints = taint is None
            if not self._taints:
                return False
        return True


# --------------------------------------------------------------------------------------------------
# Cycle state


class _CriticalPaths:
    """The two domains with the fewest matching pods, updated exactly as upstream's criticalPaths (only the
    first, the minimum, is read; after add/remove it is an approximation upstream shares)."""

    __slots__ = ("nums", "values")

    def __init__(self, values: list[str] | None = None, nums: list[int] | None = None) -> None:
        self.values = values if values is not None else ["", ""]
        self.nums = nums if nums is not None else [_MAX_INT32, _MAX_INT32]

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


class _PreFilterState:
    __slots__ = ("constraints", "counts", "paths", "self_match")

    def __init__(
        self,
        constraints: list[Constraint],
        counts: list[dict[str, int]],
        paths: list[_CriticalPaths],
        self_match: list[int],
    ) -> None:
        self.constraints = constraints
        # Per constraint: domain value -> matching pods (every eligible domain present, possibly 0).
        self.counts = counts
        self.paths = paths
        # Per constraint: 1 when the incoming pod matches the selector itself.
        self.self_match = self_match

    def clone(self) -> _PreFilterState:
        return _PreFilterState(
            self.constraints, [dict(c) for c in self.counts], [p.clone() for p in self.paths], self.self_match
        )

    def min_match(self, i: int) -> int:
        """The global minimum; 0 while fewer domains than minDomains are eligible."""
        if len(self.counts[i]) < self.constraints[i].min_domains:
            return 0
        return self.paths[i].nums[0]

    def update_with_pod(self, incoming: Pod, other: Pod, node: Node, delta: int) -> None:
        if other.namespace != incoming.namespace:
            return
        labels = node.labels
        if not _has_all_keys(labels, self.constraints):
            return
        inclusion = _NodeInclusion(incoming, node)
        for i, c in enumerate(self.constraints):
            if not c.matches(other.labels) or not inclusion.includes(c):
                continue
            value = labels[c.topology_key]
            counts = self.counts[i]
            counts[value] = counts.get(value, 0) + delta
            self.paths[i].update(value, counts[value])


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    constraints: list[Constraint]
    ignored_nodes: frozenset[str]
    # Per constraint (except hostname ones, counted in Score): domain value -> matching pods.
    counts: list[dict[str, int]]
    weights: list[float]

    def clone(self) -> _PreScoreState:
        return self


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
        namespace = pod.namespace
        groups = _selector_groups(constraints)
        counts: list[dict[str, int]] = [{} for _ in constraints]
        for info in snapshot.node_infos:
            node = info.node
            labels = node.labels
            if not _has_all_keys(labels, constraints):
                continue
            inclusion = _NodeInclusion(pod, node)
            per_group: dict[int, int] = {}
            for i, c in enumerate(constraints):
                if not inclusion.includes(c):
                    continue
                group = groups[i]
                count = per_group.get(group)
                if count is None:
                    count = per_group[group] = count_matching(info.pods.values(), c.selector, namespace)
                value = labels[c.topology_key]
                counts[i][value] = counts[i].get(value, 0) + count
        paths = []
        for by_value in counts:
            path = _CriticalPaths()
            for value, num in by_value.items():
                path.update(value, num)
            paths.append(path)
        self_match = [1 if c.matches(pod.labels) else 0 for c in constraints]
        state.write(_PRE_FILTER_KEY, _PreFilterState(constraints, counts, paths, self_match))
        return None, None

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo, snapshot: Snapshot) -> None:
        state.read(_PRE_FILTER_KEY, _PreFilterState).update_with_pod(pod, pod_to_add, node_info.node, 1)

    def remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo, snapshot: Snapshot
    ) -> None:
        state.read(_PRE_FILTER_KEY, _PreFilterState).update_with_pod(pod, pod_to_remove, node_info.node, -1)

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        """Rejects when placing the pod would make its domain exceed the global minimum by more than maxSkew."""
        s = state.read(_PRE_FILTER_KEY, _PreFilterState)
        labels = node_info.node.labels
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                return unresolvable(REASON_NODE_LABEL_NOT_MATCH)
            skew = s.counts[i].get(value, 0) + s.self_match[i] - s.min_match(i)
            if skew > c.max_skew:
                return unschedulable(REASON_CONSTRAINTS_NOT_MATCH)
        return None

    # -- PreScore / Score ------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], snapshot: Snapshot) -> Status | None:
        """Counts matching pods over all nodes, per domain present among the feasible nodes.

        Own constraints (or List defaults) require a node to carry every topology key to be scored; with
        the System defaults a node lacking the zone label is still scored for hostname spreading.
        """
        all_nodes = snapshot.node_infos
        if not all_nodes:
            return SKIP
        constraints = self.constraints(pod, SCHEDULE_ANYWAY, snapshot)
        if not constraints:
            return SKIP
        require_all = bool(pod.topology_spread_constraints) or not self.system_defaulted
        counts: list[dict[str, int]] = [{} for _ in constraints]
        ignored: set[str] = set()
        for info in nodes:
            labels = info.node.labels
            if require_all and not _has_all_keys(labels, constraints):
                ignored.add(info.name)
                continue
            for i, c in enumerate(constraints):
                if c.topology_key != LABEL_HOSTNAME:
                    counts[i].setdefault(labels.get(c.topology_key, ""), 0)
        weights = []
        for i, c in enumerate(constraints):
            size = len(nodes) - len(ignored) if c.topology_key == LABEL_HOSTNAME else len(counts[i])
            weights.append(math.log(float(size + 2)))

        namespace = pod.namespace
        groups = _selector_groups(constraints)
        counted = [i for i, c in enumerate(constraints) if c.topology_key != LABEL_HOSTNAME]
        if counted:
            for info in all_nodes:
                node = info.node
                labels = node.labels
                if require_all and not _has_all_keys(labels, constraints):
                    continue
                inclusion = _NodeInclusion(pod, node)
                per_group: dict[int, int] = {}
                for i in counted:
                    c = constraints[i]
                    if not inclusion.includes(c):
                        continue
                    value = labels.get(c.topology_key, "")
                    by_value = counts[i]
                    if value not in by_value:
                        continue
                    group = groups[i]
                    count = per_group.get(group)
                    if count is None:
                        count = per_group[group] = count_matching(info.pods.values(), c.selector, namespace)
                    by_value[value] += count
        state.write(_PRE_SCORE_KEY, _PreScoreState(constraints, frozenset(ignored), counts, weights))
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        """Sum over constraints of count x log(domains + 2) + maxSkew - 1, rounded (lower is better).

        Nodes PreScore ignored score -1, a marker NormalizeScore turns into 0.
        """
        s = state.read(_PRE_SCORE_KEY, _PreScoreState)
        if node_info.name in s.ignored_nodes:
            return _INVALID_SCORE
        labels = node_info.node.labels
        total = 0.0
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                continue
            if c.topology_key == LABEL_HOSTNAME:
                count = count_matching(node_info.pods.values(), c.selector, pod.namespace)
            else:
                count = s.counts[i].get(value, 0)
            total += count * s.weights[i] + float(c.max_skew - 1)
        return _round_half_away(total)

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[int]) -> None:
        """Reverses and scales: the lowest raw score gets 100; ignored nodes get 0."""
        low, high = _MAX_INT64, 0
        for raw in scores:
            if raw == _INVALID_SCORE:
                continue
            low = min(low, raw)
            high = max(high, raw)
        for i, raw in enumerate(scores):
            if raw == _INVALID_SCORE:
                scores[i] = 0
            elif high == 0:
                scores[i] = MAX_NODE_SCORE
            else:
                scores[i] = MAX_NODE_SCORE * (high + low - raw) // high


def _round_half_away(x: float) -> int:
    """Go's math.Round (halves away from zero), for the non-negative raw scores."""
    floor = math.floor(x)
    return int(floor) + 1 if x - floor >= 0.5 else int(floor)


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


def new(args: Mapping[str, Any]) -> PodTopologySpread:
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
