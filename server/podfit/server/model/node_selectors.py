"""Node selector matching (component-helpers' nodeaffinity and labels.Requirement): the model's own rules,
shared by the plugins and the DRA allocator (a claim's allocation node selector)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from podfit.server.model.objects import Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, parse_go_int

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
