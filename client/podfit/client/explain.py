"""``podfit explain``: why a pod is pending (or where it would go), in plain language.

Everything comes from one Schedule answer (VIEW_FULL), so the explanation is of one cache generation:
kube-scheduler's own FailedScheduling line first, then the rejected nodes grouped by what rejected them
(counts and a few names per group, never a line per node on a large cluster), the closest candidates,
whether preemption would help and whom it would evict, and whether the pod is gated.

The closest candidates are ranked on what the verdicts tell: nodes where preemption found room first,
then nodes whose rejection preemption could resolve (code Unschedulable: free room, a port, spread)
before those it cannot, then fewer reasons. Each verdict names the *first* filter that rejected the
node (upstream stops there), so a candidate may have further blockers behind it; the text says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from podfit.client import _requests as rq
from podfit.v1 import scheduler_pb2 as sc

# How many node names to list per reason group, and how many closest candidates to show.
NAMES_PER_GROUP = 3
CLOSEST = 5

# What each Filter plugin's rejection means for the operator, and what would lift it.
_HINTS = {
    "NodeUnschedulable": "the node is cordoned (spec.unschedulable); uncordon it or tolerate the taint",
    "NodeName": "the pod's spec.nodeName names another node",
    "TaintToleration": "the node has a taint the pod does not tolerate; add a toleration or remove the taint",
    "NodeAffinity": "the node's labels do not match the pod's nodeSelector or required node affinity",
    "NodePorts": "a hostPort the pod asks for is taken on this node",
    "PodTopologySpread": "placing the pod here would break a topology spread constraint",
    "InterPodAffinity": "the pod (anti-)affinity rules, its own or those of pods already there, exclude this node",
    "VolumeRestrictions": "a volume the pod uses cannot be attached here",
    "NodeVolumeLimits": "the node's volume attach limit is reached",
    "VolumeBinding": "the pod's volumes cannot be bound on this node",
    "VolumeZone": "the pod's volumes are in another zone",
    "DynamicResources": "the pod's resource claims cannot be satisfied here",
}
_ROOM = "not enough free room; evicting lower-priority pods (or pods finishing) would make room"
_TOO_BIG = "the request exceeds what the node can ever offer (its allocatable); no eviction helps"


def hint(plugin: str, code: str) -> str:
    if plugin == "NodeResourcesFit":
        return _ROOM if code == "Unschedulable" else _TOO_BIG
    return _HINTS.get(plugin, f"rejected by {plugin}" if plugin else "rejected")


def _gates(message: str) -> list[str]:
    """The gates named in SchedulingGates' message ("waiting for scheduling gates: [a b]")."""
    found = re.search(r"\[([^\]]*)\]\s*$", message)
    return found.group(1).split() if found else []


