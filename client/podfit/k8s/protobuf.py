"""Kubernetes protobuf (Go's ``obj.Marshal()``, e.g. ``v1.Pod.Marshal()``) <-> the object's Kubernetes JSON.

cluster-autoscaler's gRPC expander sends pods and nodes in Kubernetes' protobuf encoding, and Go clients
can send volumes, storage and resource.k8s.io objects that way too. ``decode`` turns them into the dict
that Kubernetes' JSON serialisation of the same Go object gives, so that everything downstream
(``manifest_to_message``, the server's model) treats them exactly like JSON; ``encode`` is the inverse,
writing the bytes Go's ``Marshal()`` writes for the fields podfit models.

The wire format alone cannot say how Go renders a field in JSON: Go writes its non-pointer fields always
(so presence means nothing for them, and JSON's ``omitempty`` drops their zero values), its pointer fields
only when set (shown in JSON even when zero), and some fields have no ``omitempty`` at all (``null`` when
empty). The tables below record which is which for every modelled field, as k8s.io/api v0.37 declares it;
the rest follows from the schema in protos/podfit/k8s/v1 (core.proto, storage.proto, resource.proto), whose
field names are the JSON keys.
"""

from __future__ import annotations

import codecs
import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass
from google.protobuf.unknown_fields import UnknownFieldSet
from podfit.k8s.errors import ConversionError
from podfit.k8s.limits import check_json
from podfit.k8s.quantity import QuantityError, parse_quantity
from podfit.k8s.v1 import apps_pb2 as k8s_apps
from podfit.k8s.v1 import batch_pb2 as k8s_batch
from podfit.k8s.v1 import core_pb2 as k8s
from podfit.k8s.v1 import policy_pb2 as k8s_policy
from podfit.k8s.v1 import resource_pb2 as k8s_resource
from podfit.k8s.v1 import storage_pb2 as k8s_storage

__all__ = ["API_VERSIONS", "ENVELOPE_MAGIC", "KINDS", "MAX_BYTES", "decode", "encode"]

# Kubernetes' protobuf serializer writes this before a runtime.Unknown envelope.
ENVELOPE_MAGIC = b"k8s\x00"
PROTOBUF_CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
# The kinds podfit holds, every one of which it decodes from protobuf.
KINDS: dict[str, type[Message]] = {
    "Pod": k8s.Pod,
    "Node": k8s.Node,
    "PersistentVolume": k8s.PersistentVolume,
    "PersistentVolumeClaim": k8s.PersistentVolumeClaim,
    "StorageClass": k8s_storage.StorageClass,
    "CSINode": k8s_storage.CSINode,
    "CSIDriver": k8s_storage.CSIDriver,
    "CSIStorageCapacity": k8s_storage.CSIStorageCapacity,
    "VolumeAttachment": k8s_storage.VolumeAttachment,
    "DeviceClass": k8s_resource.DeviceClass,
    "ResourceSlice": k8s_resource.ResourceSlice,
    "ResourceClaim": k8s_resource.DRAResourceClaim,
    "Namespace": k8s.Namespace,
    "Service": k8s.Service,
    "PodDisruptionBudget": k8s_policy.PodDisruptionBudget,
    "ReplicaSet": k8s_apps.ReplicaSet,
    "StatefulSet": k8s_apps.StatefulSet,
    "DaemonSet": k8s_apps.DaemonSet,
    "ReplicationController": k8s.ReplicationController,
    "Job": k8s_batch.Job,
}
# The apiVersion of each kind: the envelope's must match it, and decoded JSON carries it.
API_VERSIONS = {
    "Pod": "v1",
    "Node": "v1",
    "PersistentVolume": "v1",
    "PersistentVolumeClaim": "v1",
    "StorageClass": "storage.k8s.io/v1",
    "CSINode": "storage.k8s.io/v1",
    "CSIDriver": "storage.k8s.io/v1",
    "CSIStorageCapacity": "storage.k8s.io/v1",
    "VolumeAttachment": "storage.k8s.io/v1",
    "DeviceClass": "resource.k8s.io/v1",
    "ResourceSlice": "resource.k8s.io/v1",
    "ResourceClaim": "resource.k8s.io/v1",
    "Namespace": "v1",
    "Service": "v1",
    "PodDisruptionBudget": "policy/v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "ReplicationController": "v1",
    "Job": "batch/v1",
}
assert set(API_VERSIONS) == set(KINDS)
# Objects are far smaller (etcd stores objects of at most 1.5 MiB); larger input is refused unread.
MAX_BYTES = 16 << 20

