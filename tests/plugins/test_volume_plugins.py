"""The volume plugins through the framework, as upstream's plugin tests state their cases: a cluster of
nodes, volumes and claims, a pod, and every node's verdict (plugin, reasons, code) — so PreFilter order
and short-circuits are part of what is checked. The public storage corpora check the same plugins against
kube-scheduler itself (tests/test_conformance.py)."""

from __future__ import annotations

from typing import Any

import pytest
from podfit.server.config import default_profile
from podfit.server.engine import Engine
from podfit.server.model import Kind

from tests.builders import NodeBuilder, PodBuilder, make_cache, make_node, make_pod

Verdicts = dict[str, tuple[str, tuple[str, ...], str]]
UNRESOLVABLE = "UnschedulableAndUnresolvable"
UNSCHEDULABLE = "Unschedulable"
ZONE = "topology.kubernetes.io/zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"


def node(name: str, **labels: str) -> NodeBuilder:
    return make_node(name).capacity(cpu="4", memory="8Gi", pods="110").labels(**labels)


def storage_class(name: str, mode: str = "WaitForFirstConsumer", provisioner: str = "csi.example.com") -> Any:
    return (
        Kind.STORAGE_CLASS,
        {"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode},
    )


def pv(
    name: str, size: str = "10Gi", cls: str = "fast", claim: str = "", phase: str = "Available", **extra: Any
) -> Any:
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": cls}
    if claim:
        spec["claimRef"] = {"namespace": "default", "name": claim}
    labels = extra.pop("labels", {})
    spec.update(extra)
    return (
        Kind.PERSISTENT_VOLUME,
        {"metadata": {"name": name, "labels": labels}, "spec": spec, "status": {"phase": phase}},
    )


def pvc(name: str, size: str = "5Gi", cls: str = "fast", volume: str = "", bound: bool = False, **extra: Any) -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "annotations": extra.pop("annotations", {})}
    if bound:
        meta["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
    spec = {"accessModes": extra.pop("modes", ["ReadWriteOnce"]), "resources": {"requests": {"storage": size}}}
    spec["storageClassName"] = cls
    if volume:
        spec["volumeName"] = volume
    return (Kind.PERSISTENT_VOLUME_CLAIM, {"metadata": meta, "spec": spec, "status": {"phase": extra.pop("phase", "")}})


def csi_node(name: str, driver: str = "csi.example.com", count: int | None = None) -> Any:
    entry: dict[str, Any] = {"name": driver, "nodeID": name}
    if count is not None:
        entry["allocatable"] = {"count": count}
    return (Kind.CSI_NODE, {"metadata": {"name": name}, "spec": {"drivers": [entry]}})


def with_claims(pod: PodBuilder, *claims: str) -> PodBuilder:
    pod.spec["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return pod


def with_volumes(pod: PodBuilder, *volumes: dict[str, Any]) -> PodBuilder:
    pod.spec["volumes"] = [{"name": f"v{i}", **v} for i, v in enumerate(volumes)]
    return pod


def verdicts(objects: list[Any], pod: PodBuilder, version: str = "v1.35") -> Verdicts:
    engine = Engine(make_cache(*objects), {"default-scheduler": default_profile(version=version)})
    decision, _, _ = engine.decide(pod.obj(), score=False)
    return {n: (s.plugin, s.reasons, s.code.value) for n, s in decision.rejections().items()}


def every(names: str, plugin: str, reason: str, code: str = UNRESOLVABLE) -> Verdicts:
    return {n: (plugin, (reason,), code) for n in names.split()}


CASES = [
    # -- VolumeRestrictions --
    pytest.param(
        [node("a"), node("b")],
        with_claims(make_pod("p"), "absent"),
        every("a b", "VolumeRestrictions", 'persistentvolumeclaim "absent" not found'),
        id="VolumeRestrictions: a missing claim rejects the pod at PreFilter, before VolumeBinding",
    ),
    pytest.param(
        [node("a"), node("b"), with_volumes(make_pod("old").node("a"), {"gcePersistentDisk": {"pdName": "d"}})],
        with_volumes(make_pod("p"), {"gcePersistentDisk": {"pdName": "d"}}),
        every("a", "VolumeRestrictions", "node(s) had no available disk", UNSCHEDULABLE),
        id="VolumeRestrictions: the same GCE PD on a node conflicts",
    ),
    pytest.param(
        [node("a"), with_volumes(make_pod("old").node("a"), {"gcePersistentDisk": {"pdName": "d", "readOnly": True}})],
        with_volumes(make_pod("p"), {"gcePersistentDisk": {"pdName": "d", "readOnly": True}}),
        {},
        id="VolumeRestrictions: a GCE PD read-only on both sides does not conflict",
    ),
    pytest.param(
        [
            node("a"),
            with_volumes(make_pod("old").node("a"), {"awsElasticBlockStore": {"volumeID": "v", "readOnly": True}}),
        ],
        with_volumes(make_pod("p"), {"awsElasticBlockStore": {"volumeID": "v", "readOnly": True}}),
        every("a", "VolumeRestrictions", "node(s) had no available disk", UNSCHEDULABLE),
        id="VolumeRestrictions: the same EBS volume always conflicts",
    ),
    pytest.param(
        [
            node("a"),
            node("b"),
            storage_class("fast"),
            pv("pv1", claim="once", phase="Bound"),
            pvc("once", volume="pv1", bound=True, modes=["ReadWriteOncePod"]),
            with_claims(make_pod("holder").node("a"), "once"),
        ],
        with_claims(make_pod("p"), "once"),
        every(
            "a b",
            "VolumeRestrictions",
            "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by "
            "another pod",
            UNSCHEDULABLE,
        ),
        id="VolumeRestrictions: a ReadWriteOncePod claim in use rejects every node",
    ),
    # -- VolumeZone --
    pytest.param(
        [
            node("a", **{ZONE: "z1"}),
            node("b", **{ZONE: "z2"}),
            node("c"),
            storage_class("fast"),
            pv("pv1", claim="data", phase="Bound", labels={ZONE: "z1"}),
            pvc("data", volume="pv1", bound=True),
        ],
        with_claims(make_pod("p"), "data"),
        every("b", "VolumeZone", "node(s) had no available volume zone"),
        id="VolumeZone: a zonal PV rejects nodes of other zones; a node without zone labels passes",
    ),
    pytest.param(
        [
            node("a", **{BETA_ZONE: "z1"}),
            storage_class("fast"),
            pv("pv1", claim="data", phase="Bound", labels={ZONE: "z1"}),
            pvc("data", volume="pv1", bound=True),
        ],
        with_claims(make_pod("p"), "data"),
        every("a", "VolumeZone", "node(s) had no available volume zone"),
        id="VolumeZone: a PV's GA zone label does not fall back to the node's beta label",
    ),
    pytest.param(
        [
            node("a", **{ZONE: "z2"}),
            storage_class("fast"),
            pv("pv1", claim="data", phase="Bound", labels={BETA_ZONE: "z1__z2"}),
            pvc("data", volume="pv1", bound=True),
        ],
        with_claims(make_pod("p"), "data"),
        {},
        id="VolumeZone: a beta multi-zone label falls back to the node's GA label",
    ),
    pytest.param(
        [node("a"), storage_class("fast"), pvc("data", volume="gone", bound=True)],
        with_claims(make_pod("p"), "data"),
        every("a", "VolumeZone", 'persistentvolume "gone" not found'),
        id="VolumeZone: a bound claim's missing PV is VolumeZone's PreFilter rejection",
    ),
    # -- VolumeBinding --
    pytest.param(
        [node("a"), storage_class("slow", mode="Immediate"), pvc("data", cls="slow")],
        with_claims(make_pod("p"), "data"),
        every("a", "VolumeBinding", "pod has unbound immediate PersistentVolumeClaims"),
        id="VolumeBinding: an unbound Immediate claim waits for the PV controller",
    ),
    pytest.param(
        [node("a"), storage_class("fast"), pv("pv1"), pvc("data", volume="pv1")],
        with_claims(make_pod("p"), "data"),
        every("a", "VolumeBinding", "pod has unbound immediate PersistentVolumeClaims"),
        id="VolumeBinding: a volume name without bind-completed is not bound, nor delayed",
    ),
    pytest.param(
        [
            node("a", host="a"),
            node("b", host="b"),
            storage_class("fast", provisioner="kubernetes.io/no-provisioner"),
            pv(
                "local",
                nodeAffinity={
                    "required": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "host", "operator": "In", "values": ["a"]}]}
                        ]
                    }
                },
            ),
            pvc("data"),
        ],
        with_claims(make_pod("p"), "data"),
        every("b", "VolumeBinding", "node(s) didn't find available persistent volumes to bind"),
        id="VolumeBinding: WaitForFirstConsumer matches a local PV only where its node affinity allows",
    ),
    pytest.param(
        [
            node("a"),
            storage_class("fast", provisioner="kubernetes.io/no-provisioner"),
            pv("small", size="1Gi"),
            pvc("data", size="5Gi"),
        ],
        with_claims(make_pod("p"), "data"),
        every("a", "VolumeBinding", "node(s) didn't find available persistent volumes to bind"),
        id="VolumeBinding: no PV large enough and no provisioner",
    ),
    pytest.param(
        [
            node("a", **{ZONE: "z1"}),
            node("b", **{ZONE: "z2"}),
            storage_class("fast"),
            (Kind.CSI_DRIVER, {"metadata": {"name": "csi.example.com"}, "spec": {"storageCapacity": True}}),
            (
                Kind.CSI_STORAGE_CAPACITY,
                {
                    "metadata": {"name": "c1", "namespace": "kube-system"},
                    "storageClassName": "fast",
                    "capacity": "6Gi",
                    "nodeTopology": {"matchLabels": {ZONE: "z1"}},
                },
            ),
            pvc("data", size="5Gi"),
            pvc("more", size="5Gi"),
        ],
        with_claims(make_pod("p"), "data", "more"),
        every("b", "VolumeBinding", "node(s) did not have enough free storage"),
        id="VolumeBinding: capacity is checked per claim, where the capacity's topology selects the node",
    ),
    pytest.param(
        [
            node("a"),
            node("b"),
            storage_class("fast"),
            pvc("data", annotations={"volume.kubernetes.io/selected-node": "a"}),
        ],
        with_claims(make_pod("p"), "data"),
        every("b", "VolumeBinding", "node(s) didn't find available persistent volumes to bind"),
        id="VolumeBinding: the selected-node annotation pins a delayed claim",
    ),
    # -- NodeVolumeLimits --
    pytest.param(
        [
            node("a"),
            node("b"),
            storage_class("fast", mode="Immediate"),
            csi_node("a", count=1),
            csi_node("b", count=2),
            pv("pv1", claim="old", phase="Bound", csi={"driver": "csi.example.com", "volumeHandle": "h1"}),
            pvc("old", volume="pv1", bound=True),
            with_claims(make_pod("holder").node("a"), "old"),
            pv("pv2", claim="data", phase="Bound", csi={"driver": "csi.example.com", "volumeHandle": "h2"}),
            pvc("data", volume="pv2", bound=True),
        ],
        with_claims(make_pod("p"), "data"),
        every("a", "NodeVolumeLimits", "node(s) exceed max volume count", UNSCHEDULABLE),
        id="NodeVolumeLimits: a node at its CSINode count rejects a new volume of the driver",
    ),
    pytest.param(
        [
            node("a"),
            storage_class("fast", mode="Immediate"),
            csi_node("a", count=1),
            pv("pv1", claim="data", phase="Bound", csi={"driver": "csi.example.com", "volumeHandle": "h1"}),
            pvc("data", volume="pv1", bound=True),
            with_claims(make_pod("holder").node("a"), "data"),
        ],
        with_claims(make_pod("p"), "data"),
        {},
        id="NodeVolumeLimits: a volume the node already has is not new",
    ),
    pytest.param(
        [
            node("a"),
            storage_class("fast", mode="Immediate"),
            csi_node("a"),
            pv("pv1", claim="data", phase="Bound", csi={"driver": "csi.example.com", "volumeHandle": "h1"}),
            pvc("data", volume="pv1", bound=True),
        ],
        with_claims(make_pod("p"), "data"),
        {},
        id="NodeVolumeLimits: a CSINode without allocatable count sets no limit",
    ),
]


