"""Kubernetes JSON <-> podfit.v1 messages: the one converter the SDK, the CLI and the server share.

The podfit.v1 messages use Kubernetes' field names, so the proto3 JSON mapping of a message *is* the
Kubernetes JSON of the object. Conversion is therefore protobuf's own json_format plus the few
Kubernetes shapes proto cannot spell (IntOrString fields), and unknown Kubernetes fields are ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from podfit.k8s import protobuf
from podfit.k8s.errors import ConversionError as ConversionError  # re-exported: where converters raise it
from podfit.k8s.limits import UntrustedInputError, bounded, check_json, echo
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import objects_pb2 as ob
from podfit.v1 import resource_pb2 as rs
from podfit.v1 import storage_pb2 as st

# Kubernetes kind -> (ClusterObject oneof field, message class, ObjectKind enum value).
KINDS: dict[str, tuple[str, type[Message], int]] = {
    "Node": ("node", ob.Node, cc.OBJECT_KIND_NODE),
    "Pod": ("pod", ob.Pod, cc.OBJECT_KIND_POD),
    "Namespace": ("namespace", ob.Namespace, cc.OBJECT_KIND_NAMESPACE),
    "PodDisruptionBudget": ("pod_disruption_budget", ob.PodDisruptionBudget, cc.OBJECT_KIND_POD_DISRUPTION_BUDGET),
    "Service": ("service", ob.Service, cc.OBJECT_KIND_SERVICE),
    "ReplicaSet": ("replica_set", ob.ReplicaSet, cc.OBJECT_KIND_REPLICA_SET),
    "StatefulSet": ("stateful_set", ob.StatefulSet, cc.OBJECT_KIND_STATEFUL_SET),
    "ReplicationController": (
        "replication_controller",
        ob.ReplicationController,
        cc.OBJECT_KIND_REPLICATION_CONTROLLER,
    ),
    "Job": ("job", ob.Job, cc.OBJECT_KIND_JOB),
    "DaemonSet": ("daemon_set", ob.DaemonSet, cc.OBJECT_KIND_DAEMON_SET),
    "StorageClass": ("storage_class", st.StorageClass, cc.OBJECT_KIND_STORAGE_CLASS),
    "PersistentVolume": ("persistent_volume", st.PersistentVolume, cc.OBJECT_KIND_PERSISTENT_VOLUME),
    "PersistentVolumeClaim": (
        "persistent_volume_claim",
        st.PersistentVolumeClaim,
        cc.OBJECT_KIND_PERSISTENT_VOLUME_CLAIM,
    ),
    "CSINode": ("csi_node", st.CSINode, cc.OBJECT_KIND_CSI_NODE),
    "CSIDriver": ("csi_driver", st.CSIDriver, cc.OBJECT_KIND_CSI_DRIVER),
    "CSIStorageCapacity": ("csi_storage_capacity", st.CSIStorageCapacity, cc.OBJECT_KIND_CSI_STORAGE_CAPACITY),
    "VolumeAttachment": ("volume_attachment", st.VolumeAttachment, cc.OBJECT_KIND_VOLUME_ATTACHMENT),
    "DeviceClass": ("device_class", rs.DeviceClass, cc.OBJECT_KIND_DEVICE_CLASS),
    "ResourceSlice": ("resource_slice", rs.ResourceSlice, cc.OBJECT_KIND_RESOURCE_SLICE),
    "ResourceClaim": ("resource_claim", rs.ResourceClaim, cc.OBJECT_KIND_RESOURCE_CLAIM),
}
FIELD_TO_KIND = {field: kind for kind, (field, _, _) in KINDS.items()}
ENUM_TO_KIND = {enum: kind for kind, (_, _, enum) in KINDS.items()}
KIND_TO_ENUM = {kind: enum for kind, (_, _, enum) in KINDS.items()}
# CLI / user spellings of kinds, as kubectl accepts them.
KIND_ALIASES = {
    **{k.lower(): k for k in KINDS},
    "nodes": "Node",
    "no": "Node",
    "pods": "Pod",
    "po": "Pod",
    "namespaces": "Namespace",
    "ns": "Namespace",
    "poddisruptionbudgets": "PodDisruptionBudget",
    "pdb": "PodDisruptionBudget",
    "pdbs": "PodDisruptionBudget",
    "services": "Service",
    "svc": "Service",
    "replicasets": "ReplicaSet",
    "rs": "ReplicaSet",
    "statefulsets": "StatefulSet",
    "sts": "StatefulSet",
    "replicationcontrollers": "ReplicationController",
    "rc": "ReplicationController",
    "jobs": "Job",
    "daemonsets": "DaemonSet",
    "ds": "DaemonSet",
    "storageclasses": "StorageClass",
    "sc": "StorageClass",
    "persistentvolumes": "PersistentVolume",
    "pv": "PersistentVolume",
    "persistentvolumeclaims": "PersistentVolumeClaim",
    "pvc": "PersistentVolumeClaim",
    "csinodes": "CSINode",
    "csidrivers": "CSIDriver",
    "csistoragecapacities": "CSIStorageCapacity",
    "volumeattachments": "VolumeAttachment",
    "deviceclasses": "DeviceClass",
    "resourceslices": "ResourceSlice",
    "resourceclaims": "ResourceClaim",
}


def canonical_kind(name: str) -> str:
    kind = KIND_ALIASES.get(name.lower())
    if kind is None:
        raise ConversionError("kind", f"{echo(name)} is not a kind podfit holds ({', '.join(KINDS)})")
    return kind


def _normalise(kind: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """Rewrites the Kubernetes shapes proto3 JSON cannot parse directly (IntOrString -> string)."""
    result = dict(data)
    if kind == "PodDisruptionBudget" and isinstance(result.get("spec"), Mapping):
        spec = dict(result["spec"])
        for name in ("minAvailable", "maxUnavailable"):
            value = spec.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                spec[name] = str(value)
        result["spec"] = spec
    return result


def manifest_to_message(data: Mapping[str, Any], kind: str | None = None) -> Message:
    """A Kubernetes object (as decoded JSON/YAML) as its typed podfit.v1 message."""
    if not isinstance(data, Mapping):
        raise ConversionError("", f"a Kubernetes object must be a mapping, not {type(data).__name__}")
    kind = canonical_kind(kind or str(data.get("kind") or ""))
    message = KINDS[kind][1]()
    try:
        json_format.ParseDict(_normalise(kind, data), message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise ConversionError(_field_of(str(exc)), bounded(str(exc), 400)) from exc
    return message


def manifest_to_object(data: Mapping[str, Any], kind: str | None = None) -> cc.ClusterObject:
    kind = canonical_kind(kind or str(data.get("kind") or "")) if isinstance(data, Mapping) else ""
    message = manifest_to_message(data, kind or None)
    obj = cc.ClusterObject()
    getattr(obj, KINDS[kind][0]).CopyFrom(message)
    return obj


# proto3 JSON writes int64 as strings; Kubernetes JSON has numbers there.
_INT64 = frozenset({FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT64})


def message_to_data(message: Message, *, all_fields: bool = False) -> dict[str, Any]:
    """The protobuf JSON mapping of ``message`` with its 64-bit integers as JSON numbers, as Kubernetes JSON
    writes them (``generation``, ``sizeBytes``, ``tolerationSeconds``) and people compare them; the
    mapping's strings are only there for JavaScript, and protobuf's parser accepts either. ``all_fields``
    also writes fields left at their defaults."""
    body: dict[str, Any] = json_format.MessageToDict(message, always_print_fields_with_no_presence=all_fields)
    _int64_as_numbers(message, body)
    return body


def _int64_as_numbers(message: Message, body: dict[str, Any]) -> None:
    """Rewrites ``body`` (``message``'s JSON mapping) in place, led by the descriptors rather than key names."""
    for field in message.DESCRIPTOR.fields:
        if field.json_name not in body:
            continue
        value = getattr(message, field.name)
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            target = entry.fields_by_name["value"]
            for key, item in value.items():
                if target.cpp_type in _INT64:
                    body[field.json_name][str(key)] = int(item)
                elif target.message_type is not None and not target.message_type.full_name.startswith("google."):
                    _int64_as_numbers(item, body[field.json_name][str(key)])
        elif entry is not None:
            if entry.full_name.startswith("google."):
                continue  # well-known types have JSON forms of their own (Timestamp, Struct, ...)
            if field.is_repeated:
                for item, item_body in zip(value, body[field.json_name], strict=True):
                    _int64_as_numbers(item, item_body)
            else:
                _int64_as_numbers(value, body[field.json_name])
        elif field.cpp_type in _INT64:
            body[field.json_name] = [int(v) for v in value] if field.is_repeated else int(value)


def message_to_manifest(message: Message, kind: str) -> dict[str, Any]:
    """The Kubernetes JSON of a typed message (apiVersion/kind filled in when absent)."""
    data = message_to_data(message)
    data.setdefault("kind", kind)
    data.setdefault("apiVersion", API_VERSIONS[kind])
    return data


def object_kind_and_message(obj: cc.ClusterObject) -> tuple[str, Message]:
    """The Kubernetes kind and typed message of a ClusterObject (kubernetes_json or _protobuf is parsed)."""
    which = obj.WhichOneof("object")
    if which is None:
        raise ConversionError("object", "is empty: set one of node, pod, ..., kubernetes_json")
    if which == "kubernetes_json":
        try:
            check_json(obj.kubernetes_json)
            data = json.loads(obj.kubernetes_json)
        except UntrustedInputError as exc:
            raise ConversionError("kubernetes_json", exc.message) from None
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise ConversionError("kubernetes_json", f"is not valid JSON: {bounded(str(exc), 200)}") from None
        if not isinstance(data, dict):
            raise ConversionError("kubernetes_json", "must be a JSON object")
        kind = canonical_kind(str(data.get("kind") or "")) if data.get("kind") else ""
        if not kind:
            raise ConversionError("kubernetes_json.kind", "is required to tell what the object is")
        return kind, manifest_to_message(data, kind)
    if which == "kubernetes_protobuf":
        try:
            data = protobuf.decode(obj.kubernetes_protobuf.kind, obj.kubernetes_protobuf.data)
        except ConversionError as exc:
            where = "kubernetes_protobuf.data"
            raise ConversionError(f"{where}.{exc.field}" if exc.field else where, exc.message) from exc
        return data["kind"], manifest_to_message(data, data["kind"])
    return FIELD_TO_KIND[which], getattr(obj, which)


def object_to_manifest(obj: cc.ClusterObject) -> dict[str, Any]:
    kind, message = object_kind_and_message(obj)
    return message_to_manifest(message, kind)


# The kinds that also have a Kubernetes protobuf form take their apiVersion from that table.
API_VERSIONS = {
    **protobuf.API_VERSIONS,
    "Namespace": "v1",
    "Service": "v1",
    "ReplicationController": "v1",
    "PodDisruptionBudget": "policy/v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "Job": "batch/v1",
    "DaemonSet": "apps/v1",
}
assert set(API_VERSIONS) == set(KINDS), "every kind podfit holds needs its apiVersion"


def _field_of(parse_error: str) -> str:
    """json_format nests 'Failed to parse <field> field: ...'; join the names into a field path."""
    parts = []
    rest = parse_error
    marker = "Failed to parse "
    while marker in rest:
        rest = rest.split(marker, 1)[1]
        name, sep, rest = rest.partition(" field")
        if not sep:
            break
        parts.append(name)
    return ".".join(parts)