# Go pointer scalars (*int32, *bool, *string): written, and shown in JSON, exactly when set, even to zero.
# Other scalars are Go values: always written, and left out of JSON when zero (omitempty) unless listed
# in _NO_OMITEMPTY.
_POINTER_SCALARS = frozenset(
    {
        "ObjectMeta.deletionGracePeriodSeconds",
        "OwnerReference.controller",
        "OwnerReference.blockOwnerDeletion",
        "PodSpec.terminationGracePeriodSeconds",
        "PodSpec.activeDeadlineSeconds",
        "PodSpec.automountServiceAccountToken",
        "PodSpec.shareProcessNamespace",
        "PodSpec.priority",
        "PodSpec.runtimeClassName",
        "PodSpec.enableServiceLinks",
        "PodSpec.preemptionPolicy",
        "PodSpec.setHostnameAsFQDN",
        "PodSpec.hostUsers",
        "PodSpec.hostnameOverride",
        "Container.restartPolicy",
        "HostPathVolumeSource.type",
        "Toleration.tolerationSeconds",
        "TopologySpreadConstraint.minDomains",
        "TopologySpreadConstraint.nodeAffinityPolicy",
        "TopologySpreadConstraint.nodeTaintsPolicy",
        "PodResourceClaim.resourceClaimName",
        "PodResourceClaim.resourceClaimTemplateName",
        "ContainerStatus.started",
        "VolumeMount.mountPropagation",
        "VolumeMount.recursiveReadOnly",
        "PodResourceClaimStatus.resourceClaimName",
        "PersistentVolumeSpec.volumeMode",
        "LocalVolumeSource.fsType",
        "PersistentVolumeClaimSpec.storageClassName",
        "PersistentVolumeClaimSpec.volumeMode",
        "StorageClass.reclaimPolicy",
        "StorageClass.volumeBindingMode",
        "VolumeNodeResources.count",
        "CSIDriverSpec.attachRequired",
        "CSIDriverSpec.podInfoOnMount",
        "CSIDriverSpec.storageCapacity",
        "CSIDriverSpec.fsGroupPolicy",
        "CSIDriverSpec.requiresRepublish",
        "CSIDriverSpec.seLinuxMount",
        "CSIDriverSpec.nodeAllocatableUpdatePeriodSeconds",
        "CSIDriverSpec.preventPodSchedulingIfMissing",
        "VolumeAttachmentSource.persistentVolumeName",
        "DeviceClassSpec.extendedResourceName",
        "ResourceSliceSpec.nodeName",
        "ResourceSliceSpec.allNodes",
        "DeviceAttribute.int",
        "DeviceAttribute.bool",
        "DeviceAttribute.string",
        "DeviceAttribute.version",
        "ExactDeviceRequest.adminAccess",
        "DeviceConstraint.matchAttribute",
        "DeviceRequestAllocationResult.adminAccess",
        "ResourceSliceSpec.perDeviceNodeSelection",
        "Device.nodeName",
        "Device.allNodes",
        "Device.bindsToNode",
        "Device.allowMultipleAllocations",
        "DeviceToleration.tolerationSeconds",
        "DeviceConstraint.distinctAttribute",
        "PodDisruptionBudgetSpec.unhealthyPodEvictionPolicy",
        "ReplicationControllerSpec.replicas",
        "ReplicaSetSpec.replicas",
        "StatefulSetSpec.replicas",
    }
)
# Go non-pointer structs: always written and always in JSON (omitempty does not apply to structs; a zero
# Time is null). Other message fields are Go pointers: written, and in JSON, exactly when set.
_VALUE_STRUCTS = frozenset(
    {
        "Pod.metadata",
        "Pod.spec",
        "Pod.status",
        "Node.metadata",
        "Node.spec",
        "Node.status",
        "ObjectMeta.creationTimestamp",
        "Container.resources",
        "Volume.volumeSource",
        "PreferredSchedulingTerm.preference",
        "WeightedPodAffinityTerm.podAffinityTerm",
        "PodCondition.lastProbeTime",
        "PodCondition.lastTransitionTime",
        "ContainerStatus.state",
        "ContainerStatus.lastState",
        "ContainerStateRunning.startedAt",
        "ContainerStateTerminated.startedAt",
        "ContainerStateTerminated.finishedAt",
        "NodeStatus.daemonEndpoints",
        "NodeStatus.nodeInfo",
        "NodeDaemonEndpoints.kubeletEndpoint",
        "NodeCondition.lastHeartbeatTime",
        "NodeCondition.lastTransitionTime",
        "PersistentVolumeClaimTemplate.metadata",
        "PersistentVolumeClaimTemplate.spec",
        "PersistentVolume.metadata",
        "PersistentVolume.spec",
        "PersistentVolume.status",
        "PersistentVolumeSpec.persistentVolumeSource",
        "PersistentVolumeClaim.metadata",
        "PersistentVolumeClaim.spec",
        "PersistentVolumeClaim.status",
        "PersistentVolumeClaimSpec.resources",
        "StorageClass.metadata",
        "CSINode.metadata",
        "CSINode.spec",
        "CSINode.status",
        "CSIDriver.metadata",
        "CSIDriver.spec",
        "CSIStorageCapacity.metadata",
        "VolumeAttachment.metadata",
        "VolumeAttachment.spec",
        "VolumeAttachment.status",
        "VolumeAttachmentSpec.source",
        "DeviceClass.metadata",
        "DeviceClass.spec",
        "DeviceClassConfiguration.deviceConfiguration",
        "OpaqueDeviceConfiguration.parameters",
        "ResourceSlice.metadata",
        "ResourceSlice.spec",
        "ResourceSliceSpec.pool",
        "DeviceCapacity.value",
        "Counter.value",
        "DRAResourceClaim.metadata",
        "DRAResourceClaim.spec",
        "DRAResourceClaim.status",
        "ResourceClaimSpec.devices",
        "DeviceClaimConfiguration.deviceConfiguration",
        "AllocationResult.devices",
        "Namespace.metadata",
        "Namespace.spec",
        "Namespace.status",
        "Service.metadata",
        "Service.spec",
        "Service.status",
        "ServiceStatus.loadBalancer",
        "PodDisruptionBudget.metadata",
        "PodDisruptionBudget.spec",
        "PodDisruptionBudget.status",
        "PodTemplateSpec.metadata",
        "PodTemplateSpec.spec",
        "ReplicationController.metadata",
        "ReplicationController.spec",
        "ReplicationController.status",
        "ReplicaSet.metadata",
        "ReplicaSet.spec",
        "ReplicaSet.status",
        "ReplicaSetSpec.template",
        "StatefulSet.metadata",
        "StatefulSet.spec",
        "StatefulSet.status",
        "StatefulSetSpec.template",
        "StatefulSetSpec.updateStrategy",
        "DaemonSet.metadata",
        "DaemonSet.spec",
        "DaemonSet.status",
        "DaemonSetSpec.template",
        "DaemonSetSpec.updateStrategy",
        "Job.metadata",
        "Job.spec",
        "Job.status",
        "JobSpec.template",
    }
)
# Value structs tagged omitzero: left out of JSON when zero.
_OMITZERO = frozenset({"ObjectMeta.creationTimestamp"})
# Fields without omitempty: in JSON even when empty ("", 0, false, or null for an empty list).
_NO_OMITEMPTY = frozenset(
    {
        "OwnerReference.apiVersion",
        "OwnerReference.kind",
        "OwnerReference.name",
        "OwnerReference.uid",
        "LabelSelectorRequirement.key",
        "LabelSelectorRequirement.operator",
        "PodSpec.containers",
        "Container.name",
        "ContainerPort.containerPort",
        "ResourceClaim.name",
        "Volume.name",
        "VolumeMount.name",
        "VolumeMount.mountPath",
        "HostPathVolumeSource.path",
        "PersistentVolumeClaimVolumeSource.claimName",
        "NodeSelector.nodeSelectorTerms",
        "NodeSelectorRequirement.key",
        "NodeSelectorRequirement.operator",
        "PreferredSchedulingTerm.weight",
        "PodAffinityTerm.topologyKey",
        "WeightedPodAffinityTerm.weight",
        "TopologySpreadConstraint.maxSkew",
        "TopologySpreadConstraint.topologyKey",
        "TopologySpreadConstraint.whenUnsatisfiable",
        "PodSchedulingGate.name",
        "PodResourceClaim.name",
        "PodOS.name",
        "PodCondition.type",
        "PodCondition.status",
        "HostIP.ip",
        "PodIP.ip",
        "ContainerStatus.name",
        "ContainerStatus.ready",
        "ContainerStatus.restartCount",
        "ContainerStatus.image",
        "ContainerStatus.imageID",
        "ContainerStateTerminated.exitCode",
        "Taint.key",
        "Taint.effect",
        "NodeCondition.type",
        "NodeCondition.status",
        "NodeAddress.type",
        "NodeAddress.address",
        "DaemonEndpoint.Port",
        "NodeSystemInfo.machineID",
        "NodeSystemInfo.systemUUID",
        "NodeSystemInfo.bootID",
        "NodeSystemInfo.kernelVersion",
        "NodeSystemInfo.osImage",
        "NodeSystemInfo.containerRuntimeVersion",
        "NodeSystemInfo.kubeletVersion",
        "NodeSystemInfo.kubeProxyVersion",
        "NodeSystemInfo.operatingSystem",
        "NodeSystemInfo.architecture",
        "ContainerImage.names",
        "PodResourceClaimStatus.name",
        "GCEPersistentDiskVolumeSource.pdName",
        "AWSElasticBlockStoreVolumeSource.volumeID",
        "ISCSIVolumeSource.targetPortal",
        "ISCSIVolumeSource.iqn",
        "ISCSIVolumeSource.lun",
        "RBDVolumeSource.monitors",
        "RBDVolumeSource.image",
        "LocalVolumeSource.path",
        "CSIPersistentVolumeSource.driver",
        "CSIPersistentVolumeSource.volumeHandle",
        "TopologySelectorLabelRequirement.key",
        "TopologySelectorLabelRequirement.values",
        "StorageClass.provisioner",
        "CSINodeSpec.drivers",
        "CSINodeDriver.name",
        "CSINodeDriver.nodeID",
        "CSINodeDriver.topologyKeys",
        "CSIStorageCapacity.storageClassName",
        "VolumeAttachmentSpec.attacher",
        "VolumeAttachmentSpec.nodeName",
        "VolumeAttachmentStatus.attached",
        "CELDeviceSelector.expression",
        "OpaqueDeviceConfiguration.driver",
        "ResourceSliceSpec.driver",
        "ResourcePool.name",
        "ResourcePool.generation",
        "ResourcePool.resourceSliceCount",
        "Device.name",
        "CounterSet.name",
        "DeviceCounterConsumption.counterSet",
        "DeviceTaint.key",
        "DeviceTaint.effect",
        "CapacityRequestPolicy.default",
        "DeviceClaim.requests",
        "DeviceRequest.name",
        "ExactDeviceRequest.deviceClassName",
        "DeviceSubRequest.name",
        "DeviceSubRequest.deviceClassName",
        "DeviceRequestAllocationResult.request",
        "DeviceRequestAllocationResult.driver",
        "DeviceRequestAllocationResult.pool",
        "DeviceRequestAllocationResult.device",
        "ResourceClaimConsumerReference.resource",
        "ResourceClaimConsumerReference.name",
        "ResourceClaimConsumerReference.uid",
        "PodDisruptionBudgetStatus.disruptionsAllowed",
        "PodDisruptionBudgetStatus.currentHealthy",
        "PodDisruptionBudgetStatus.desiredHealthy",
        "PodDisruptionBudgetStatus.expectedPods",
        "ReplicationControllerStatus.replicas",
        "ReplicaSetSpec.selector",
        "ReplicaSetStatus.replicas",
        "StatefulSetSpec.selector",
        "StatefulSetSpec.serviceName",
        "StatefulSetStatus.replicas",
        "StatefulSetStatus.availableReplicas",
        "DaemonSetSpec.selector",
        "DaemonSetStatus.currentNumberScheduled",
        "DaemonSetStatus.numberMisscheduled",
        "DaemonSetStatus.desiredNumberScheduled",
        "DaemonSetStatus.numberReady",
    }
)
# Go embeds these structs inline: their fields are JSON keys of the containing object.
_INLINE = frozenset(
    {
        "Volume.volumeSource",
        "PersistentVolumeSpec.persistentVolumeSource",
        "DeviceClassConfiguration.deviceConfiguration",
        "DeviceClaimConfiguration.deviceConfiguration",
    }
)

