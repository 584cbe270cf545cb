"""podfit.v1 messages <-> domain records and decisions."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from google.protobuf import json_format
from podfit.k8s.convert import ENUM_TO_KIND, KINDS, ConversionError, object_kind_and_message
from podfit.server.cache.cluster_cache import Change, ClusterCache, Delete, Upsert
from podfit.server.engine import Decision
from podfit.server.framework.runtime import NodeScores
from podfit.server.framework.status import Code, Status
from podfit.server.model import Kind, Pod, ValidationError
from podfit.server.model.objects import object_from_k8s, pod_from_parts, pod_spec_fields
from podfit.server.transport.errors import NotFoundError
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import objects_pb2 as ob
from podfit.v1 import scheduler_pb2 as sc

STATUS_CODES = {
    Code.SUCCESS: sc.STATUS_CODE_SUCCESS,
    Code.UNSCHEDULABLE: sc.STATUS_CODE_UNSCHEDULABLE,
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: sc.STATUS_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE,
    Code.ERROR: sc.STATUS_CODE_ERROR,
}


def _located(exc: ValidationError | ConversionError, prefix: str) -> ValidationError:
    return ValidationError(f"{prefix}.{exc.field}" if exc.field else prefix, exc.message)


class _SpecMemo:
    """Pod spec (without nodeName) bytes -> the Pod fields derived from it. Replicas of a workload
    share their spec, so ingesting them converts one spec instead of thousands."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._fields: OrderedDict[bytes, dict[str, Any]] = OrderedDict()

    def fields(self, spec: ob.PodSpec, path: str) -> dict[str, Any]:
        node_name = spec.node_name
        spec.ClearField("node_name")
        try:
            key = spec.SerializeToString(deterministic=True)
            found = self._fields.get(key)
            if found is not None:
                self._fields.move_to_end(key)
                return found
            fields = pod_spec_fields(json_format.MessageToDict(spec), path)
        finally:
            spec.node_name = node_name
        self._fields[key] = fields
        if len(self._fields) > self._size:
            self._fields.popitem(last=False)
        return fields


_SPECS = _SpecMemo()


def pod_from_message(message: ob.Pod, path: str) -> Pod:
    meta = json_format.MessageToDict(message.metadata)
    if not meta.get("name"):
        raise ValidationError(f"{path}.metadata.name", "is required")
    fields = _SPECS.fields(message.spec, f"{path}.spec")
    status = json_format.MessageToDict(message.status)
    return pod_from_parts(meta, fields, message.spec.node_name, status, path)


def upsert_from_object(obj: cc.ClusterObject, path: str, expected_kind: Kind | None = None) -> Upsert:
    """Converts one ClusterObject; the typed message is what Get/List later return."""
    try:
        kind_name, message = object_kind_and_message(obj)
    except ConversionError as exc:
        raise _located(exc, path) from exc
    kind = Kind(kind_name)
    if expected_kind is not None and kind is not expected_kind:
        raise ValidationError(path, f"is a {kind.value}, but this request is about {expected_kind.value} objects")
    domain: Any
    if isinstance(message, ob.Pod):
        domain = pod_from_message(message, f"{path}.pod")
    else:
        manifest: dict[str, Any] = json_format.MessageToDict(message)
        domain = object_from_k8s(kind, manifest, f"{path}.{KINDS[kind.value][0]}")
    typed = cc.ClusterObject()
    getattr(typed, KINDS[kind.value][0]).CopyFrom(message)
    return Upsert(kind, domain, typed.SerializeToString(deterministic=True))


def kind_from_enum(value: int, path: str) -> Kind:
    name = ENUM_TO_KIND.get(value)
    if name is None:
        raise ValidationError(path, "must name a kind (OBJECT_KIND_NODE, OBJECT_KIND_POD, ...)")
    return Kind(name)


