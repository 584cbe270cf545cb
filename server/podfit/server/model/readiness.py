"""Pod scheduling readiness: what may change in a pod update (kube-apiserver's ValidatePodUpdate rules
for scheduling gates and the scheduling directives of gated pods).

- Scheduling gates can only be removed after creation, never added.
- While a pod is gated its directives may only be tightened: nodeSelector entries may be added but
  not changed or removed; required node affinity may be set when it was absent or had no terms,
  otherwise the terms list keeps its length and each term only gains requirements (existing
  matchExpressions / matchFields unchanged, in order). Preferred node affinity may change freely.
"""

from __future__ import annotations

from podfit.server.model.errors import ValidationError
from podfit.server.model.objects import NodeSelectorTerm, Pod

NODE_AFFINITY_TERMS = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"


def validate_pod_update(old: Pod, new: Pod) -> None:
    """Raises ValidationError (field relative to the pod) when ``new`` may not replace ``old``."""
    old_gates = set(old.scheduling_gates)
    for i, gate in enumerate(new.scheduling_gates):
        if gate not in old_gates:
            raise ValidationError(
                f"spec.schedulingGates[{i}].name",
                f"Forbidden: only deletion is allowed, but found new scheduling gate '{gate}'",
            )
    if not old.scheduling_gates:
        return
    for key, value in old.node_selector.items():
        if new.node_selector.get(key) != value:
            raise ValidationError(
                "spec.nodeSelector",
                "Invalid value: only additions to spec.nodeSelector are allowed (no mutations or deletions)",
            )
    old_terms = old.required_node_affinity
    if not old_terms:
        return
    new_terms = new.required_node_affinity or ()
    if len(new_terms) != len(old_terms):
        raise ValidationError(
            NODE_AFFINITY_TERMS, "Invalid value: no additions/deletions to non-empty NodeSelectorTerms list are allowed"
        )
    for i, (before, after) in enumerate(zip(old_terms, new_terms, strict=True)):
        if not _only_additions(before, after):
            raise ValidationError(
                f"{NODE_AFFINITY_TERMS}[{i}]", "Invalid value: only additions are allowed (no mutations or deletions)"
            )


def _only_additions(before: NodeSelectorTerm, after: NodeSelectorTerm) -> bool:
    if len(before.match_expressions) > len(after.match_expressions):
        return False
    if len(before.match_fields) > len(after.match_fields):
        return False
    return all(a == b for a, b in zip(before.match_expressions, after.match_expressions, strict=False)) and all(
        a == b for a, b in zip(before.match_fields, after.match_fields, strict=False)
    )