_TIME = k8s.Time.DESCRIPTOR.full_name
_QUANTITY = k8s.Quantity.DESCRIPTOR.full_name
_RAW = k8s.RawExtension.DESCRIPTOR.full_name
_INT_OR_STRING = k8s.IntOrString.DESCRIPTOR.full_name
# The self-described CBOR tag with which RawExtension marks CBOR rather than JSON text.
_CBOR_TAG = b"\xd9\xd9\xf7"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# time.Time{}.Unix(): Go's zero time, shown as null.
_GO_ZERO_SECONDS = -62135596800
_M = TypeVar("_M", bound=Message)
_POOL: Any = k8s.DESCRIPTOR.pool
_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
}


def _replace_each_bad_byte(error: UnicodeError) -> tuple[str, int]:
    assert isinstance(error, UnicodeDecodeError)
    return "\ufffd" * (error.end - error.start), error.end


_EACH_BAD_BYTE = "podfit-k8s-each-bad-byte"
codecs.register_error(_EACH_BAD_BYTE, _replace_each_bad_byte)


# -- the schema, as Go treats it -------------------------------------------------------------------------


class _Shape(enum.Enum):
    SCALAR = enum.auto()
    MESSAGE = enum.auto()
    LIST = enum.auto()
    MAP = enum.auto()


