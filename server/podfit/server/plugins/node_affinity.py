"""NodeAffinity: nodeSelector and required node affinity filter nodes, preferred terms score them.

The plugin's ``addedAffinity`` argument is ANDed with every pod's own affinity: its required selector
rejects nodes before the pod's rules are looked at, its preferred terms add to every node's score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import MAX_NODE_SCORE, Int32Array, Int64Array, IntpArray, PreFilterResult
from podfit.server.framework.profile import NODE_AFFINITY
from podfit.server.framework.status import SKIP, Status, unresolvable
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import NodeSelectorRequirement, NodeSelectorTerm, Pod, PreferredSchedulingTerm
from podfit.server.model.node_selectors import NODE_NAME_FIELD, term_valid
from podfit.server.plugins.helper import default_normalize_rows

if TYPE_CHECKING:
    from podfit.server.cache.node_table import NodeTable
    from podfit.server.cache.snapshot import Snapshot

REASON_POD = "node(s) didn't match Pod's node affinity/selector"
REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
REASON_CONFLICT = "pod affinity terms conflict"
_REJECTED_BY_POD = unresolvable(REASON_POD)
_REJECTED_BY_ENFORCED = unresolvable(REASON_ENFORCED)

_ARGS = "NodeAffinityArgs"
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _effective_preferred(terms: Sequence[PreferredSchedulingTerm]) -> tuple[PreferredSchedulingTerm, ...]:
    """Upstream drops zero-weight terms and empty preferences before scoring."""
    return tuple(t for t in terms if t.weight != 0 and (t.preference.match_expressions or t.preference.match_fields))


def _node_names_from_fields(terms: Sequence[NodeSelectorTerm]) -> set[str] | None:
    """The nodes that ``matchFields metadata.name In`` allows, or None when some term allows every node.

    Terms are ORed (union), requirements within a term ANDed (intersection); like upstream this reads
    the values of every such requirement, valid or not.
    """
    names: set[str] | None = None
    for term in terms:
        term_names: set[str] | None = None
        for req in term.match_fields:
            if req.key == NODE_NAME_FIELD and req.operator == "In":
                values = set(req.values)
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        names = term_names if names is None else names | term_names
    return names


BoolArray = npt.NDArray[np.bool_]


def _requirement_rows(req: NodeSelectorRequirement, table: NodeTable, rows: IntpArray) -> BoolArray:
    """label_requirement_matches of a valid requirement over the rows, via a per-value-code lookup table
    whose extra last entry answers for nodes without the key (code -1)."""
    op = req.operator
    column = table.labels.get(req.key)
    if column is None:
        return np.full(len(rows), op in ("NotIn", "DoesNotExist"))
    codes = column.codes.take(rows)
    if op == "Exists":
        return codes >= 0
    if op == "DoesNotExist":
        return codes < 0
    lookup = np.zeros(len(column.names) + 1, dtype=bool)
    if op in ("In", "NotIn"):
        value_codes = [code for code in map(column.values.get, req.values) if code is not None]
        lookup[value_codes] = True
        if op == "NotIn":
            lookup = ~lookup
    else:
        valid, ints = column.integer_values()
        # term_valid checked that the value parses as an int64, so int() reads it the same way.
        want = int(req.values[0])
        lookup[:-1] = valid & (ints > want if op == "Gt" else ints < want)
    return lookup.take(codes)


def _field_rows(req: NodeSelectorRequirement, table: NodeTable, rows: IntpArray) -> BoolArray:
    """field_requirement_matches: node names are unique rows, other field keys read as ""."""
    same: BoolArray
    if req.key == NODE_NAME_FIELD:
        same = np.equal(rows, table.row_of.get(req.values[0], -1))
    else:
        same = np.full(len(rows), req.values[0] == "")
    return same if req.operator == "In" else ~same


def _term_rows(term: NodeSelectorTerm, table: NodeTable, rows: IntpArray) -> BoolArray:
    """term_matches over the rows."""
    if not term_valid(term):
        return np.zeros(len(rows), dtype=bool)
    mask = np.ones(len(rows), dtype=bool)
    for req in term.match_expressions:
        mask &= _requirement_rows(req, table, rows)
    for req in term.match_fields:
        mask &= _field_rows(req, table, rows)
    return mask


def _terms_rows(terms: Sequence[NodeSelectorTerm], table: NodeTable, rows: IntpArray) -> BoolArray:
    """terms_match over the rows (terms are ORed)."""
    mask = np.zeros(len(rows), dtype=bool)
    for term in terms:
        mask |= _term_rows(term, table, rows)
    return mask


def _required_rows(pod: Pod, table: NodeTable, rows: IntpArray) -> BoolArray:
    """required_node_affinity_matches over the rows."""
    mask = np.ones(len(rows), dtype=bool)
    for key, value in pod.node_selector.items():
        column = table.labels.get(key)
        code = column.values.get(value) if column is not None else None
        if column is None or code is None:
            return np.zeros(len(rows), dtype=bool)
        mask &= column.codes.take(rows) == code
    if pod.required_node_affinity is not None:
        mask &= _terms_rows(pod.required_node_affinity, table, rows)
    return mask


def _preferred_rows(terms: Sequence[PreferredSchedulingTerm], table: NodeTable, rows: IntpArray) -> Int64Array:
    total = np.zeros(len(rows), dtype=np.int64)
    for term in terms:
        total += _term_rows(term.preference, table, rows) * term.weight
    return total


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    preferred: tuple[PreferredSchedulingTerm, ...]

    def clone(self) -> _PreScoreState:
        return self


class NodeAffinity:
    # Filter and Score of a row read only that row: results survive until the row's generation moves.
    row_local = True
    # ...and only its Node: pods coming and going leave them standing.
    reads_pods = False
    name = NODE_AFFINITY

    def __init__(
        self,
        added_required: tuple[NodeSelectorTerm, ...] | None = None,
        added_preferred: tuple[PreferredSchedulingTerm, ...] | None = None,
    ) -> None:
        # None = no added selector; an empty tuple is a selector that matches no node.
        self.added_required = added_required
        # None when addedAffinity has no preferred terms (then PreScore may skip).
        self.added_preferred = added_preferred

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        required = pod.required_node_affinity
        if required is None and self.added_required is None and not pod.node_selector:
            return None, SKIP
        if not required:
            return None, None
        names = _node_names_from_fields(required)
        if names is None:
            return None, None
        if not names:
            return None, unresolvable(REASON_CONFLICT)
        return PreFilterResult(frozenset(names)), None

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        """Requirements are evaluated over the label code columns; the added selector is checked first."""
        codes = np.where(_required_rows(pod, table, rows), np.int32(0), np.int32(2))
        if self.added_required is not None:
            codes[~_terms_rows(self.added_required, table, rows)] = 1
        return codes, [_REJECTED_BY_ENFORCED, _REJECTED_BY_POD]

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: IntpArray) -> Status | None:
        # The model cannot tell an absent preferred list from an empty one; both skip here.
        if not pod.preferred_node_affinity and self.added_preferred is None:
            return SKIP
        state.write(self.name, _PreScoreState(_effective_preferred(pod.preferred_node_affinity)))
        return None

    def score_rows(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray) -> Int64Array:
        return _preferred_rows((*(self.added_preferred or ()), *self._pod_preferred(state, pod)), table, rows)

    def _pod_preferred(self, state: CycleState, pod: Pod) -> tuple[PreferredSchedulingTerm, ...]:
        pre = state.get(self.name)
        return pre.preferred if isinstance(pre, _PreScoreState) else _effective_preferred(pod.preferred_node_affinity)

    def normalize_rows(self, state: CycleState, pod: Pod, scores: Int64Array) -> Int64Array:
        return default_normalize_rows(MAX_NODE_SCORE, False, scores)


# -- arguments -----------------------------------------------------------------------------------


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{path}: must be an object")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise ValueError(f"{path}: must be a list")
    return list(value)


def _requirements(value: Any, path: str, fields: bool) -> tuple[NodeSelectorRequirement, ...]:
    result = []
    for i, item in enumerate(_list(value, path)):
        where = f"{path}[{i}]"
        req = _mapping(item, where)
        key, operator, values = req.get("key", ""), req.get("operator", ""), _list(req.get("values"), f"{where}.values")
        if not isinstance(key, str) or not isinstance(operator, str) or not all(isinstance(v, str) for v in values):
            raise ValueError(f"{where}: key, operator and values must be strings")
        allowed = ("In", "NotIn") if fields else _OPERATORS
        if operator not in allowed:
            raise ValueError(
                f"{where}.operator: Unsupported value: {operator!r}: supported values: {', '.join(allowed)}"
            )
        result.append(NodeSelectorRequirement(key=key, operator=operator, values=tuple(values)))
    return tuple(result)


def _term(value: Any, path: str) -> NodeSelectorTerm:
    data = _mapping(value, path)
    term = NodeSelectorTerm(
        match_expressions=_requirements(data.get("matchExpressions"), f"{path}.matchExpressions", fields=False),
        match_fields=_requirements(data.get("matchFields"), f"{path}.matchFields", fields=True),
    )
    if (term.match_expressions or term.match_fields) and not term_valid(term):
        raise ValueError(f"{path}: invalid requirement values for their operator")
    return term


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> NodeAffinity:
    added = args.get("addedAffinity")
    if added is None:
        return NodeAffinity()
    path = f"{_ARGS}.addedAffinity"
    added = _mapping(added, path)
    added_required: tuple[NodeSelectorTerm, ...] | None = None
    required = added.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        where = f"{path}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        raw_terms = _list(_mapping(required, where).get("nodeSelectorTerms"), where)
        added_required = tuple(_term(t, f"{where}[{i}]") for i, t in enumerate(raw_terms))
    added_preferred: tuple[PreferredSchedulingTerm, ...] | None = None
    where = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
    raw_preferred = _list(added.get("preferredDuringSchedulingIgnoredDuringExecution"), where)
    if raw_preferred:
        terms = []
        for i, item in enumerate(raw_preferred):
            data = _mapping(item, f"{where}[{i}]")
            weight = data.get("weight", 0)
            if isinstance(weight, bool) or not isinstance(weight, int):
                raise ValueError(f"{where}[{i}].weight: must be an integer")
            terms.append(PreferredSchedulingTerm(weight, _term(data.get("preference"), f"{where}[{i}].preference")))
        added_preferred = _effective_preferred(terms)
    return NodeAffinity(added_required, added_preferred)