def delete_from_key(key: cc.ObjectKey, path: str) -> Delete:
    kind = kind_from_enum(key.kind, f"{path}.kind")
    if not key.name:
        raise ValidationError(f"{path}.name", "is required")
    return Delete(kind, key.namespace if kind.namespaced else "", key.name, key.resource_version)


def changes_from_updates(updates: Any, path: str = "updates") -> list[Change]:
    """Converts every update first, so a bad one rejects the whole batch before anything is applied."""
    changes: list[Change] = []
    for i, update in enumerate(updates):
        which = update.WhichOneof("operation")
        where = f"{path}[{i}]"
        if which == "upsert":
            changes.append(upsert_from_object(update.upsert, f"{where}.upsert"))
        elif which == "delete":
            changes.append(delete_from_key(update.delete, f"{where}.delete"))
        else:
            raise ValidationError(where, "must set upsert or delete")
    return changes


def object_from_source(source: bytes) -> cc.ClusterObject:
    obj = cc.ClusterObject()
    obj.ParseFromString(source)
    return obj


def pod_from_reference(ref: sc.PodReference, cache: ClusterCache, path: str = "pod") -> Pod:
    which = ref.WhichOneof("source")
    if which == "cached":
        if not ref.cached.name:
            raise ValidationError(f"{path}.cached.name", "is required")
        entry = cache.get(Kind.POD, ref.cached.namespace, ref.cached.name)
        if entry is None:
            raise NotFoundError(f"pod {ref.cached.namespace or 'default'}/{ref.cached.name} is not in the cache")
        assert isinstance(entry.obj, Pod)
        return entry.obj
    if which == "pod":
        return pod_from_message(ref.pod, f"{path}.pod")
    if which == "kubernetes_json":
        wrapper = cc.ClusterObject(kubernetes_json=ref.kubernetes_json)
        try:
            kind, message = object_kind_and_message(wrapper)
        except ConversionError as exc:
            raise _located(exc, path) from exc
        if kind != "Pod":
            raise ValidationError(f"{path}.kubernetes_json.kind", f"must be Pod, not {kind}")
        assert isinstance(message, ob.Pod)
        return pod_from_message(message, f"{path}.kubernetes_json")
    raise ValidationError(path, "must set pod, kubernetes_json or cached")


def verdict_message(node_name: str, status: Status | None) -> sc.NodeVerdict:
    if status is None:
        return sc.NodeVerdict(node_name=node_name, fits=True, code=sc.STATUS_CODE_SUCCESS)
    return sc.NodeVerdict(
        node_name=node_name,
        fits=False,
        plugin=status.plugin,
        reasons=list(status.reasons),
        code=STATUS_CODES.get(status.code, sc.STATUS_CODE_ERROR),
    )


def score_message(scores: NodeScores) -> sc.NodeScore:
    return sc.NodeScore(
        node_name=scores.node_name,
        total=scores.total,
        plugins=[sc.PluginScore(plugin=name, score=value) for name, value in scores.plugins.items()],
    )


def verdicts(decision: Decision) -> list[sc.NodeVerdict]:
    return [verdict_message(v.node_name, v.status) for v in decision.verdicts]


def assumed_source(ref: sc.PodReference, cache: ClusterCache, node_name: str) -> bytes:
    """The typed pod message of a reservation: the pod as given, bound to ``node_name``."""
    which = ref.WhichOneof("source")
    obj = cc.ClusterObject()
    if which == "cached":
        entry = cache.get(Kind.POD, ref.cached.namespace, ref.cached.name)
        if entry is None:
            raise NotFoundError(f"pod {ref.cached.namespace or 'default'}/{ref.cached.name} is not in the cache")
        obj = object_from_source(entry.source)
    elif which == "pod":
        obj.pod.CopyFrom(ref.pod)
    else:
        _, message = object_kind_and_message(cc.ClusterObject(kubernetes_json=ref.kubernetes_json))
        obj.pod.MergeFromString(message.SerializeToString())
    obj.pod.spec.node_name = node_name
    obj.pod.status.nominated_node_name = ""
    return obj.SerializeToString(deterministic=True)