class _Special(enum.Enum):
    """Messages that are a single JSON value rather than an object."""

    NONE = enum.auto()
    TIME = enum.auto()
    QUANTITY = enum.auto()
    RAW = enum.auto()
    INT_OR_STRING = enum.auto()


@dataclass(frozen=True, slots=True)
class _Field:
    """One field of a message with everything decode/encode need, worked out once per message type."""

    name: str
    number: int
    shape: _Shape
    # The scalar's type (FieldDescriptor.TYPE_*), or of a map's values; 0 when the values are messages.
    scalar_type: int
    # The message type of a message field, of a list's items or of a map's values, else "".
    message: str
    # A map's synthetic entry message type, else "".
    entry: str
    special: _Special
    pointer: bool
    value_struct: bool
    omitzero: bool
    always: bool
    inline: bool
    default: Any


_PLANS: dict[str, tuple[_Field, ...]] = {}
_SPECIALS = {
    _TIME: _Special.TIME,
    _QUANTITY: _Special.QUANTITY,
    _RAW: _Special.RAW,
    _INT_OR_STRING: _Special.INT_OR_STRING,
}


def _plan(full_name: str) -> tuple[_Field, ...]:
    """The fields of a message type (by full name), from the schema and the Go tables above."""
    found = _PLANS.get(full_name)
    if found is not None:
        return found
    descriptor: Any = _POOL.FindMessageTypeByName(full_name)
    fields = []
    for field in descriptor.fields:
        key = f"{descriptor.name}.{field.name}"
        element: Any = field.message_type
        entry = ""
        if element is not None and element.GetOptions().map_entry:
            shape = _Shape.MAP
            entry = element.full_name
            element = element.fields_by_name["value"]
            scalar_type = 0 if element.message_type is not None else element.type
            element = element.message_type
        elif field.is_repeated:
            shape = _Shape.LIST
            scalar_type = 0 if element is not None else field.type
        else:
            shape = _Shape.MESSAGE if element is not None else _Shape.SCALAR
            scalar_type = 0 if element is not None else field.type
        message = element.full_name if element is not None else ""
        fields.append(
            _Field(
                name=field.name,
                number=field.number,
                shape=shape,
                scalar_type=scalar_type,
                message=message,
                entry=entry,
                special=_SPECIALS.get(message, _Special.NONE),
                pointer=key in _POINTER_SCALARS,
                value_struct=key in _VALUE_STRUCTS,
                omitzero=key in _OMITZERO,
                always=key in _NO_OMITEMPTY,
                inline=key in _INLINE,
                default=field.default_value if element is None else None,
            )
        )
    plan = _PLANS[full_name] = tuple(fields)
    return plan


