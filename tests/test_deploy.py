"""deploy/: the container image and the Kubernetes manifests, checked statically.

No cluster and no container engine run where the suite runs, so:

* every Kubernetes object in deploy/kubernetes/*.yaml is schema-checked, strictly (an unknown field is an
  error), with kubernetes-validate, which bundles the Kubernetes OpenAPI schemas of each release (offline);
* the two documents that are no API objects are checked by their readers: kube-scheduler's
  KubeSchedulerConfiguration against its kubescheduler.config.k8s.io/v1 fields (transcribed below from
  k8s.io/kube-scheduler/config/v1 and k8s.io/component-base/config/v1alpha1; not served by the API server,
  so in no OpenAPI schema) and podfit's PodfitConfiguration with podfit-server's own loader;
* what the manifests promise is asserted (RBAC, security settings, probes, flags, Service wiring, the
  extender URL), the programs' flags are parsed by the programs' own parsers;
* deploy/Containerfile is parsed and checked (non-root, HEALTHCHECK, only the wheel installed, what it
  COPYs exists and is not excluded by .dockerignore).
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import shlex
import sys
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import jsonschema
import kubernetes_validate
import pytest
import yaml
from packaging.requirements import Requirement
from podfit.server import settings as server_settings
from podfit.server.config import profiles_from_configuration

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "deploy" / "kubernetes"
CONTAINERFILE = ROOT / "deploy" / "Containerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

NAMESPACE = "podfit"
SERVICE = "podfit"
SERVICE_ACCOUNT = "podfit"
DEPLOYMENT = "podfit"
SERVER_CONTAINER = "podfit"
FEEDER_CONTAINER = "feeder"
CONFIG_FILE = MANIFESTS / "podfit-config.yaml"
CONFIGMAP = "podfit-config"

# What `podfit feed` lists and watches: (API group, resource). The RBAC must grant list and watch on
# exactly these, and nothing else.
FEEDER_KINDS = [
    ("", "nodes"),
    ("", "pods"),
    ("", "namespaces"),
    ("", "services"),
    ("", "replicationcontrollers"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("batch", "jobs"),
    ("policy", "poddisruptionbudgets"),
    ("", "persistentvolumes"),
    ("", "persistentvolumeclaims"),
    ("storage.k8s.io", "storageclasses"),
    ("storage.k8s.io", "csinodes"),
    ("storage.k8s.io", "csidrivers"),
    ("storage.k8s.io", "csistoragecapacities"),
    ("storage.k8s.io", "volumeattachments"),
    ("resource.k8s.io", "deviceclasses"),
    ("resource.k8s.io", "resourceslices"),
    ("resource.k8s.io", "resourceclaims"),
]
FEEDER_VERBS = {"list", "watch"}

# The oldest Kubernetes release the manifests are meant for; they are checked against its schemas and
# against the newest release the validator bundles.
OLDEST_KUBERNETES = (1, 29)


# --- the manifests ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Doc:
    file: str
    body: Mapping[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body.get("kind"))

    @property
    def name(self) -> str:
        return str(self.body.get("metadata", {}).get("name", ""))

    @property
    def namespace(self) -> str:
        return str(self.body.get("metadata", {}).get("namespace", ""))

    @property
    def id(self) -> str:
        return f"{self.file}:{self.kind}/{self.name}" if self.name else f"{self.file}:{self.kind}"


def _load_docs() -> list[Doc]:
    docs = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for body in yaml.safe_load_all(path.read_text()):
            if body is not None:
                docs.append(Doc(path.name, body))
    return docs


DOCS = _load_docs()
# Configuration files read by programs, not objects of the API server.
NON_API_KINDS = {"KubeSchedulerConfiguration", "PodfitConfiguration"}
API_DOCS = [d for d in DOCS if d.kind not in NON_API_KINDS]


def _one(kind: str, name: str, file: str = "podfit.yaml") -> Mapping[str, Any]:
    found = [d.body for d in DOCS if d.file == file and d.kind == kind and d.name == name]
    assert len(found) == 1, f"{file}: expected one {kind}/{name}, found {len(found)}"
    return found[0]


def _deployment() -> Mapping[str, Any]:
    return _one("Deployment", DEPLOYMENT)


def _pod_spec() -> Mapping[str, Any]:
    spec: Mapping[str, Any] = _deployment()["spec"]["template"]["spec"]
    return spec


def _container(name: str) -> Mapping[str, Any]:
    found: list[Mapping[str, Any]] = [c for c in _pod_spec()["containers"] if c["name"] == name]
    assert len(found) == 1, f"expected one container {name!r}"
    return found[0]


def _podfit_workloads() -> Iterator[tuple[Doc, Mapping[str, Any]]]:
    """Every workload of deploy/kubernetes that runs podfit's image, with its pod spec."""
    for doc in API_DOCS:
        template = doc.body.get("spec", {}).get("template")
        if doc.kind not in ("Deployment", "StatefulSet", "DaemonSet", "Job") or not template:
            continue
        if any(c["image"].split(":")[0].endswith("podfit") for c in template["spec"]["containers"]):
            yield doc, template["spec"]


PODFIT_CONTAINERS = [
    (f"{doc.kind}/{doc.name}/{container['name']}", pod, container)
    for doc, pod in _podfit_workloads()
    for container in pod["containers"] + pod.get("initContainers", [])
]


def _port_of(addr: str) -> int:
    return int(addr.rpartition(":")[2])


