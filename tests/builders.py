"""Fluent makers for test objects, in the spirit of upstream's ``st.MakePod().Name("p")...Obj()``.

Builders produce Kubernetes JSON (``.json()``) so that every test also exercises the one converter,
and domain records (``.obj()``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from podfit.server.cache.cluster_cache import ClusterCache, Upsert
from podfit.server.cache.node_info import NodeInfo
from podfit.server.model import Kind, Node, Pod
from podfit.server.model.decode import object_from_k8s
from podfit.server.model.objects import node_from_k8s, pod_from_k8s


class PodBuilder:
    def __init__(self, name: str = "pod", namespace: str = "default") -> None:
        self._d: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
            "spec": {"containers": []},
            "status": {},
        }

    @property
    def spec(self) -> dict[str, Any]:
        return self._d["spec"]  # type: ignore[no-any-return]

    def namespace(self, ns: str) -> PodBuilder:
        self._d["metadata"]["namespace"] = ns
        return self

    def uid(self, uid: str) -> PodBuilder:
        self._d["metadata"]["uid"] = uid
        return self

    def labels(self, **labels: str) -> PodBuilder:
        self._d["metadata"].setdefault("labels", {}).update(labels)
        return self

    def label(self, key: str, value: str) -> PodBuilder:
        self._d["metadata"].setdefault("labels", {})[key] = value
        return self

    def node(self, name: str) -> PodBuilder:
        self.spec["nodeName"] = name
        return self

    def container(
        self,
        requests: Mapping[str, str] | None = None,
        image: str = "registry.k8s.io/pause:3.9",
        ports: Iterable[Mapping[str, Any]] = (),
        limits: Mapping[str, str] | None = None,
    ) -> PodBuilder:
        c: dict[str, Any] = {"name": f"c{len(self.spec['containers'])}", "image": image}
        if requests is not None or limits is not None:
            c["resources"] = {}
            if requests is not None:
                c["resources"]["requests"] = dict(requests)
            if limits is not None:
                c["resources"]["limits"] = dict(limits)
        if ports:
            c["ports"] = [dict(p) for p in ports]
        self.spec["containers"].append(c)
        return self

    def req(self, **requests: str) -> PodBuilder:
        """One container with these requests (use ``ephemeral_storage`` for ephemeral-storage)."""
        return self.container({k.replace("_", "-"): v for k, v in requests.items()})

    def init_container(self, requests: Mapping[str, str], sidecar: bool = False) -> PodBuilder:
        c: dict[str, Any] = {"name": f"i{len(self.spec.get('initContainers', []))}", "image": "busybox"}
        c["resources"] = {"requests": dict(requests)}
        if sidecar:
            c["restartPolicy"] = "Always"
        self.spec.setdefault("initContainers", []).append(c)
        return self

    def overhead(self, **amounts: str) -> PodBuilder:
        self.spec["overhead"] = {k.replace("_", "-"): v for k, v in amounts.items()}
        return self

    def host_port(self, port: int, protocol: str = "TCP", host_ip: str = "") -> PodBuilder:
        p: dict[str, Any] = {"containerPort": port, "hostPort": port, "protocol": protocol}
        if host_ip:
            p["hostIP"] = host_ip
        return self.container(ports=[p])

    def node_selector(self, **labels: str) -> PodBuilder:
        self.spec.setdefault("nodeSelector", {}).update(labels)
        return self

    def affinity(self, section: str, value: Any) -> PodBuilder:
        """Sets ``spec.affinity.<section>`` (nodeAffinity, podAffinity, podAntiAffinity) verbatim."""
        self.spec.setdefault("affinity", {})[section] = copy.deepcopy(value)
        return self

    def pod_term(
        self, section: str, match_labels: Mapping[str, str], topology_key: str, weight: int | None = None
    ) -> PodBuilder:
        """Adds one podAffinity/podAntiAffinity term selecting ``match_labels``: required, or preferred with
        ``weight``."""
        term: dict[str, Any] = {"labelSelector": {"matchLabels": dict(match_labels)}, "topologyKey": topology_key}
        kind = "required" if weight is None else "preferred"
        if weight is not None:
            term = {"weight": weight, "podAffinityTerm": term}
        terms = self.spec.setdefault("affinity", {}).setdefault(section, {})
        terms.setdefault(f"{kind}DuringSchedulingIgnoredDuringExecution", []).append(term)
        return self

    def toleration(self, key: str = "", operator: str = "Equal", value: str = "", effect: str = "") -> PodBuilder:
        t = {"key": key, "operator": operator, "value": value, "effect": effect}
        self.spec.setdefault("tolerations", []).append({k: v for k, v in t.items() if v})
        return self

    def spread(
        self,
        max_skew: int,
        key: str,
        when: str = "DoNotSchedule",
        selector: Mapping[str, Any] | None = None,
        **extra: Any,
    ) -> PodBuilder:
        c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
        if selector is not None:
            c["labelSelector"] = copy.deepcopy(selector)
        c.update(extra)
        self.spec.setdefault("topologySpreadConstraints", []).append(c)
        return self

    def gates(self, *names: str) -> PodBuilder:
        self.spec["schedulingGates"] = [{"name": n} for n in names]
        return self

    def priority(self, value: int, policy: str = "") -> PodBuilder:
        self.spec["priority"] = value
        if policy:
            self.spec["preemptionPolicy"] = policy
        return self

    def phase(self, phase: str) -> PodBuilder:
        self._d["status"]["phase"] = phase
        return self

    def start_time(self, rfc3339: str) -> PodBuilder:
        self._d["status"]["startTime"] = rfc3339
        return self

    def nominated(self, node: str) -> PodBuilder:
        self._d["status"]["nominatedNodeName"] = node
        return self

    def deleting(self, rfc3339: str = "2024-01-01T00:00:00Z") -> PodBuilder:
        """Sets metadata.deletionTimestamp: the pod is terminating."""
        self._d["metadata"]["deletionTimestamp"] = rfc3339
        return self

    def terminating(self) -> PodBuilder:
        """A terminating pod (upstream's st.MakePod().Terminating())."""
        return self.deleting()

    def condition(self, kind: str, status: str = "True", reason: str = "") -> PodBuilder:
        c = {"type": kind, "status": status}
        if reason:
            c["reason"] = reason
        self._d["status"].setdefault("conditions", []).append(c)
        return self

    def preempted(self) -> PodBuilder:
        """Terminating because kube-scheduler preempted it: the DisruptionTarget condition its preemption
        sets (reason PreemptionByScheduler), then the deletionTimestamp."""
        return self.condition("DisruptionTarget", "True", "PreemptionByScheduler").terminating()

    def owner(self, kind: str, name: str) -> PodBuilder:
        self._d["metadata"].setdefault("ownerReferences", []).append(
            {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}
        )
        return self

    def scheduler(self, name: str) -> PodBuilder:
        self.spec["schedulerName"] = name
        return self

    def json(self) -> dict[str, Any]:
        return copy.deepcopy(self._d)

    def obj(self) -> Pod:
        return pod_from_k8s(self._d)


class NodeBuilder:
    def __init__(self, name: str = "node") -> None:
        self._d: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}},
        }

    def labels(self, **labels: str) -> NodeBuilder:
        self._d["metadata"]["labels"].update(labels)
        return self

    def label(self, key: str, value: str) -> NodeBuilder:
        self._d["metadata"]["labels"][key] = value
        return self

    def capacity(self, **amounts: str) -> NodeBuilder:
        """Sets allocatable (and capacity) amounts; ``ephemeral_storage`` for ephemeral-storage."""
        alloc = {k.replace("_", "-") if not k.startswith("example") else k: v for k, v in amounts.items()}
        self._d["status"]["allocatable"].update(alloc)
        self._d["status"]["capacity"] = dict(self._d["status"]["allocatable"])
        return self

    def allocatable(self, resources: Mapping[str, str]) -> NodeBuilder:
        self._d["status"]["allocatable"] = dict(resources)
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> NodeBuilder:
        self._d["spec"].setdefault("taints", []).append({"key": key, "value": value, "effect": effect})
        return self

    def unschedulable(self, value: bool = True) -> NodeBuilder:
        self._d["spec"]["unschedulable"] = value
        return self

    def image(self, size_bytes: int, *names: str) -> NodeBuilder:
        self._d["status"].setdefault("images", []).append({"names": list(names), "sizeBytes": size_bytes})
        return self

    def json(self) -> dict[str, Any]:
        return copy.deepcopy(self._d)

    def obj(self) -> Node:
        return node_from_k8s(self._d)