# -- decoding ------------------------------------------------------------------------------------------


def decode(kind: str, data: bytes) -> dict[str, Any]:
    """The Kubernetes JSON (as ``json.loads`` gives it) of an object of one of ``KINDS`` in Kubernetes protobuf.

    ``data`` is the bare object (Go's ``Marshal()``) or Kubernetes' ``k8s\\x00`` envelope, whose own
    kind is used when ``kind`` is empty. Fields the schema does not model are left out. Bytes Go could not
    decode raise ConversionError at the path of the field within the object ("" for the whole object)."""
    if len(data) > MAX_BYTES:
        raise ConversionError("", f"is {len(data)} bytes, more than the {MAX_BYTES} a Kubernetes object may be")
    if data.startswith(ENVELOPE_MAGIC):
        kind, data = _open_envelope(kind, data[len(ENVELOPE_MAGIC) :])
    message = _parse(_message_class(kind), data)
    result: dict[str, Any] = {"apiVersion": API_VERSIONS[kind], "kind": kind}
    result.update(_to_json(message, ""))
    return result


def _message_class(kind: str) -> type[Message]:
    if not kind:
        raise ConversionError("kind", "is required for bare protobuf (only the k8s\\x00 envelope names its kind)")
    found = KINDS.get(kind)
    if found is None:
        raise ConversionError("kind", f"{kind!r} is not a kind podfit decodes from protobuf ({', '.join(KINDS)})")
    return found


def _open_envelope(kind: str, data: bytes) -> tuple[str, bytes]:
    """runtime.Unknown: checks what it says it holds and returns (kind, the object's bytes)."""
    envelope = _parse(k8s.Unknown, data)
    meta = envelope.typeMeta
    if not meta.kind:
        raise ConversionError("typeMeta.kind", "is required")
    if kind and meta.kind != kind:
        raise ConversionError("typeMeta.kind", f"is {meta.kind!r}, but a {kind} was expected")
    _message_class(meta.kind)
    if meta.apiVersion != API_VERSIONS[meta.kind]:
        raise ConversionError(
            "typeMeta.apiVersion",
            f"must be {API_VERSIONS[meta.kind]} for a {meta.kind}, not {meta.apiVersion!r}",
        )
    if envelope.contentEncoding:
        raise ConversionError("contentEncoding", f"{envelope.contentEncoding!r} is not supported")
    if envelope.contentType not in ("", PROTOBUF_CONTENT_TYPE):
        raise ConversionError("contentType", f"must be {PROTOBUF_CONTENT_TYPE}, not {envelope.contentType!r}")
    return meta.kind, envelope.raw


def _parse(message_class: type[_M], data: bytes) -> _M:
    message = message_class()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        field, problem = _locate(data, message_class.DESCRIPTOR.full_name, "")
        raise ConversionError(field, f"is not valid Kubernetes protobuf: {problem or exc}") from exc
    return message


