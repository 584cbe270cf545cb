"""The one converter: Kubernetes JSON <-> podfit.v1 messages, and manifest loading."""

import json
from typing import Any

import pytest
from podfit.client.manifests import load_manifests, parse_text, to_pod_reference
from podfit.k8s.convert import ConversionError, manifest_to_object, object_kind_and_message, object_to_manifest
from podfit.v1 import cluster_cache_pb2 as cc

from tests.builders import make_node, make_pod


@pytest.mark.parametrize(
    "manifest",
    [
        pytest.param(
            make_pod("p")
            .req(cpu="500m")
            .host_port(80, "UDP", "10.0.0.1")
            .toleration("k", "Exists")
            .spread(1, "zone", selector={"matchLabels": {"a": "b"}}, minDomains=2)
            .json(),
            id="a pod",
        ),
        pytest.param(make_node("n").taint("k", "v").image(123, "img:1").json(), id="a node"),
        pytest.param(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "b", "namespace": "x"},
                "spec": {"maxUnavailable": "50%", "selector": {}},
                "status": {"disruptionsAllowed": 1},
            },
            id="a PDB with a percentage and an empty selector",
        ),
        pytest.param(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": "rs"},
                "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}},
            },
            id="a replica set",
        ),
    ],
)
def test_round_trip_keeps_kubernetes_json(manifest: dict[str, Any]) -> None:
    back = object_to_manifest(manifest_to_object(manifest))
    assert _without_empty(back) == _without_empty(manifest)


def _without_empty(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_empty(v) for k, v in value.items() if v not in ("", None, [], False) or k == "selector"}
    if isinstance(value, list):
        return [_without_empty(v) for v in value]
    return value


def test_host_ip_keeps_kubernetes_casing() -> None:
    obj = manifest_to_object(make_pod().host_port(80, host_ip="1.2.3.4").json())
    assert obj.pod.spec.containers[0].ports[0].host_ip == "1.2.3.4"
    assert '"hostIP"' in json.dumps(object_to_manifest(obj))


def test_integer_pdb_bounds_become_strings() -> None:
    obj = manifest_to_object({"kind": "PodDisruptionBudget", "metadata": {"name": "b"}, "spec": {"minAvailable": 1}})
    assert obj.pod_disruption_budget.spec.min_available == "1"


def test_unknown_kubernetes_fields_are_ignored() -> None:
    data = make_pod().json()
    data["spec"]["dnsPolicy"] = "ClusterFirst"
    assert manifest_to_object(data).pod.metadata.name == "pod"


@pytest.mark.parametrize(
    ("manifest", "field"),
    [
        pytest.param({"kind": "Deployment", "metadata": {"name": "d"}}, "kind", id="unknown kinds are refused"),
        pytest.param({"kind": "Pod", "metadata": {"name": 3}}, "metadata.name", id="wrong types name their field"),
        pytest.param({"kind": "Pod", "spec": {"priority": "x"}}, "spec.priority", id="non-numeric priority"),
    ],
)
def test_bad_manifests(manifest: dict[str, Any], field: str) -> None:
    with pytest.raises(ConversionError) as info:
        manifest_to_object(manifest)
    assert info.value.field == field


def test_kubernetes_json_objects_are_parsed_by_their_kind() -> None:
    raw = json.dumps(make_node("n").json()).encode()
    kind, message = object_kind_and_message(cc.ClusterObject(kubernetes_json=raw))
    assert (kind, message.metadata.name) == ("Node", "n")
    with pytest.raises(ConversionError) as info:
        object_kind_and_message(cc.ClusterObject(kubernetes_json=b"{not json"))
    assert info.value.field == "kubernetes_json"


@pytest.mark.parametrize(
    ("text", "names"),
    [
        pytest.param(
            "kind: Node\nmetadata: {name: a}\n---\nkind: Pod\nmetadata: {name: b}\n",
            ["a", "b"],
            id="multi-document YAML",
        ),
        pytest.param('{"kind": "Node", "metadata": {"name": "a"}}', ["a"], id="one JSON document"),
        pytest.param(
            '{"kind": "Node", "metadata": {"name": "a"}}\n{"kind": "Pod", "metadata": {"name": "b"}}\n',
            ["a", "b"],
            id="JSON Lines",
        ),
        pytest.param(
            "kind: List\nitems:\n- {kind: Node, metadata: {name: a}}\n- {kind: Pod, metadata: {name: b}}\n",
            ["a", "b"],
            id="a kind List is flattened",
        ),
    ],
)
def test_manifest_formats(text: str, names: list[str]) -> None:
    assert [m["metadata"]["name"] for m in parse_text(text)] == names


def test_directories_are_read_recursively(tmp_path: Any) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.yaml").write_text("kind: Node\nmetadata: {name: a}\n")
    (tmp_path / "sub" / "b.json").write_text('{"kind": "Pod", "metadata": {"name": "b"}}')
    (tmp_path / "notes.txt").write_text("ignored")
    assert sorted(m["metadata"]["name"] for m in load_manifests(str(tmp_path))) == ["a", "b"]


def test_pod_references() -> None:
    assert to_pod_reference("team/web-1").cached.namespace == "team"
    assert to_pod_reference(make_pod("x").json()).pod.metadata.name == "x"
    assert to_pod_reference("kind: Pod\nmetadata: {name: y}\n").pod.metadata.name == "y"