@pytest.mark.parametrize(("objects", "pod", "want"), CASES)
def test_volume_plugin_verdicts(objects: list[Any], pod: PodBuilder, want: Verdicts) -> None:
    assert verdicts(objects, pod) == want


@pytest.mark.parametrize(
    ("version", "required", "want"),
    [
        pytest.param("v1.35", True, {}, id="v1.35: no VolumeLimitScaling, the missing driver is not checked"),
        pytest.param(
            "v1.37",
            True,
            every("a", "NodeVolumeLimits", "csi.other.com CSI driver is not installed on the node", UNSCHEDULABLE),
            id="v1.37: a driver that opts in must be installed on the node",
        ),
        pytest.param("v1.37", False, {}, id="v1.37: a driver that does not opt in is not checked"),
    ],
)
def test_volume_limit_scaling_per_version(version: str, required: bool, want: Verdicts) -> None:
    objects = [
        node("a"),
        csi_node("a"),
        storage_class("fast", mode="Immediate"),
        (Kind.CSI_DRIVER, {"metadata": {"name": "csi.other.com"}, "spec": {"preventPodSchedulingIfMissing": required}}),
        pv("pv1", claim="data", phase="Bound", csi={"driver": "csi.other.com", "volumeHandle": "h1"}),
        pvc("data", volume="pv1", bound=True),
    ]
    assert verdicts(objects, with_claims(make_pod("p"), "data"), version) == want


