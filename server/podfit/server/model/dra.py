"""Dynamic resource allocation objects as DynamicResources reads them: DeviceClasses, ResourceSlices and
ResourceClaims (resource.k8s.io/v1, structured parameters), converted once from Kubernetes JSON.

CEL selectors are kept as text here and compiled by ``podfit.server.model.cel``, once per distinct
expression; a selector that does not compile is refused there, at its field path, when the object arrives.

Fields of DRA features podfit does not model (partitionable devices, consumable capacity, binding
conditions) are accepted, so that a real cluster can be fed, and recorded as ``unmodelled``: the object's
first such field path and the feature it belongs to. The allocator refuses (ValidationError) a decision
that would depend on them, rather than answering as if they were absent (see ``podfit.server.dra``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from podfit.k8s.limits import echo
from podfit.k8s.quantity import QuantityError, parse_quantity
from podfit.server.model.cel import CompileError, compile_selector, parse_semver
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
# DeviceTaint effects that keep a device from requests that do not tolerate them (others change nothing).
TAINT_EFFECTS_THAT_PREVENT = ("NoSchedule", "NoExecute")
# The implicit extended resource name of every DeviceClass: this prefix and the class's name.
DEVICE_CLASS_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"
PARTITIONABLE = "partitionable devices (DRAPartitionableDevices)"
CONSUMABLE = "consumable capacity (DRAConsumableCapacity)"
BINDING = "binding conditions (DRADeviceBindingConditions)"
# DeviceAttribute's value fields, one of which is set.
ATTRIBUTE_TYPES = ("int", "bool", "string", "version")


@dataclass(frozen=True, slots=True)
class Unmodelled:
    """A field of a DRA feature podfit does not model: where it is (relative to its object) and which
    feature it belongs to."""

    path: str
    feature: str


class UnmodelledError(ValidationError):
    """A decision that depends on a field of a DRA feature podfit does not model: refused (INVALID_ARGUMENT
    at the field, ``owner`` naming the object) rather than answered as if the field were absent."""

    def __init__(self, owner: str, unmodelled: Unmodelled, why: str) -> None:
        super().__init__(
            f"{owner}.{unmodelled.path}",
            f"uses {unmodelled.feature}, which podfit does not model, and {why}: podfit refuses the decision "
            "rather than answer as if the field were absent",
        )


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    # spec.selectors[].cel.expression, ANDed.
    selectors: tuple[str, ...]
    uid: str = ""
    resource_version: str = ""
    # spec.extendedResourceName (DRAExtendedResource); "" when unset.
    extended_resource_name: str = ""


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: DeviceTaint) -> bool:
        """k8s.io/dynamic-resource-allocation/resourceclaim.ToleratesTaint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class Device:
    """Compared and hashed by identity: selector answers are remembered per device object while it lives."""

    name: str
    # Attribute name as published ("model" or "gpu.example.com/family") -> (type, value); type is one of
    # ATTRIBUTE_TYPES and a version's value is its text.
    attributes: Mapping[str, tuple[str, Any]]
    # Capacity name -> amount.
    capacity: Mapping[str, Fraction]
    # spec.devices[].taints.
    taints: tuple[DeviceTaint, ...] = ()
    # The device's first field (path from its slice) of a feature podfit does not model, if any: what
    # allocating this device would read.
    unmodelled: Unmodelled | None = None


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
    # spec.perDeviceNodeSelection: which nodes reach the slice depends on its devices (not modelled).
    per_device_node_selection: bool = False
    # The first field of a feature podfit does not model that changes the whole pool (which nodes reach
    # it, the order of pools), if any.
    unmodelled: Unmodelled | None = None


@dataclass(frozen=True, slots=True)
class DeviceSubRequest:
    """An exact request or one alternative of a prioritized list (``name`` is "req" or "req/sub")."""

    name: str
    class_name: str
    selectors: tuple[str, ...]
    mode: str
    count: int
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()

    def tolerates(self, taints: tuple[DeviceTaint, ...]) -> bool:
        """Whether every NoSchedule and NoExecute taint is tolerated (upstream's taintPreventsAllocation)."""
        return all(
            taint.effect not in TAINT_EFFECTS_THAT_PREVENT or any(t.tolerates(taint) for t in self.tolerations)
            for taint in taints
        )


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
    # The first field of a feature podfit does not model in the claim's spec (what allocating it reads),
    # and in its status.allocation (what using it once allocated reads), if any.
    unmodelled: Unmodelled | None = None
    unmodelled_allocation: Unmodelled | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def allocated(self) -> bool:
        return self.allocation is not None