def _pod_key(pod: Any) -> str:
    if isinstance(pod, str) and "\n" not in pod and ":" not in pod and not pod.lstrip().startswith("{"):
        namespace, _, name = pod.rpartition("/")
        return f"{namespace or 'default'}/{name}"
    meta = (pod.get("metadata") or {}) if isinstance(pod, Mapping) else {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


def explanation(pod_key: str, response: sc.ScheduleResponse) -> dict[str, Any]:
    """The explanation as data (what ``-o json|yaml`` prints), from a VIEW_FULL Schedule answer."""
    nodes = list(response.nodes)
    body: dict[str, Any] = {
        "pod": pod_key,
        "generation": response.generation,
        "gated": response.gated,
        "fits": bool(response.selected_node),
        "summary": "",
        "node_count": len(nodes),
        "feasible_count": response.feasible_count,
    }
    if response.gated:
        body["summary"] = f"gated: {response.message}"
        body["gates"] = _gates(response.message)
        return body
    if response.selected_node:
        body["summary"] = (
            f"fits: {response.selected_node} is chosen ({response.feasible_count} of {len(nodes)} nodes fit)"
        )
        body["selected_node"] = response.selected_node
        body["best_nodes"] = list(response.best_nodes)
        body["scores"] = [
            {"node": s.node_name, "total": s.total, "plugins": {p.plugin: p.score for p in s.plugins}}
            for s in response.scores[: CLOSEST + 1]
        ]
    else:
        body["summary"] = response.unschedulable_message or "no node fits"
    ties = set(response.preemption.node_ties) if response.HasField("preemption") else set()
    body["groups"] = _groups(nodes)
    body["closest"] = [] if response.selected_node else _closest(nodes, ties)
    if response.HasField("preemption") and response.preemption.code != sc.STATUS_CODE_UNSPECIFIED:
        body["preemption"] = _preemption(response.preemption)
    return body


def _groups(nodes: Sequence[sc.NodeVerdict]) -> list[dict[str, Any]]:
    """Rejected nodes by (plugin, code, reasons), largest group first."""
    groups: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    for v in nodes:
        if not v.fits:
            groups.setdefault((v.plugin, rq.STATUS_CODE_NAMES.get(v.code, ""), tuple(v.reasons)), []).append(
                v.node_name
            )
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    return [
        {
            "plugin": plugin,
            "code": code,
            "reasons": list(reasons),
            "count": len(names),
            "nodes": sorted(names)[:NAMES_PER_GROUP],
            "hint": hint(plugin, code),
        }
        for (plugin, code, reasons), names in ordered
    ]


def _closest(nodes: Sequence[sc.NodeVerdict], preemption_targets: set[str]) -> list[dict[str, Any]]:
    rejected = [v for v in nodes if not v.fits]
    rejected.sort(
        key=lambda v: (
            v.node_name not in preemption_targets,
            v.code != sc.STATUS_CODE_UNSCHEDULABLE,
            len(v.reasons),
            v.node_name,
        )
    )
    return [
        {
            "node": v.node_name,
            "plugin": v.plugin,
            "code": rq.STATUS_CODE_NAMES.get(v.code, ""),
            "reasons": list(v.reasons),
            "hint": hint(v.plugin, rq.STATUS_CODE_NAMES.get(v.code, "")),
            "preemption_target": v.node_name in preemption_targets,
        }
        for v in rejected[:CLOSEST]
    ]


def _preemption(p: sc.PreemptResponse) -> dict[str, Any]:
    return {
        "helps": bool(p.nominated_node),
        "node": p.nominated_node,
        "victims": [{"namespace": v.namespace, "name": v.name, "priority": v.priority} for v in p.victims],
        "pdb_violations": p.num_pdb_violations,
        "node_ties": list(p.node_ties),
        "message": p.message,
    }


def _names(group: Mapping[str, Any]) -> str:
    more = group["count"] - len(group["nodes"])
    return ", ".join(group["nodes"]) + (f" and {more} more" if more > 0 else "")


def render(body: Mapping[str, Any]) -> str:
    """The plain-language text of ``explanation``'s data."""
    lines = [f"{body['pod']}: {body['summary']}"]
    if body["gated"]:
        gates = body.get("gates") or []
        lines.append(
            f"The pod is gated by {len(gates)} scheduling gate(s): {', '.join(gates)}. kube-scheduler does not "
            "try to place it until every gate is removed from spec.schedulingGates."
        )
        return "\n".join(lines)
    if body["fits"]:
        best = body["best_nodes"]
        scores = body["scores"]
        top = scores[0]
        parts = ", ".join(f"{name} {score}" for name, score in top["plugins"].items())
        lines.append(f"It would go to {body['selected_node']}: score {top['total']} ({parts}).")
        if len(best) > 1:
            others = ", ".join(n for n in best if n != body["selected_node"])
            lines.append(f"Tied with {others}: kube-scheduler picks one of them at random.")
        elif len(scores) > 1:
            lines.append(f"Next best: {scores[1]['node']} with {scores[1]['total']}.")
    rejected = sum(g["count"] for g in body["groups"])
    if body["groups"]:
        lines.append("")
        lines.append(f"Nodes rejected by reason ({rejected} of {body['node_count']}):")
        for g in body["groups"]:
            lines.append(f"  {g['count']:>5}  {g['plugin']}: {'; '.join(g['reasons'])} [{g['code']}]")
            lines.append(f"         {g['hint']}; e.g. {_names(g)}")
    if body["closest"]:
        lines.append("")
        lines.append("Closest candidates (each with the first filter that rejects it; more may follow):")
        width = max(len(c["node"]) for c in body["closest"])
        for c in body["closest"]:
            mark = " (preemption makes room here)" if c["preemption_target"] else ""
            lines.append(f"  {c['node']:<{width}}  {c['plugin']}: {'; '.join(c['reasons'])}{mark}")
    pre = body.get("preemption")
    if pre is not None:
        lines.append("")
        if pre["helps"]:
            victims = ", ".join(f"{v['namespace']}/{v['name']} (priority {v['priority']})" for v in pre["victims"])
            lines.append(
                f"Preemption would help: evicting {len(pre['victims'])} pod(s) on {pre['node']} makes room: {victims}"
                f" ({pre['pdb_violations']} PodDisruptionBudget violation(s))."
            )
            alternatives = [n for n in pre["node_ties"] if n != pre["node"]]
            if alternatives:
                lines.append(f"Equally good preemption targets: {', '.join(alternatives)}.")
        else:
            why = pre["message"].split("preemption: ", 1)[-1]
            lines.append(f"Preemption would not help: {why}")
    return "\n".join(lines)


def explain(
    client: Any, pod: Any, node_names: Sequence[str] = (), scheduler_name: str = "", kube_scheduler_version: str = ""
) -> dict[str, Any]:
    """Asks the server (one Schedule, nothing assumed) and returns the explanation's data."""
    response = client.schedule(pod, node_names, scheduler_name, kube_scheduler_version=kube_scheduler_version)
    return explanation(_pod_key(pod), response)
