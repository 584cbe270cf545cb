"""DRA features v1.37 turns on by default (issue 35): device taints are modelled as upstream's allocator
checks them (k8s.io/dynamic-resource-allocation, incubating: ``taintPreventsAllocation`` and
``resourceclaim.ToleratesTaint``); partitionable devices, consumable capacity, binding conditions and
DRA-backed extended resources are not, so a decision that would read them is refused with a
ValidationError naming the field (INVALID_ARGUMENT through gRPC), never answered as if they were absent.
Objects that use them are still held, so that a real cluster can be fed."""

from __future__ import annotations

import copy
from typing import Any

import grpc
import pytest
from podfit.client import PodfitError
from podfit.server.config import default_profile
from podfit.server.engine import Engine
from podfit.server.framework.cycle_state import CycleState
from podfit.server.model import ValidationError
from podfit.server.model.dra import resource_slice_from_k8s

from tests.builders import PodBuilder, make_cache, make_pod
from tests.conftest import LiveServer
from tests.plugins.test_dynamic_resources import (
    GPU,
    UNRESOLVABLE,
    Verdicts,
    claim,
    device_class,
    gpu,
    node,
    request,
    slice_,
    using,
)

CANNOT = ("DynamicResources", ("cannot allocate all claims",), UNRESOLVABLE)


def tainted(name: str, *taints: tuple[str, str, str]) -> dict[str, Any]:
    device = gpu(name)
    device["taints"] = [{"key": key, "value": value, "effect": effect} for key, value, effect in taints]
    return device


def tolerating(*tolerations: dict[str, str], **extra: Any) -> dict[str, Any]:
    return request(tolerations=list(tolerations), **extra)


def decide(objects: list[Any], pod: PodBuilder, version: str, gates: dict[str, bool] | None = None) -> Verdicts:
    profile = default_profile(version=version, feature_gates=gates)
    decision, _, _ = Engine(make_cache(*objects), {"default-scheduler": profile}).decide(pod.obj(), score=False)
    assert not decision.failed, decision.message
    return {n: (s.plugin, s.reasons, s.code.value) for n, s in decision.rejections().items()}


NO_SCHEDULE = ("example.com/unhealthy", "ecc", "NoSchedule")
NO_EXECUTE = ("example.com/unhealthy", "ecc", "NoExecute")


def one_tainted_node(device: dict[str, Any], pod_claim: Any) -> list[Any]:
    """n1 publishes ``device``, n2 an untainted GPU; the pod uses ``pod_claim`` (named c)."""
    return [node("n1"), node("n2"), device_class(), slice_("n1", device), slice_("n2", gpu("g0")), pod_claim]


