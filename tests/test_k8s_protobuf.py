"""Kubernetes protobuf <-> Kubernetes JSON, checked against bytes and JSON that Kubernetes' own Go code made.

tests/k8s_protobuf/vectors.json comes from tests/k8s_protobuf/gen (k8s.io/api v0.37): for each pod or node,
``obj.Marshal()``, the ``k8s\\x00`` envelope of Kubernetes' protobuf serializer, and ``json.Marshal(obj)``.
The only normalisation: vectors that set fields podfit does not model (``modelledOnly`` false) are
compared after dropping those fields from the Go JSON (``_prune``); every other vector must decode to
exactly Go's JSON, and encode to exactly Go's bytes.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message
from grpcplugin import expander_pb2, expander_pb2_grpc
from podfit.k8s import protobuf
from podfit.k8s.convert import ConversionError, manifest_to_message
from podfit.k8s.protobuf import ENVELOPE_MAGIC, MAX_BYTES, decode, encode
from podfit.k8s.v1 import core_pb2 as k8s
from podfit.server.model import Kind, ValidationError
from podfit.server.model.objects import object_from_k8s

VECTORS: list[dict[str, Any]] = json.loads((Path(__file__).parent / "k8s_protobuf" / "vectors.json").read_text())
BY_NAME = {vector["name"]: vector for vector in VECTORS}
MODELLED = [vector for vector in VECTORS if vector["modelledOnly"]]
# Messages that are one JSON value (a string, or null) rather than an object.
LEAVES = {k8s.Time.DESCRIPTOR.full_name, k8s.Quantity.DESCRIPTOR.full_name}


def _params(vectors: list[dict[str, Any]]) -> list[Any]:
    return [pytest.param(vector, id=vector["name"]) for vector in vectors]


def _bytes(vector: dict[str, Any], key: str = "protobuf_b64") -> bytes:
    return base64.b64decode(vector[key])


def _descriptor(kind: str) -> Any:
    return getattr(k8s, kind).DESCRIPTOR


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
    pruned = {"apiVersion": "v1", "kind": vector["kind"], **_prune(vector["json"], _descriptor(vector["kind"]))}
    if vector["modelledOnly"]:
        assert pruned == vector["json"], "a vector marked modelledOnly sets a field the schema does not model"
    return pruned


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
            return object_from_k8s(Kind(kind), data, "object")
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


def test_every_modelled_field_is_set_by_some_vector() -> None:
    wanted = _schema_fields(k8s.Pod.DESCRIPTOR, set()) | _schema_fields(k8s.Node.DESCRIPTOR, set())
    covered: set[str] = set()
    for vector in MODELLED:
        _set_fields(vector["json"], _descriptor(vector["kind"]), covered, zero=False)
    assert sorted(wanted - covered) == []


def test_every_go_pointer_is_also_set_to_zero_by_some_vector() -> None:
    # A pointer set to zero is the case that tells a pointer from a value field in JSON.
    zeroes: set[str] = set()
    for vector in MODELLED:
        _set_fields(vector["json"], _descriptor(vector["kind"]), zeroes, zero=True)
    assert sorted(protobuf._POINTER_SCALARS - zeroes) == []


def test_the_go_tables_name_fields_of_the_schema() -> None:
    fields = {
        f"{message.name}.{field.name}"
        for message in k8s.DESCRIPTOR.message_types_by_name.values()
        for field in message.fields
    }
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
        pytest.param("Service", b"", "kind", "not a kind podfit decodes", id="unsupported-kind"),
        pytest.param("", POD, "kind", "is required", id="bare-without-kind"),
        pytest.param("Node", POD_ENVELOPE, "typeMeta.kind", "but a Node was expected", id="envelope-kind-mismatch"),
        pytest.param("", _envelope(POD, kind="Service"), "kind", "not a kind podfit decodes", id="envelope-wrong-kind"),
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
        pytest.param({"kind": "Service"}, "kind", "not a kind podfit decodes", id="unsupported-kind"),
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
    assert _numbers(expander_pb2.Option) == {"nodeGroupId": 1, "nodeCount": 2, "debug": 3, "podBytes": 5}
    assert _numbers(expander_pb2.BestOptionsRequest) == {"options": 1, "nodeBytesMap": 3}
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