def _to_json(message: Message, path: str) -> dict[str, Any]:
    """One message as Go's encoding/json renders the struct it decodes to."""
    result: dict[str, Any] = {}
    plan = _plan(message.DESCRIPTOR.full_name)
    unknown = UnknownFieldSet(message)
    if len(unknown):
        _check_unknown(unknown, plan, path)
    for field in plan:
        name = field.name
        value = getattr(message, name)
        if field.shape is _Shape.SCALAR:
            if message.HasField(name) if field.pointer else value or field.always:
                result[name] = _text(value)
        elif field.shape is _Shape.MESSAGE:
            if field.inline:
                result.update(_to_json(value, path))
            elif field.value_struct:
                if not (field.omitzero and _is_zero_time(value)):
                    result[name] = _message_to_json(field, value, _join(path, name))
            elif message.HasField(name):
                result[name] = _message_to_json(field, value, _join(path, name))
            elif field.always:
                result[name] = None  # a Go pointer without omitempty
        elif value or field.always:
            where = _join(path, name)
            if field.shape is _Shape.MAP:
                try:
                    pairs = list(value.items())
                except UnicodeDecodeError:
                    pairs = _raw_map_items(message, field)
                items = {_text(k): _item_to_json(field, v, f"{where}.{_text(k)}") for k, v in pairs}
                result[name] = items or None
            else:
                result[name] = [_item_to_json(field, v, f"{where}[{i}]") for i, v in enumerate(value)] or None
    return result


def _check_unknown(unknown: UnknownFieldSet, plan: tuple[_Field, ...], path: str) -> None:
    """upb keeps a modelled field sent with the wrong wire type as an unknown field; Go's decoder fails on
    it, and so does this. (Fields the schema does not model are skipped, whatever their wire type.)"""
    names = {field.number: field.name for field in plan}
    for index in range(len(unknown)):
        item = unknown[index]
        name = names.get(item.field_number)
        if name is not None:
            raise ConversionError(
                _join(path, name),
                f"is not valid Kubernetes protobuf: wire type {item.wire_type} does not fit the field",
            )


def _raw_map_items(message: Message, field: _Field) -> list[tuple[bytes, Any]]:
    """A map's entries read off the wire: upb cannot look up keys that are not UTF-8, which Go keeps."""
    value_class = None if field.scalar_type else GetMessageClass(_POOL.FindMessageTypeByName(field.message))
    pairs = []
    for number, chunk in _length_delimited(message.SerializeToString()):
        if number == field.number:
            entry = dict(_length_delimited(chunk))
            raw = entry.get(2, b"")
            pairs.append((entry.get(1, b""), raw if value_class is None else value_class.FromString(raw)))
    return pairs


def _length_delimited(data: bytes) -> list[tuple[int, bytes]]:
    """The (field number, bytes) of the length-delimited fields of well-formed wire data."""
    found = []
    position = 0
    while position < len(data):
        tag, position = read_varint(data, position)
        wire_type = tag & 7
        if wire_type == 0:
            _, position = read_varint(data, position)
        elif wire_type in (1, 5):
            position += 8 if wire_type == 1 else 4
        elif wire_type == 2:
            length, position = read_varint(data, position)
            found.append((tag >> 3, data[position : position + length]))
            position += length
        else:
            raise ConversionError("", f"wire type {wire_type} is not used by Kubernetes objects")
    return found


def _item_to_json(field: _Field, value: Any, path: str) -> Any:
    return _text(value) if field.scalar_type else _message_to_json(field, value, path)


def _message_to_json(field: _Field, value: Message, path: str) -> Any:
    if field.special is _Special.TIME:
        return _time_to_json(value, path)
    if field.special is _Special.QUANTITY:
        return _quantity_to_json(value, path)
    if field.special is _Special.RAW:
        return _raw_to_json(value, path)
    if field.special is _Special.INT_OR_STRING:
        return _int_or_string_to_json(value, path)
    return _to_json(value, path)


def _int_or_string_to_json(value: Message, path: str) -> int | str:
    """intstr.IntOrString's JSON: the integer when its type is 0, the string when it is 1; Go fails to
    render any other type, and so does this."""
    assert isinstance(value, k8s.IntOrString)
    if value.type == 0:
        return value.intVal
    if value.type == 1:
        return str(_text(value.strVal))
    raise ConversionError(path, f"type {value.type} is neither 0 (int) nor 1 (string): impossible IntOrString.Type")


def _text(value: Any) -> Any:
    """proto2 strings arrive as bytes when they are not UTF-8; Go's JSON writes U+FFFD per bad byte."""
    return value.decode("utf-8", errors=_EACH_BAD_BYTE) if isinstance(value, bytes) else value


def _is_zero_time(value: Message) -> bool:
    """Go reads an empty Time as the zero time, and otherwise whole seconds only (nanos are dropped)."""
    assert isinstance(value, k8s.Time)
    return value.ByteSize() == 0 or value.seconds == _GO_ZERO_SECONDS


