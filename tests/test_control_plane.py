"""podfit against the components users run: upstream etcd, kube-apiserver and kube-scheduler, built from the
Go module proxy (``tests/controlplane/build.sh``, cached by version) and started here on loopback.

What a list/watch double cannot show: the apiserver's admission (a not-ready taint on every new Node, the
``default`` ServiceAccount every pod needs), RBAC against the shipped ClusterRole, 410 after a compaction,
restarts, and kube-scheduler's own calls to the extender and its own choices.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf import json_format
from podfit.feed.kinds import ALL_KINDS, KindSpec
from podfit.k8s.convert import API_VERSIONS

from tests.builders import make_node, make_pod
from tests.control_plane import (
    RELEASES,
    ControlPlane,
    Feeder,
    KubeScheduler,
    Podfit,
    TcpProxy,
    apply_manifests,
    create_node,
    ensure_namespace,
    service_account_token,
    shipped,
    stop_started,
    wait_for,
)

NS = "e2e"
Key = tuple[str, str]


@pytest.fixture(autouse=True)
def processes() -> Iterator[None]:
    """Every process a test starts is stopped by PID when it ends, newest first: feeders and schedulers
    before podfit, podfit before the apiserver, the apiserver before etcd."""
    yield
    stop_started()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def control_plane(folder: Path) -> ControlPlane:
    return ControlPlane(folder).start()


@pytest.fixture
def podfit(folder: Path, control_plane: ControlPlane) -> Podfit:
    return Podfit(folder, control_plane.pki).start()


def feeder_token(control_plane: ControlPlane, cluster_role: Mapping[str, Any] | None = None) -> str:
    """The feeder's identity as deploy/kubernetes/podfit.yaml makes it: the podfit ServiceAccount bound to
    the shipped ClusterRole (or to ``cluster_role`` under the same name)."""
    api = control_plane.api()
    apply_manifests(
        api,
        [
            shipped("Namespace", "podfit"),
            shipped("ServiceAccount", "podfit"),
            dict(cluster_role or shipped("ClusterRole", "podfit-feeder")),
            shipped("ClusterRoleBinding", "podfit-feeder"),
        ],
    )
    return service_account_token(api, "podfit", "podfit")


def start_feeder(control_plane: ControlPlane, podfit: Podfit, server: str | None = None) -> Feeder:
    kubeconfig = control_plane.kubeconfig("podfit-feeder", feeder_token(control_plane))
    if server is not None:
        config = yaml.safe_load(kubeconfig.read_text())
        config["clusters"][0]["cluster"]["server"] = server
        kubeconfig.write_text(yaml.safe_dump(config))
    return Feeder(podfit, kubeconfig).start()


# -- the cluster's objects, as the apiserver and as podfit hold them ----------------------------------------------


def listed(control_plane: ControlPlane, spec: KindSpec) -> list[dict[str, Any]]:
    """The apiserver's objects of one kind, as the feeder lists them, as manifests (a list's items carry
    no apiVersion/kind)."""
    path = spec.path + (f"?fieldSelector={spec.field_selector}" if spec.field_selector else "")
    items = json.loads(control_plane.get(path))["items"]
    return [{"apiVersion": API_VERSIONS[spec.kind], "kind": spec.kind, **item} for item in items]


def api_state(control_plane: ControlPlane, spec: KindSpec) -> dict[Key, str]:
    return {
        (m["metadata"].get("namespace", ""), m["metadata"]["name"]): m["metadata"]["resourceVersion"]
        for m in listed(control_plane, spec)
    }


def podfit_state(client: Any, spec: KindSpec) -> dict[Key, str]:
    state: dict[Key, str] = {}
    for page in client.list_pages(spec.kind):
        for obj in page.objects:
            meta = getattr(obj, str(obj.WhichOneof("object"))).metadata
            state[(meta.namespace, meta.name)] = meta.resource_version
    return state


def wait_caught_up(control_plane: ControlPlane, podfit: Podfit, kinds: tuple[KindSpec, ...] = ALL_KINDS) -> None:
    """Until podfit holds exactly the apiserver's objects of ``kinds``, each at the apiserver's
    resourceVersion."""
    with podfit.client() as client:

        def same() -> bool:
            for spec in kinds:
                expected, held = api_state(control_plane, spec), podfit_state(client, spec)
                if expected != held:
                    raise AssertionError(
                        f"{spec.kind}: apiserver {sorted(expected.items())} podfit {sorted(held.items())}"
                    )
            return True

        wait_for("podfit to catch up with the apiserver", same, 30, interval=0.2)


# -- manifests ------------------------------------------------------------------------------------------------


def node(name: str, zone: str, cpu: str = "4", memory: str = "8Gi", **labels: str) -> dict[str, Any]:
    """A Node as a kubelet registers it: its capacity and a Ready condition."""
    builder = make_node(name).capacity(cpu=cpu, memory=memory, pods="110", ephemeral_storage="100Gi")
    manifest = builder.labels(**{"kubernetes.io/os": "linux", "topology.kubernetes.io/zone": zone}, **labels).json()
    manifest["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return manifest


def pod(name: str, cpu: str = "100m", memory: str = "128Mi", **spec: Any) -> dict[str, Any]:
    """A pod of namespace e2e labelled app=<name without its index>, with ``spec`` fields added."""
    labels = spec.pop("labels", {"app": name.rsplit("-", 1)[0]})
    manifest = make_pod(name, NS).req(cpu=cpu, memory=memory).labels(**labels).json()
    manifest["spec"].update(spec)
    return manifest


EVERY_KIND = """
apiVersion: v1
kind: Service
metadata: {name: web, namespace: e2e}
spec: {selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: rc, namespace: e2e}
spec:
  replicas: 0
  selector: {app: rc}
  template: {metadata: {labels: {app: rc}}, spec: {containers: [{name: c, image: registry.k8s.io/pause:3.10}]}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: e2e}
spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web, namespace: e2e}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c, image: registry.k8s.io/pause:3.10}]}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: e2e}
spec:
  replicas: 0
  serviceName: web
  selector: {matchLabels: {app: db}}
  template: {metadata: {labels: {app: db}}, spec: {containers: [{name: c, image: registry.k8s.io/pause:3.10}]}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: e2e}
spec:
  selector: {matchLabels: {app: agent}}
  template: {metadata: {labels: {app: agent}}, spec: {containers: [{name: c, image: registry.k8s.io/pause:3.10}]}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: once, namespace: e2e}
spec:
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: registry.k8s.io/pause:3.10}]}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-1}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local
  local: {path: /mnt/disk}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [NODE]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: e2e}
spec: {accessModes: [ReadWriteOnce], storageClassName: local, resources: {requests: {storage: 1Gi}}}
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: csi.example.com}
spec: {attachRequired: true}
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: NODE}
spec: {drivers: [{name: csi.example.com, nodeID: NODE, allocatable: {count: 8}}]}
---
apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacity
metadata: {name: cap, namespace: e2e}
storageClassName: local
capacity: 10Gi
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: va-1}
spec: {attacher: csi.example.com, nodeName: NODE, source: {persistentVolumeName: pv-1}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: NODE-gpu}
spec:
  driver: gpu.example.com
  nodeName: NODE
  pool: {name: NODE, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}, {name: gpu-1}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu, namespace: e2e}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}
