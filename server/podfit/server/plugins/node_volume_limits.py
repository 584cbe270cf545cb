"""NodeVolumeLimits: a node's CSI drivers attach at most their CSINode ``allocatable.count`` volumes.

Volumes are counted per driver by unique name (driver/handle): the new pod's claims (an unbound claim
under its StorageClass's provisioner, with a handle of its own), its ephemeral volumes, and in-tree GCE
PD and AWS EBS volumes migrated to their CSI drivers; then what the node already has, from its pods and
from VolumeAttachments of CSI volumes. A volume the node already has is not new. The rejection is
Unschedulable: evicting pods frees attach slots. From v1.37 (VolumeLimitScaling) a node without a driver
whose CSIDriver sets ``preventPodSchedulingIfMissing`` is rejected too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import Int32Array, IntpArray, PreFilterResult
from podfit.server.framework.profile import NODE_VOLUME_LIMITS
from podfit.server.framework.status import SKIP, Status, unresolvable, unschedulable
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import Pod
from podfit.server.model.storage import CSINode, PersistentVolume, PersistentVolumeClaim
from podfit.server.plugins.volume_zone import BETA_ZONE, ZONE, not_found

if TYPE_CHECKING:
    from podfit.server.cache.node_table import NodeTable
    from podfit.server.cache.snapshot import Snapshot, StorageView

REASON_MAX_VOLUME_COUNT = "node(s) exceed max volume count"
GCE_PD_PLUGIN = "kubernetes.io/gce-pd"
AWS_EBS_PLUGIN = "kubernetes.io/aws-ebs"
# In-tree plugin -> its CSI driver (csi-translation-lib), for the in-tree volumes podfit models.
CSI_DRIVER_OF = {GCE_PD_PLUGIN: "pd.csi.storage.gke.io", AWS_EBS_PLUGIN: "ebs.csi.aws.com"}
# Every in-tree plugin the translation library can migrate, by provisioner name, and the ones whose
# migration is on wherever the node has a CSINode (both podfit versions).
_MIGRATABLE = {
    GCE_PD_PLUGIN: "pd.csi.storage.gke.io",
    AWS_EBS_PLUGIN: "ebs.csi.aws.com",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/azure-file": "file.csi.azure.com",
    "kubernetes.io/vsphere-volume": "csi.vsphere.vmware.com",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
}
_ALWAYS_MIGRATED = frozenset(
    {GCE_PD_PLUGIN, AWS_EBS_PLUGIN, "kubernetes.io/azure-disk", "kubernetes.io/cinder", "kubernetes.io/portworx-volume"}
)
_UNSPECIFIED = "UNSPECIFIED"
# The handle of an unbound claim's future volume: unique per claim, never equal to a real handle.
_PROVISIONED = "podfit-provisioned"


def _migration_on(csi_node: CSINode | None, plugin: str) -> bool:
    return csi_node is not None and plugin in _ALWAYS_MIGRATED


def _ebs_handle(volume_id: str) -> str:
    """KubernetesVolumeIDToEBSVolumeID: ``aws://zone/vol-1`` -> ``vol-1``."""
    return volume_id.rsplit("/", 1)[-1] if volume_id.startswith("aws://") else volume_id


def _gce_pv_handle(pv: PersistentVolume) -> str:
    zones = [z for z in (pv.labels.get(BETA_ZONE) or pv.labels.get(ZONE) or "").split("__")]
    if len(zones) == 1 and zones[0]:
        return f"projects/{_UNSPECIFIED}/zones/{zones[0]}/disks/{pv.gce_pd_name}"
    if len(zones) > 1:
        region = zones[0].rsplit("-", 1)[0]
        return f"projects/{_UNSPECIFIED}/regions/{region}/disks/{pv.gce_pd_name}"
    return f"projects/{_UNSPECIFIED}/zones/{_UNSPECIFIED}/disks/{pv.gce_pd_name}"


def _pv_driver(pv: PersistentVolume, csi_node: CSINode | None) -> tuple[str, str]:
    if pv.csi_driver:
        return pv.csi_driver, pv.csi_handle
    if pv.gce_pd_name and _migration_on(csi_node, GCE_PD_PLUGIN):
        return CSI_DRIVER_OF[GCE_PD_PLUGIN], _gce_pv_handle(pv)
    if pv.aws_volume_id and _migration_on(csi_node, AWS_EBS_PLUGIN):
        return CSI_DRIVER_OF[AWS_EBS_PLUGIN], _ebs_handle(pv.aws_volume_id)
    return "", ""


def _claim_driver(claim: PersistentVolumeClaim, storage: StorageView, csi_node: CSINode | None) -> tuple[str, str]:
    """getCSIDriverInfo: the bound volume's driver and handle, else the class's provisioner."""
    if claim.volume_name:
        pv = storage.volumes.get(claim.volume_name)
        if pv is not None:
            return _pv_driver(pv, csi_node)
    storage_class = storage.classes.get(claim.storage_class) if claim.storage_class else None
    if storage_class is None:
        return "", ""
    handle = f"{_PROVISIONED}-{claim.namespace}/{claim.name}"
    provisioner = storage_class.provisioner
    if provisioner in _MIGRATABLE:
        return (_MIGRATABLE[provisioner], handle) if _migration_on(csi_node, provisioner) else ("", "")
    return provisioner, handle


