"""deploy/replicated/: three podfit replicas on the replicated log and the three-node engine beside them —
checked offline (Kubernetes' OpenAPI schema, strict; what the issue asks of them: anti-affinity, a
PodDisruptionBudget, probes; podfit-server's arguments as it parses them) and created in a real
kube-apiserver (tests/control_plane.py), which admits and stores every object."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from podfit.server.settings import resolve

from tests.control_plane import ControlPlane, apply_manifests, ensure_namespace, stop_started

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "deploy" / "replicated"
DOCS = [
    (path.name, doc)
    for path in sorted(FOLDER.glob("*.yaml"))
    for doc in yaml.safe_load_all(path.read_text())
    if doc is not None
]


def one(kind: str, name: str) -> Mapping[str, Any]:
    found = [doc for _, doc in DOCS if doc["kind"] == kind and doc["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def doc_id(entry: tuple[str, Mapping[str, Any]]) -> str:
    return f"{entry[0]}:{entry[1]['kind']}/{entry[1]['metadata']['name']}"


@pytest.mark.parametrize("entry", DOCS, ids=[doc_id(d) for d in DOCS])
def test_every_object_matches_the_kubernetes_schema_strictly(entry: tuple[str, Mapping[str, Any]]) -> None:
    version = sorted(kubernetes_validate.utils.all_versions(), key=lambda v: tuple(int(p) for p in v.split(".")))[-1]
    kubernetes_validate.validate(dict(entry[1]), version, strict=True)


def _spread_one_per_machine(workload: Mapping[str, Any]) -> None:
    spec = workload["spec"]["template"]["spec"]
    (term,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == workload["spec"]["selector"]["matchLabels"]


def _three(workload: Mapping[str, Any]) -> None:
    assert workload["spec"]["replicas"] == 3


def _budget_keeps_two(workload: Mapping[str, Any]) -> None:
    budget = one("PodDisruptionBudget", workload["metadata"]["name"])
    assert budget["spec"]["minAvailable"] == 2
    assert budget["spec"]["selector"]["matchLabels"] == workload["spec"]["selector"]["matchLabels"]


def _probed(workload: Mapping[str, Any]) -> None:
    (container,) = workload["spec"]["template"]["spec"]["containers"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["path"], probe
    ports = {p["name"] for p in container["ports"]}
    assert {container[p]["httpGet"]["port"] for p in ("startupProbe", "readinessProbe")} <= ports


WORKLOADS = [("Deployment", "podfit-replicas"), ("StatefulSet", "podfit-nats")]
CHECKS: dict[str, Callable[[Mapping[str, Any]], None]] = {
    "three of them": _three,
    "one per machine (required anti-affinity on the host name)": _spread_one_per_machine,
    "a PodDisruptionBudget keeps a quorum of two": _budget_keeps_two,
    "startup, liveness and readiness probes on a declared port": _probed,
}


@pytest.mark.parametrize("check", CHECKS, ids=str)
@pytest.mark.parametrize(("kind", "name"), WORKLOADS, ids=[f"{k}/{n}" for k, n in WORKLOADS])
def test_the_workloads_survive_losing_a_machine(kind: str, name: str, check: str) -> None:
    CHECKS[check](one(kind, name))


def _expanded(args: list[str], env: Mapping[str, str]) -> list[str]:
    """The container's arguments as the kubelet expands $(VAR) references."""
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], arg) for arg in args]


