"""Dynamic resource allocation objects as DynamicResources reads them: DeviceClasses, ResourceSlices and
ResourceClaims (resource.k8s.io/v1, structured parameters), converted once from Kubernetes JSON.

CEL selectors are kept as text here and compiled by ``podfit.server.plugins.dra_cel``, once per distinct
expression; a selector that does not compile is refused there, at its field path, when the object arrives.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from podfit.k8s.limits import echo
from podfit.k8s.quantity import QuantityError, parse_quantity
from podfit.server.dra.cel import CompileError, compile_selector, parse_semver
from podfit.server.model.errors import ValidationError
from podfit.server.model.objects import (
    DEFAULT_NAMESPACE,
    Kind,
    NodeSelectorTerm,
    OwnerReference,
    _boolean,
    _integer,
    _mapping,
    _meta,
    _owner_references,
    _sequence,
    _string,
    _strings,
    _time,
    node_selector,
    resource_version,
)

EXACT_COUNT = "ExactCount"
ALL = "All"
# DeviceAttribute's value fields, one of which is set.
ATTRIBUTE_TYPES = ("int", "bool", "string", "version")


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    # spec.selectors[].cel.expression, ANDed.
    selectors: tuple[str, ...]
    uid: str = ""
    resource_version: str = ""


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class Device:
    """Compared and hashed by identity: selector answers are remembered per device object while it lives."""

    name: str
    # Attribute name as published ("model" or "gpu.example.com/family") -> (type, value); type is one of
    # ATTRIBUTE_TYPES and a version's value is its text.
    attributes: Mapping[str, tuple[str, Any]]
    # Capacity name -> amount.
    capacity: Mapping[str, Fraction]


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    # Exactly one of the three is set.
    node_name: str | None
    node_selector: tuple[NodeSelectorTerm, ...] | None
    all_nodes: bool
    devices: tuple[Device, ...]
    uid: str = ""
    resource_version: str = ""


@dataclass(frozen=True, slots=True)
class DeviceSubRequest:
    """An exact request or one alternative of a prioritized list (``name`` is "req" or "req/sub")."""

    name: str
    class_name: str
    selectors: tuple[str, ...]
    mode: str
    count: int
    admin_access: bool = False


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    # Set for an exact request; the alternatives of a prioritized list otherwise.
    exactly: DeviceSubRequest | None
    first_available: tuple[DeviceSubRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    # Empty: every request of the claim.
    requests: tuple[str, ...]
    match_attribute: str | None


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False

    @property
    def device_id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    name: str
    namespace: str
    uid: str
    owner_references: tuple[OwnerReference, ...]
    being_deleted: bool
    requests: tuple[DeviceRequest, ...]
    constraints: tuple[DeviceConstraint, ...]
    # status.allocation: None when the claim is not allocated.
    allocation: tuple[AllocatedDevice, ...] | None
    # status.allocation.nodeSelector: None when unset (every node).
    allocation_node_selector: tuple[NodeSelectorTerm, ...] | None
    # status.reservedFor as (resource, name, uid).
    reserved_for: tuple[tuple[str, str, str], ...]
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def allocated(self) -> bool:
        return self.allocation is not None


DraObject = DeviceClass | ResourceSlice | ResourceClaim


def _selectors(value: Any, path: str) -> tuple[str, ...]:
    expressions = []
    for i, item in enumerate(_sequence(value, path)):
        where = f"{path}[{i}].cel"
        cel = _mapping(_mapping(item, f"{path}[{i}]").get("cel"), where)
        expression = _string(cel.get("expression"), f"{where}.expression")
        if not expression:
            raise ValidationError(f"{where}.expression", "is required")
        try:
            compile_selector(expression)
        except CompileError as exc:
            raise ValidationError(f"{where}.expression", f"CEL compile error: {exc}") from None
        expressions.append(expression)
    return tuple(expressions)


def device_class_from_k8s(data: Mapping[str, Any], path: str = "deviceClass") -> DeviceClass:
    data = _mapping(data, path)
    meta = _meta(data, path)
    spec = _mapping(data.get("spec"), f"{path}.spec")
    return DeviceClass(
        name=_string(meta.get("name"), f"{path}.metadata.name"),
        selectors=_selectors(spec.get("selectors"), f"{path}.spec.selectors"),
        uid=_string(meta.get("uid"), f"{path}.metadata.uid"),
        resource_version=resource_version(meta.get("resourceVersion"), f"{path}.metadata.resourceVersion"),
    )


def _attribute(value: Any, path: str) -> tuple[str, Any]:
    entry = _mapping(value, path)
    present = [name for name in ATTRIBUTE_TYPES if entry.get(name) is not None]
    if len(present) != 1:
        raise ValidationError(path, "must set exactly one of int, bool, string and version")
    kind = present[0]
    raw = entry[kind]
    where = f"{path}.{kind}"
    if kind == "int":
        return kind, _integer(raw, where)
    if kind == "bool":
        return kind, _boolean(raw, where)
    text = _string(raw, where)
    if kind == "version" and parse_semver(text) is None:
        raise ValidationError(where, f"{echo(text)} must be a semantic version (semver 2.0.0)")
    return kind, text


def _device(value: Any, path: str) -> Device:
    device = _mapping(value, path)
    name = _string(device.get("name"), f"{path}.name")
    if not name:
        raise ValidationError(f"{path}.name", "is required")
    attributes = {
        str(key): _attribute(item, f"{path}.attributes.{key}")
        for key, item in _mapping(device.get("attributes"), f"{path}.attributes").items()
    }
    capacity: dict[str, Fraction] = {}
    for key, item in _mapping(device.get("capacity"), f"{path}.capacity").items():
        where = f"{path}.capacity.{key}.value"
        text = _mapping(item, f"{path}.capacity.{key}").get("value")
        try:
            capacity[str(key)] = parse_quantity(_string(text, where))
        except QuantityError as exc:
            raise ValidationError(where, str(exc)) from exc
    return Device(name=name, attributes=attributes, capacity=capacity)


def resource_slice_from_k8s(data: Mapping[str, Any], path: str = "resourceSlice") -> ResourceSlice:
    data = _mapping(data, path)
    meta = _meta(data, path)
    spec = _mapping(data.get("spec"), f"{path}.spec")
    pool = _mapping(spec.get("pool"), f"{path}.spec.pool")
    driver = _string(spec.get("driver"), f"{path}.spec.driver")
    if not driver:
        raise ValidationError(f"{path}.spec.driver", "is required")
    pool_name = _string(pool.get("name"), f"{path}.spec.pool.name")
    if not pool_name:
        raise ValidationError(f"{path}.spec.pool.name", "is required")
    node_name = spec.get("nodeName")
    selector = spec.get("nodeSelector")
    all_nodes = _boolean(spec.get("allNodes"), f"{path}.spec.allNodes")
    if (node_name is not None) + (selector is not None) + all_nodes != 1:
        raise ValidationError(f"{path}.spec", "must set exactly one of nodeName, nodeSelector and allNodes")
    terms = node_selector(selector, f"{path}.spec.nodeSelector")
    slice_count = _integer(pool.get("resourceSliceCount"), f"{path}.spec.pool.resourceSliceCount")
    if slice_count < 1:
        raise ValidationError(f"{path}.spec.pool.resourceSliceCount", "must be greater than zero")
    return ResourceSlice(
        name=_string(meta.get("name"), f"{path}.metadata.name"),
        driver=driver,
        pool=pool_name,
        generation=_integer(pool.get("generation"), f"{path}.spec.pool.generation"),
        slice_count=slice_count,
        node_name=None if node_name is None else _string(node_name, f"{path}.spec.nodeName"),
        node_selector=terms,
        all_nodes=all_nodes,
        devices=tuple(
            _device(item, f"{path}.spec.devices[{i}]")
            for i, item in enumerate(_sequence(spec.get("devices"), f"{path}.spec.devices"))
        ),
        uid=_string(meta.get("uid"), f"{path}.metadata.uid"),
        resource_version=resource_version(meta.get("resourceVersion"), f"{path}.metadata.resourceVersion"),
    )


def _sub_request(value: Mapping[str, Any], name: str, path: str, admin: bool) -> DeviceSubRequest:
    mode = _string(value.get("allocationMode"), f"{path}.allocationMode") or EXACT_COUNT
    if mode not in (EXACT_COUNT, ALL):
        raise ValidationError(f"{path}.allocationMode", f"{echo(mode)} must be ExactCount or All")
    count = _integer(value.get("count"), f"{path}.count", 1 if mode == EXACT_COUNT else 0)
    if mode == EXACT_COUNT and count < 1:
        raise ValidationError(f"{path}.count", "must be greater than zero")
    class_name = _string(value.get("deviceClassName"), f"{path}.deviceClassName")
    if not class_name:
        raise ValidationError(f"{path}.deviceClassName", "is required")
    return DeviceSubRequest(
        name=name,
        class_name=class_name,
        selectors=_selectors(value.get("selectors"), f"{path}.selectors"),
        mode=mode,
        count=count,
        admin_access=admin and _boolean(value.get("adminAccess"), f"{path}.adminAccess"),
    )


def _requests(value: Any, path: str) -> tuple[DeviceRequest, ...]:
    requests = []
    for i, item in enumerate(_sequence(value, path)):
        where = f"{path}[{i}]"
        request = _mapping(item, where)
        name = _string(request.get("name"), f"{where}.name")
        if not name:
            raise ValidationError(f"{where}.name", "is required")
        exactly = request.get("exactly")
        alternatives = _sequence(request.get("firstAvailable"), f"{where}.firstAvailable")
        if (exactly is not None) == bool(alternatives):
            raise ValidationError(where, "must set exactly one of exactly and firstAvailable")
        if exactly is not None:
            requests.append(
                DeviceRequest(name, _sub_request(_mapping(exactly, f"{where}.exactly"), name, f"{where}.exactly", True))
            )
            continue
        subs = []
        for j, sub in enumerate(alternatives):
            at = f"{where}.firstAvailable[{j}]"
            sub_map = _mapping(sub, at)
            sub_name = _string(sub_map.get("name"), f"{at}.name")
            if not sub_name:
                raise ValidationError(f"{at}.name", "is required")
            subs.append(_sub_request(sub_map, f"{name}/{sub_name}", at, False))
        requests.append(DeviceRequest(name, None, tuple(subs)))
    return tuple(requests)


def _allocation(
    value: Any, path: str
) -> tuple[tuple[AllocatedDevice, ...] | None, tuple[NodeSelectorTerm, ...] | None]:
    if value is None:
        return None, None
    allocation = _mapping(value, path)
    devices = _mapping(allocation.get("devices"), f"{path}.devices")
    results = []
    for i, item in enumerate(_sequence(devices.get("results"), f"{path}.devices.results")):
        where = f"{path}.devices.results[{i}]"
        result = _mapping(item, where)
        results.append(
            AllocatedDevice(
                request=_string(result.get("request"), f"{where}.request"),
                driver=_string(result.get("driver"), f"{where}.driver"),
                pool=_string(result.get("pool"), f"{where}.pool"),
                device=_string(result.get("device"), f"{where}.device"),
                admin_access=_boolean(result.get("adminAccess"), f"{where}.adminAccess"),
            )
        )
    return tuple(results), node_selector(allocation.get("nodeSelector"), f"{path}.nodeSelector")


def resource_claim_from_k8s(data: Mapping[str, Any], path: str = "resourceClaim") -> ResourceClaim:
    data = _mapping(data, path)
    meta = _meta(data, path)
    spec = _mapping(data.get("spec"), f"{path}.spec")
    status = _mapping(data.get("status"), f"{path}.status")
    devices = _mapping(spec.get("devices"), f"{path}.spec.devices")
    constraints = []
    for i, item in enumerate(_sequence(devices.get("constraints"), f"{path}.spec.devices.constraints")):
        where = f"{path}.spec.devices.constraints[{i}]"
        constraint = _mapping(item, where)
        attribute = constraint.get("matchAttribute")
        constraints.append(
            DeviceConstraint(
                requests=_strings(constraint.get("requests"), f"{where}.requests"),
                match_attribute=None if attribute is None else _string(attribute, f"{where}.matchAttribute"),
            )
        )
    allocation, node_selector = _allocation(status.get("allocation"), f"{path}.status.allocation")
    reserved = []
    for i, item in enumerate(_sequence(status.get("reservedFor"), f"{path}.status.reservedFor")):
        where = f"{path}.status.reservedFor[{i}]"
        ref = _mapping(item, where)
        reserved.append(
            (
                _string(ref.get("resource"), f"{where}.resource"),
                _string(ref.get("name"), f"{where}.name"),
                _string(ref.get("uid"), f"{where}.uid"),
            )
        )
    return ResourceClaim(
        name=_string(meta.get("name"), f"{path}.metadata.name"),
        namespace=_string(meta.get("namespace"), f"{path}.metadata.namespace") or DEFAULT_NAMESPACE,
        uid=_string(meta.get("uid"), f"{path}.metadata.uid"),
        owner_references=_owner_references(meta.get("ownerReferences"), f"{path}.metadata.ownerReferences"),
        being_deleted=_time(meta.get("deletionTimestamp"), f"{path}.metadata.deletionTimestamp") is not None,
        requests=_requests(devices.get("requests"), f"{path}.spec.devices.requests"),
        constraints=tuple(constraints),
        allocation=allocation,
        allocation_node_selector=node_selector,
        reserved_for=tuple(reserved),
        resource_version=resource_version(meta.get("resourceVersion"), f"{path}.metadata.resourceVersion"),
    )


_CONVERTERS = {
    "DeviceClass": device_class_from_k8s,
    "ResourceSlice": resource_slice_from_k8s,
    "ResourceClaim": resource_claim_from_k8s,
}


def dra_object_from_k8s(kind: Kind, data: Mapping[str, Any], path: str) -> DraObject:
    converter: Any = _CONVERTERS[kind.value]
    result: DraObject = converter(data, path)
    return result
