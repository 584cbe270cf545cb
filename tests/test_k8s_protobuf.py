"""Kubernetes protobuf <-> Kubernetes JSON, checked against bytes and JSON that Kubernetes' own Go code made.

tests/k8s_protobuf/vectors.json comes from tests/k8s_protobuf/gen (k8s.io/api v0.37): for objects of every
kind podfit decodes from protobuf (``protobuf.KINDS``), ``obj.Marshal()``, the ``k8s\\x00`` envelope of
Kubernetes' protobuf serializer, and ``json.Marshal(obj)``.
The only normalisation: vectors that set fields podfit does not model (``modelledOnly`` false) are
compared after dropping those fields from the Go JSON (``_prune``); every other vector must decode to
exactly Go's JSON, and encode to exactly Go's bytes.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message
from grpcplugin import expander_pb2, expander_pb2_grpc
from podfit.k8s import convert, protobuf
from podfit.k8s.convert import ConversionError, manifest_to_message, manifest_to_object, object_kind_and_message
from podfit.k8s.protobuf import ENVELOPE_MAGIC, MAX_BYTES, decode, encode
from podfit.k8s.v1 import apps_pb2 as k8s_apps
from podfit.k8s.v1 import batch_pb2 as k8s_batch
from podfit.k8s.v1 import core_pb2 as k8s
from podfit.k8s.v1 import policy_pb2 as k8s_policy
from podfit.k8s.v1 import resource_pb2 as k8s_resource
from podfit.k8s.v1 import storage_pb2 as k8s_storage
from podfit.server.model import Kind, ValidationError
from podfit.server.model.decode import object_from_k8s
from podfit.v1 import cluster_cache_pb2 as cc

VECTORS: list[dict[str, Any]] = json.loads((Path(__file__).parent / "k8s_protobuf" / "vectors.json").read_text())
BY_NAME = {vector["name"]: vector for vector in VECTORS}
MODELLED = [vector for vector in VECTORS if vector["modelledOnly"]]
# Messages that are one JSON value (a string, any JSON value, or null) rather than an object.
LEAVES = {
    k8s.Time.DESCRIPTOR.full_name,
    k8s.Quantity.DESCRIPTOR.full_name,
    k8s.RawExtension.DESCRIPTOR.full_name,
    k8s.IntOrString.DESCRIPTOR.full_name,
}
KINDS = list(protobuf.KINDS)


def _params(vectors: list[dict[str, Any]]) -> list[Any]:
    return [pytest.param(vector, id=vector["name"]) for vector in vectors]


def _bytes(vector: dict[str, Any], key: str = "protobuf_b64") -> bytes:
    return base64.b64decode(vector[key])


def _descriptor(kind: str) -> Any:
    return protobuf.KINDS[kind].DESCRIPTOR


def _element(field: Any) -> Any:
    """The message type of a field's values (a map's value type for maps), or None for scalars."""
    message = field.message_type
    if message is not None and message.GetOptions().map_entry:
        return message.fields_by_name["value"].message_type
    return message


def _is_map(field: Any) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _prune(data: Any, descriptor: Any) -> Any:
    """The Go JSON without the fields the schema does not model (Volume's source is inline in JSON)."""
    result = {}
    for field in descriptor.fields:
        if f"{descriptor.name}.{field.name}" in protobuf._INLINE:
            result.update(_prune(data, field.message_type))
            continue
        if field.name not in data:
            continue
        value, element = data[field.name], _element(field)
        if element is None or element.full_name in LEAVES or value is None:
            result[field.name] = value
        elif _is_map(field):
            result[field.name] = {key: _prune(item, element) for key, item in value.items()}
        elif field.is_repeated:
            result[field.name] = [_prune(item, element) for item in value]
        else:
            result[field.name] = _prune(value, element)
    return result


def _expected(vector: dict[str, Any]) -> dict[str, Any]:
    kind = vector["kind"]
    pruned = {"apiVersion": protobuf.API_VERSIONS[kind], "kind": kind, **_prune(vector["json"], _descriptor(kind))}
    if vector["modelledOnly"]:
        assert pruned == vector["json"], "a vector marked modelledOnly sets a field the schema does not model"
    return pruned


def _plain(value: Any) -> Any:
    """A model object as nested dicts and lists: some model classes (DRA devices) compare by identity."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value) if field.compare
        }
        return type(value).__name__, fields
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


# -- decoding: exactly Go's JSON ---------------------------------------------------------------------------


@pytest.mark.parametrize("vector", _params(VECTORS))
def test_decode_gives_the_json_go_gives(vector: dict[str, Any]) -> None:
    assert decode(vector["kind"], _bytes(vector)) == _expected(vector)


@pytest.mark.parametrize("vector", _params(VECTORS))
def test_the_converters_read_decoded_protobuf_as_they_read_go_json(vector: dict[str, Any]) -> None:
    kind, go_json = vector["kind"], vector["json"]
    decoded = decode(kind, _bytes(vector))
    assert manifest_to_message(decoded, kind) == manifest_to_message(go_json, kind)

    def model(data: dict[str, Any]) -> object:
        try:
            return _plain(object_from_k8s(Kind(kind), data, "object"))
        except ValidationError as exc:
            return f"ValidationError: {exc}"

    assert model(decoded) == model(go_json)


@pytest.mark.parametrize("vector", _params(VECTORS))
def test_the_envelope_names_the_kind(vector: dict[str, Any]) -> None:
    envelope = _bytes(vector, "envelope_b64")
    assert envelope.startswith(ENVELOPE_MAGIC)
    expected = decode(vector["kind"], _bytes(vector))
    assert decode("", envelope) == expected
    assert decode(vector["kind"], envelope) == expected


# -- encoding: the inverse, and Go's bytes -----------------------------------------------------------------


# Vectors with a Go pointer to a zero time, which JSON shows as null; decoding that JSON leaves the pointer nil,
# in Go and in encode(), so those fields do not come back.
NULL_POINTERS = {"pod-zero-pointers", "node-zero-values"}


@pytest.mark.parametrize("vector", _params(VECTORS))
def test_encode_round_trips_every_modelled_field(vector: dict[str, Any]) -> None:
    expected = _expected(vector)
    round_trip = decode(vector["kind"], encode(expected))
    assert round_trip == decode(vector["kind"], _bytes(vector, "json_protobuf_b64"))
    if vector["name"] not in NULL_POINTERS:
        assert round_trip == expected


@pytest.mark.parametrize("vector", _params(MODELLED))
def test_encode_writes_the_bytes_go_writes(vector: dict[str, Any]) -> None:
    # What Go's Marshal() writes for the object it decodes from the same JSON.
    assert encode(vector["json"]) == _bytes(vector, "json_protobuf_b64")


# Kinds podfit holds that have no Kubernetes protobuf schema yet (send them as JSON or typed messages).
NO_PROTOBUF_SCHEMA: set[str] = set()


def test_every_kind_podfit_holds_but_those_listed_has_a_kubernetes_protobuf_schema() -> None:
    assert set(protobuf.KINDS) == set(convert.KINDS) - NO_PROTOBUF_SCHEMA
    for kind in protobuf.KINDS:
        typed = convert.KINDS[kind][1]
        assert convert.message_to_manifest(typed(), kind)["apiVersion"] == protobuf.API_VERSIONS[kind]
    names = {kind: message.DESCRIPTOR.name for kind, message in protobuf.KINDS.items()}
    # core.proto's ResourceClaim is core/v1's (a pod's claim by name), so the kind is named apart.
    assert {kind: name for kind, name in names.items() if name != kind} == {"ResourceClaim": "DRAResourceClaim"}


def _schema_keys(descriptor: Any) -> dict[str, Any]:
    """A schema message's fields by JSON key (an inline struct's fields are the containing object's keys)."""
    keys = {}
    for field in descriptor.fields:
        if f"{descriptor.name}.{field.name}" in protobuf._INLINE:
            keys.update(_schema_keys(field.message_type))
        else:
            keys[field.name] = field
    return keys


def _shape(field: Any) -> str:
    return "map" if _is_map(field) else "list" if field.is_repeated else "one"


def _not_in_schema(typed: Any, schema: Any, path: str, found: list[str]) -> list[str]:
    keys = _schema_keys(schema)
    for field in typed.fields:
        if not path and field.json_name in ("apiVersion", "kind"):
            continue  # the envelope's, not the object's
        where = f"{path}.{field.json_name}" if path else field.json_name
        counterpart = keys.get(field.json_name)
        if counterpart is None or _shape(counterpart) != _shape(field):
            found.append(where)
            continue
        typed_element, schema_element = _element(field), _element(counterpart)
        if typed_element is None or schema_element is None or schema_element.full_name in LEAVES:
            continue  # scalars, and values proto3 spells its own way (Timestamp, Struct, quantity strings)
        _not_in_schema(typed_element, schema_element, where, found)
    return found


@pytest.mark.parametrize("kind", KINDS)
def test_the_schema_models_every_field_of_the_typed_message(kind: str) -> None:
    # Otherwise an object sent as Kubernetes protobuf would lose what the same object in JSON keeps.
    typed = convert.KINDS[kind][1].DESCRIPTOR
    assert _not_in_schema(typed, _descriptor(kind), "", []) == TYPED_ONLY.get(kind, [])


# The typed WorkloadSpec is shared by four kinds, but Kubernetes' JobSpec and DaemonSetSpec have no
# replicas: their JSON cannot carry one either (strict field validation refuses it as an unknown field).
TYPED_ONLY = {"Job": ["spec.replicas"], "DaemonSet": ["spec.replicas"]}


@pytest.mark.parametrize("vector", _params(VECTORS))
def test_kubernetes_protobuf_objects_convert_as_their_kubernetes_json_does(vector: dict[str, Any]) -> None:
    kind = vector["kind"]
    expected = manifest_to_object(vector["json"])
    expected_message = getattr(expected, convert.KINDS[kind][0])
    for sent_kind, data in (
        (kind, _bytes(vector)),
        ("", _bytes(vector, "envelope_b64")),
        (kind, _bytes(vector, "envelope_b64")),
    ):
        obj = cc.ClusterObject(kubernetes_protobuf=cc.KubernetesProtobuf(kind=sent_kind, data=data))
        assert object_kind_and_message(obj) == (kind, expected_message)


def test_encode_ignores_fields_it_does_not_model() -> None:
    pod = {"kind": "Pod", "metadata": {"name": "p", "managedFields": [{}]}, "spec": {"dnsConfig": {}}}
    assert encode(pod) == encode({"kind": "Pod", "metadata": {"name": "p"}})


# -- the vectors test every modelled field and the Go tables -----------------------------------------------


def _schema_fields(descriptor: Any, found: set[str]) -> set[str]:
    for field in descriptor.fields:
        found.add(f"{descriptor.name}.{field.name}")
        element = _element(field)
        if element is not None and element.full_name not in LEAVES:
            _schema_fields(element, found)
    return found


def _set_fields(data: Any, descriptor: Any, found: set[str], *, zero: bool) -> set[str]:
    """The fields a JSON object sets to a non-zero value (or, with ``zero``, to a zero value)."""
    for field in descriptor.fields:
        key = f"{descriptor.name}.{field.name}"
        if key in protobuf._INLINE:
            found.add(key)
            _set_fields(data, field.message_type, found, zero=zero)
            continue
        if field.name not in data:
            continue
        value, element = data[field.name], _element(field)
        if (value in (None, "", 0, False, [], {})) == zero:
            found.add(key)
        if element is None or element.full_name in LEAVES or not value:
            continue
        items = value.values() if _is_map(field) else value if field.is_repeated else [value]
        for item in items:
            _set_fields(item, element, found, zero=zero)
    return found


# Fields of a message that models no field of its own (CSINode.status, a value struct Go's JSON shows as {}):
# nothing to set.
_EMPTY_MESSAGE_FIELDS = {
    f"{message.name}.{field.name}"
    for module in (k8s, k8s_storage, k8s_resource, k8s_policy, k8s_apps, k8s_batch)
    for message in module.DESCRIPTOR.message_types_by_name.values()
    for field in message.fields
    if field.message_type is not None and not field.message_type.fields
}


def _covered(*, zero: bool) -> set[str]:
    found: set[str] = set()
    for vector in MODELLED:
        _set_fields(vector["json"], _descriptor(vector["kind"]), found, zero=zero)
    return found


@pytest.mark.parametrize("kind", KINDS)
def test_every_modelled_field_is_set_by_some_vector(kind: str) -> None:
    # Messages shared by several kinds (ObjectMeta, NodeSelector) count whichever kind's vector sets them.
    assert [vector for vector in MODELLED if vector["kind"] == kind], f"no vector of {kind}"
    wanted = _schema_fields(_descriptor(kind), set()) - _EMPTY_MESSAGE_FIELDS
    assert sorted(wanted - _covered(zero=False)) == []


@pytest.mark.parametrize("kind", KINDS)
def test_every_go_pointer_is_also_set_to_zero_by_some_vector(kind: str) -> None:
    # A pointer set to zero is the case that tells a pointer from a value field in JSON.
    pointers = protobuf._POINTER_SCALARS & _schema_fields(_descriptor(kind), set())
    assert sorted(pointers - _covered(zero=True)) == []


def test_the_go_tables_name_fields_of_the_schema() -> None:
    # Fields some kind reaches: a table naming any other field is stale or misspelt.
    fields: set[str] = set()
    for kind in KINDS:
        _schema_fields(_descriptor(kind), fields)
    for table in (
        protobuf._POINTER_SCALARS,
        protobuf._VALUE_STRUCTS,
        protobuf._OMITZERO,
        protobuf._NO_OMITEMPTY,
        protobuf._INLINE,
    ):
        assert sorted(table - fields) == []


# -- bad input: ConversionError at the field that is wrong -------------------------------------------------


def _ld(number: int, payload: bytes) -> bytes:
    """A length-delimited field (numbers and lengths below 128 in these tests)."""
    return bytes([number << 3 | 2, len(payload)]) + payload


def _envelope(raw: bytes, kind: str = "Pod", api_version: str = "v1", **extra: str) -> bytes:
    unknown = k8s.Unknown(typeMeta=k8s.TypeMeta(apiVersion=api_version, kind=kind), raw=raw, **extra)
    return ENVELOPE_MAGIC + unknown.SerializeToString()


POD = _bytes(BY_NAME["pod-full-spec"])
POD_ENVELOPE = _bytes(BY_NAME["pod-full-spec"], "envelope_b64")
STORAGE_CLASS = _bytes(BY_NAME["storageclass-full"])


def _device_class(raw: bytes) -> bytes:
    """A DeviceClass whose one configuration has ``raw`` as its parameters' text."""
    opaque = k8s_resource.OpaqueDeviceConfiguration(driver="d", parameters=k8s.RawExtension(raw=raw))
    config = k8s_resource.DeviceClassConfiguration(deviceConfiguration=k8s_resource.DeviceConfiguration(opaque=opaque))
    return k8s_resource.DeviceClass(spec=k8s_resource.DeviceClassSpec(config=[config])).SerializeToString()


PARAMETERS = "spec.config[0].opaque.parameters"


@pytest.mark.parametrize(
    ("kind", "data", "field", "problem"),
    [
        pytest.param("Pod", b"\xff\xff\xff", "", "a field tag is cut off", id="garbage"),
        pytest.param("Pod", POD[: len(POD) // 2], "spec", "but only", id="truncated"),
        pytest.param(
            "Pod", _ld(2, _ld(2, b"\x0a\x0aab")), "spec.containers[0].name", "declares 10 bytes", id="truncated-deep"
        ),
        pytest.param("Node", b"\x0b", "metadata", "wire type 3", id="group-wire-type"),
        # Node.spec.taints[0].key sent as a varint: upb would keep it as an unknown field, Go fails.
        pytest.param("Node", b"\x12\x04\x2a\x02\x08\x01", "spec.taints[0].key", "wire type 0", id="wrong-wire-type"),
        pytest.param(
            "Pod",
            k8s.Pod(
                spec=k8s.PodSpec(
                    containers=[
                        k8s.Container(resources=k8s.ResourceRequirements(requests={"cpu": k8s.Quantity(string="lots")}))
                    ]
                )
            ).SerializeToString(),
            "spec.containers[0].resources.requests.cpu",
            "quantities must match",
            id="bad-quantity",
        ),
        pytest.param(
            "Pod",
            k8s.Pod(metadata=k8s.ObjectMeta(creationTimestamp=k8s.Time(seconds=2**62))).SerializeToString(),
            "metadata.creationTimestamp",
            "outside years 1 to 9999",
            id="time-out-of-range",
        ),
        pytest.param("ConfigMap", b"", "kind", "not a kind podfit decodes", id="unsupported-kind"),
        pytest.param("", POD, "kind", "is required", id="bare-without-kind"),
        pytest.param("Node", POD_ENVELOPE, "typeMeta.kind", "but a Node was expected", id="envelope-kind-mismatch"),
        pytest.param(
            "", _envelope(POD, kind="ConfigMap"), "kind", "not a kind podfit decodes", id="envelope-wrong-kind"
        ),
        pytest.param("", _envelope(POD, kind=""), "typeMeta.kind", "is required", id="envelope-without-kind"),
        pytest.param(
            "", _envelope(POD, api_version="apps/v1"), "typeMeta.apiVersion", "must be v1", id="envelope-group"
        ),
        pytest.param("", _envelope(POD, contentEncoding="gzip"), "contentEncoding", "not supported", id="gzip"),
        pytest.param(
            "", _envelope(POD, contentType="application/json"), "contentType", "must be", id="json-in-envelope"
        ),
        pytest.param("", ENVELOPE_MAGIC + b"\x12\x05ab", "raw", "declares 5 bytes", id="envelope-truncated"),
        pytest.param("", _envelope(POD[:100]), "metadata", "but only", id="envelope-raw-truncated"),
        pytest.param("Pod", bytes(MAX_BYTES + 1), "", "more than", id="too-large"),
        pytest.param(
            "",
            _envelope(STORAGE_CLASS, kind="StorageClass"),
            "typeMeta.apiVersion",
            "must be storage.k8s.io/v1",
            id="envelope-group-of-another-kind",
        ),
        pytest.param(
            "",
            _envelope(POD, api_version="resource.k8s.io/v1"),
            "typeMeta.apiVersion",
            "must be v1",
            id="envelope-pod-in-a-group",
        ),
        pytest.param("DeviceClass", _device_class(b"{"), PARAMETERS, "not valid JSON", id="parameters-not-json"),
        pytest.param("DeviceClass", _device_class(b""), PARAMETERS, "not valid JSON", id="parameters-empty"),
        pytest.param("DeviceClass", _device_class(b"NaN"), PARAMETERS, "not valid JSON", id="parameters-nan"),
        pytest.param("DeviceClass", _device_class(b"\xd9\xd9\xf7\xa0"), PARAMETERS, "CBOR", id="parameters-cbor"),
        pytest.param("DeviceClass", _device_class(b"[" * 200 + b"]" * 200), PARAMETERS, "levels", id="parameters-deep"),
        pytest.param(
            "ResourceSlice",
            k8s_resource.ResourceSlice(
                spec=k8s_resource.ResourceSliceSpec(
                    devices=[
                        k8s_resource.Device(capacity={"memory": k8s_resource.DeviceCapacity(value={"string": "x"})})
                    ]
                )
            ).SerializeToString(),
            "spec.devices[0].capacity.memory.value",
            "quantities must match",
            id="bad-quantity-in-a-map-of-messages",
        ),
    ],
)
def test_undecodable_input_is_a_located_conversion_error(kind: str, data: bytes, field: str, problem: str) -> None:
    with pytest.raises(ConversionError) as caught:
        decode(kind, data)
    assert caught.value.field == field
    assert problem in caught.value.message


@pytest.mark.parametrize(
    ("obj", "field", "problem"),
    [
        pytest.param([], "", "must be a mapping", id="not-a-mapping"),
        pytest.param({"metadata": {}}, "kind", "is required", id="no-kind"),
        pytest.param({"kind": "ConfigMap"}, "kind", "not a kind podfit decodes", id="unsupported-kind"),
        pytest.param({"kind": "Pod", "apiVersion": "v2"}, "apiVersion", "must be v1", id="wrong-api-version"),
        pytest.param({"kind": "Pod", "spec": []}, "spec", "must be an object", id="spec-not-an-object"),
        pytest.param({"kind": "Pod", "spec": {"containers": {}}}, "spec.containers", "must be a list", id="not-a-list"),
        pytest.param(
            {"kind": "Pod", "spec": {"containers": [{"name": 1}]}},
            "spec.containers[0].name",
            "string",
            id="not-a-string",
        ),
        pytest.param({"kind": "Pod", "spec": {"priority": "1"}}, "spec.priority", "integer", id="not-an-integer"),
        pytest.param({"kind": "Pod", "spec": {"priority": True}}, "spec.priority", "integer", id="bool-not-an-integer"),
        pytest.param({"kind": "Pod", "spec": {"priority": 2**31}}, "spec.priority", "outside", id="int32-overflow"),
        pytest.param({"kind": "Pod", "spec": {"hostNetwork": 1}}, "spec.hostNetwork", "boolean", id="not-a-boolean"),
        pytest.param(
            {"kind": "Pod", "spec": {"overhead": {"cpu": "x"}}}, "spec.overhead.cpu", "quantities", id="quantity"
        ),
        pytest.param(
            {"kind": "Pod", "metadata": {"labels": {"a": 1}}}, "metadata.labels.a", "string", id="label-not-a-string"
        ),
        pytest.param(
            {"kind": "Pod", "metadata": {"creationTimestamp": "2024-01-02"}},
            "metadata.creationTimestamp",
            "RFC 3339",
            id="date-without-time",
        ),
        pytest.param(
            {"kind": "Pod", "metadata": {"creationTimestamp": "2024-01-02T03:04:05"}},
            "metadata.creationTimestamp",
            "RFC 3339",
            id="time-without-zone",
        ),
        pytest.param(
            {"kind": "Node", "spec": {"taints": [{"timeAdded": 5}]}},
            "spec.taints[0].timeAdded",
            "string",
            id="time-type",
        ),
        pytest.param(
            {"kind": "StorageClass", "apiVersion": "v1"}, "apiVersion", "must be storage.k8s.io/v1", id="group-kind"
        ),
        pytest.param(
            {"kind": "DeviceClass", "spec": {"config": [{"opaque": {"parameters": {"ratio": float("nan")}}}]}},
            "spec.config[0].opaque.parameters",
            "must be a JSON value",
            id="parameters-nan",
        ),
    ],
)
def test_unencodable_json_is_a_located_conversion_error(obj: Any, field: str, problem: str) -> None:
    with pytest.raises(ConversionError) as caught:
        encode(obj)
    assert caught.value.field == field
    assert problem in caught.value.message


@pytest.mark.parametrize(
    ("given", "seconds", "shown"),
    [
        pytest.param("2024-01-02T03:04:05Z", 1704164645, "2024-01-02T03:04:05Z", id="utc"),
        pytest.param("2024-01-02T05:04:05.999+02:00", 1704164645, "2024-01-02T03:04:05Z", id="offset-and-fraction"),
        pytest.param("1969-12-31T23:59:59.5Z", -1, "1969-12-31T23:59:59Z", id="before-the-epoch-rounds-down"),
    ],
)
def test_times_are_whole_utc_seconds_as_metav1_time_keeps_them(given: str, seconds: int, shown: str) -> None:
    raw = encode({"kind": "Node", "spec": {"taints": [{"key": "k", "effect": "NoSchedule", "timeAdded": given}]}})
    node = k8s.Node.FromString(raw)
    assert (node.spec.taints[0].timeAdded.seconds, node.spec.taints[0].timeAdded.nanos) == (seconds, 0)
    assert decode("Node", raw)["spec"]["taints"][0]["timeAdded"] == shown


def test_parameters_that_are_not_utf8_read_as_go_reads_them_back() -> None:
    # Go's JSON passes a RawExtension's bytes through; reading that JSON gives U+FFFD per bad byte.
    decoded = decode("DeviceClass", _device_class(b'{"a": "x\xffy\xe2\x82"}'))
    assert decoded["spec"]["config"][0]["opaque"]["parameters"] == {"a": "x\ufffdy\ufffd\ufffd"}


# -- cluster-autoscaler's expander contract ----------------------------------------------------------------


def _numbers(message: type[Message]) -> dict[str, int]:
    return {field.name: field.number for field in message.DESCRIPTOR.fields}


def test_the_expander_contract_is_the_autoscalers() -> None:
    service = expander_pb2.DESCRIPTOR.services_by_name["Expander"]
    method = service.methods_by_name["BestOptions"]
    assert f"/{service.full_name}/{method.name}" == "/grpcplugin.Expander/BestOptions"
    assert (method.input_type.full_name, method.output_type.full_name) == (
        "grpcplugin.BestOptionsRequest",
        "grpcplugin.BestOptionsResponse",
    )
    # pod (4) and nodeMap (2) are the older autoscalers' typed fields, wire-identical to bytes.
    assert _numbers(expander_pb2.Option) == {"nodeGroupId": 1, "nodeCount": 2, "debug": 3, "pod": 4, "podBytes": 5}
    # templateResourceSlices (100) is podfit's own addition, numbered clear of the autoscaler's fields: an
    # autoscaler never sends it, and a request without it is the autoscaler's bytes exactly.
    assert _numbers(expander_pb2.BestOptionsRequest) == {
        "options": 1,
        "nodeMap": 2,
        "nodeBytesMap": 3,
        "templateResourceSlices": 100,
    }
    assert _numbers(expander_pb2.BestOptionsResponse) == {"options": 1}
    assert hasattr(expander_pb2_grpc, "ExpanderServicer")


def test_pods_and_nodes_travel_through_the_expander_messages_intact() -> None:
    pod, node = BY_NAME["pod-full-spec"], BY_NAME["node-full"]
    request = expander_pb2.BestOptionsRequest(
        options=[expander_pb2.Option(nodeGroupId="ng-1", nodeCount=2, debug="d", podBytes=[_bytes(pod)])],
        nodeBytesMap={"ng-1": _bytes(node)},
    )
    received = expander_pb2.BestOptionsRequest.FromString(request.SerializeToString())
    assert decode("Pod", received.options[0].podBytes[0]) == pod["json"]
    assert decode("Node", received.nodeBytesMap["ng-1"]) == node["json"]
