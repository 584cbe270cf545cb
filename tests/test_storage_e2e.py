"""The storage kinds through a real server: cached, listed, counted, refused with their field, decided on."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from podfit.client import PodfitError

from tests.builders import make_node, make_pod
from tests.conftest import LiveServer

STORAGE_OBJECTS = [
    {"kind": "StorageClass", "metadata": {"name": "fast"}, "provisioner": "csi.example.com",
     "volumeBindingMode": "WaitForFirstConsumer"},
    {"kind": "PersistentVolume", "metadata": {"name": "pv1", "labels": {"topology.kubernetes.io/zone": "z1"}},
     "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
              "claimRef": {"namespace": "default", "name": "data"}}, "status": {"phase": "Bound"}},
    {"kind": "PersistentVolumeClaim",
     "metadata": {"name": "data", "namespace": "default", "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
     "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}},
              "storageClassName": "fast", "volumeName": "pv1"}, "status": {"phase": "Bound"}},
    {"kind": "CSINode", "metadata": {"name": "a"},
     "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "a", "allocatable": {"count": 8}}]}},
    {"kind": "CSIDriver", "metadata": {"name": "csi.example.com"}, "spec": {"storageCapacity": True}},
    {"kind": "CSIStorageCapacity", "metadata": {"name": "cap", "namespace": "kube-system"},
     "storageClassName": "fast", "capacity": "100Gi",
     "nodeTopology": {"matchLabels": {"topology.kubernetes.io/zone": "z1"}}},
    {"kind": "VolumeAttachment", "metadata": {"name": "va"},
     "spec": {"attacher": "csi.example.com", "nodeName": "a", "source": {"persistentVolumeName": "pv1"}}},
]  # fmt: skip


async def test_storage_objects_are_cached_listed_counted_and_decided_on(live: LiveServer) -> None:
    zonal = [
        make_node("a").capacity(cpu="2", memory="4Gi", pods="10").label("topology.kubernetes.io/zone", "z1").json(),
        make_node("b").capacity(cpu="2", memory="4Gi", pods="10").label("topology.kubernetes.io/zone", "z2").json(),
    ]
    await live.client.apply([*zonal, *STORAGE_OBJECTS])
    stats = await live.client.stats()
    counts = (
        stats.storage_classes,
        stats.persistent_volumes,
        stats.persistent_volume_claims,
        stats.csi_nodes,
        stats.csi_drivers,
        stats.csi_storage_capacities,
        stats.volume_attachments,
    )
    assert counts == (1, 1, 1, 1, 1, 1, 1)
    claim = await live.client.get("pvc", "data", "default")
    assert claim.object.persistent_volume_claim.spec.volume_name == "pv1"
    listed = await live.client.list("PersistentVolume")
    assert [o.persistent_volume.metadata.name for o in listed.objects] == ["pv1"]
    pod = make_pod("p").req(cpu="100m").json()
    pod["spec"]["volumes"] = [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]
    filtered = await live.client.filter(pod)
    verdicts = {v.node_name: (v.plugin, list(v.reasons)) for v in filtered.nodes if not v.fits}
    assert verdicts == {"b": ("VolumeZone", ["node(s) had no available volume zone"])}


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        pytest.param(
            {"kind": "StorageClass", "metadata": {"name": "x"}, "volumeBindingMode": "Sometimes"},
            "objects[0].storage_class.volumeBindingMode",
            id="an unknown binding mode",
        ),
        pytest.param(
            {"kind": "PersistentVolume", "metadata": {"name": "x"}, "spec": {"capacity": {"storage": "lots"}}},
            "objects[0].persistent_volume.spec.capacity.storage",
            id="a capacity that is not a quantity",
        ),
        pytest.param(
            {"kind": "CSIStorageCapacity", "metadata": {"name": "x"}, "capacity": "-1Gi"},
            "objects[0].csi_storage_capacity.capacity.storage",
            id="a negative capacity",
        ),
    ],
)
async def test_a_bad_storage_object_is_invalid_argument_at_its_field(
    live: LiveServer, obj: dict[str, Any], field: str
) -> None:
    with pytest.raises(PodfitError) as info:
        await live.client.replace(obj["kind"], [obj])
    assert info.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.field_violations[0][0] == field
    assert (await live.client.stats()).generation == 0
