"""What-if documents: the YAML a person writes for ``podfit simulate`` and ``podfit estimate``.

Kubernetes manifests say what exists; these two podfit kinds say what to try, so that one file (or
several ``-f``) holds a whole question:

```yaml
kind: Scenario            # podfit simulate: at most one; every Pod document is placed after it
removeNodes: [node-a]
addNodes: [{count: 3, template: {kind: Node, metadata: {name: big}, status: {allocatable: {...}}},
            resourceSlices: [{kind: ResourceSlice, spec: {nodeName: big, driver: ..., devices: [...]}}]}]
cordonNodes: [node-b]
taintNodes: [{nodeName: node-c, taint: {key: k, value: v, effect: NoSchedule}}]
removePods: [shop/web-1]  # namespace/name of bound pods
addPods: [{kind: Pod, ..., spec: {nodeName: big-sim-0, ...}}]
pods: [shop/pending-1]    # cached pods to place, after the Pod documents
---
kind: NodeGroup           # podfit estimate: one per group, in the order to compare them
id: pool-a
currentSize: 2
maxSize: 10
template: {kind: Node, ...}
resourceSlices: [...]     # optional: what the drivers publish on one node of the group (node-local)
```

``resourceSlices`` (of an ``addNodes`` entry or a NodeGroup) are the ResourceSlices of one node made from
the template; each new node gets its own copies, pooled per node (see podfit.v1.HypotheticalNodes).

Pending pods for ``estimate`` are grouped as cluster-autoscaler groups them: the same controller and
the same spec make one equivalence group; pods without a controller stand alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from podfit.client.manifests import Manifest, to_cluster_object, to_pod_reference
from podfit.k8s.convert import ConversionError
from podfit.v1 import objects_pb2 as ob
from podfit.v1 import simulation_pb2 as sim

SCENARIO = "Scenario"
NODE_GROUP = "NodeGroup"
_SCENARIO_FIELDS = {"kind", "apiVersion", "removeNodes", "addNodes", "cordonNodes", "taintNodes", "removePods"}
_SCENARIO_FIELDS |= {"addPods", "pods"}
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConversionError(path, "must be a list")
    return value


def _names(value: Any, path: str) -> list[str]:
    names = _list(value, path)
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise ConversionError(f"{path}[{i}]", "must be a non-empty string")
    return names


def _int(value: Any, path: str, default: int | None = None) -> int:
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConversionError(path, "must be an integer")
    return value


def _slices(value: Any, path: str) -> list[Any]:
    """A template's ResourceSlice manifests as ClusterObjects (a manifest without a kind is one)."""
    slices = []
    for i, item in enumerate(_list(value, path)):
        if not isinstance(item, Mapping):
            raise ConversionError(f"{path}[{i}]", "must be a ResourceSlice manifest")
        try:
            slices.append(to_cluster_object(item, "ResourceSlice"))
        except ConversionError as exc:
            raise ConversionError(f"{path}[{i}].{exc.field}" if exc.field else f"{path}[{i}]", exc.message) from None
    return slices


def _pod_key(value: Any, path: str) -> tuple[str, str]:
    if not isinstance(value, str) or not value:
        raise ConversionError(path, 'must be "namespace/name" or "name"')
    namespace, _, name = value.rpartition("/")
    return namespace or "default", name


def scenario(doc: Mapping[str, Any], source: str = "scenario") -> sim.Scenario:
    """A ``kind: Scenario`` document as the Scenario message (its ``pods`` are read by ``simulate_request``)."""
    unknown = sorted(set(doc) - _SCENARIO_FIELDS)
    if unknown:
        raise ConversionError(
            f"{source}.{unknown[0]}", f"unknown field; expected {', '.join(sorted(_SCENARIO_FIELDS))}"
        )
    message = sim.Scenario(remove_nodes=_names(doc.get("removeNodes"), f"{source}.removeNodes"))
    for i, group in enumerate(_list(doc.get("addNodes"), f"{source}.addNodes")):
        where = f"{source}.addNodes[{i}]"
        if not isinstance(group, Mapping) or not isinstance(group.get("template"), Mapping):
            raise ConversionError(f"{where}.template", "must be a Node manifest")
        message.add_nodes.add(
            template=to_cluster_object(group["template"], "Node"),
            count=_int(group.get("count"), f"{where}.count", 1),
            resource_slices=_slices(group.get("resourceSlices"), f"{where}.resourceSlices"),
        )
    message.cordon_nodes.extend(_names(doc.get("cordonNodes"), f"{source}.cordonNodes"))
    for i, entry in enumerate(_list(doc.get("taintNodes"), f"{source}.taintNodes")):
        where = f"{source}.taintNodes[{i}]"
        taint = entry.get("taint") if isinstance(entry, Mapping) else None
        if not isinstance(taint, Mapping) or taint.get("effect") not in _TAINT_EFFECTS:
            raise ConversionError(f"{where}.taint.effect", f"must be one of {', '.join(_TAINT_EFFECTS)}")
        message.taint_nodes.add(
            node_name=str(entry.get("nodeName", "")),
            taint=ob.Taint(key=str(taint.get("key", "")), value=str(taint.get("value", "")), effect=taint["effect"]),
        )
    for i, key in enumerate(_list(doc.get("removePods"), f"{source}.removePods")):
        namespace, name = _pod_key(key, f"{source}.removePods[{i}]")
        message.remove_pods.add(namespace=namespace, name=name)
    for pod in _list(doc.get("addPods"), f"{source}.addPods"):
        message.add_pods.append(to_pod_reference(pod))
    return message


