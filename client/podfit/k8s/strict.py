"""Manifests checked as kubectl checks them (its default strict field validation): a field Kubernetes does
not have is refused as ``unknown field "spec.containrs"``, a value of the wrong JSON type names the field
and the type expected, and a pod needs containers.

podfit models only part of each kind, so the schema is Kubernetes' own: the official client's models
(``kubernetes.client``), whose ``attribute_map``/``openapi_types`` list every field of every kind with its
type. Paths are written as kube-apiserver writes them, with list indexes (``spec.containers[0].imagee``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from podfit.k8s.errors import ConversionError
from podfit.k8s.limits import echo

# Fields of type string in the client's models that Kubernetes types as resource.Quantity, which also
# takes JSON numbers (``cpu: 2``).
_QUANTITY_MAPS = frozenset({"requests", "limits", "overhead", "capacity", "allocatable"})
_QUANTITY_FIELDS = frozenset({"sizeLimit", "maximumVolumeSize", "value", "capacity"})
_LIST = re.compile(r"^List\[(.+)\]$")
_DICT = re.compile(r"^Dict\[str, (.+)\]$")
_EXPECTED = {"str": "a string", "int": "an integer", "bool": "a boolean", "float": "a number", "datetime": "a time"}


@cache
def _model(name: str) -> Any:
    from kubernetes import client

    return getattr(client, name, None)


def model_for(kind: str) -> Any:
    """The client's model of a kind podfit holds (resource.k8s.io's ResourceClaim has a prefixed name)."""
    return _model(f"V1{kind}") or _model(f"ResourceV1{kind}")


def check_strict(manifest: Mapping[str, Any], kind: str) -> None:
    """Raises ConversionError (the field path, kubectl's wording) for the first problem found."""
    model = model_for(kind)
    if model is None:
        return
    _check(manifest, model, "")
    if kind == "Pod":
        spec = manifest.get("spec")
        if not isinstance(spec, Mapping) or not spec.get("containers"):
            raise ConversionError("spec.containers", "Required value")


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return "null"


def _wrong(path: str, expected: str, value: Any) -> ConversionError:
    shown = f" {echo(value)}" if isinstance(value, str | int | float) and not isinstance(value, bool) else ""
    return ConversionError(path, f"expected {expected}, got {_type_name(value)}{shown}")


def _check(value: Any, model: Any, path: str) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise _wrong(path, "an object", value)
    fields = {json_name: attr for attr, json_name in model.attribute_map.items()}
    for key, item in value.items():
        where = f"{path}.{key}" if path else str(key)
        attr = fields.get(key)
        if attr is None:
            raise ConversionError("", f'unknown field "{where}"')
        _check_typed(item, model.openapi_types[attr], where, key in _QUANTITY_FIELDS)


def _check_typed(value: Any, type_name: str, path: str, quantity: bool) -> None:
    if value is None or type_name == "object":
        return
    listed = _LIST.match(type_name)
    if listed:
        if not isinstance(value, list):
            raise _wrong(path, "an array", value)
        for i, item in enumerate(value):
            _check_typed(item, listed.group(1), f"{path}[{i}]", False)
        return
    mapped = _DICT.match(type_name)
    if mapped:
        if not isinstance(value, Mapping):
            raise _wrong(path, "an object", value)
        numbers = path.rpartition(".")[2] in _QUANTITY_MAPS
        for key, item in value.items():
            _check_typed(item, mapped.group(1), f"{path}.{key}", numbers)
        return
    expected = _EXPECTED.get(type_name)
    if expected is None:
        model = _model(type_name)
        if model is not None:
            _check(value, model, path)
        return
    ok = {
        "str": isinstance(value, str) or (quantity and isinstance(value, int | float) and not isinstance(value, bool)),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "float": isinstance(value, int | float) and not isinstance(value, bool),
        "datetime": isinstance(value, str),
    }[type_name]
    if not ok:
        raise _wrong(path, expected, value)