def attachable_volumes(
    pod: Pod, storage: StorageView, csi_node: CSINode | None, new_pod: bool
) -> tuple[dict[str, str], Status | None]:
    """filterAttachableVolumes: unique volume name -> driver, or the status a new pod's lookup failed with."""
    result: dict[str, str] = {}
    for volume in pod.volumes:
        if volume.claim_name or volume.ephemeral:
            name = volume.claim_name or f"{pod.name}-{volume.name}"
            claim = storage.claims.get(f"{pod.namespace}/{name}")
            if claim is None:
                if new_pod:
                    text = f"looking up PVC {pod.namespace}/{name}: {not_found('persistentvolumeclaim', name)}"
                    return result, unresolvable(text)
                continue
            if volume.ephemeral and not any(r.controller and r.uid == pod.uid for r in claim.owner_references):
                owner = f"PVC {claim.namespace}/{claim.name} was not created for pod {pod.namespace}/{pod.name}"
                return result, unresolvable(f"{owner} (pod is not owner)")
            driver, handle = _claim_driver(claim, storage, csi_node)
        elif volume.gce_pd_name and _migration_on(csi_node, GCE_PD_PLUGIN):
            driver = CSI_DRIVER_OF[GCE_PD_PLUGIN]
            handle = f"projects/{_UNSPECIFIED}/zones/{_UNSPECIFIED}/disks/{volume.gce_pd_name}"
        elif volume.aws_volume_id and _migration_on(csi_node, AWS_EBS_PLUGIN):
            driver, handle = CSI_DRIVER_OF[AWS_EBS_PLUGIN], _ebs_handle(volume.aws_volume_id)
        else:
            continue
        if driver and handle:
            result[f"{driver}/{handle}"] = driver
    return result, None


@dataclass(slots=True)
class _State:
    storage: StorageView
    # The new pod's attachable volumes per CSINode (None: nodes without one): they depend on nothing
    # else of the node, so 5,000 nodes without CSINodes compute them once.
    new_volumes: dict[str | None, tuple[dict[str, str], Status | None]] = field(default_factory=dict)

    def clone(self) -> _State:
        return self


def _counts_volumes(pod: Pod) -> bool:
    return any(v.claim_name or v.ephemeral or v.gce_pd_name or v.aws_volume_id for v in pod.volumes)


class NodeVolumeLimits:
    name = NODE_VOLUME_LIMITS

    def __init__(self, limit_scaling: bool) -> None:
        # VolumeLimitScaling (v1.37): a driver that opts in must be installed on the node.
        self.limit_scaling = limit_scaling

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        if not _counts_volumes(pod):
            return None, SKIP
        state.write(self.name, _State(snapshot.storage))
        return None, None

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        data = state.read(self.name, _State)
        codes = np.zeros(len(rows), dtype=np.int32)
        statuses: list[Status] = []
        known: dict[Status, int] = {}
        infos = table.infos
        csi_nodes = data.storage.csi_nodes

        def record(status: Status | None) -> int:
            if status is None:
                return 0
            if status not in known:
                statuses.append(status)
                known[status] = len(statuses)
            return known[status]

        # A node without a CSINode has no limits: one answer serves every such node.
        shared = record(self._filter(pod, "", (), data)) if len(rows) else 0
        if not csi_nodes:
            codes[:] = shared
            return codes, statuses
        for i, row in enumerate(rows.tolist()):
            info = infos[row]
            if info is None:
                continue
            if info.name in csi_nodes:
                codes[i] = record(self._filter(pod, info.name, info.pods.values(), data))
            else:
                codes[i] = shared
        return codes, statuses

    def _filter(self, pod: Pod, node_name: str, pods: Iterable[Pod], data: _State) -> Status | None:
        storage = data.storage
        csi_node = storage.csi_nodes.get(node_name)
        key = csi_node.name if csi_node is not None else None
        cached = data.new_volumes.get(key)
        if cached is None:
            cached = data.new_volumes[key] = attachable_volumes(pod, storage, csi_node, True)
        found, status = cached
        if status is not None:
            return status
        new = dict(found)
        if not new:
            return None
        if self.limit_scaling:
            for driver in new.values():
                csi_driver = storage.csi_drivers.get(driver)
                if csi_driver is None or not csi_driver.prevent_pod_scheduling_if_missing:
                    continue
                if csi_node is None or all(d.name != driver for d in csi_node.drivers):
                    return unschedulable(f"{driver} CSI driver is not installed on the node")
        limits = {d.name: d.allocatable for d in csi_node.drivers if d.allocatable is not None} if csi_node else {}
        if not limits:
            return None
        attached: dict[str, str] = {}
        for existing in pods:
            attached.update(attachable_volumes(existing, storage, csi_node, False)[0])
        counts: dict[str, int] = {}
        for unique, driver in attached.items():
            new.pop(unique, None)
            counts[driver] = counts.get(driver, 0) + 1
        for attachment in storage.attachments:
            if attachment.node_name != node_name or not attachment.attacher or not attachment.persistent_volume_name:
                continue
            pv = storage.volumes.get(attachment.persistent_volume_name)
            if pv is None or not pv.csi_driver:
                continue
            unique = f"{attachment.attacher}/{pv.csi_handle}"
            if unique not in attached:
                attached[unique] = attachment.attacher
                counts[attachment.attacher] = counts.get(attachment.attacher, 0) + 1
        wanted: dict[str, int] = {}
        for driver in new.values():
            wanted[driver] = wanted.get(driver, 0) + 1
        for driver, count in wanted.items():
            limit = limits.get(driver)
            if limit is not None and counts.get(driver, 0) + count > limit:
                return unschedulable(REASON_MAX_VOLUME_COUNT)
        return None


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> NodeVolumeLimits:
    return NodeVolumeLimits(features.enable_volume_limit_scaling)
