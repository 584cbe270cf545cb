"""Kubernetes protobuf wherever Kubernetes JSON is accepted: objects applied and pods decided on arrive
the same either way, through a real server."""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest
from podfit.client import PodfitError
from podfit.k8s import protobuf
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import scheduler_pb2 as sc

from tests.builders import make_node, make_pod
from tests.conftest import LiveServer

ENVELOPE = b"k8s\x00"


def enveloped(kind: str, raw: bytes) -> bytes:
    """The API server's application/vnd.kubernetes.protobuf form: magic, then a runtime.Unknown."""

    def field(number: int, payload: bytes) -> bytes:
        return bytes([number << 3 | 2, len(payload)]) + payload

    type_meta = field(1, b"v1") + field(2, kind.encode())
    return ENVELOPE + field(1, type_meta) + bytes([2 << 3 | 2]) + _varint(len(raw)) + raw


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


NODES = [
    make_node("a").capacity(cpu="4", memory="8Gi", pods="10").labels(disk="ssd").json(),
    make_node("b").capacity(cpu="4", memory="8Gi", pods="10").taint("dedicated", "x").json(),
]
POD = make_pod("web").req(cpu="1", memory="1Gi").node_selector(disk="ssd").toleration("dedicated", "Exists").json()


def as_object(manifest: dict[str, Any], form: str) -> cc.ClusterObject:
    raw = protobuf.encode(manifest)
    if form == "raw":
        return cc.ClusterObject(kubernetes_protobuf=cc.KubernetesProtobuf(kind=manifest["kind"], data=raw))
    if form == "enveloped":
        return cc.ClusterObject(kubernetes_protobuf=cc.KubernetesProtobuf(data=enveloped(manifest["kind"], raw)))
    return cc.ClusterObject(kubernetes_json=json.dumps(manifest).encode())


def as_reference(manifest: dict[str, Any], form: str) -> sc.PodReference:
    if form == "json":
        return sc.PodReference(kubernetes_json=json.dumps(manifest).encode())
    raw = protobuf.encode(manifest)
    return sc.PodReference(kubernetes_protobuf=raw if form == "raw" else enveloped("Pod", raw))


@pytest.mark.parametrize("form", ["json", "raw", "enveloped"])
async def test_applied_and_decided_alike(live: LiveServer, form: str) -> None:
    await live.client.apply([as_object(node, form) for node in NODES])
    got = await live.client.get("Node", "a")
    assert got.object.node.metadata.labels["disk"] == "ssd"
    answer = await live.client.schedule(as_reference(POD, form))
    baseline = await live.client.schedule(as_reference(POD, "json"))
    assert answer.selected_node == baseline.selected_node == "a"
    assert [(v.node_name, v.fits, list(v.reasons)) for v in answer.nodes] == [
        (v.node_name, v.fits, list(v.reasons)) for v in baseline.nodes
    ]


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        pytest.param(
            cc.KubernetesProtobuf(kind="Pod", data=b"\xff\xff"),
            "updates[0].upsert.kubernetes_protobuf.data",
            id="garbage",
        ),
        pytest.param(
            cc.KubernetesProtobuf(data=b"\x0a\x00"),
            "updates[0].upsert.kubernetes_protobuf.data",
            id="raw without a kind",
        ),
        pytest.param(
            cc.KubernetesProtobuf(kind="ConfigMap", data=b""),
            "updates[0].upsert.kubernetes_protobuf.data",
            id="unsupported kind",
        ),
    ],
)
async def test_bad_protobuf_objects_name_the_field(live: LiveServer, obj: cc.KubernetesProtobuf, field: str) -> None:
    with pytest.raises(PodfitError) as raised:
        await live.client.apply([cc.ClusterObject(kubernetes_protobuf=obj)])
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    (violation,) = [f for f, _ in raised.value.field_violations]
    assert violation == field or violation.startswith(f"{field}."), violation
    assert (await live.client.stats()).nodes == 0


NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"team": "web"}}}
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"selector": {"app": "web"}, "clusterIP": "10.0.0.10"},
}
PDB = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"minAvailable": 2, "maxUnavailable": "25%", "selector": {"matchLabels": {"app": "web"}}},
    "status": {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 2},
}
TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}
SELECTOR = {"matchLabels": {"app": "web"}}
WORKLOADS = [
    {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"selector": SELECTOR, "template": TEMPLATE, **({"replicas": 3} if kind != "DaemonSet" else {})},
    }
    for kind in ("ReplicaSet", "StatefulSet", "DaemonSet")
] + [
    {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"selector": {"app": "web"}, "replicas": 2, "template": TEMPLATE},
    },
    {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"selector": SELECTOR, "template": TEMPLATE},
    },
]
MANIFESTS = [NAMESPACE, SERVICE, PDB, *WORKLOADS]


def _enveloped_as(kind: str, api_version: str, raw: bytes) -> bytes:
    def field(number: int, payload: bytes) -> bytes:
        return bytes([number << 3 | 2, len(payload)]) + payload

    type_meta = field(1, api_version.encode()) + field(2, kind.encode())
    return ENVELOPE + field(1, type_meta) + bytes([2 << 3 | 2]) + _varint(len(raw)) + raw


async def _stored(live: LiveServer) -> dict[str, Any]:
    found = {}
    for manifest in MANIFESTS:
        kind, meta = manifest["kind"], manifest["metadata"]
        found[kind] = (await live.client.get(kind, meta["name"], meta.get("namespace", ""))).object
    return found


@pytest.mark.parametrize("form", ["raw", "enveloped"])
async def test_namespaces_services_budgets_and_workloads_arrive_as_protobuf_as_they_do_as_json(
    live: LiveServer, form: str
) -> None:
    """Namespace, Service, PodDisruptionBudget and the workload kinds in Kubernetes protobuf are stored as
    the same typed objects their Kubernetes JSON gives (the IntOrString budget fields as their text)."""
    objects = []
    for manifest in MANIFESTS:
        raw = protobuf.encode(manifest)
        data = raw if form == "raw" else _enveloped_as(manifest["kind"], manifest["apiVersion"], raw)
        kind = manifest["kind"] if form == "raw" else ""
        objects.append(cc.ClusterObject(kubernetes_protobuf=cc.KubernetesProtobuf(kind=kind, data=data)))
    await live.client.apply(objects)
    got = await _stored(live)
    await live.client.apply([cc.ClusterObject(kubernetes_json=json.dumps(m).encode()) for m in MANIFESTS])
    assert got == await _stored(live)
    budget = got["PodDisruptionBudget"].pod_disruption_budget
    assert (budget.spec.min_available, budget.spec.max_unavailable) == ("2", "25%")
    assert dict(got["Service"].service.spec.selector) == {"app": "web"}
    assert dict(got["Namespace"].namespace.metadata.labels) == {"team": "web"}
    assert got["ReplicaSet"].replica_set.spec.replicas == 3
    assert dict(got["ReplicationController"].replication_controller.spec.selector) == {"app": "web"}
    assert [tuple(pair) for pair in got["Job"].job.spec.selector.match_labels.items()] == [("app", "web")]