def make_pod(name: str = "pod", namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


def make_node(name: str = "node") -> NodeBuilder:
    return NodeBuilder(name)


def node_info(node: NodeBuilder | Node, *pods: PodBuilder | Pod) -> NodeInfo:
    info = NodeInfo(node.obj() if isinstance(node, NodeBuilder) else node)
    for pod in pods:
        info.add_pod(pod.obj() if isinstance(pod, PodBuilder) else pod)
    return info


def make_cache(*objects: PodBuilder | NodeBuilder | tuple[Kind, Mapping[str, Any]]) -> ClusterCache:
    """A cache holding the given nodes, pods, and (kind, Kubernetes JSON) pairs for other kinds."""
    cache = ClusterCache()
    changes = []
    for item in objects:
        if isinstance(item, PodBuilder):
            changes.append(Upsert(Kind.POD, item.obj()))
        elif isinstance(item, NodeBuilder):
            changes.append(Upsert(Kind.NODE, item.obj()))
        else:
            kind, data = item
            changes.append(Upsert(kind, object_from_k8s(kind, data, kind.value)))
    cache.apply(changes)
    return cache


def make_pdb(
    name: str,
    selector: Mapping[str, Any] | None,
    disruptions_allowed: int,
    namespace: str = "default",
    min_available: int | None = None,
    disrupted_pods: Iterable[str] = (),
) -> tuple[Kind, dict[str, Any]]:
    """A policy/v1 PodDisruptionBudget for ``make_cache``; ``selector`` is a LabelSelector (None = absent),
    ``disrupted_pods`` the names its status.disruptedPods lists."""
    spec: dict[str, Any] = {}
    if selector is not None:
        spec["selector"] = copy.deepcopy(dict(selector))
    if min_available is not None:
        spec["minAvailable"] = min_available
    data: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {"disruptionsAllowed": disruptions_allowed},
    }
    disrupted = {pod: "2024-01-01T00:00:00Z" for pod in disrupted_pods}
    if disrupted:
        data["status"]["disruptedPods"] = disrupted
    return Kind.POD_DISRUPTION_BUDGET, data