def test_podfit_server_accepts_the_replicas_arguments_and_reaches_every_engine_node() -> None:
    (container,) = one("Deployment", "podfit-replicas")["spec"]["template"]["spec"]["containers"]
    args = [a for a in _expanded(container["args"], {"POD_IP": "10.0.0.7"}) if not a.startswith("--config")]
    settings = resolve(args, {})
    urls = settings.replicated_log.split(",")
    nodes = one("StatefulSet", "podfit-nats")
    service = nodes["spec"]["serviceName"]
    assert urls == [f"nats://{nodes['metadata']['name']}-{i}.{service}.podfit.svc:4222" for i in range(3)]
    assert settings.replica_addr == "10.0.0.7:8090"
    assert "8090" in {str(p["containerPort"]) for p in container["ports"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert settings.replication_key_file.startswith(mounts["replication"])


def test_the_replicas_are_elected_with_a_lease_their_service_account_may_hold() -> None:
    (container,) = one("Deployment", "podfit-replicas")["spec"]["template"]["spec"]["containers"]
    settings = resolve([a for a in _expanded(container["args"], {"POD_IP": "10.0.0.7"}) if "--config" not in a], {})
    assert settings.replication_election == "kubernetes"
    pod = one("Deployment", "podfit-replicas")["spec"]["template"]["spec"]
    # The token the Lease is written with is mounted, and it is the Lease's own ServiceAccount's.
    assert pod["automountServiceAccountToken"] is True
    (subject,) = one("RoleBinding", "podfit-replica-lease")["subjects"]
    assert subject == {"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": "podfit"}
    assert one("RoleBinding", "podfit-replica-lease")["roleRef"]["name"] == "podfit-replica-lease"
    named = [r for r in one("Role", "podfit-replica-lease")["rules"] if r.get("resourceNames")]
    assert [r["resourceNames"] for r in named] == [[settings.replication_lease_name]]


def test_the_engine_image_is_the_version_the_tests_run() -> None:
    go_mod = (ROOT / "tests" / "engine" / "go" / "go.mod").read_text()
    (pinned,) = re.findall(r"github.com/nats-io/nats-server/v2 v(\S+)", go_mod)
    (container,) = one("StatefulSet", "podfit-nats")["spec"]["template"]["spec"]["containers"]
    assert container["image"].split(":")[1].startswith(pinned)


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    try:
        yield ControlPlane(tmp_path_factory.mktemp("control-plane")).start()
    finally:
        stop_started()


def test_a_real_kube_apiserver_admits_and_stores_every_object(control_plane: ControlPlane) -> None:
    from kubernetes import client

    api = control_plane.api()
    ensure_namespace(api, "podfit")
    apply_manifests(api, [doc for _, doc in DOCS])
    stored = client.ApiClient.sanitize_for_serialization
    apps, core, policy = client.AppsV1Api(api), client.CoreV1Api(api), client.PolicyV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    readers = {
        "Deployment": apps.read_namespaced_deployment,
        "StatefulSet": apps.read_namespaced_stateful_set,
        "Service": core.read_namespaced_service,
        "ConfigMap": core.read_namespaced_config_map,
        "PodDisruptionBudget": policy.read_namespaced_pod_disruption_budget,
        "ServiceAccount": core.read_namespaced_service_account,
        "Role": rbac.read_namespaced_role,
        "RoleBinding": rbac.read_namespaced_role_binding,
    }
    for _, doc in DOCS:
        got = readers[doc["kind"]](doc["metadata"]["name"], "podfit")
        assert got.metadata.name == doc["metadata"]["name"]
        assert stored(api, got.metadata)["labels"] == doc["metadata"]["labels"]


def test_the_engine_configuration_is_valid_for_the_pinned_nats_server(tmp_path: Path) -> None:
    import os
    import subprocess

    from tests.engine_cluster import nats_server

    conf = one("ConfigMap", "podfit-nats")["data"]["nats.conf"].replace("/data/jetstream", str(tmp_path / "js"))
    (tmp_path / "nats.conf").write_text(conf)
    checked = subprocess.run(
        [str(nats_server()), "-c", str(tmp_path / "nats.conf"), "-t"],
        env={**os.environ, "POD_NAME": "podfit-nats-0"},
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


async def test_the_shipped_rbac_lets_a_replica_hold_the_lease_and_nothing_more(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """A replica's token (the podfit-replica ServiceAccount, bound by the shipped Role) creates, renews and
    releases the Lease the replicas are elected with, in a real kube-apiserver; another Lease's name, or
    any other kind, is forbidden."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from podfit.server.transport.election import KubeAccess, KubernetesLease

    from tests.control_plane import service_account_token

    api = control_plane.api()
    ensure_namespace(api, "podfit")
    apply_manifests(api, [doc for _, doc in DOCS])
    token = service_account_token(api, "podfit", "podfit-replica")
    access = KubeAccess.from_kubeconfig(str(control_plane.kubeconfig("podfit-replica", token)))
    lease = KubernetesLease(access, "podfit", "podfit-replicas", "replica-a", lease_seconds=10)
    other = KubernetesLease(access, "podfit", "podfit-replicas", "replica-b", lease_seconds=10)
    try:
        assert await lease.acquire()
        await lease.renew()
        assert not await other.acquire()  # held, and not lapsed on replica-b's clock
        await lease.release()
        assert await other.acquire()  # released: free at once
    finally:
        await lease.close()
        await other.close()
    stored = client.CoordinationV1Api(api).read_namespaced_lease("podfit-replicas", "podfit").spec
    assert (stored.holder_identity, stored.lease_duration_seconds, stored.lease_transitions) == ("replica-b", 10, 1)
    elsewhere = KubernetesLease(access, "podfit", "another-lease", "replica-a", lease_seconds=10)
    try:
        with pytest.raises(Exception, match="403"):
            await elsewhere.acquire()
    finally:
        await elsewhere.close()
    as_replica = control_plane.api(token)
    with pytest.raises(ApiException) as refused:
        client.CoreV1Api(as_replica).list_namespaced_pod("podfit")
    assert refused.value.status == 403