"""


def every_kind(node_name: str) -> list[dict[str, Any]]:
    """One object of each kind podfit feeds (Namespace and Node aside), as the apiserver accepts them."""
    documents = yaml.safe_load_all(EVERY_KIND.replace("NODE", node_name))
    return [pod("web-bound", nodeName=node_name, labels={"app": "web"}), *documents]


# -- podfit feed against the real apiserver -------------------------------------------------------------------


def test_feed_syncs_every_kind_with_the_shipped_cluster_role_and_follows_the_watch_in_order(
    control_plane: ControlPlane, podfit: Podfit
) -> None:
    api = control_plane.api()
    ensure_namespace(api, NS)
    create_node(api, node("n1", "zone-a"))
    apply_manifests(api, every_kind("n1"))
    feeder = start_feeder(control_plane, podfit)

    podfit.wait_synced()
    wait_caught_up(control_plane, podfit)
    with podfit.client() as client:
        fed = {spec.kind for spec in ALL_KINDS if podfit_state(client, spec)}
    assert fed == {spec.kind for spec in ALL_KINDS}  # every kind, not only those a namespace brings

    # Thirty updates of one pod in quick succession, and a pod created and deleted: podfit ends where the
    # apiserver does, so no event was applied out of order or lost.
    from kubernetes import client as k8s

    core = k8s.CoreV1Api(api)
    for step in range(30):
        core.patch_namespaced_pod("web-bound", NS, {"metadata": {"labels": {"step": str(step)}}})
    core.create_namespaced_pod(NS, pod("brief-1"))
    core.delete_namespaced_pod("brief-1", NS, grace_period_seconds=0)
    core.create_namespaced_pod(NS, pod("late-1"))
    wait_caught_up(control_plane, podfit)
    with podfit.client() as client:
        assert client.get("Pod", "web-bound", NS).object.pod.metadata.labels["step"] == "29"
    assert feeder.process.alive(), feeder.process.tail()


def test_feed_relists_after_etcd_compacts_the_history_it_missed(folder: Path) -> None:
    # The watch cache would serve a short absence from memory; without it, a watch from a compacted
    # resourceVersion is answered 410 Gone straight from etcd, which is what a long partition meets.
    plane = ControlPlane(folder, apiserver_flags=["--watch-cache=false"]).start()
    podfit = Podfit(folder, plane.pki).start()
    proxy = TcpProxy(plane.port)
    try:
        api = plane.api()
        ensure_namespace(api, NS)
        create_node(api, node("n1", "zone-a"))
        feeder = start_feeder(plane, podfit, server=f"https://127.0.0.1:{proxy.port}")
        podfit.wait_synced()
        wait_caught_up(plane, podfit)

        proxy.cut()  # the feeder is partitioned from the apiserver ...
        from kubernetes import client as k8s

        core = k8s.CoreV1Api(api)
        for index in range(5):
            core.create_namespaced_pod(NS, pod(f"missed-{index}"))
        create_node(api, node("n2", "zone-b"))
        core.delete_node("n1")
        plane.compact_etcd()  # ... while the history it would resume from is compacted away
        proxy.restore()

        wait_caught_up(plane, podfit)
        assert re.search(r"resourceVersion \d+ is gone \(410\): relisting", feeder.process.log()), feeder.process.tail()
        assert feeder.process.alive()
    finally:
        proxy.cut()


def test_feed_reconnects_after_the_apiserver_restarts(control_plane: ControlPlane, podfit: Podfit) -> None:
    api = control_plane.api()
    ensure_namespace(api, NS)
    create_node(api, node("n1", "zone-a"))
    feeder = start_feeder(control_plane, podfit)
    podfit.wait_synced()
    wait_caught_up(control_plane, podfit)

    control_plane.restart_apiserver()
    api = control_plane.api()
    from kubernetes import client as k8s

    k8s.CoreV1Api(api).create_namespaced_pod(NS, pod("after-restart-1"))
    create_node(api, node("n2", "zone-b"))
    wait_caught_up(control_plane, podfit)
    assert feeder.process.alive(), feeder.process.tail()


def test_feed_notices_a_podfit_restart_by_its_epoch_and_syncs_it_again(
    control_plane: ControlPlane, podfit: Podfit
) -> None:
    api = control_plane.api()
    ensure_namespace(api, NS)
    create_node(api, node("n1", "zone-a"))
    apply_manifests(api, [pod("web-1", nodeName="n1")])
    feeder = start_feeder(control_plane, podfit)
    podfit.wait_synced()
    wait_caught_up(control_plane, podfit)
    with podfit.client() as client:
        before = client.stats().server_epoch

    podfit.restart()  # same address, new epoch, empty cache: unready until the feeder syncs it again
    podfit.wait_synced()
    wait_caught_up(control_plane, podfit)
    with podfit.client() as client:
        assert client.stats().server_epoch != before
    assert "podfit restarted" in feeder.process.log(), feeder.process.tail()
    assert feeder.process.alive()


def test_feed_with_too_narrow_rbac_names_the_resource_and_verb_then_syncs_once_granted(
    control_plane: ControlPlane, podfit: Podfit
) -> None:
    role = shipped("ClusterRole", "podfit-feeder")
    narrow = json.loads(json.dumps(role))
    for rule in narrow["rules"]:
        rule["resources"] = [r for r in rule["resources"] if r != "resourceclaims"]
    kubeconfig = control_plane.kubeconfig("podfit-feeder", feeder_token(control_plane, narrow))
    feeder = Feeder(podfit, kubeconfig).start()

    wait_for(
        "the feeder to name what RBAC refused",
        lambda: re.search(
            r'User "system:serviceaccount:podfit:podfit" cannot list resource "resourceclaims" in API group '
            r'"resource.k8s.io"',
            feeder.process.log(),
        ),
        30,
    )
    assert podfit.probe("/readyz") == 503  # a kind it cannot see keeps podfit unsynced
    assert "ClusterRole podfit-feeder" in feeder.process.log()

    from kubernetes import client as k8s

    k8s.RbacAuthorizationV1Api(control_plane.api()).replace_cluster_role("podfit-feeder", role)
    podfit.wait_synced()  # RBAC is fixed without restarting the feeder
    assert feeder.process.alive()


# -- kube-scheduler ---------------------------------------------------------------------------------------------


def cluster_nodes() -> list[dict[str, Any]]:
    """Eight nodes over three zones, of three sizes; two with SSDs; one dedicated to GPUs (tainted)."""
    nodes = [
        node("node-a1", "zone-a", cpu="2", memory="4Gi"),
        node("node-a2", "zone-a", cpu="4", memory="8Gi", disk="ssd"),
        node("node-a3", "zone-a", cpu="8", memory="16Gi"),
        node("node-b1", "zone-b", cpu="4", memory="8Gi"),
        node("node-b2", "zone-b", cpu="8", memory="16Gi", disk="ssd"),
        node("node-c1", "zone-c", cpu="2", memory="4Gi"),
        node("node-c2", "zone-c", cpu="4", memory="8Gi"),
        node("node-gpu", "zone-c", cpu="8", memory="32Gi", accelerator="gpu"),
    ]
    nodes[-1]["spec"] = {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}
    return nodes


def mixed_workload() -> list[dict[str, Any]]:
    """Plain pods, a zone-spread service, required anti-affinity, node selectors, tolerations with node
    affinity, preferred pod affinity and sizes that exhaust the small nodes."""
    hostname_anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    near_web = {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "topologyKey": "topology.kubernetes.io/zone",
                    },
                }
            ]
        }
    }
    to_gpu = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "accelerator", "operator": "In", "values": ["gpu"]}]}
                ]
            }
        }
    }
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    gpu_toleration = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    pods = []
    for index in range(6):
        pods.append(pod(f"web-{index}", cpu="250m", topologySpreadConstraints=spread))
        pods.append(pod(f"plain-{index}", cpu=f"{100 * (index + 1)}m", memory=f"{64 * (index + 1)}Mi"))
    for index in range(5):
        pods.append(pod(f"cache-{index}", cpu="300m", memory="512Mi", affinity=hostname_anti))
    for index in range(4):
        pods.append(pod(f"batch-{index}", cpu="700m", memory="1Gi", nodeSelector={"disk": "ssd"}))
        pods.append(pod(f"api-{index}", cpu="200m", affinity=near_web))
    for index in range(3):
        pods.append(pod(f"gpu-{index}", cpu="2", memory="4Gi", tolerations=gpu_toleration, affinity=to_gpu))
    pods.append(pod("big-0", cpu="1500m", memory="2Gi"))
    return pods


def bound(control_plane: ControlPlane) -> dict[str, str]:
    items = json.loads(control_plane.get(f"/api/v1/namespaces/{NS}/pods"))["items"]
    return {i["metadata"]["name"]: i["spec"].get("nodeName", "") for i in items}


def cluster_with_feeder(control_plane: ControlPlane, podfit: Podfit) -> Feeder:
    api = control_plane.api()
    ensure_namespace(api, NS)
    for manifest in cluster_nodes():
        create_node(api, manifest)
    feeder = start_feeder(control_plane, podfit)
    podfit.wait_synced()
    return feeder


@pytest.mark.parametrize("node_cache_capable", [True, False], ids=["node-names", "full-node-objects"])
def test_kube_scheduler_binds_a_mixed_workload_through_podfits_extender(
    control_plane: ControlPlane, podfit: Podfit, folder: Path, node_cache_capable: bool
) -> None:
    cluster_with_feeder(control_plane, podfit)
    scheduler = KubeScheduler(control_plane, folder, podfit=podfit, node_cache_capable=node_cache_capable).start()
    workload = mixed_workload()
    apply_manifests(control_plane.api(), workload)

    placed = wait_for(
        f"kube-scheduler to bind all {len(workload)} pods",
        lambda: (lambda b: b if all(b.values()) and len(b) == len(workload) else None)(bound(control_plane)),
        90,
        interval=0.25,
    )
    wait_caught_up(control_plane, podfit, tuple(s for s in ALL_KINDS if s.kind in ("Pod", "Node")))
    with podfit.client() as client:
        held = {p.pod.metadata.name: p.pod.spec.node_name for p in client.list("Pod", NS).objects}
    assert held == placed  # podfit's cache followed every binding
    # Every pod went through podfit: one filter and one prioritize call each at least, all answered.
    assert podfit.extender_requests("filter") >= len(workload), scheduler.process.tail()
    # kube-scheduler scores nothing when one node is feasible: the three GPU pods have only node-gpu.
    assert podfit.extender_requests("prioritize") >= len(workload) - 3
    assert podfit.extender_requests("filter", "503") == 0
    # The placements obey what the pods asked for.
    assert len({placed[f"cache-{i}"] for i in range(5)}) == 5
    assert {placed[f"gpu-{i}"] for i in range(3)} == {"node-gpu"}
    assert {placed[f"batch-{i}"] for i in range(4)} <= {"node-a2", "node-b2"}
    assert "node-gpu" not in {n for name, n in placed.items() if not name.startswith("gpu-")}


def held_pod(manifest: Mapping[str, Any]) -> dict[str, Any]:
    held = json.loads(json.dumps(manifest))
    held["spec"]["schedulingGates"] = [{"name": "podfit.dev/e2e-hold"}]
    return held


@pytest.mark.parametrize("version", sorted(RELEASES))
def test_shadow_parity_kube_scheduler_binds_a_node_of_podfits_best_set(
    control_plane: ControlPlane, folder: Path, version: str
) -> None:
    """kube-scheduler of each supported release schedules on its own; before each pod is released to it,
    podfit answers the same pod from its fed cache, caught up to the apiserver's resourceVersions."""
    podfit = Podfit(folder, control_plane.pki, f"--kube-scheduler-version={version}").start()
    cluster_with_feeder(control_plane, podfit)
    KubeScheduler(control_plane, folder, release=RELEASES[version]).start()
    from kubernetes import client as k8s

    core = k8s.CoreV1Api(control_plane.api())
    pods_and_nodes = tuple(s for s in ALL_KINDS if s.kind in ("Pod", "Node"))
    disagreements, narrowed = [], 0
    with podfit.client() as client:
        for manifest in mixed_workload():
            name = manifest["metadata"]["name"]
            # Held by a scheduling gate, the pod is stored as the apiserver admits it (its ServiceAccount
            # volume and defaults included) and fed to podfit, while kube-scheduler leaves it alone.
            core.create_namespaced_pod(NS, held_pod(manifest))
            wait_caught_up(control_plane, podfit, pods_and_nodes)
            stored = json.loads(control_plane.get(f"/api/v1/namespaces/{NS}/pods/{name}"))
            del stored["spec"]["schedulingGates"]
            answer = client.schedule(stored, kube_scheduler_version=version)
            core.patch_namespaced_pod(name, NS, {"spec": {"schedulingGates": None}})
            chosen = wait_for(f"kube-scheduler to bind {name}", lambda n=name: bound(control_plane).get(n), 30)
            if chosen not in answer.best_nodes:
                disagreements.append(f"{name}: kube-scheduler chose {chosen}, podfit's best {list(answer.best_nodes)}")
            narrowed += len(answer.best_nodes) < answer.feasible_count
    assert not disagreements, "\n".join(disagreements)
    # The check has teeth: for most pods the scores single out fewer nodes than the filters pass.
    assert narrowed >= 20, narrowed