DraObject = DeviceClass | ResourceSlice | ResourceClaim


def held_devices(claim: ResourceClaim) -> frozenset[tuple[str, str, str]]:
    """The devices an allocated claim keeps from other claims: all it holds except those allocated for
    admin access (empty when the claim is not allocated)."""
    if claim.allocation is None:
        return frozenset()
    return frozenset(result.device_id for result in claim.allocation if not result.admin_access)


def template_copies(slices: Sequence[ResourceSlice], node_name: str, suffix: str) -> tuple[ResourceSlice, ...]:
    """A template node's ResourceSlices as a DRA driver publishes them on one new copy of the node, named
    ``node_name``: each slice named ``<slice>-<suffix>``, in pool ``<pool>-<suffix>`` (pool names are
    unique within a driver, so every copy has pools of its own, as cluster-autoscaler names them), on
    ``node_name``, without a uid. A pool starts at generation 1, as the driver's ResourceSlice controller
    starts the pool of a node that has none, with the slices of the template pool's newest generation
    (the controller deletes older ones); slice count and devices are the template's. Which devices a node
    offers does not depend on a pool's generation number, only on which of its slices are newest, so the
    copies answer as the template's slices would. (The slices must be node-local: ``check_template_slices``.)"""
    newest: dict[tuple[str, str], int] = {}
    for item in slices:
        key = (item.driver, item.pool)
        newest[key] = max(newest.get(key, item.generation), item.generation)
    return tuple(
        replace(
            item, name=f"{item.name}-{suffix}", pool=f"{item.pool}-{suffix}", node_name=node_name, uid="", generation=1
        )
        for item in slices
        if item.generation == newest[(item.driver, item.pool)]
    )


def check_template_slices(slices: Sequence[ResourceSlice], path: str) -> None:
    """A template node's slices must be node-local (``spec.nodeName``): cluster-autoscaler copies no other
    (``can't sanitize slice ... because it isn't node-local``), and a slice shared by nodes is the
    cluster's, published once, not once per new node."""
    for i, item in enumerate(slices):
        if item.node_name is None:
            raise ValidationError(
                f"{path}[{i}].spec.nodeName",
                f"is required: slice {echo(item.name)} of a template node must be node-local (a slice for "
                "several nodes is the cluster's, published once, not once per new node)",
            )


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
        extended_resource_name=_string(spec.get("extendedResourceName"), f"{path}.spec.extendedResourceName"),
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


def _taints(value: Any, path: str) -> tuple[DeviceTaint, ...]:
    taints = []
    for i, item in enumerate(_sequence(value, path)):
        taint = _mapping(item, f"{path}[{i}]")
        taints.append(
            DeviceTaint(
                key=_string(taint.get("key"), f"{path}[{i}].key"),
                value=_string(taint.get("value"), f"{path}[{i}].value"),
                effect=_string(taint.get("effect"), f"{path}[{i}].effect"),
            )
        )
    return tuple(taints)


def _tolerations(value: Any, path: str) -> tuple[DeviceToleration, ...]:
    tolerations = []
    for i, item in enumerate(_sequence(value, path)):
        toleration = _mapping(item, f"{path}[{i}]")
        tolerations.append(
            DeviceToleration(
                key=_string(toleration.get("key"), f"{path}[{i}].key"),
                operator=_string(toleration.get("operator"), f"{path}[{i}].operator"),
                value=_string(toleration.get("value"), f"{path}[{i}].value"),
                effect=_string(toleration.get("effect"), f"{path}[{i}].effect"),
            )
        )
    return tuple(tolerations)


def _device_unmodelled(device: Mapping[str, Any], where: str) -> Unmodelled | None:
    """The first field of the device whose handling podfit does not model (relative path ``where``): what
    allocating this device reads (counters it consumes, capacity sharing, binding conditions)."""
    if device.get("consumesCounters"):
        return Unmodelled(f"{where}.consumesCounters", PARTITIONABLE)
    for key in ("bindingConditions", "bindingFailureConditions"):
        if device.get(key):
            return Unmodelled(f"{where}.{key}", BINDING)
    if device.get("bindsToNode") is True:
        return Unmodelled(f"{where}.bindsToNode", BINDING)
    if device.get("allowMultipleAllocations") is True:
        return Unmodelled(f"{where}.allowMultipleAllocations", CONSUMABLE)
    for key, item in _mapping(device.get("capacity"), f"{where}.capacity").items():
        if isinstance(item, Mapping) and item.get("requestPolicy") is not None:
            return Unmodelled(f"{where}.capacity.{key}.requestPolicy", CONSUMABLE)
    return None