def _container_port(container: Mapping[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    numbers = [p["containerPort"] for p in container.get("ports", []) if p.get("name") == port]
    assert len(numbers) == 1, f"container {container['name']} has no port named {port!r}"
    return int(numbers[0])


# --- schema checks ----------------------------------------------------------------------------------


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _kubernetes_versions() -> list[str]:
    bundled = sorted(set(kubernetes_validate.utils.all_versions()), key=_version)
    oldest = next((v for v in bundled if _version(v) >= OLDEST_KUBERNETES), bundled[-1])
    return sorted({oldest, bundled[-1]}, key=bundled.index)


@pytest.mark.parametrize("version", _kubernetes_versions())
@pytest.mark.parametrize("doc", API_DOCS, ids=lambda d: d.id)
def test_manifest_matches_the_kubernetes_openapi_schema(doc: Doc, version: str) -> None:
    try:
        kubernetes_validate.validate(dict(doc.body), version, strict=True)
    except kubernetes_validate.SchemaNotFoundError as exc:
        pytest.fail(f"{doc.id}: {exc.message}")
    except kubernetes_validate.ValidationError as exc:
        where = ".".join(str(p) for p in exc.path)
        pytest.fail(f"{doc.id} (Kubernetes {version}): {where}: {exc.message}")


def test_the_validator_rejects_unknown_fields() -> None:
    """Strict really is strict: a misspelt field is an error, not silently dropped as kubectl would."""
    body = json.loads(json.dumps(_deployment()))
    body["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError, match="readinesProbe"):
        kubernetes_validate.validate(body, _kubernetes_versions()[-1], strict=True)


def test_every_manifest_document_is_checked() -> None:
    kinds = {d.kind for d in DOCS}
    assert kinds - NON_API_KINDS, "no API objects found"
    assert {"KubeSchedulerConfiguration", "PodfitConfiguration"} <= kinds
    for doc in API_DOCS:
        assert doc.body.get("apiVersion") and doc.name, f"{doc.id}: apiVersion and metadata.name are required"


def _strict(properties: Mapping[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties), "required": list(required), "additionalProperties": False}


def _array(items: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": dict(items)}


_STR = {"type": "string"}
_BOOL = {"type": "boolean"}
_INT = {"type": "integer"}
_DURATION = {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"}
_PLUGIN = _strict({"name": _STR, "weight": _INT}, ["name"])
_PLUGIN_SET = _strict({"enabled": _array(_PLUGIN), "disabled": _array(_PLUGIN)})
_EXTENSION_POINTS = [
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
    "multiPoint",
    "placementGenerate",
    "placementScore",
    "placementFeasible",
    "podGroupPostFilter",
]
_PROFILE = _strict(
    {
        "schedulerName": _STR,
        "percentageOfNodesToScore": _INT,
        "percentageOfPlacementsToScore": _INT,
        "plugins": _strict(dict.fromkeys(_EXTENSION_POINTS, _PLUGIN_SET)),
        "pluginConfig": _array(_strict({"name": _STR, "args": {"type": "object"}}, ["name"])),
    }
)
_EXTENDER = _strict(
    {
        "urlPrefix": _STR,
        "filterVerb": _STR,
        "preemptVerb": _STR,
        "prioritizeVerb": _STR,
        "weight": _INT,
        "bindVerb": _STR,
        "enableHTTPS": _BOOL,
        "tlsConfig": _strict(
            dict.fromkeys(["serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData"], _STR)
            | {"insecure": _BOOL}
        ),
        "httpTimeout": _DURATION,
        "nodeCacheCapable": _BOOL,
        "managedResources": _array(_strict({"name": _STR, "ignoredByScheduler": _BOOL}, ["name"])),
        "ignorable": _BOOL,
    },
    ["urlPrefix"],
)
# kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration (DebuggingConfiguration is inlined).
KUBE_SCHEDULER_CONFIGURATION_SCHEMA = _strict(
    {
        "apiVersion": {"const": "kubescheduler.config.k8s.io/v1"},
        "kind": {"const": "KubeSchedulerConfiguration"},
        "parallelism": _INT,
        "leaderElection": _strict(
            {"leaderElect": _BOOL, "leaseDuration": _DURATION, "renewDeadline": _DURATION, "retryPeriod": _DURATION}
            | dict.fromkeys(["resourceLock", "resourceName", "resourceNamespace"], _STR)
        ),
        "clientConnection": _strict(
            {"kubeconfig": _STR, "acceptContentTypes": _STR, "contentType": _STR, "qps": {"type": "number"}}
            | {"burst": _INT}
        ),
        "enableProfiling": _BOOL,
        "enableContentionProfiling": _BOOL,
        "percentageOfNodesToScore": _INT,
        "percentageOfPlacementsToScore": _INT,
        "podInitialBackoffSeconds": _INT,
        "podMaxBackoffSeconds": _INT,
        "profiles": _array(_PROFILE),
        "extenders": _array(_EXTENDER),
        "delayCacheUntilActive": _BOOL,
    },
    ["apiVersion", "kind"],
)

SCHEDULER_CONFIGS = [d for d in DOCS if d.kind == "KubeSchedulerConfiguration"]


@pytest.mark.parametrize("doc", SCHEDULER_CONFIGS, ids=lambda d: d.id)
def test_kube_scheduler_configuration_has_only_known_fields(doc: Doc) -> None:
    errors = sorted(jsonschema.Draft202012Validator(KUBE_SCHEDULER_CONFIGURATION_SCHEMA).iter_errors(doc.body), key=str)
    assert not errors, "\n".join(f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors)
    profiles_from_configuration(doc.body)  # podfit reads the same document; its profiles must be valid too


def test_the_kube_scheduler_schema_rejects_unknown_fields() -> None:
    body = json.loads(json.dumps(SCHEDULER_CONFIGS[0].body))
    body["extenders"][0]["nodeCacheCapabel"] = True
    with pytest.raises(jsonschema.ValidationError, match="nodeCacheCapabel"):
        jsonschema.validate(body, KUBE_SCHEDULER_CONFIGURATION_SCHEMA)


def test_podfit_configuration_is_accepted_by_podfit_server() -> None:
    values, scheduler = server_settings.load_file(str(CONFIG_FILE))
    server_settings.validate(server_settings.Settings(**values))
    if scheduler is not None:
        profiles_from_configuration(scheduler)


def test_configmap_carries_podfit_config_yaml() -> None:
    """podfit.yaml's ConfigMap is deploy/kubernetes/podfit-config.yaml, document for document."""
    data = _one("ConfigMap", CONFIGMAP)["data"]
    assert list(data) == ["podfit.yaml"]
    embedded = [d for d in yaml.safe_load_all(data["podfit.yaml"]) if d]
    assert embedded == [d for d in yaml.safe_load_all(CONFIG_FILE.read_text()) if d]


# --- RBAC ---------------------------------------------------------------------------------------------


def _granted() -> dict[tuple[str, str], set[str]]:
    """(group, resource) -> verbs, over every Role and ClusterRole of the manifests."""
    grants: dict[tuple[str, str], set[str]] = {}
    for doc in API_DOCS:
        if doc.kind not in ("Role", "ClusterRole"):
            continue
        assert "aggregationRule" not in doc.body, f"{doc.id}: aggregated roles grant what others add"
        for rule in doc.body.get("rules", []):
            assert not rule.get("resourceNames"), f"{doc.id}: resourceNames"
            assert not rule.get("nonResourceURLs"), f"{doc.id}: nonResourceURLs"
            for group in rule.get("apiGroups", []):
                for resource in rule.get("resources", []):
                    grants.setdefault((group, resource), set()).update(rule.get("verbs", []))
    return grants


@pytest.mark.parametrize(("group", "resource"), FEEDER_KINDS, ids=[f"{g or 'core'}/{r}" for g, r in FEEDER_KINDS])
def test_feeder_may_list_and_watch(group: str, resource: str) -> None:
    assert _granted().get((group, resource)) == FEEDER_VERBS


def test_rbac_grants_nothing_else() -> None:
    grants = _granted()
    extra = {key: verbs for key, verbs in grants.items() if key not in FEEDER_KINDS or verbs != FEEDER_VERBS}
    assert not extra, f"beyond list/watch of the feeder's kinds: {extra}"
    for (group, resource), _verbs in grants.items():
        assert "*" not in group and "*" not in resource and "/" not in resource  # no wildcards, no subresources


def test_roles_are_bound_to_the_podfit_service_account_only() -> None:
    roles = {(d.kind, d.name) for d in API_DOCS if d.kind in ("Role", "ClusterRole")}
    bindings = [d for d in API_DOCS if d.kind in ("RoleBinding", "ClusterRoleBinding")]
    assert {(b.body["roleRef"]["kind"], b.body["roleRef"]["name"]) for b in bindings} == roles
    for binding in bindings:
        assert binding.body["subjects"] == [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]
    assert _one("ServiceAccount", SERVICE_ACCOUNT)["metadata"]["namespace"] == NAMESPACE
    assert _pod_spec()["serviceAccountName"] == SERVICE_ACCOUNT


def test_only_the_feeder_gets_the_service_account_token() -> None:
    assert _one("ServiceAccount", SERVICE_ACCOUNT)["automountServiceAccountToken"] is False
    assert _pod_spec()["automountServiceAccountToken"] is False
    token_volumes = {
        v["name"]
        for v in _pod_spec()["volumes"]
        if any("serviceAccountToken" in source for source in v.get("projected", {}).get("sources", []))
    }
    for container in _pod_spec()["containers"]:
        mounted = {m["name"] for m in container.get("volumeMounts", [])} & token_volumes
        assert bool(mounted) == (container["name"] == FEEDER_CONTAINER), container["name"]
    feeder_mounts = {m["name"]: m["mountPath"] for m in _container(FEEDER_CONTAINER)["volumeMounts"]}
    # Where in-cluster configuration looks for token, ca.crt and namespace.
    assert [feeder_mounts[v] for v in token_volumes] == ["/var/run/secrets/kubernetes.io/serviceaccount"]


# --- the containers' security settings -----------------------------------------------------------------


def _effective(pod: Mapping[str, Any], container: Mapping[str, Any], key: str) -> Any:
    """A securityContext setting as the kubelet applies it: the container's, else the pod's."""
    value = container.get("securityContext", {}).get(key)
    return pod.get("securityContext", {}).get(key) if value is None else value


def _non_root(pod: Mapping[str, Any], container: Mapping[str, Any]) -> None:
    assert _effective(pod, container, "runAsNonRoot") is True
    uid = _effective(pod, container, "runAsUser")
    assert isinstance(uid, int) and uid > 0, f"runAsUser {uid!r}: a numeric non-root UID"
    gid = _effective(pod, container, "runAsGroup")
    assert isinstance(gid, int) and gid > 0, f"runAsGroup {gid!r}"


def _no_privilege_escalation(pod: Mapping[str, Any], container: Mapping[str, Any]) -> None:
    assert container.get("securityContext", {}).get("allowPrivilegeEscalation") is False
    assert not container.get("securityContext", {}).get("privileged", False)


def _read_only_root(pod: Mapping[str, Any], container: Mapping[str, Any]) -> None:
    assert container.get("securityContext", {}).get("readOnlyRootFilesystem") is True


def _no_capabilities(pod: Mapping[str, Any], container: Mapping[str, Any]) -> None:
    capabilities = container.get("securityContext", {}).get("capabilities", {})
    assert capabilities.get("drop") == ["ALL"] and not capabilities.get("add")


def _seccomp(pod: Mapping[str, Any], container: Mapping[str, Any]) -> None:
    assert _effective(pod, container, "seccompProfile") == {"type": "RuntimeDefault"}


def _resources(pod: Mapping[str, Any], container: Mapping[str, Any]) -> None:
    resources = container.get("resources", {})
    assert {"cpu", "memory"} <= set(resources.get("requests", {})), "cpu and memory requests"
    assert "memory" in resources.get("limits", {}), "a memory limit"


def _pinned_image(pod: Mapping[str, Any], container: Mapping[str, Any]) -> None:
    name, _, tag = container["image"].rpartition(":")
    assert name and tag and tag != "latest" and "/" not in tag, f"{container['image']}: a pinned tag"


def _no_host_namespaces(pod: Mapping[str, Any], container: Mapping[str, Any]) -> None:
    assert not any(pod.get(key) for key in ("hostNetwork", "hostPID", "hostIPC"))
    assert not any("hostPath" in volume for volume in pod.get("volumes", []))


SECURITY_CHECKS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any]], None]] = {
    "non-root": _non_root,
    "no-privilege-escalation": _no_privilege_escalation,
    "read-only-root": _read_only_root,
    "drop-all-capabilities": _no_capabilities,
    "seccomp-runtime-default": _seccomp,
    "resource-requests-and-limits": _resources,
    "pinned-image": _pinned_image,
    "no-host-namespaces": _no_host_namespaces,
}


def test_podfit_containers_found() -> None:
    names = {name for name, _, _ in PODFIT_CONTAINERS}
    assert names == {f"Deployment/{DEPLOYMENT}/{SERVER_CONTAINER}", f"Deployment/{DEPLOYMENT}/{FEEDER_CONTAINER}"}


@pytest.mark.parametrize("check", SECURITY_CHECKS, ids=str)
@pytest.mark.parametrize(
    ("pod", "container"), [(p, c) for _, p, c in PODFIT_CONTAINERS], ids=[n for n, _, _ in PODFIT_CONTAINERS]
)
def test_container_security(pod: Mapping[str, Any], container: Mapping[str, Any], check: str) -> None:
    SECURITY_CHECKS[check](pod, container)


def test_the_image_user_matches_the_pods_uid() -> None:
    user = _final_stage().last("USER")
    assert user is not None
    uid, _, gid = user.partition(":")
    assert (_pod_spec()["securityContext"]["runAsUser"], _pod_spec()["securityContext"]["runAsGroup"]) == (
        int(uid),
        int(gid),
    )


def test_namespace_enforces_the_restricted_pod_security_standard() -> None:
    labels = _one("Namespace", NAMESPACE)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    for doc in API_DOCS:
        if doc.file == "podfit.yaml" and doc.kind not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert doc.namespace == NAMESPACE, doc.id


# --- probes, flags and wiring ----------------------------------------------------------------------------


def _resolved_server_settings(tmp_path: Path) -> server_settings.Settings:
    """podfit-server's settings as the podfit container starts it: its args, its env, the mounted ConfigMap."""
    container = _container(SERVER_CONTAINER)
    assert container["command"] == ["podfit-server"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    config_volume = next(v for v in _pod_spec()["volumes"] if v.get("configMap", {}).get("name") == CONFIGMAP)
    mounted_files = {
        f"{mounts[config_volume['name']]}/{key}": text for key, text in _one("ConfigMap", CONFIGMAP)["data"].items()
    }
    argv = []
    for arg in container["args"]:
        flag, eq, value = arg.partition("=")
        if flag == "--config" and eq:
            assert value in mounted_files, f"--config {value}: not a file of the mounted ConfigMap"
            local = tmp_path / Path(value).name
            local.write_text(mounted_files[value])
            arg = f"--config={local}"
        argv.append(arg)
    return server_settings.resolve(argv, _environment(container))


# What the downward API gives a pod, for the env vars that reference it.
POD_FIELDS = {"status.podIP": "10.1.2.3", "metadata.name": "podfit-abc12"}


def _environment(container: Mapping[str, Any]) -> dict[str, str]:
    """The container's env as the kubelet sets it: fieldRefs resolved, $(VAR) expanded from earlier vars."""
    environ: dict[str, str] = {}
    for entry in container.get("env", []):
        if "valueFrom" in entry:
            environ[entry["name"]] = POD_FIELDS[entry["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            environ[entry["name"]] = re.sub(r"\$\((\w+)\)", lambda m: environ[m.group(1)], entry["value"])
    return environ


def test_podfit_server_waits_for_the_feeders_sync(tmp_path: Path) -> None:
    assert "--wait-for-sync" in _container(SERVER_CONTAINER)["args"]
    assert _resolved_server_settings(tmp_path).wait_for_sync is True


def test_container_ports_are_the_ones_podfit_server_listens_on(tmp_path: Path) -> None:
    settings = _resolved_server_settings(tmp_path)
    container = _container(SERVER_CONTAINER)
    assert _container_port(container, "grpc") == _port_of(settings.grpc_addr)
    assert _container_port(container, "extender") == _port_of(settings.extender_addr)
    assert _container_port(container, "probes") == _port_of(settings.probe_addr)
    assert _container_port(container, "metrics") == _port_of(settings.metrics_addr)
    assert settings.metrics_addr.startswith("0.0.0.0:")
    assert settings.grpc_addr.startswith("0.0.0.0:") and settings.extender_addr.startswith("0.0.0.0:")
    # kubelet probes the pod IP; the probe listener is no business of the Service.
    assert settings.probe_addr == f"{POD_FIELDS['status.podIP']}:8081"


def test_the_cluster_set_up_is_locked_down(tmp_path: Path) -> None:
    """mTLS on gRPC and the extender, role tokens on gRPC, no bind: what the README calls the secure set-up."""
    settings = _resolved_server_settings(tmp_path)
    assert settings.tls_cert_file and settings.tls_key_file and settings.tls_client_ca_file
    assert settings.auth_tokens_file and not settings.auth_token_file
    assert not settings.extender_bind and not settings.insecure_listen_any
    server_settings.check_exposure(settings)
    mounted = _secret_files(SERVER_CONTAINER)
    for path in (settings.tls_cert_file, settings.tls_key_file, settings.tls_client_ca_file, settings.auth_tokens_file):
        assert path in mounted, path


def test_the_feeder_shares_no_writable_volume_with_the_server() -> None:
    """The server's decision workers talk to their owner over a socket in its /tmp: a feeder that could
    reach that directory could reach the private channel."""

    def writable(name: str) -> set[str]:
        return {m["name"] for m in _container(name)["volumeMounts"] if not m.get("readOnly")}

    assert writable(SERVER_CONTAINER), "the server has a writable /tmp"
    assert not writable(SERVER_CONTAINER) & writable(FEEDER_CONTAINER)


def _secret_files(container_name: str) -> dict[str, str]:
    """Files a container sees from Secrets: path -> secret name (a volume without items: any file in it)."""
    volumes = {v["name"]: v["secret"] for v in _pod_spec()["volumes"] if "secret" in v}
    files = {}
    for mount in _container(container_name)["volumeMounts"]:
        secret = volumes.get(mount["name"])
        if secret is None:
            continue
        keys = [item["path"] for item in secret.get("items", [])] or ["tls.crt", "tls.key", "ca.crt"]
        files |= {f"{mount['mountPath']}/{key}": secret["secretName"] for key in keys}
    return files


def test_prometheus_annotations_point_at_the_metrics_listener(tmp_path: Path) -> None:
    """Prometheus' pod-annotation discovery scrapes prometheus.io/port and /path: they must be where
    podfit-server serves /metrics, or the dashboard stays empty."""
    from podfit.server.metrics import METRICS_PATH

    annotations = _deployment()["spec"]["template"]["metadata"]["annotations"]
    settings = _resolved_server_settings(tmp_path)
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == _port_of(settings.metrics_addr)
    assert annotations["prometheus.io/path"] == METRICS_PATH


PROBES = [
    ("startupProbe", "/healthz"),
    ("livenessProbe", "/healthz"),
    ("readinessProbe", "/readyz"),
]


@pytest.mark.parametrize(("probe", "path"), PROBES, ids=[p for p, _ in PROBES])
def test_probe_hits_the_plain_probe_listener(probe: str, path: str, tmp_path: Path) -> None:
    """Not the extender port: with client certificates required there, kubelet's probes would fail."""
    container = _container(SERVER_CONTAINER)
    http_get = container[probe]["httpGet"]
    assert http_get["path"] == path
    assert http_get.get("scheme", "HTTP") == "HTTP"
    assert _container_port(container, http_get["port"]) == _port_of(_resolved_server_settings(tmp_path).probe_addr)


def test_tokens_are_mounted_for_server_and_feeder_only_what_each_needs(tmp_path: Path) -> None:
    """podfit-server reads every token with its role; the feeder sees its own token, not the table."""
    from podfit.client import cli

    tokens_file = _resolved_server_settings(tmp_path).auth_tokens_file
    server_files, feeder_files = _secret_files(SERVER_CONTAINER), _secret_files(FEEDER_CONTAINER)
    feeder_token = cli.build_parser().parse_args(_container(FEEDER_CONTAINER)["args"]).token_file
    assert server_files[tokens_file] == feeder_files[feeder_token] == "podfit-auth"
    assert tokens_file not in feeder_files and feeder_token not in server_files


def test_feeder_talks_to_its_own_pods_podfit_server(tmp_path: Path) -> None:
    from podfit.client import cli

    container = _container(FEEDER_CONTAINER)
    assert container["command"] == ["podfit"]
    settings = _resolved_server_settings(tmp_path)
    parsed = cli.build_parser().parse_args(container["args"])  # podfit's own parser: global flags, then feed's
    assert parsed.command == "feed"
    assert parsed.target == f"127.0.0.1:{_port_of(settings.grpc_addr)}"
    # mTLS: the feeder presents a client certificate, since podfit-server requires one (tls.clientCAFile).
    assert settings.tls_client_ca_file
    feeder_files = _secret_files(FEEDER_CONTAINER)
    for path in (parsed.ca_file, parsed.cert_file, parsed.key_file, parsed.token_file):
        assert path in feeder_files, path
    env = {e["name"] for e in container.get("env", [])}
    assert parsed.kubeconfig is None and "KUBECONFIG" not in env, "in-cluster: the service account, no kubeconfig"
    for reference in re.findall(r"\$\((\w+)\)", " ".join(container["args"])):
        assert reference in env, f"$({reference}) in args needs an env var of that name"


def test_one_feeder_per_podfit_server() -> None:
    """Each replica is fed by the feeder beside it; no separate feeder workload to fill just one replica."""
    names = [c["name"] for c in _pod_spec()["containers"]]
    assert sorted(names) == sorted([SERVER_CONTAINER, FEEDER_CONTAINER])
    feeders = [
        (doc.id, c["name"])
        for doc, pod in _podfit_workloads()
        for c in pod["containers"]
        if c.get("command") == ["podfit"] and "feed" in c.get("args", [])
    ]
    assert feeders == [(f"podfit.yaml:Deployment/{DEPLOYMENT}", FEEDER_CONTAINER)]


def _selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def test_service_exposes_grpc_and_extender() -> None:
    service = _one("Service", SERVICE)
    pod_labels = _deployment()["spec"]["template"]["metadata"]["labels"]
    assert _selects(service["spec"]["selector"], pod_labels)
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    container = _container(SERVER_CONTAINER)
    assert (ports["grpc"]["port"], _container_port(container, ports["grpc"]["targetPort"])) == (50051, 50051)
    assert (ports["extender"]["port"], _container_port(container, ports["extender"]["targetPort"])) == (8888, 8888)


def test_deployment_replicas_survive_a_disruption() -> None:
    deployment = _deployment()
    pdb = _one("PodDisruptionBudget", DEPLOYMENT)
    assert _selects(pdb["spec"]["selector"]["matchLabels"], deployment["spec"]["template"]["metadata"]["labels"])
    assert deployment["spec"]["selector"]["matchLabels"] == pdb["spec"]["selector"]["matchLabels"]
    replicas = deployment["spec"]["replicas"]
    assert replicas >= 2
    assert 1 <= pdb["spec"]["minAvailable"] < replicas, "a drain must be able to evict one replica"
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_kube_scheduler_extender_points_at_the_podfit_service(tmp_path: Path) -> None:
    (config,) = SCHEDULER_CONFIGS
    assert config.file == "kube-scheduler-config.yaml"
    (extender,) = config.body["extenders"]
    url = urlsplit(extender["urlPrefix"])
    service = _one("Service", SERVICE)
    assert url.scheme == ("https" if extender.get("enableHTTPS") else "http")
    assert url.hostname in (f"{SERVICE}.{NAMESPACE}.svc", f"{SERVICE}.{NAMESPACE}.svc.cluster.local")
    assert url.port == next(p["port"] for p in service["spec"]["ports"] if p["name"] == "extender")
    assert url.path == _resolved_server_settings(tmp_path).extender_url_prefix
    # The verbs podfit serves under the prefix; bind stays with the API server.
    assert (extender["filterVerb"], extender["prioritizeVerb"], extender["preemptVerb"]) == (
        "filter",
        "prioritize",
        "preempt",
    )
    assert "bindVerb" not in extender
    assert extender["ignorable"] is True
    assert extender["nodeCacheCapable"] is True
    assert extender["weight"] >= 1
    assert re.fullmatch(r"[0-9]+(ms|s)", extender["httpTimeout"])


def test_cluster_autoscaler_expander_reaches_podfit() -> None:
    service = _one("Service", "podfit-ca-expander", "cluster-autoscaler-expander.yaml")
    policy = _one("NetworkPolicy", "podfit-ca-expander", "cluster-autoscaler-expander.yaml")
    pod_labels = _deployment()["spec"]["template"]["metadata"]["labels"]
    assert service["metadata"]["namespace"] == policy["metadata"]["namespace"] == NAMESPACE
    assert _selects(service["spec"]["selector"], pod_labels)
    assert _selects(policy["spec"]["podSelector"]["matchLabels"], pod_labels)
    autoscaler = _one("Deployment", "cluster-autoscaler", "cluster-autoscaler-expander.yaml")
    command = autoscaler["spec"]["template"]["spec"]["containers"][0]["command"]
    port = service["spec"]["ports"][0]["port"]
    assert f"--grpc-expander-url=podfit-ca-expander.{NAMESPACE}.svc:{port}" in command


# --- the Containerfile ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str

    def exec_form(self) -> list[str] | None:
        try:
            value = json.loads(self.args)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


@dataclass(frozen=True)
class Stage:
    base: str
    name: str
    instructions: tuple[Instruction, ...]

    def all(self, keyword: str) -> list[str]:
        return [i.args for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> str | None:
        found = self.all(keyword)
        return found[-1] if found else None


def _parse_containerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """(global ARG defaults, stages) of a Containerfile: continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "a continuation line ends the file"
    global_args: dict[str, str] = {}
    stages: list[tuple[str, str, list[Instruction]]] = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        instruction = Instruction(keyword.upper(), args.strip())
        if instruction.keyword == "FROM":
            words = instruction.args.split()
            base = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: global_args[m.group(1) or m.group(2)], words[0])
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else ""
            stages.append((base, name, []))
        elif not stages:
            assert instruction.keyword == "ARG", f"{line}: only ARG may precede the first FROM"
            key, _, default = instruction.args.partition("=")
            global_args[key] = default
        else:
            stages[-1][2].append(instruction)
    return global_args, [Stage(base, name, tuple(instructions)) for base, name, instructions in stages]


_, STAGES = _parse_containerfile(CONTAINERFILE.read_text())


def _final_stage() -> Stage:
    return STAGES[-1]


def _flags(args: str) -> tuple[dict[str, str], list[str]]:
    words = shlex.split(args)
    flags = dict(w[2:].partition("=")[::2] for w in words if w.startswith("--"))
    return flags, [w for w in words if not w.startswith("--")]


def test_containerfile_is_multi_stage_on_a_pinned_slim_python() -> None:
    assert len(STAGES) >= 2, "build the wheel in one stage, run it in another"
    for stage in STAGES:
        image, _, tag = stage.base.partition("@")[0].rpartition(":")
        assert image and tag and tag != "latest", f"FROM {stage.base}: pin a tag"
    final = _final_stage().base
    assert final.startswith("python:3.11") and "slim" in final, f"FROM {final}: a minimal Python 3.11 base"
    assert re.fullmatch(r">=3\.11", PYPROJECT["project"]["requires-python"])


def test_containerfile_runs_as_a_numeric_non_root_user() -> None:
    user = _final_stage().last("USER")
    assert user is not None and re.fullmatch(r"[0-9]+:[0-9]+", user), f"USER {user}: numeric UID:GID"
    assert int(user.split(":")[0]) > 0 and int(user.split(":")[1]) > 0
    # USER comes after the last RUN: nothing the image ships is installed by, or owned by, that user.
    keywords = [i.keyword for i in _final_stage().instructions]
    assert keywords.index("USER") > max(i for i, k in enumerate(keywords) if k == "RUN")


def test_containerfile_healthcheck_hits_healthz(tmp_path: Path) -> None:
    args = _final_stage().last("HEALTHCHECK")
    assert args is not None
    flags, _ = _flags(args.partition(" CMD ")[0])
    assert set(flags) <= {"interval", "timeout", "start-period", "start-interval", "retries"}
    command = Instruction("CMD", args.partition(" CMD ")[2]).exec_form()
    assert command is not None and command[:2] == ["python", "-c"], "exec form, no shell and no curl needed"
    code = command[2]
    # The image's own probe listener: plain HTTP whatever TLS the other ports serve. The check is run
    # with the image's environment and a recording urlopen: it asks exactly what podfit-server listens on.
    env = dict(w.partition("=")[::2] for args in _final_stage().all("ENV") for w in shlex.split(args))
    probe_addr = server_settings.resolve([], env).probe_addr
    assert probe_addr.startswith("127.0.0.1:")
    for addr in (probe_addr, "127.0.0.1:9999"):  # and it follows the variable when a deployment moves it
        with (
            mock.patch.dict(os.environ, {**env, "PODFIT_PROBE_ADDR": addr}),
            mock.patch("urllib.request.urlopen") as urlopen,
        ):
            exec(compile(code, "<HEALTHCHECK>", "exec"), {})
        assert [c.args[0] for c in urlopen.call_args_list] == [f"http://{addr}/healthz"]


def test_containerfile_exposes_grpc_and_extender(tmp_path: Path) -> None:
    settings = _resolved_server_settings(tmp_path)
    exposed = {int(p.partition("/")[0]) for args in _final_stage().all("EXPOSE") for p in args.split()}
    assert exposed == {_port_of(settings.grpc_addr), _port_of(settings.extender_addr), _port_of(settings.metrics_addr)}


def test_containerfile_entrypoint_is_podfit_server() -> None:
    entrypoint = _final_stage().last("ENTRYPOINT")
    assert entrypoint is not None
    assert Instruction("ENTRYPOINT", entrypoint).exec_form() == ["podfit-server"]
    scripts = PYPROJECT["project"]["scripts"]
    assert {"podfit-server", "podfit"} <= set(scripts), "the image runs podfit-server and `podfit feed`"


def _pip_installs(stage: Stage) -> list[list[str]]:
    """The arguments of every `pip install` in a stage's RUN instructions."""
    installs = []
    for run in stage.all("RUN"):
        for command in re.split(r"&&|;|\|\|", run):
            words = shlex.split(command)
            if words[:2] == ["pip", "install"] or words[:4] == ["python", "-m", "pip", "install"]:
                installs.append(words[words.index("install") + 1 :])
    return installs


def test_runtime_stage_installs_the_wheels_requirements_then_the_wheel() -> None:
    """Two installs, so that a change of the sources reinstalls the wheel only: first exactly the
    requirements pyproject.toml declares (no extra, so no dev extra), read by the build stage; then the
    wheel without dependencies. Neither takes -e, extra indexes or caches."""
    installs = _pip_installs(_final_stage())
    assert len(installs) == 2, "pip install -r the wheel's requirements, then the wheel"
    requirements, wheel = installs
    assert [a for a in requirements if a.startswith("-")] == ["--no-cache-dir", "-r"], requirements
    (listed,) = [a for a in requirements if not a.startswith("-")]
    options = [a for a in wheel if a.startswith("-")]
    targets = [a for a in wheel if not a.startswith("-")]
    assert options == ["--no-cache-dir", "--no-deps"], f"pip install {options}: no -e, extra indexes or caches"
    # No extras on the wheel: with --no-deps they would install nothing.
    assert len(targets) == 1 and re.fullmatch(r"/\S+/podfit-\*?[^/\[\]]*\.whl", targets[0]), targets
    # Both come from the build stage, not from the build context; the list is pyproject.toml's dependencies.
    copies = [_flags(c) for c in _final_stage().all("COPY") + _final_stage().all("ADD")]
    assert copies and all(flags.get("from") in {s.name for s in STAGES[:-1]} for flags, _ in copies)
    (source,) = [paths[0] for flags, paths in copies if paths[-1] == listed]
    writes = [r for s in STAGES[:-1] for r in s.all("RUN") if r.rstrip().endswith(f"> {source}")]
    assert len(writes) == 1 and "['project']['dependencies']" in writes[0], writes


def test_build_stage_builds_the_wheel_from_pyproject() -> None:
    wheel_from = {_flags(c)[0].get("from") for c in _final_stage().all("COPY")}
    (build,) = [s for s in STAGES[:-1] if s.name in wheel_from]
    runs = " && ".join(build.all("RUN"))
    assert re.search(r"pip wheel .*--no-deps .*--wheel-dir /dist \.$|python -m build .*--wheel", runs), runs
    # Everything hatchling reads: pyproject.toml, the readme and every package the wheel is made of.
    copied = {Path(source.rstrip("/")) for _, paths in (_flags(c) for c in build.all("COPY")) for source in paths[:-1]}
    wheel = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    for needed in ["pyproject.toml", PYPROJECT["project"]["readme"], *wheel]:
        assert any(Path(needed) == c or c in Path(needed).parents for c in copied), f"{needed} is not copied"


def _dockerignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    patterns = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        glob = line.lstrip("!").strip("/")
        regex = ""
        for part in re.split(r"(\*\*/?|\*|\?)", glob):
            if part in ("**/", "**"):
                regex += "(?:.*/)?" if part == "**/" else ".*"
            elif part == "*":
                regex += "[^/]*"
            elif part == "?":
                regex += "[^/]"
            else:
                regex += re.escape(part)
        patterns.append((negated, re.compile(regex)))
    return patterns


def _ignored(path: str) -> bool:
    """Whether docker/podman leave a context path out: the last matching pattern wins, directories included."""
    candidates = [path] + ["/".join(path.split("/")[:n]) for n in range(1, path.count("/") + 1)]
    ignored = False
    for negated, pattern in _dockerignore_patterns():
        if any(pattern.fullmatch(c) for c in candidates):
            ignored = not negated
    return ignored


def _copied_sources() -> list[str]:
    sources: list[str] = []
    for stage in STAGES:
        for args in stage.all("COPY") + stage.all("ADD"):
            flags, paths = _flags(args)
            if "from" not in flags:
                sources.extend(p.rstrip("/") for p in paths[:-1])
    return sources


@pytest.mark.parametrize("source", _copied_sources(), ids=str)
def test_what_the_containerfile_copies_exists_in_the_context(source: str) -> None:
    path = ROOT / source
    assert path.exists(), f"COPY {source}: no such file in the repository"
    files = [path] if path.is_file() else [p for p in path.rglob("*.py") if "__pycache__" not in p.parts]
    assert files
    for file in files:
        assert not _ignored(file.relative_to(ROOT).as_posix()), f"{file.relative_to(ROOT)} is excluded by .dockerignore"


@pytest.mark.parametrize("path", [".venv/bin/python", ".git/HEAD", "sdk/typescript/package.json", "tests/conftest.py"])
def test_dockerignore_keeps_the_context_small(path: str) -> None:
    assert _ignored(path)


def test_dockerignore_drops_bytecode() -> None:
    assert _ignored("server/podfit/server/__pycache__/app.cpython-311.pyc")
    assert not _ignored("server/podfit/server/app.py")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _with_dependencies(requirements: Iterable[str]) -> set[str]:
    """The distributions pip installs for these requirements: them and their own requirements, recursively
    (as the versions installed here declare them; requirements of extras not asked for are left out)."""
    found: set[str] = set()
    pending = [Requirement(r) for r in requirements]
    while pending:
        requirement = pending.pop()
        name = _canonical(requirement.name)
        if name in found:
            continue
        found.add(name)
        try:
            declared = importlib.metadata.requires(requirement.name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in declared:
            nested = Requirement(text)
            environments = [{"extra": extra} for extra in requirement.extras] or [{"extra": ""}]
            if nested.marker is None or any(nested.marker.evaluate(env) for env in environments):
                pending.append(nested)
    return found


def _imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


# Imports of the wheel's code that the image need not satisfy: optional, each behind its own switch.
OPTIONAL_IMPORTS = {
    ("opentelemetry.exporter", "server/podfit/server/telemetry.py"),  # --telemetry-exporter otlp (extra: otlp)
    ("redis", "server/podfit/server/memo.py"),  # memo.backend: redis (extra: redis)
}


def test_the_image_installs_every_distribution_the_code_imports() -> None:
    """What the runtime stage installs is the wheel's requirements: whatever podfit-server and `podfit feed`
    import must be among them (the dev extra, which the image leaves out, does not count)."""
    # The runtime stage installs pyproject.toml's dependencies, then the wheel without any (above).
    installed = _with_dependencies(list(PYPROJECT["project"]["dependencies"]))
    providers = importlib.metadata.packages_distributions()
    own = {Path(p).name for p in PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]}
    missing = set()
    for package in PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]:
        for file in sorted((ROOT / package).rglob("*.py")):
            where = file.relative_to(ROOT).as_posix()
            for module in _imports(file):
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top in own:
                    continue
                if any(module.startswith(prefix) and where == allowed for prefix, allowed in OPTIONAL_IMPORTS):
                    continue
                dists = {_canonical(d) for d in providers.get(top, [])}
                if not dists & installed:
                    missing.add(f"{where}: {module} ({', '.join(sorted(dists)) or 'not installed here'})")
    assert not missing, "imported but not installed in the image:\n" + "\n".join(sorted(missing))


def _policies() -> list[Mapping[str, Any]]:
    return [d.body for d in API_DOCS if d.kind == "NetworkPolicy"]


def test_metrics_are_reachable_only_from_the_scrapers_namespace() -> None:
    """/metrics is plain HTTP: every ingress rule that opens its port names a source, and only the
    labelled scraper namespace; the authenticated listeners and the probes stay open to all."""
    metrics_rules = [
        rule
        for policy in _policies()
        for rule in policy["spec"].get("ingress", [])
        if any(port["port"] == 9464 for port in rule.get("ports", []))
    ]
    assert metrics_rules, "no policy names the metrics port"
    for rule in metrics_rules:
        assert rule.get("from") == [{"namespaceSelector": {"matchLabels": {"podfit.io/metrics-scraper": "true"}}}]
    policy = _one("NetworkPolicy", "podfit")
    open_ports = {p["port"] for rule in policy["spec"]["ingress"] if "from" not in rule for p in rule["ports"]}
    assert open_ports == {50051, 8888, 8081}


def test_the_server_requests_a_core_for_each_of_its_processes() -> None:
    """Every process of the server runs on a core of its own — those on the listeners (PODFIT_WORKERS) and
    the what-if process: a request of fewer cores would have them share, which measured slower."""
    from podfit.k8s.quantity import parse_quantity

    (container,) = [c for name, _, c in PODFIT_CONTAINERS if name.endswith(f"/{SERVER_CONTAINER}")]
    env = {e["name"]: e.get("value", "") for e in container.get("env", [])}
    workers = int(env["PODFIT_WORKERS"])
    what_if = env.get("PODFIT_WHAT_IF_PROCESS", "true") not in ("false", "0")
    assert workers >= 1
    assert parse_quantity(str(container["resources"]["requests"]["cpu"])) >= workers + int(what_if)
