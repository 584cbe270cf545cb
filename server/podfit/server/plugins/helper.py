"""Matching rules several plugins share (upstream's plugins/helper and component-helpers' nodeaffinity)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt
from podfit.server.model import Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration
from podfit.server.model.objects import parse_go_int

NODE_NAME_FIELD = "metadata.name"


def _requirement_valid(req: NodeSelectorRequirement) -> bool:
    if req.operator in ("In", "NotIn"):
        return len(req.values) > 0
    if req.operator in ("Exists", "DoesNotExist"):
        return len(req.values) == 0
    if req.operator in ("Gt", "Lt"):
        return len(req.values) == 1 and parse_go_int(req.values[0]) is not None
    return False


def label_requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """One matchExpressions entry against node labels (labels.Requirement.Matches)."""
    if not _requirement_valid(req):
        return False
    op = req.operator
    if op == "In":
        return req.key in labels and labels[req.key] in req.values
    if op == "NotIn":
        return req.key not in labels or labels[req.key] not in req.values
    if op == "Exists":
        return req.key in labels
    if op == "DoesNotExist":
        return req.key not in labels
    if req.key not in labels:
        return False
    have = parse_go_int(labels[req.key])
    if have is None:
        return False
    want = parse_go_int(req.values[0])
    assert want is not None
    return have > want if op == "Gt" else have < want


def field_requirement_matches(req: NodeSelectorRequirement, node_name: str) -> bool:
    """One matchFields entry: a node has the single field metadata.name; other keys read as ""."""
    value = node_name if req.key == NODE_NAME_FIELD else ""
    if req.operator == "In":
        return value == req.values[0]
    return value != req.values[0]


def term_valid(term: NodeSelectorTerm) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False
    if not all(_requirement_valid(r) for r in term.match_expressions):
        return False
    return all(r.operator in ("In", "NotIn") and len(r.values) == 1 for r in term.match_fields)


def term_matches(term: NodeSelectorTerm, node: Node) -> bool:
    """A nodeSelectorTerm: every expression and field requirement holds; an empty term matches nothing."""
    if not term_valid(term):
        return False
    labels = node.labels
    if not all(label_requirement_matches(r, labels) for r in term.match_expressions):
        return False
    return all(field_requirement_matches(r, node.name) for r in term.match_fields)


def terms_match(terms: Sequence[NodeSelectorTerm], node: Node) -> bool:
    """nodeSelectorTerms are ORed."""
    return any(term_matches(term, node) for term in terms)


def required_node_affinity_matches(pod: Pod, node: Node) -> bool:
    """nodeSelector AND required node affinity (component-helpers' GetRequiredNodeAffinity().Match)."""
    labels = node.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return False
    if pod.required_node_affinity is None:
        return True
    return terms_match(pod.required_node_affinity, node)


TaintFilter = Callable[[Taint], bool]


def do_not_schedule_taints(taint: Taint) -> bool:
    """Taints that keep pods off a node: NoSchedule and NoExecute."""
    return taint.effect in ("NoSchedule", "NoExecute")


def find_untolerated_taint(
    taints: Iterable[Taint], tolerations: Sequence[Toleration], taint_filter: TaintFilter | None = None
) -> Taint | None:
    """The first taint (passing the filter) that no toleration tolerates (v1helper.FindMatchingUntoleratedTaint)."""
    for taint in taints:
        if taint_filter is not None and not taint_filter(taint):
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def default_normalize_score(max_priority: int, reverse: bool, scores: list[int]) -> None:
    """Scales scores in place so the highest becomes max_priority (plugins/helper.DefaultNormalizeScore).

    Integer arithmetic truncates toward zero as Go's does; with reverse, lower raw scores win and an
    all-zero list becomes all max_priority.
    """
    max_count = max((s for s in scores if s > 0), default=0)
    if max_count == 0:
        if reverse:
            scores[:] = [max_priority] * len(scores)
        return
    for i, score in enumerate(scores):
        scaled = go_div(max_priority * score, max_count)
        scores[i] = max_priority - scaled if reverse else scaled


def go_div(a: int, b: int) -> int:
    """Go's integer division: truncates toward zero (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def go_div_rows(a: npt.NDArray[np.int64], b: int) -> npt.NDArray[np.int64]:
    """go_div over an int64 column (numpy's // floors too)."""
    if b > 0 and (a >= 0).all():
        return a // b
    q = np.abs(a) // abs(b)
    return np.where((a >= 0) == (b > 0), q, -q)


def default_normalize_rows(max_priority: int, reverse: bool, scores: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """default_normalize_score over an int64 column, returning a new column."""
    # The largest positive score is the largest score, when that is positive.
    max_count = int(scores.max(initial=0))
    if max_count == 0:
        return np.full(len(scores), max_priority, dtype=np.int64) if reverse else scores.copy()
    scaled = go_div_rows(scores * max_priority, max_count)
    return max_priority - scaled if reverse else scaled