def _device(value: Any, path: str, relative: str) -> Device:
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
    return Device(
        name=name,
        attributes=attributes,
        capacity=capacity,
        taints=_taints(device.get("taints"), f"{path}.taints"),
        unmodelled=_device_unmodelled(device, relative),
    )


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
    per_device = _boolean(spec.get("perDeviceNodeSelection"), f"{path}.spec.perDeviceNodeSelection")
    if (node_name is not None) + (selector is not None) + all_nodes + per_device != 1:
        raise ValidationError(
            f"{path}.spec", "must set exactly one of nodeName, nodeSelector, allNodes and perDeviceNodeSelection"
        )
    raw_devices = _sequence(spec.get("devices"), f"{path}.spec.devices")
    # What changes the whole pool: which nodes it reaches (per-device node selection) or where it stands in
    # the allocator's order (pools with binding conditions go last). Shared counters only matter to the
    # devices that consume them, which refuse on their own.
    unmodelled = Unmodelled("spec.perDeviceNodeSelection", PARTITIONABLE) if per_device else None
    for i, item in enumerate(raw_devices):
        if unmodelled is None and _mapping(item, f"{path}.spec.devices[{i}]").get("bindingConditions"):
            unmodelled = Unmodelled(f"spec.devices[{i}].bindingConditions", BINDING)
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
            _device(item, f"{path}.spec.devices[{i}]", f"spec.devices[{i}]") for i, item in enumerate(raw_devices)
        ),
        uid=_string(meta.get("uid"), f"{path}.metadata.uid"),
        resource_version=resource_version(meta.get("resourceVersion"), f"{path}.metadata.resourceVersion"),
        per_device_node_selection=per_device,
        unmodelled=unmodelled,
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
        tolerations=_tolerations(value.get("tolerations"), f"{path}.tolerations"),
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


def _claim_unmodelled(devices: Mapping[str, Any]) -> Unmodelled | None:
    """The first field of the claim's spec whose allocation podfit does not model (already validated)."""
    for i, item in enumerate(_sequence(devices.get("requests"), "")):
        request = _mapping(item, "")
        where = f"spec.devices.requests[{i}]"
        alternatives = [(f"{where}.exactly", request.get("exactly"))] if request.get("exactly") is not None else []
        alternatives += [
            (f"{where}.firstAvailable[{j}]", sub) for j, sub in enumerate(request.get("firstAvailable") or ())
        ]
        for at, sub in alternatives:
            capacity = _mapping(_mapping(sub, at).get("capacity"), f"{at}.capacity")
            if _mapping(capacity.get("requests"), f"{at}.capacity.requests"):
                return Unmodelled(f"{at}.capacity.requests", CONSUMABLE)
    for i, item in enumerate(_sequence(devices.get("constraints"), "")):
        if _mapping(item, "").get("distinctAttribute") is not None:
            return Unmodelled(f"spec.devices.constraints[{i}].distinctAttribute", CONSUMABLE)
    return None


def _allocation_unmodelled(allocation: Any) -> Unmodelled | None:
    devices = _mapping(_mapping(allocation, "").get("devices"), "")
    for i, item in enumerate(_sequence(devices.get("results"), "")):
        result = _mapping(item, "")
        for key in ("bindingConditions", "bindingFailureConditions"):
            if result.get(key):
                return Unmodelled(f"status.allocation.devices.results[{i}].{key}", BINDING)
    return None


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
    requests = _requests(devices.get("requests"), f"{path}.spec.devices.requests")
    return ResourceClaim(
        name=_string(meta.get("name"), f"{path}.metadata.name"),
        namespace=_string(meta.get("namespace"), f"{path}.metadata.namespace") or DEFAULT_NAMESPACE,
        uid=_string(meta.get("uid"), f"{path}.metadata.uid"),
        owner_references=_owner_references(meta.get("ownerReferences"), f"{path}.metadata.ownerReferences"),
        being_deleted=_time(meta.get("deletionTimestamp"), f"{path}.metadata.deletionTimestamp") is not None,
        requests=requests,
        constraints=tuple(constraints),
        allocation=allocation,
        allocation_node_selector=node_selector,
        reserved_for=tuple(reserved),
        resource_version=resource_version(meta.get("resourceVersion"), f"{path}.metadata.resourceVersion"),
        unmodelled=_claim_unmodelled(devices),
        unmodelled_allocation=_allocation_unmodelled(status.get("allocation")),
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