def simulate_request(manifests: Sequence[Manifest], scheduler_name: str = "") -> sim.SimulateRequest:
    """At most one Scenario document and any Pod documents (placed in file order, then the scenario's
    ``pods``); other kinds are refused so a misplaced document is never silently ignored."""
    scenarios = [m for m in manifests if m.get("kind") == SCENARIO]
    if len(scenarios) > 1:
        raise ConversionError("scenario", f"expected at most one Scenario document, found {len(scenarios)}")
    pods: list[Any] = []
    for i, m in enumerate(manifests):
        kind = m.get("kind", "Pod")
        if kind not in ("Pod", SCENARIO):
            raise ConversionError(f"documents[{i}].kind", f"{kind!r} is neither a Pod to place nor a Scenario")
        if kind == "Pod":
            pods.append(m)
    doc = scenarios[0] if scenarios else {}
    changes = scenario(doc)
    pods.extend(_names(doc.get("pods"), "scenario.pods"))
    if not pods:
        raise ConversionError("pods", "nothing to place: give Pod documents or the scenario's pods")
    return sim.SimulateRequest(
        scenario=changes, pods=[to_pod_reference(p) for p in pods], scheduler_name=scheduler_name
    )


def _equivalence_key(pod: Manifest) -> str | None:
    """Same controller and same spec (ignoring nodeName): cluster-autoscaler's equivalence group."""
    meta = pod.get("metadata") or {}
    owner = next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)
    if owner is None:
        return None
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
    return json.dumps([owner.get("uid") or [owner.get("kind"), owner.get("name")], spec], sort_keys=True)


def equivalence_groups(pods: Sequence[Manifest]) -> list[list[Manifest]]:
    """Pods grouped by controller and spec, each group where its first pod stood."""
    groups: list[list[Manifest]] = []
    by_key: dict[str, list[Manifest]] = {}
    for pod in pods:
        key = _equivalence_key(pod)
        if key is None:
            groups.append([pod])
        elif key in by_key:
            by_key[key].append(pod)
        else:
            by_key[key] = [pod]
            groups.append(by_key[key])
    return groups


def estimate_request(manifests: Sequence[Manifest], scheduler_name: str = "") -> sim.EstimateScaleUpRequest:
    """NodeGroup documents and the pending Pod documents (grouped by ``equivalence_groups``)."""
    request = sim.EstimateScaleUpRequest(scheduler_name=scheduler_name)
    pods: list[Manifest] = []
    for i, m in enumerate(manifests):
        kind = m.get("kind", "Pod")
        where = f"documents[{i}]"
        if kind == "Pod":
            pods.append(m)
        elif kind == NODE_GROUP:
            if not isinstance(m.get("id"), str) or not m["id"]:
                raise ConversionError(f"{where}.id", "is required")
            if not isinstance(m.get("template"), Mapping):
                raise ConversionError(f"{where}.template", "must be a Node manifest")
            request.node_groups.add(
                id=m["id"],
                template=to_cluster_object(m["template"], "Node"),
                current_size=_int(m.get("currentSize"), f"{where}.currentSize", 0),
                max_size=_int(m.get("maxSize"), f"{where}.maxSize"),
                template_resource_slices=_slices(m.get("resourceSlices"), f"{where}.resourceSlices"),
            )
        else:
            raise ConversionError(f"{where}.kind", f"{kind!r} is neither a pending Pod nor a NodeGroup")
    if not request.node_groups:
        raise ConversionError("node_groups", "give at least one NodeGroup document")
    if not pods:
        raise ConversionError("pods", "give at least one pending Pod document")
    for group in equivalence_groups(pods):
        request.groups.add(pods=[to_pod_reference(p) for p in group])
    return request