# -- what-if questions, fed versus loaded by hand ------------------------------------------------------------------


def without_generations(message: Any) -> Any:
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ("generation", "baseGeneration", "serverEpoch")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(json_format.MessageToDict(message))


def test_what_if_answers_from_a_fed_cluster_match_the_same_objects_loaded_by_hand(
    control_plane: ControlPlane, podfit: Podfit, folder: Path
) -> None:
    api = control_plane.api()
    from kubernetes import client as k8s

    ensure_namespace(api, NS)
    for manifest in cluster_nodes():
        create_node(api, manifest)
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {
            "replicas": 8,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod("x")["spec"]},
        },
    }
    uid = k8s.AppsV1Api(api).create_namespaced_replica_set(NS, replica_set).metadata.uid
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": uid, "controller": True}
    nodes = [n["metadata"]["name"] for n in cluster_nodes() if n["metadata"]["name"] != "node-gpu"]
    workload = []
    for index in range(8):
        replica = pod(f"web-{index}", cpu="500m", memory="512Mi", nodeName=nodes[index % len(nodes)])
        replica["metadata"]["ownerReferences"] = [owner]
        workload.append(replica)
    workload.append(pod("lonely-0", nodeName="node-c1"))  # no controller: blocks draining node-c1
    workload.append(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    pending = [pod(f"burst-{index}", cpu="3", memory="2Gi") for index in range(6)]
    apply_manifests(api, [*workload, *pending])
    # What the disruption controller (not running here) would write: one of the eight may go.
    status = {"status": {"disruptionsAllowed": 1, "currentHealthy": 8, "desiredHealthy": 7, "expectedPods": 8}}
    k8s.PolicyV1Api(api).patch_namespaced_pod_disruption_budget_status("web", NS, status)
    # The feeder lists what exists, in the apiserver's order, as the hand loading below does: the drain
    # rules report a node's first blocking pod in the order its pods arrived, as cluster-autoscaler's
    # snapshot does, so two caches filled in different orders may name different blockers.
    start_feeder(control_plane, podfit)
    podfit.wait_synced()
    wait_caught_up(control_plane, podfit)

    by_hand = Podfit(folder / "by-hand", control_plane.pki, "--no-wait-for-sync", name="by-hand").start()
    with by_hand.client() as client:
        for spec in ALL_KINDS:
            if manifests := listed(control_plane, spec):
                client.apply(manifests)

    template = node("template", "zone-a", cpu="4", memory="8Gi")
    stored_pending = [json.loads(control_plane.get(f"/api/v1/namespaces/{NS}/pods/burst-{i}")) for i in range(6)]
    answers = []
    for server in (podfit, by_hand):
        with server.client() as client:
            drain = client.simulate_drain(["node-a1", "node-b1", "node-c1"])
            estimate = client.estimate_scale_up([stored_pending], [("pool-a", template, 0, 10)])
            answers.append((without_generations(drain), without_generations(estimate)))
    fed, loaded = answers
    assert fed[0] == loaded[0], json.dumps([fed[0], loaded[0]], indent=1)
    assert fed[1] == loaded[1], json.dumps([fed[1], loaded[1]], indent=1)
    # The questions were real ones: a node blocked, a node that can go, and a scale-up of several nodes.
    results = {n["nodeName"]: n for n in fed[0]["nodes"]}
    assert results["node-a1"]["removable"] is True  # takes the one disruption the budget allows ...
    assert results["node-b1"]["blockingPod"]["reason"] == "NotEnoughPdb"  # ... so none is left for web-3
    assert results["node-c1"]["blockingPod"]["reason"] == "NotReplicated"
    assert fed[1]["estimates"][0]["nodeCount"] == 6, fed[1]  # one 3-CPU pod per 4-CPU template node