def _time_to_json(value: Message, path: str) -> str | None:
    """metav1.Time's JSON: null when zero, else RFC 3339 in UTC to the second."""
    assert isinstance(value, k8s.Time)
    if _is_zero_time(value):
        return None
    try:
        return (_EPOCH + timedelta(seconds=value.seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    except OverflowError:
        raise ConversionError(path, f"{value.seconds} seconds since the epoch is outside years 1 to 9999") from None


def _quantity_to_json(value: Message, path: str) -> str:
    """The quantity's text; Go fails to decode a quantity it cannot parse, so this does too."""
    assert isinstance(value, k8s.Quantity)
    if not value.HasField("string"):
        return "0"
    text = _text(value.string)
    try:
        parse_quantity(text)
    except QuantityError as exc:
        raise ConversionError(path, str(exc)) from None
    return str(text)


def _raw_to_json(value: Message, path: str) -> Any:
    """A RawExtension's JSON value (null when unset). Go's JSON fails on raw text that is not JSON, and so
    does this; CBOR, which Go would convert, is refused."""
    assert isinstance(value, k8s.RawExtension)
    if not value.HasField("raw"):
        return None
    if value.raw.startswith(_CBOR_TAG):
        raise ConversionError(path, "is CBOR; podfit reads RawExtension parameters only as JSON")
    check_json(value.raw, path)
    try:
        # Bytes that are not UTF-8 pass through Go's JSON and read back as U+FFFD each.
        return json.loads(value.raw.decode("utf-8", errors=_EACH_BAD_BYTE), parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise ConversionError(path, f"is not valid JSON: {exc}") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _locate(data: bytes, full_name: str, path: str, map_entry: bool = False) -> tuple[str, str]:
    """Walks the wire format along the schema to find where it breaks: (field path, problem), or
    (path, "") when this level is sound. The schema is not recursive, so neither is this deeper than it.
    Inside a map entry the path stays the map's."""
    fields = {field.number: field for field in _plan(full_name)}
    position = 0
    counts: dict[int, int] = {}
    while position < len(data):
        try:
            tag, position = read_varint(data, position)
        except IndexError:
            return path, "a field tag is cut off"
        number, wire_type = tag >> 3, tag & 7
        field = fields.get(number)
        where = path if map_entry else _join(path, field.name if field is not None else f"#{number}")
        if field is not None and field.shape is _Shape.LIST:
            where = f"{where}[{counts.get(number, 0)}]"
            counts[number] = counts.get(number, 0) + 1
        if number == 0:
            return path, "field number 0 is not allowed"
        if wire_type == 0:
            try:
                _, position = read_varint(data, position)
            except IndexError:
                return where, "a varint is cut off"
        elif wire_type in (1, 5):
            position += 8 if wire_type == 1 else 4
            if position > len(data):
                return where, "a fixed-size value is cut off"
        elif wire_type == 2:
            try:
                length, position = read_varint(data, position)
            except IndexError:
                return where, "a length is cut off"
            end = position + length
            if end > len(data):
                return where, f"declares {length} bytes, but only {len(data) - position} remain"
            if field is not None and field.entry:
                found, problem = _locate(data[position:end], field.entry, where, map_entry=True)
                if problem:
                    return found, problem
            elif field is not None and field.message:
                found, problem = _locate(data[position:end], field.message, path if field.inline else where)
                if problem:
                    return found, problem
            position = end
        else:
            return where, f"wire type {wire_type} is not used by Kubernetes objects"
    return path, ""


def read_varint(data: bytes, position: int) -> tuple[int, int]:
    """(value, next position) of the varint at ``position``; IndexError when it is cut off or runs past
    the ten bytes a 64-bit varint may take."""
    result = shift = 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
        if shift >= 70:
            raise IndexError("varint too long")


# -- encoding ------------------------------------------------------------------------------------------


def encode(obj: Mapping[str, Any]) -> bytes:
    """The Kubernetes protobuf of an object of one of ``KINDS`` given as Kubernetes JSON: the bytes Go's
    ``Marshal()`` writes for the modelled fields (other keys are ignored, as the JSON converter ignores them)."""
    if not isinstance(obj, Mapping):
        raise ConversionError("", f"a Kubernetes object must be a mapping, not {type(obj).__name__}")
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ConversionError("kind", f"is required ({', '.join(KINDS)})")
    message = _message_class(kind)()
    api_version = obj.get("apiVersion", API_VERSIONS[kind])
    if api_version != API_VERSIONS[kind]:
        raise ConversionError("apiVersion", f"must be {API_VERSIONS[kind]} for a {kind}, not {api_version!r}")
    _from_json(obj, message, "")
    return message.SerializeToString(deterministic=True)


def _from_json(data: Any, message: Message, path: str) -> None:
    if not isinstance(data, Mapping):
        raise ConversionError(path, f"must be an object, not {type(data).__name__}")
    for field in _plan(message.DESCRIPTOR.full_name):
        name = field.name
        where = _join(path, name)
        if field.inline:
            inline = getattr(message, name)
            inline.SetInParent()
            _from_json(data, inline, path)
            continue
        value = data.get(name)
        if field.shape is _Shape.SCALAR:
            if value is not None:
                setattr(message, name, _scalar(field.scalar_type, value, where))
            elif not field.pointer:
                # Go writes value fields whether or not they are zero.
                setattr(message, name, field.default)
        elif field.shape is _Shape.MESSAGE:
            if value is not None or field.value_struct:
                sub = getattr(message, name)
                sub.SetInParent()
                _message_from_json(field, value, sub, where)
        elif value is None:
            continue
        elif field.shape is _Shape.MAP:
            if not isinstance(value, Mapping):
                raise ConversionError(where, f"must be an object, not {type(value).__name__}")
            target = getattr(message, name)
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ConversionError(where, f"keys must be strings, not {type(key).__name__}")
                if field.scalar_type:
                    target[key] = _scalar(field.scalar_type, item, f"{where}.{key}")
                else:
                    _message_from_json(field, item, target[key], f"{where}.{key}")
        else:
            if not isinstance(value, list | tuple):
                raise ConversionError(where, f"must be a list, not {type(value).__name__}")
            items = getattr(message, name)
            for i, item in enumerate(value):
                if field.scalar_type:
                    items.append(_scalar(field.scalar_type, item, f"{where}[{i}]"))
                else:
                    _message_from_json(field, item, items.add(), f"{where}[{i}]")


def _message_from_json(field: _Field, value: Any, message: Message, path: str) -> None:
    if field.special is _Special.TIME:
        assert isinstance(message, k8s.Time)
        if value is not None:
            seconds = _parse_time(value, path)
            if seconds != _GO_ZERO_SECONDS:
                # Go writes whole seconds and a zero nanos field; the zero time is an empty message.
                message.seconds, message.nanos = seconds, 0
    elif field.special is _Special.QUANTITY:
        assert isinstance(message, k8s.Quantity)
        message.string = _quantity_text(value, path)
    elif field.special is _Special.RAW:
        assert isinstance(message, k8s.RawExtension)
        if value is not None:
            # Go keeps null as no raw text at all.
            message.raw = _go_json(value, path)
    elif field.special is _Special.INT_OR_STRING:
        assert isinstance(message, k8s.IntOrString)
        # Go writes all three fields: a JSON string is type 1, a JSON integer (an int32) type 0.
        if isinstance(value, str):
            message.type, message.intVal, message.strVal = 1, 0, value
        else:
            number = _scalar(FieldDescriptor.TYPE_INT32, value, path)
            message.type, message.intVal, message.strVal = 0, number, ""
    else:
        # null (a value struct or a list item given as null) is Go's zero struct.
        _from_json({} if value is None else value, message, path)


def _parse_time(value: Any, path: str) -> int:
    """Whole seconds of an RFC 3339 time, as metav1.Time reads it (fractions dropped, rounding down)."""
    if not isinstance(value, str):
        raise ConversionError(path, f"must be an RFC 3339 time string, not {type(value).__name__}")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None or "T" not in value:
        raise ConversionError(path, f"must be an RFC 3339 time such as 2024-01-02T03:04:05Z, not {value!r}")
    return (moment - _EPOCH) // timedelta(seconds=1)


def _quantity_text(value: Any, path: str) -> str:
    """A quantity's text; like Go's JSON decoding, numbers are accepted and null is zero."""
    if value is None:
        return "0"
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConversionError(path, f"must be a quantity string such as '500m', not {type(value).__name__}")
    try:
        parse_quantity(value)
    except QuantityError as exc:
        raise ConversionError(path, str(exc)) from None
    return value if isinstance(value, str) else str(value)


# encoding/json's escapes for HTML and JavaScript, which it applies to a RawExtension's text too. These
# characters can only be inside JSON strings, so replacing them in the text is safe.
_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_GO_ESCAPED = str.maketrans(_GO_ESCAPES)


def _go_json(value: Any, path: str) -> bytes:
    """A JSON value as the compact text Go's JSON writes for it (keys in the given order), as a
    RawExtension decoded from that JSON holds it."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return text.translate(_GO_ESCAPED).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        raise ConversionError(path, f"must be a JSON value: {exc}") from None


def _scalar(scalar_type: int, value: Any, path: str) -> Any:
    if scalar_type == FieldDescriptor.TYPE_STRING:
        if not isinstance(value, str):
            raise ConversionError(path, f"must be a string, not {type(value).__name__}")
        return value
    if scalar_type == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            raise ConversionError(path, f"must be a boolean, not {type(value).__name__}")
        return value
    low, high = _INT_RANGES[scalar_type]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConversionError(path, f"must be an integer, not {type(value).__name__}")
    if not low <= value <= high:
        raise ConversionError(path, f"{value} is outside [{low}, {high}]")
    return value


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