@pytest.mark.parametrize(
    ("version", "gates", "device", "pod_claim", "want"),
    [
        pytest.param("v1.37", None, tainted("g0", NO_SCHEDULE), claim("c"), {"n1": CANNOT},
                     id="v1.37: an untolerated NoSchedule taint keeps the device"),
        pytest.param("v1.37", None, tainted("g0", NO_EXECUTE), claim("c"), {"n1": CANNOT},
                     id="v1.37: an untolerated NoExecute taint keeps the device"),
        pytest.param("v1.37", None, tainted("g0", ("example.com/note", "", "None")), claim("c"), {},
                     id="v1.37: effect None changes nothing"),
        pytest.param("v1.37", None, tainted("g0", ("example.com/x", "", "PreferNoSchedule")), claim("c"), {},
                     id="v1.37: an unknown effect changes nothing"),
        pytest.param("v1.37", None, tainted("g0", NO_SCHEDULE),
                     claim("c", tolerating({"key": "example.com/unhealthy", "operator": "Exists"})), {},
                     id="v1.37: Exists on the key tolerates"),
        pytest.param("v1.37", None, tainted("g0", NO_SCHEDULE), claim("c", tolerating({"operator": "Exists"})), {},
                     id="v1.37: Exists without a key tolerates every taint"),
        pytest.param("v1.37", None, tainted("g0", NO_SCHEDULE),
                     claim("c", tolerating({"key": "example.com/unhealthy", "value": "ecc"})), {},
                     id="v1.37: Equal (the default operator) with the value tolerates"),
        pytest.param("v1.37", None, tainted("g0", NO_SCHEDULE),
                     claim("c", tolerating({"key": "example.com/unhealthy", "operator": "Equal", "value": "x"})),
                     {"n1": CANNOT}, id="v1.37: Equal with another value does not tolerate"),
        pytest.param("v1.37", None, tainted("g0", NO_EXECUTE),
                     claim("c", tolerating({"operator": "Exists", "effect": "NoSchedule"})), {"n1": CANNOT},
                     id="v1.37: a toleration for another effect does not tolerate"),
        pytest.param("v1.37", None, tainted("g0", NO_SCHEDULE, NO_EXECUTE),
                     claim("c", tolerating({"operator": "Exists", "effect": "NoSchedule"})), {"n1": CANNOT},
                     id="v1.37: every taint must be tolerated"),
        pytest.param("v1.37", None, tainted("g0", NO_SCHEDULE),
                     claim("c", tolerating({"key": "example.com/unhealthy", "operator": "Bogus"})),
                     {"n1": CANNOT}, id="v1.37: an unknown operator tolerates nothing"),
        pytest.param("v1.37", None, tainted("g0", NO_SCHEDULE), claim("c", request(mode="All")), {"n1": CANNOT},
                     id="v1.37: All meets a tainted device and cannot allocate"),
        pytest.param("v1.37", None, tainted("g0", NO_SCHEDULE),
                     claim("c", {"name": "gpu", "firstAvailable": [
                         {"name": "plain", "deviceClassName": GPU},
                         {"name": "tolerant", "deviceClassName": GPU, "tolerations": [{"operator": "Exists"}]},
                     ]}), {}, id="v1.37: a prioritized list's tolerating alternative takes the tainted device"),
        pytest.param("v1.37", {"DRADeviceTaints": False}, tainted("g0", NO_SCHEDULE), claim("c"), {},
                     id="v1.37 with DRADeviceTaints=false: taints are ignored"),
        pytest.param("v1.35", None, tainted("g0", NO_SCHEDULE), claim("c"), {},
                     id="v1.35: DRADeviceTaints is alpha and off, taints are ignored"),
        pytest.param("v1.35", {"DRADeviceTaints": True}, tainted("g0", NO_SCHEDULE), claim("c"), {"n1": CANNOT},
                     id="v1.35 with DRADeviceTaints=true: taints are checked"),
    ],
)  # fmt: skip
def test_device_taints(
    version: str, gates: dict[str, bool] | None, device: dict[str, Any], pod_claim: Any, want: Verdicts
) -> None:
    assert decide(one_tainted_node(device, pod_claim), using(make_pod("p"), "c"), version, gates) == want


@pytest.mark.parametrize(
    ("pod_claim", "device"),
    [
        pytest.param(claim("c"), "g1", id="the untainted device is chosen"),
        pytest.param(claim("c", tolerating({"operator": "Exists"})), "g0", id="a tolerating request takes the first"),
    ],
)
def test_the_allocation_skips_a_tainted_device_on_the_same_node(pod_claim: Any, device: str) -> None:
    objects = [node("n1"), device_class(), slice_("n1", tainted("g0", NO_SCHEDULE), gpu("g1")), pod_claim]
    engine = Engine(make_cache(*objects), {"default-scheduler": default_profile(version="v1.37")})
    pod = using(make_pod("p"), "c").obj()
    claims = engine.framework_for(pod).run_reserve(CycleState(), pod, "n1", engine.cache.snapshot())
    assert [(d.pool, d.device) for c in claims for d in c.allocation or ()] == [("n1", device)]


# -- unmodelled features: refused, naming the field -----------------------------------------------------


def with_fields(device: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**copy.deepcopy(device), **fields}


