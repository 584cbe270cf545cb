"""Volume objects as the volume plugins read them: PersistentVolumes and their claims, StorageClasses,
CSINodes, CSIDrivers, CSIStorageCapacities and VolumeAttachments, converted once from Kubernetes JSON.

Storage amounts are whole bytes (``Quantity.Value()``); the storage-class lookups follow upstream's
``storageutil`` helpers, where the beta annotation wins over the spec field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from podfit.k8s.limits import echo
from podfit.server.model.errors import ValidationError
from podfit.server.model.objects import (
    DEFAULT_NAMESPACE,
    Kind,
    LabelSelector,
    NodeSelectorTerm,
    OwnerReference,
    _boolean,
    _mapping,
    _meta,
    _optional_integer,
    _owner_references,
    _quantities,
    _sequence,
    _string,
    _string_map,
    _strings,
    _time,
    canonical_amount,
    node_selector,
    parse_label_selector,
    resource_version,
)

BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
BIND_COMPLETED_ANNOTATION = "pv.kubernetes.io/bind-completed"
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"
STORAGE = "storage"


def _storage(value: Any, path: str) -> int | None:
    """``value["storage"]`` in bytes, None when absent."""
    amounts = _quantities(value, path)
    amount = amounts.get(STORAGE)
    return None if amount is None else canonical_amount(STORAGE, amount)


def _quantity(value: Any, path: str) -> int | None:
    if value is None:
        return None
    return _storage({STORAGE: value}, path)


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str = ""
    volume_binding_mode: str = "Immediate"
    # ORed terms of ANDed (key, values) requirements; empty allows every node.
    allowed_topologies: tuple[tuple[tuple[str, tuple[str, ...]], ...], ...] = ()
    uid: str = ""
    resource_version: str = ""

    @property
    def wait_for_first_consumer(self) -> bool:
        return self.volume_binding_mode == "WaitForFirstConsumer"


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    labels: Mapping[str, str]
    storage_class: str
    capacity: int | None
    access_modes: tuple[str, ...]
    volume_mode: str
    phase: str
    # spec.claimRef: (namespace, name, uid); None when not (pre-)bound.
    claim_ref: tuple[str, str, str] | None = None
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    csi_driver: str = ""
    csi_handle: str = ""
    gce_pd_name: str = ""
    aws_volume_id: str = ""
    uid: str = ""
    resource_version: str = ""


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    name: str
    namespace: str
    uid: str
    annotations: Mapping[str, str]
    owner_references: tuple[OwnerReference, ...]
    being_deleted: bool
    access_modes: tuple[str, ...]
    request: int
    # The class as upstream's GetPersistentVolumeClaimClass reads it ("" = none).
    storage_class: str
    volume_name: str
    volume_mode: str
    selector: LabelSelector | None
    phase: str
    resource_version: str = ""
    # Whether resources.requests["storage"] is set (capacity is checked only then).
    has_request: bool = True

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def bound(self) -> bool:
        """Bound as the volume binder sees it: a volume name and the bind-completed annotation."""
        return bool(self.volume_name) and BIND_COMPLETED_ANNOTATION in self.annotations


@dataclass(frozen=True, slots=True)
class CSINodeDriver:
    name: str
    node_id: str
    topology_keys: tuple[str, ...]
    # allocatable.count; None when unset (no limit).
    allocatable: int | None


@dataclass(frozen=True, slots=True)
class CSINode:
    name: str
    drivers: tuple[CSINodeDriver, ...]
    migrated_plugins: frozenset[str]
    uid: str = ""
    resource_version: str = ""


@dataclass(frozen=True, slots=True)
class CSIDriver:
    name: str
    # spec.storageCapacity (unset: false).
    storage_capacity: bool
    # spec.preventPodSchedulingIfMissing (unset: false).
    prevent_pod_scheduling_if_missing: bool = False
    uid: str = ""
    resource_version: str = ""


@dataclass(frozen=True, slots=True)
class CSIStorageCapacity:
    name: str
    namespace: str
    storage_class: str
    capacity: int | None
    maximum_volume_size: int | None
    # None: matches no node.
    node_topology: LabelSelector | None
    uid: str = ""
    resource_version: str = ""


@dataclass(frozen=True, slots=True)
class VolumeAttachment:
    name: str
    attacher: str
    node_name: str
    persistent_volume_name: str
    uid: str = ""
    resource_version: str = ""


StorageObject = (
    StorageClass
    | PersistentVolume
    | PersistentVolumeClaim
    | CSINode
    | CSIDriver
    | CSIStorageCapacity
    | VolumeAttachment
)


def _class_of(meta: Mapping[str, Any], field: Any, path: str) -> str:
    annotations = _string_map(meta.get("annotations"), f"{path}.metadata.annotations")
    if BETA_STORAGE_CLASS_ANNOTATION in annotations:
        return annotations[BETA_STORAGE_CLASS_ANNOTATION]
    return _string(field, f"{path}.spec.storageClassName")


def storage_class_from_k8s(data: Mapping[str, Any], path: str = "storageClass") -> StorageClass:
    data = _mapping(data, path)
    meta = _meta(data, path)
    terms = []
    for i, term in enumerate(_sequence(data.get("allowedTopologies"), f"{path}.allowedTopologies")):
        where = f"{path}.allowedTopologies[{i}]"
        expressions = _sequence(_mapping(term, where).get("matchLabelExpressions"), f"{where}.matchLabelExpressions")
        requirements = []
        for j, item in enumerate(expressions):
            req = _mapping(item, f"{where}.matchLabelExpressions[{j}]")
            key = _string(req.get("key"), f"{where}.matchLabelExpressions[{j}].key")
            requirements.append((key, _strings(req.get("values"), f"{where}.matchLabelExpressions[{j}].values")))
        terms.append(tuple(requirements))
    mode = _string(data.get("volumeBindingMode"), f"{path}.volumeBindingMode") or "Immediate"
    if mode not in ("Immediate", "WaitForFirstConsumer"):
        raise ValidationError(f"{path}.volumeBindingMode", f"{echo(mode)} must be Immediate or WaitForFirstConsumer")
    return StorageClass(
        name=_string(meta.get("name"), f"{path}.metadata.name"),
        provisioner=_string(data.get("provisioner"), f"{path}.provisioner"),
        volume_binding_mode=mode,
        allowed_topologies=tuple(terms),
        uid=_string(meta.get("uid"), f"{path}.metadata.uid"),
        resource_version=resource_version(meta.get("resourceVersion"), f"{path}.metadata.resourceVersion"),
    )


def persistent_volume_from_k8s(data: Mapping[str, Any], path: str = "persistentVolume") -> PersistentVolume:
    data = _mapping(data, path)
    meta = _meta(data, path)
    spec = _mapping(data.get("spec"), f"{path}.spec")
    status = _mapping(data.get("status"), f"{path}.status")
    claim = spec.get("claimRef")
    claim_ref = None
    if claim is not None:
        ref = _mapping(claim, f"{path}.spec.claimRef")
        claim_ref = (
            _string(ref.get("namespace"), f"{path}.spec.claimRef.namespace"),
            _string(ref.get("name"), f"{path}.spec.claimRef.name"),
            _string(ref.get("uid"), f"{path}.spec.claimRef.uid"),
        )
    required = _mapping(spec.get("nodeAffinity"), f"{path}.spec.nodeAffinity").get("required")
    # An empty required selector constrains nothing, as an absent one.
    affinity = node_selector(required or None, f"{path}.spec.nodeAffinity.required")
    csi = _mapping(spec.get("csi"), f"{path}.spec.csi")
    gce = _mapping(spec.get("gcePersistentDisk"), f"{path}.spec.gcePersistentDisk")
    aws = _mapping(spec.get("awsElasticBlockStore"), f"{path}.spec.awsElasticBlockStore")
    return PersistentVolume(
        name=_string(meta.get("name"), f"{path}.metadata.name"),
        labels=_string_map(meta.get("labels"), f"{path}.metadata.labels"),
        storage_class=_class_of(meta, spec.get("storageClassName"), path),
        capacity=_storage(spec.get("capacity"), f"{path}.spec.capacity"),
        access_modes=_strings(spec.get("accessModes"), f"{path}.spec.accessModes"),
        volume_mode=_string(spec.get("volumeMode"), f"{path}.spec.volumeMode") or "Filesystem",
        phase=_string(status.get("phase"), f"{path}.status.phase"),
        claim_ref=claim_ref,
        node_affinity=affinity,
        csi_driver=_string(csi.get("driver"), f"{path}.spec.csi.driver"),
        csi_handle=_string(csi.get("volumeHandle"), f"{path}.spec.csi.volumeHandle"),
        gce_pd_name=_string(gce.get("pdName"), f"{path}.spec.gcePersistentDisk.pdName"),
        aws_volume_id=_string(aws.get("volumeID"), f"{path}.spec.awsElasticBlockStore.volumeID"),
        uid=_string(meta.get("uid"), f"{path}.metadata.uid"),
        resource_version=resource_version(meta.get("resourceVersion"), f"{path}.metadata.resourceVersion"),
    )


def persistent_volume_claim_from_k8s(
    data: Mapping[str, Any], path: str = "persistentVolumeClaim"
) -> PersistentVolumeClaim:
    data = _mapping(data, path)
    meta = _meta(data, path)
    spec = _mapping(data.get("spec"), f"{path}.spec")
    status = _mapping(data.get("status"), f"{path}.status")
    resources = _mapping(spec.get("resources"), f"{path}.spec.resources")
    request = _storage(resources.get("requests"), f"{path}.spec.resources.requests")
    return PersistentVolumeClaim(
        name=_string(meta.get("name"), f"{path}.metadata.name"),
        namespace=_string(meta.get("namespace"), f"{path}.metadata.namespace") or DEFAULT_NAMESPACE,
        uid=_string(meta.get("uid"), f"{path}.metadata.uid"),
        annotations=_string_map(meta.get("annotations"), f"{path}.metadata.annotations"),
        owner_references=_owner_references(meta.get("ownerReferences"), f"{path}.metadata.ownerReferences"),
        being_deleted=_time(meta.get("deletionTimestamp"), f"{path}.metadata.deletionTimestamp") is not None,
        access_modes=_strings(spec.get("accessModes"), f"{path}.spec.accessModes"),
        request=request or 0,
        has_request=request is not None,
        storage_class=_class_of(meta, spec.get("storageClassName"), path),
        volume_name=_string(spec.get("volumeName"), f"{path}.spec.volumeName"),
        volume_mode=_string(spec.get("volumeMode"), f"{path}.spec.volumeMode") or "Filesystem",
        selector=parse_label_selector(spec.get("selector"), f"{path}.spec.selector"),
        phase=_string(status.get("phase"), f"{path}.status.phase"),
        resource_version=resource_version(meta.get("resourceVersion"), f"{path}.metadata.resourceVersion"),
    )


def csi_node_from_k8s(data: Mapping[str, Any], path: str = "csiNode") -> CSINode:
    data = _mapping(data, path)
    meta = _meta(data, path)
    spec = _mapping(data.get("spec"), f"{path}.spec")
    drivers = []
    for i, item in enumerate(_sequence(spec.get("drivers"), f"{path}.spec.drivers")):
        where = f"{path}.spec.drivers[{i}]"
        driver = _mapping(item, where)
        allocatable = _mapping(driver.get("allocatable"), f"{where}.allocatable")
        drivers.append(
            CSINodeDriver(
                name=_string(driver.get("name"), f"{where}.name"),
                node_id=_string(driver.get("nodeID"), f"{where}.nodeID"),
                topology_keys=_strings(driver.get("topologyKeys"), f"{where}.topologyKeys"),
                allocatable=_optional_integer(allocatable.get("count"), f"{where}.allocatable.count"),
            )
        )
    annotations = _string_map(meta.get("annotations"), f"{path}.metadata.annotations")
    migrated = annotations.get(MIGRATED_PLUGINS_ANNOTATION, "")
    return CSINode(
        name=_string(meta.get("name"), f"{path}.metadata.name"),
        drivers=tuple(drivers),
        migrated_plugins=frozenset(p.strip() for p in migrated.split(",") if p.strip()),
        uid=_string(meta.get("uid"), f"{path}.metadata.uid"),
        resource_version=resource_version(meta.get("resourceVersion"), f"{path}.metadata.resourceVersion"),
    )


def csi_driver_from_k8s(data: Mapping[str, Any], path: str = "csiDriver") -> CSIDriver:
    data = _mapping(data, path)
    meta = _meta(data, path)
    spec = _mapping(data.get("spec"), f"{path}.spec")
    return CSIDriver(
        name=_string(meta.get("name"), f"{path}.metadata.name"),
        storage_capacity=_boolean(spec.get("storageCapacity"), f"{path}.spec.storageCapacity"),
        prevent_pod_scheduling_if_missing=_boolean(
            spec.get("preventPodSchedulingIfMissing"), f"{path}.spec.preventPodSchedulingIfMissing"
        ),
        uid=_string(meta.get("uid"), f"{path}.metadata.uid"),
        resource_version=resource_version(meta.get("resourceVersion"), f"{path}.metadata.resourceVersion"),
    )


def csi_storage_capacity_from_k8s(data: Mapping[str, Any], path: str = "csiStorageCapacity") -> CSIStorageCapacity:
    data = _mapping(data, path)
    meta = _meta(data, path)
    return CSIStorageCapacity(
        name=_string(meta.get("name"), f"{path}.metadata.name"),
        namespace=_string(meta.get("namespace"), f"{path}.metadata.namespace") or DEFAULT_NAMESPACE,
        storage_class=_string(data.get("storageClassName"), f"{path}.storageClassName"),
        capacity=_quantity(data.get("capacity"), f"{path}.capacity"),
        maximum_volume_size=_quantity(data.get("maximumVolumeSize"), f"{path}.maximumVolumeSize"),
        node_topology=parse_label_selector(data.get("nodeTopology"), f"{path}.nodeTopology"),
        uid=_string(meta.get("uid"), f"{path}.metadata.uid"),
        resource_version=resource_version(meta.get("resourceVersion"), f"{path}.metadata.resourceVersion"),
    )


def volume_attachment_from_k8s(data: Mapping[str, Any], path: str = "volumeAttachment") -> VolumeAttachment:
    data = _mapping(data, path)
    meta = _meta(data, path)
    spec = _mapping(data.get("spec"), f"{path}.spec")
    source = _mapping(spec.get("source"), f"{path}.spec.source")
    return VolumeAttachment(
        name=_string(meta.get("name"), f"{path}.metadata.name"),
        attacher=_string(spec.get("attacher"), f"{path}.spec.attacher"),
        node_name=_string(spec.get("nodeName"), f"{path}.spec.nodeName"),
        persistent_volume_name=_string(source.get("persistentVolumeName"), f"{path}.spec.source.persistentVolumeName"),
        uid=_string(meta.get("uid"), f"{path}.metadata.uid"),
        resource_version=resource_version(meta.get("resourceVersion"), f"{path}.metadata.resourceVersion"),
    )


_CONVERTERS = {
    "StorageClass": storage_class_from_k8s,
    "PersistentVolume": persistent_volume_from_k8s,
    "PersistentVolumeClaim": persistent_volume_claim_from_k8s,
    "CSINode": csi_node_from_k8s,
    "CSIDriver": csi_driver_from_k8s,
    "CSIStorageCapacity": csi_storage_capacity_from_k8s,
    "VolumeAttachment": volume_attachment_from_k8s,
}


def storage_object_from_k8s(kind: Kind, data: Mapping[str, Any], path: str) -> StorageObject:
    converter: Any = _CONVERTERS[kind.value]
    result: StorageObject = converter(data, path)
    return result