@pytest.mark.parametrize(
    ("version", "scored", "want"),
    [
        pytest.param("v1.35", False, None, id="v1.35: VolumeBinding does not score"),
        pytest.param("v1.37", True, {"a": 50, "b": 90}, id="v1.37: 100 minus the matched volume's utilisation"),
    ],
)
def test_volume_binding_scores_with_storage_capacity_scoring(
    version: str, scored: bool, want: dict[str, int] | None
) -> None:
    objects = [
        node("a", host="a"),
        node("b", host="b"),
        storage_class("fast", provisioner="kubernetes.io/no-provisioner"),
        pv("on-a", size="10Gi", nodeAffinity={"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "host", "operator": "In", "values": ["a"]}]}]}}),
        pv("on-b", size="50Gi", nodeAffinity={"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "host", "operator": "In", "values": ["b"]}]}]}}),
        pvc("data", size="5Gi"),
    ]  # fmt: skip
    engine = Engine(make_cache(*objects), {"default-scheduler": default_profile(version=version)})
    decision, _, _ = engine.decide(with_claims(make_pod("p"), "data").obj())
    got = {s.node_name: s.plugins.get("VolumeBinding") for s in decision.scores}
    assert (None not in got.values()) is scored
    if want is not None:
        assert got == want


def gce_pv_in_zone(zone: str) -> Any:
    return pv(
        "gce",
        claim="data",
        phase="Bound",
        gcePersistentDisk={"pdName": "disk-1"},
        nodeAffinity={
            "required": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]
            }
        },
    )


@pytest.mark.parametrize(
    ("migrated", "want"),
    [
        pytest.param("", {}, id="not migrated on the node: the in-tree PV's zone affinity holds"),
        pytest.param(
            "kubernetes.io/gce-pd",
            every("a", "VolumeBinding", "node(s) didn't match PersistentVolume's node affinity"),
            id="migrated on the node: the translated PV asks for topology.gke.io/zone, which the node lacks",
        ),
    ],
)
def test_volume_binding_judges_a_migrated_in_tree_pv_by_its_csi_translation(migrated: str, want: Verdicts) -> None:
    annotations = {"storage.alpha.kubernetes.io/migrated-plugins": migrated} if migrated else {}
    objects = [
        node("a", **{ZONE: "z1"}),
        storage_class("fast", mode="Immediate"),
        gce_pv_in_zone("z1"),
        pvc("data", volume="gce", bound=True),
        (Kind.CSI_NODE, {"metadata": {"name": "a", "annotations": annotations}, "spec": {"drivers": []}}),
    ]
    assert verdicts(objects, with_claims(make_pod("p"), "data")) == want