COUNTERS = {"consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]}
POLICY = {"capacity": {"memory": {"value": "40Gi", "requestPolicy": {"validValues": ["10Gi", "20Gi"]}}}}


def per_device_slice(*devices: dict[str, Any]) -> Any:
    kind, data = slice_("n1", *devices)
    spec = data["spec"]
    del spec["nodeName"]
    spec["perDeviceNodeSelection"] = True
    for device in spec["devices"]:
        device["nodeName"] = "n1"
    return kind, data


def allocated_with_binding_conditions() -> Any:
    kind, data = claim("held", allocated=[("n1", "g0")])
    data["status"]["allocation"]["devices"]["results"][0]["bindingConditions"] = ["example.com/attached"]
    return kind, data


BASE = [node("n1"), device_class()]


@pytest.mark.parametrize(
    ("objects", "claims", "field"),
    [
        pytest.param([*BASE, slice_("n1", with_fields(gpu("g0"), **COUNTERS)), claim("c")], ["c"],
                     "resourceSlice(n1--1).spec.devices[0].consumesCounters",
                     id="partitionable: a device that consumes counters"),
        pytest.param([*BASE, slice_("n1", gpu("g0"), with_fields(gpu("g1"), **COUNTERS)), claim("c", request(count=2))],
                     ["c"], "resourceSlice(n1--1).spec.devices[1].consumesCounters",
                     id="partitionable: reached after a modelled device"),
        pytest.param([*BASE, slice_("n1", gpu("g0"), with_fields(gpu("g1"), **COUNTERS)),
                      claim("c", request(mode="All"))], ["c"], "resourceSlice(n1--1).spec.devices[1].consumesCounters",
                     id="partitionable: All looks at every device"),
        pytest.param([*BASE, per_device_slice(gpu("g0")), claim("c")], ["c"],
                     "resourceSlice(n1--1).spec.perDeviceNodeSelection",
                     id="partitionable: a slice whose devices each say which nodes reach them"),
        pytest.param([*BASE, slice_("n1", with_fields(gpu("g0"), allowMultipleAllocations=True)), claim("c")], ["c"],
                     "resourceSlice(n1--1).spec.devices[0].allowMultipleAllocations",
                     id="consumable capacity: a device several allocations may share"),
        pytest.param([*BASE, slice_("n1", with_fields(gpu("g0"), **POLICY)), claim("c")], ["c"],
                     "resourceSlice(n1--1).spec.devices[0].capacity.memory.requestPolicy",
                     id="consumable capacity: a capacity request policy"),
        pytest.param([*BASE, slice_("n1", gpu("g0")),
                      claim("c", request(capacity={"requests": {"memory": "10Gi"}}))], ["c"],
                     "resourceClaim(default/c).spec.devices.requests[0].exactly.capacity.requests",
                     id="consumable capacity: a claim's capacity requests"),
        pytest.param([*BASE, slice_("n1", gpu("g0")),
                      claim("c", {"name": "gpu", "firstAvailable": [
                          {"name": "a", "deviceClassName": GPU},
                          {"name": "b", "deviceClassName": GPU, "capacity": {"requests": {"memory": "1Gi"}}},
                      ]})], ["c"],
                     "resourceClaim(default/c).spec.devices.requests[0].firstAvailable[1].capacity.requests",
                     id="consumable capacity: an alternative's capacity requests"),
        pytest.param([*BASE, slice_("n1", gpu("g0")),
                      claim("c", constraints=[{"requests": ["gpu"], "distinctAttribute": "model"}])], ["c"],
                     "resourceClaim(default/c).spec.devices.constraints[0].distinctAttribute",
                     id="consumable capacity: a distinctAttribute constraint"),
        pytest.param([*BASE, slice_("n1", gpu("g0"), with_fields(gpu("g1"), bindingConditions=["example.com/ready"])),
                      claim("c")], ["c"], "resourceSlice(n1--1).spec.devices[1].bindingConditions",
                     id="binding conditions: the pool is refused (upstream sorts such pools last)"),
        pytest.param([*BASE, slice_("n1", with_fields(gpu("g0"), bindingFailureConditions=["example.com/failed"])),
                      claim("c")], ["c"], "resourceSlice(n1--1).spec.devices[0].bindingFailureConditions",
                     id="binding conditions: failure conditions"),
        pytest.param([*BASE, slice_("n1", with_fields(gpu("g0"), bindsToNode=True)), claim("c")], ["c"],
                     "resourceSlice(n1--1).spec.devices[0].bindsToNode", id="binding conditions: bindsToNode"),
        pytest.param([*BASE, slice_("n1", gpu("g0")), allocated_with_binding_conditions()], ["held"],
                     "resourceClaim(default/held).status.allocation.devices.results[0].bindingConditions",
                     id="binding conditions: an allocated claim waiting for them"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("version", ["v1.35", "v1.37"])
def test_a_decision_that_reads_an_unmodelled_field_is_refused_naming_it(
    objects: list[Any], claims: list[str], field: str, version: str
) -> None:
    with pytest.raises(ValidationError) as error:
        decide(objects, using(make_pod("p"), *claims), version)
    assert error.value.field == field
    assert "which podfit does not model" in error.value.message


@pytest.mark.parametrize(
    ("objects", "want"),
    [
        pytest.param([*BASE, slice_("n1", gpu("g0"), with_fields(gpu("g1"), **COUNTERS)), claim("c")], {},
                     id="a modelled device found first: the search never reaches the counters"),
        pytest.param([*BASE, node("n2"), slice_("n1", with_fields(gpu("g0"), **COUNTERS)), slice_("n2", gpu("g0")),
                      claim("c", allocated=[("n2", "g0")])], {},
                     id="an allocated claim is not allocated again"),
        pytest.param([*BASE, slice_("n1", gpu("g0")), claim("c"),
                      claim("other", request(capacity={"requests": {"memory": "1Gi"}}))], {},
                     id="another pod's claim is not this decision's"),
    ],
)  # fmt: skip
def test_a_decision_that_does_not_read_them_is_answered(objects: list[Any], want: Verdicts) -> None:
    assert decide(objects, using(make_pod("p"), "c"), "v1.37") == want


def test_the_cache_holds_objects_that_use_unmodelled_features() -> None:
    # A per-device-node-selection slice sets none of nodeName, nodeSelector and allNodes; it used to be refused.
    _, data = per_device_slice(with_fields(gpu("g0"), **COUNTERS))
    data["spec"]["sharedCounters"] = [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]
    held = resource_slice_from_k8s(data)
    assert held.per_device_node_selection
    assert held.unmodelled is not None and held.unmodelled.path == "spec.perDeviceNodeSelection"
    assert (
        held.devices[0].unmodelled is not None and held.devices[0].unmodelled.path == "spec.devices[0].consumesCounters"
    )


def extended_class(name: str = GPU, resource: str = "") -> Any:
    kind, data = device_class(name)
    if resource:
        data["spec"]["extendedResourceName"] = resource
    return kind, data


@pytest.mark.parametrize(
    ("classes", "resource", "refused"),
    [
        pytest.param([extended_class(resource="example.com/gpu")], "example.com/gpu", True,
                     id="a class's extendedResourceName"),
        pytest.param([extended_class()], f"deviceclass.resource.kubernetes.io/{GPU}", True,
                     id="the implicit name of every class"),
        pytest.param([extended_class(resource="example.com/gpu")], "example.com/fpga", False,
                     id="an extended resource no class backs"),
        pytest.param([extended_class()], "deviceclass.resource.kubernetes.io/other", False,
                     id="the implicit name of a class that does not exist"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("version", ["v1.35", "v1.37"])
def test_a_pod_requesting_a_dra_backed_extended_resource_is_refused_where_the_feature_is_on(
    classes: list[Any], resource: str, refused: bool, version: str
) -> None:
    # The node has the resource in allocatable: without the feature the pod simply fits.
    with_resource = node("n1").allocatable({"cpu": "8", "memory": "16Gi", "pods": "110", resource: "4"})
    pod = make_pod("p").container({"cpu": "1", resource: "1"})
    objects = [with_resource, *classes]
    if refused and version == "v1.37":  # DRAExtendedResource: alpha (off) in v1.35, GA in v1.37
        with pytest.raises(ValidationError) as error:
            decide(objects, pod, version)
        assert error.value.field == f"pod(default/p).requests.{resource}"
        assert "DRA extended resources (DRAExtendedResource)" in error.value.message
    else:
        assert decide(objects, pod, version) == {}


def k8s_json(item: Any) -> dict[str, Any]:
    kind, data = item
    return {"apiVersion": "resource.k8s.io/v1", "kind": kind.value, **data}


async def test_the_refusal_is_invalid_argument_with_the_field_path(live: LiveServer) -> None:
    objects = [
        node("n1").json(),
        k8s_json(device_class()),
        k8s_json(slice_("n1", with_fields(gpu("g0"), **COUNTERS))),
        k8s_json(claim("c")),
    ]
    await live.client.apply(objects)  # held, so that a real cluster can be fed
    with pytest.raises(PodfitError) as info:
        await live.client.schedule(using(make_pod("p"), "c").json())
    assert info.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.field_violations[0][0] == "resourceSlice(n1--1).spec.devices[0].consumesCounters"
    listed = await live.client.list("ResourceSlice")
    assert [len(o.resource_slice.spec.devices[0].consumes_counters) for o in listed.objects] == [1]