def test_typed_pods_convert_exactly_like_their_kubernetes_json() -> None:
    """The gRPC path (typed message, spec memo shared by replicas) equals the JSON path, pod by pod."""
    from podfit.server.model.objects import pod_from_k8s
    from podfit.server.transport.convert import pod_from_message

    from tests.conformance_support import load_cases

    compared = 0
    for case in load_cases():
        for manifest in [*case["pods"], case["pod"]]:
            message = manifest_to_object({**manifest, "kind": "Pod"}).pod
            assert pod_from_message(message, "pod") == pod_from_k8s(manifest), manifest["metadata"]["name"]
            assert message.spec.node_name == manifest["spec"].get("nodeName", "")
            compared += 1
    assert compared > 10_000


def test_objects_of_the_official_kubernetes_client_are_accepted() -> None:
    from kubernetes import client as k8s

    pod = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="web", namespace="shop", labels={"app": "web"}),
        spec=k8s.V1PodSpec(
            containers=[
                k8s.V1Container(name="c", image="nginx", resources=k8s.V1ResourceRequirements(requests={"cpu": "250m"}))
            ],
            node_selector={"disk": "ssd"},
        ),
    )
    message = to_pod_reference(pod).pod
    assert (message.metadata.namespace, dict(message.spec.node_selector)) == ("shop", {"disk": "ssd"})
    assert dict(message.spec.containers[0].resources.requests) == {"cpu": "250m"}
    node = k8s.V1Node(metadata=k8s.V1ObjectMeta(name="n1"), status=k8s.V1NodeStatus(allocatable={"cpu": "4"}))
    assert [m["kind"] for m in load_manifests([node, pod])] == ["Node", "Pod"]


def _with(builder: Any, **extra: Any) -> dict[str, Any]:
    manifest = builder.json()
    for section, values in extra.items():
        manifest.setdefault(section, {}).update(values)
    return manifest


@pytest.mark.parametrize(
    "manifest",
    [
        pytest.param(make_pod("plain").json(), id="a plain pod"),
        pytest.param(_with(make_pod("ns"), metadata={"namespace": ""}), id="an empty namespace means default"),
        pytest.param(
            _with(make_pod("meta").labels(app="web", tier="db"), metadata={"resourceVersion": "42", "uid": "u-1"}),
            id="labels, uid and resourceVersion",
        ),
        pytest.param(make_pod("owned").owner("ReplicaSet", "rs").json(), id="a controller owner reference"),
        pytest.param(
            _with(make_pod("owner2"), metadata={"ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x"}]}),
            id="an owner reference without controller",
        ),
        pytest.param(
            make_pod("bound").node("n1").phase("Running").start_time("2024-02-29T23:59:59Z").json(),
            id="bound and started",
        ),
        pytest.param(make_pod("ms").start_time("2024-01-01T00:00:00.125Z").json(), id="a start time in ms"),
        pytest.param(make_pod("us").start_time("2001-09-09T01:46:40.123456Z").json(), id="a start time in us"),
        pytest.param(make_pod("epoch").start_time("1970-01-01T00:00:00Z").json(), id="a start time at the epoch"),
        pytest.param(make_pod("old").start_time("1900-06-01T12:00:00Z").json(), id="a start time before the epoch"),
        pytest.param(make_pod("nominated").nominated("n2").phase("Pending").json(), id="nominated"),
        pytest.param(make_pod("done").phase("Succeeded").json(), id="terminal"),
        pytest.param(make_pod("deleted").deleting("2024-06-25T12:00:00Z").json(), id="terminating"),
        pytest.param(make_pod("preempted").preempted().json(), id="terminating by preemption (DisruptionTarget)"),
        pytest.param(
            make_pod("other").condition("DisruptionTarget", "True", "DeletionByTaintManager").terminating().json(),
            id="terminating for another reason",
        ),
        pytest.param(
            make_pod("first").condition("DisruptionTarget", "False", "PreemptionByScheduler").preempted().json(),
            id="the first DisruptionTarget condition decides",
        ),
        pytest.param(
            _with(
                make_pod("annotated"),
                metadata={"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}},
            ),
            id="annotations",
        ),
    ],
)
def test_typed_metadata_and_status_convert_like_kubernetes_json(manifest: dict[str, Any]) -> None:
    """The gRPC path reads metadata and status field by field; the result equals the JSON path's."""
    from podfit.server.model import Pod
    from podfit.server.model.objects import pod_from_k8s
    from podfit.server.transport.convert import pod_from_message

    typed = pod_from_message(manifest_to_object(manifest).pod, "pod")
    expected = pod_from_k8s(manifest)
    assert typed == expected
    assert [type(getattr(typed, f)) for f in Pod.__slots__] == [type(getattr(expected, f)) for f in Pod.__slots__]


@pytest.mark.parametrize(
    "disrupted",
    [
        pytest.param({}, id="none"),
        pytest.param({"web-1": "2024-06-25T12:00:00Z", "web-2": "2024-06-25T12:00:05Z"}, id="two"),
    ],
)
def test_typed_pdbs_keep_their_disrupted_pods(disrupted: dict[str, str]) -> None:
    """status.disruptedPods survives the typed message, so preemption's budget sees it over gRPC too."""
    from podfit.server.model import Kind
    from podfit.server.transport.convert import upsert_from_object

    manifest = {
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "b"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 0, "disruptedPods": disrupted},
    }
    pdb = upsert_from_object(manifest_to_object(manifest), "pdb", expected_kind=Kind.POD_DISRUPTION_BUDGET).obj
    assert pdb.disrupted_pods == frozenset(disrupted)
