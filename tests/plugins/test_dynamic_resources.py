"""DynamicResources through the framework, stated as upstream's plugin and allocator tests state their
cases: DeviceClasses, ResourceSlices and ResourceClaims, a pod, and what each node answers (or the gate,
the framework error, the scores, PostFilter's text) — in both versions where they differ. The public DRA
corpora check the same plugin against kube-scheduler itself (tests/test_conformance.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from podfit.server.config import default_profile
from podfit.server.engine import Engine
from podfit.server.model import Kind, ValidationError
from podfit.server.model.cel import CelError, compile_selector, device_value, parse_semver
from podfit.server.model.dra import resource_claim_from_k8s, resource_slice_from_k8s

from tests.builders import NodeBuilder, PodBuilder, make_cache, make_node, make_pod

GPU = "gpu.example.com"
UNRESOLVABLE = "UnschedulableAndUnresolvable"
Verdicts = dict[str, tuple[str, tuple[str, ...], str]]


def node(name: str, **labels: str) -> NodeBuilder:
    return make_node(name).capacity(cpu="8", memory="16Gi", pods="110").labels(**labels)


def device_class(name: str = GPU, *selectors: str) -> Any:
    exprs = selectors or (f'device.driver == "{GPU}"',)
    return (
        Kind.DEVICE_CLASS,
        {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": e}} for e in exprs]}},
    )


def gpu(name: str, model: str = "a100", memory: str = "40Gi", **attributes: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {"model": {"string": model}}
    for key, value in attributes.items():
        attrs[key] = {"int": value} if isinstance(value, int) else {"version": value}
    return {"name": name, "attributes": attrs, "capacity": {"memory": {"value": memory}}}


def slice_(
    node_name: str | None, *devices: dict[str, Any], pool: str = "", generation: int = 1, count: int = 1, name: str = ""
) -> Any:
    spec: dict[str, Any] = {
        "driver": GPU,
        "pool": {"name": pool or node_name or "shared", "generation": generation, "resourceSliceCount": count},
        "devices": list(devices),
    }
    if node_name is None:
        spec["allNodes"] = True
    else:
        spec["nodeName"] = node_name
    return (Kind.RESOURCE_SLICE, {"metadata": {"name": name or f"{node_name}-{pool}-{generation}"}, "spec": spec})


def request(
    name: str = "gpu", count: int = 1, cls: str = GPU, mode: str = "ExactCount", **extra: Any
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls, "allocationMode": mode, **extra}
    if mode == "ExactCount":
        exactly["count"] = count
    return {"name": name, "exactly": exactly}


def claim(name: str, *requests: dict[str, Any], allocated: list[tuple[str, str]] | None = None, **extra: Any) -> Any:
    data: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default", **extra.pop("meta", {})},
        "spec": {"devices": {"requests": list(requests) or [request()], **extra}},
    }
    if allocated is not None:
        results = [{"request": "gpu", "driver": GPU, "pool": pool, "device": dev} for pool, dev in allocated]
        data["status"] = {"allocation": {"devices": {"results": results}}}
    return (Kind.RESOURCE_CLAIM, data)


def using(pod: PodBuilder, *claims: str) -> PodBuilder:
    pod.spec["resourceClaims"] = [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)]
    return pod


def engine(objects: list[Any], version: str) -> Engine:
    return Engine(make_cache(*objects), {"default-scheduler": default_profile(version=version)})


def verdicts(objects: list[Any], pod: PodBuilder, version: str = "v1.35") -> Verdicts:
    decision, _, _ = engine(objects, version).decide(pod.obj(), score=False)
    assert not decision.failed, decision.message
    return {n: (s.plugin, s.reasons, s.code.value) for n, s in decision.rejections().items()}


TWO_NODES = [node("n1"), node("n2"), device_class(), slice_("n1", gpu("g0"), gpu("g1")), slice_("n2", gpu("g0"))]


@pytest.mark.parametrize(
    ("objects", "pod", "want"),
    [
        pytest.param(TWO_NODES, make_pod("p"), {}, id="a pod without claims is not the plugin's business"),
        pytest.param(
            [*TWO_NODES, claim("c", request(count=2))],
            using(make_pod("p"), "c"),
            {"n2": ("DynamicResources", ("cannot allocate all claims",), UNRESOLVABLE)},
            id="two devices fit only where two are published",
        ),
        pytest.param(
            [*TWO_NODES, claim("held", allocated=[("n1", "g0"), ("n1", "g1")]), claim("c")],
            using(make_pod("p"), "c"),
            {"n1": ("DynamicResources", ("cannot allocate all claims",), UNRESOLVABLE)},
            id="devices another claim holds are in use",
        ),
        pytest.param(
            [
                *TWO_NODES,
                claim("held", allocated=[("n1", "g0"), ("n1", "g1"), ("n2", "g0")]),
                claim("c", request(adminAccess=True)),
            ],
            using(make_pod("p"), "c"),
            {},
            id="admin access may take devices in use",
        ),
        pytest.param(
            [
                *TWO_NODES,
                claim(
                    "c",
                    request(
                        selectors=[{"cel": {"expression": 'device.attributes["gpu.example.com"].model == "h100"'}}]
                    ),
                ),
            ],
            using(make_pod("p"), "c"),
            {n: ("DynamicResources", ("cannot allocate all claims",), UNRESOLVABLE) for n in ("n1", "n2")},
            id="a request selector no device passes",
        ),
        pytest.param(
            [
                node("n1"),
                device_class(),
                slice_("n1", gpu("g0", numa=0), gpu("g1", numa=1), gpu("g2", numa=1)),
                claim(
                    "c",
                    request("a"),
                    request("b"),
                    constraints=[{"requests": [], "matchAttribute": f"{GPU}/numa"}],
                ),
            ],
            using(make_pod("p"), "c"),
            {},
            id="matchAttribute backtracks to a pair on one NUMA node",
        ),
        pytest.param(
            [
                node("n1"),
                device_class(),
                slice_("n1", gpu("g0", numa=0), gpu("g1", numa=1)),
                claim("c", request("a"), request("b"), constraints=[{"matchAttribute": f"{GPU}/numa"}]),
            ],
            using(make_pod("p"), "c"),
            {"n1": ("DynamicResources", ("cannot allocate all claims",), UNRESOLVABLE)},
            id="matchAttribute without a matching pair",
        ),
        pytest.param(
            [node("n1"), device_class(), slice_("n1", gpu("g0"), pool="p", count=2)],
            using(make_pod("p"), "c"),
            {},
            id="gated pods are not filtered",  # the claim is missing: PreEnqueue gates (see the gate table)
        ),
        pytest.param(
            [
                node("n1"),
                device_class(),
                slice_("n1", gpu("g0"), pool="p", count=2, name="a"),
                claim("c"),
            ],
            using(make_pod("p"), "c"),
            {"n1": ("DynamicResources", ("cannot allocate all claims",), UNRESOLVABLE)},
            id="an incomplete pool is not allocated from",
        ),
        pytest.param(
            [
                node("n1"),
                device_class(),
                slice_("n1", gpu("g0"), pool="p", count=2, name="a"),
                slice_("n1", gpu("g0"), pool="p", count=2, name="b"),
                claim("c"),
            ],
            using(make_pod("p"), "c"),
            {"n1": ("DynamicResources", ("invalid resource pools were encountered",), UNRESOLVABLE)},
            id="a duplicate device name makes the pool invalid",
        ),
        pytest.param(
            [
                node("n1"),
                device_class(),
                slice_("n1", gpu("old"), pool="p", generation=1, name="a"),
                slice_("n1", gpu("g0"), pool="p", generation=2, name="b"),
                claim("c", request(count=2)),
            ],
            using(make_pod("p"), "c"),
            {"n1": ("DynamicResources", ("cannot allocate all claims",), UNRESOLVABLE)},
            id="only the newest generation of a pool counts",
        ),
        pytest.param(
            [node("n1"), node("n2"), device_class(), slice_(None, gpu("g0"), pool="net"), claim("c")],
            using(make_pod("p"), "c"),
            {},
            id="an allNodes slice serves every node",
        ),
        pytest.param(
            [
                *TWO_NODES,
                (
                    Kind.RESOURCE_CLAIM,
                    {
                        "metadata": {"name": "c", "namespace": "default"},
                        "spec": {"devices": {"requests": [request()]}},
                        "status": {
                            "allocation": {
                                "devices": {
                                    "results": [{"request": "gpu", "driver": GPU, "pool": "n2", "device": "g0"}]
                                },
                                "nodeSelector": {
                                    "nodeSelectorTerms": [
                                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
                                    ]
                                },
                            }
                        },
                    },
                ),
            ],
            using(make_pod("p"), "c"),
            {"n1": ("DynamicResources", ("resourceclaim not available on the node",), UNRESOLVABLE)},
            id="an allocated claim pins the pod to its allocation's nodes",
        ),
        pytest.param(
            [*TWO_NODES, claim("c", request(cls="fpga"))],
            using(make_pod("p"), "c"),
            {
                n: ("DynamicResources", ("request gpu: device class fpga does not exist",), UNRESOLVABLE)
                for n in ("n1", "n2")
            },
            id="a missing DeviceClass rejects at PreFilter",
        ),
    ],
)
def test_filter(objects: list[Any], pod: PodBuilder, want: Verdicts) -> None:
    for version in ("v1.35", "v1.37"):
        assert verdicts(objects, pod, version) == want


def _template_pod(status_name: str | None, owner: str = "uid-p") -> tuple[PodBuilder, Any]:
    pod = make_pod("p").uid("uid-p")
    pod.spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    pod._d["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": status_name}]}
    refs = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner, "controller": True}]
    return pod, claim("p-gpu", meta={"ownerReferences": refs})


@pytest.mark.parametrize(
    ("case", "v135", "v137"),
    [
        pytest.param("missing", 'could not find ResourceClaim "default/c"', None, id="missing claim"),
        pytest.param("deleting", 'resourceclaim "c" is being deleted', None, id="claim being deleted"),
        pytest.param(
            "no-status", 'pod "default/p": ResourceClaim not created yet', None, id="template claim not created"
        ),
        pytest.param(
            "not-owner",
            "ResourceClaim default/p-gpu was not created for pod default/p (pod is not owner)",
            "ResourceClaim default/p-gpu was not created for Pod default/p (Pod is not owner)",
            id="template claim of another pod",
        ),
        pytest.param("owned", "", None, id="template claim owned by the pod"),
        pytest.param("unnamed", "", None, id="a null claim name needs no claim"),
    ],
)
def test_pre_enqueue(case: str, v135: str, v137: str | None) -> None:
    objects: list[Any] = [*TWO_NODES]
    pod = using(make_pod("p"), "c")
    if case == "deleting":
        objects.append(claim("c", meta={"deletionTimestamp": "2026-01-01T00:00:00Z"}))
    elif case == "no-status":
        pod = make_pod("p")
        pod.spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    elif case in ("not-owner", "owned", "unnamed"):
        pod, template_claim = _template_pod(
            None if case == "unnamed" else "p-gpu", "other" if case == "not-owner" else "uid-p"
        )
        objects.append(template_claim)
    for version, text in (("v1.35", v135), ("v1.37", v137 if v137 is not None else v135)):
        decision, _, _ = engine(objects, version).decide(pod.obj())
        assert decision.gated is bool(text)
        assert decision.message == (f"DynamicResources: {text}" if text else "")


@pytest.mark.parametrize(
    ("selector", "v135", "v137"),
    [
        pytest.param(
            'device.attributes["gpu.example.com"].missing == 1',
            'running "DynamicResources" filter plugin: class gpu.example.com: selector #1: CEL runtime error: '
            "no such key: missing",
            'running "DynamicResources" filter plugin: class gpu.example.com: selector #1 on device '
            "gpu.example.com/n1/g0: CEL runtime error: no such key: missing. consider using CEL optional chaining "
            "(.? followed by orValue()) or guarding the check with has() for optional fields",
            id="a missing attribute aborts the attempt",
        ),
        pytest.param(
            '"missing" in device.attributes["gpu.example.com"] && device.attributes["gpu.example.com"].missing == 1',
            "",
            "",
            id="a guarded selector does not",
        ),
    ],
)
def test_cel_runtime_errors(selector: str, v135: str, v137: str) -> None:
    objects = [
        node("n1"),
        device_class(GPU, f'device.driver == "{GPU}"', selector),
        slice_("n1", gpu("g0")),
        claim("c"),
    ]
    for version, text in (("v1.35", v135), ("v1.37", v137)):
        decision, _, outcome = engine(objects, version).decide(using(make_pod("p"), "c").obj())
        assert (decision.failed, decision.message) == (bool(text), text)
        assert (outcome is None) is bool(text)


def _prioritized(*alternatives: tuple[str, str]) -> dict[str, Any]:
    return {
        "name": "gpu",
        "firstAvailable": [
            {
                "name": sub,
                "deviceClassName": GPU,
                "selectors": [{"cel": {"expression": f'device.attributes["{GPU}"].model == "{model}"'}}],
            }
            for sub, model in alternatives
        ],
    }


def test_prioritized_list_scores_the_first_choice_highest() -> None:
    objects = [
        node("n1"),
        node("n2"),
        device_class(),
        slice_("n1", gpu("g0", "h100")),
        slice_("n2", gpu("g0", "l4")),
        claim("c", _prioritized(("big", "h100"), ("small", "l4"))),
    ]
    for version in ("v1.35", "v1.37"):
        decision, _, _ = engine(objects, version).decide(using(make_pod("p"), "c").obj())
        scores = {s.node_name: s.plugins["DynamicResources"] for s in decision.scores}
        # Raw 8 and 7, normalised to 100 and 87, weighed 2.
        assert scores == {"n1": 200, "n2": 174}


def test_allocated_and_pending_claims_score_per_version() -> None:
    objects = [*TWO_NODES, claim("done", allocated=[("n2", "g0")]), claim("c", _prioritized(("any", "a100")))]
    pod = using(make_pod("p"), "done", "c")
    old, _, _ = engine(objects, "v1.35").decide(pod.obj())
    assert old.failed and old.message == (
        'running Score plugins: plugin "DynamicResources" failed with: number of allocations 1 is smaller than '
        "number of claims"
    )
    assert old.feasible_count == 1 and not old.scores
    new, _, _ = engine(objects, "v1.37").decide(pod.obj())
    assert not new.failed and [s.plugins["DynamicResources"] for s in new.scores] == [200]


@pytest.mark.parametrize(
    ("objects", "pod", "v135", "v137"),
    [
        pytest.param(
            [node("n1"), device_class(), slice_("n1", gpu("g0")), claim("c", request(count=2))],
            using(make_pod("p"), "c"),
            "Unschedulable: still not schedulable, preemption: 0/1 nodes are available: 1 Preemption is not "
            "helpful for scheduling.",
            "Unschedulable: preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
            id="nothing to deallocate",
        ),
        pytest.param(
            [node("n1"), device_class(), claim("c", request(cls="none"))],
            using(make_pod("p"), "c"),
            "Unschedulable: no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not "
            "helpful for scheduling.",
            "Unschedulable: preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
            id="rejected at its own PreFilter",
        ),
    ],
)
def test_post_filter(objects: list[Any], pod: PodBuilder, v135: str, v137: str) -> None:
    for version, text in (("v1.35", v135), ("v1.37", v137)):
        result = engine(objects, version).preempt(pod.obj())
        assert f"{result.code}: {result.message}" == text


@pytest.mark.parametrize(
    ("expression", "want"),
    [
        pytest.param(
            'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) == 0', True, id="quantity equal"
        ),
        pytest.param(
            'device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("39Gi"))', True, id="quantity greater"
        ),
        pytest.param(
            'device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("2.0.0"))', True, id="semver"
        ),
        pytest.param('device.attributes["gpu.example.com"].driverVersion.major() == 2', True, id="semver major"),
        pytest.param('device.attributes["other.example.com"].size() == 0', True, id="an absent domain is an empty map"),
        pytest.param('device.attributes["gpu.example.com"].nope', "no such key: nope", id="missing key"),
        pytest.param('device.attributes["gpu.example.com"].model + 1 == 2', "no such overload", id="type error"),
    ],
)
def test_cel(expression: str, want: bool | str) -> None:
    data = resource_slice_from_k8s(slice_("n1", gpu("g0", driverVersion="2.1.0"))[1])
    value = device_value(GPU, data.devices[0])
    if isinstance(want, bool):
        assert compile_selector(expression).matches(value) is want
    else:
        with pytest.raises(CelError, match=want):
            compile_selector(expression).matches(value)


@pytest.mark.parametrize(
    ("text", "ordered_after"),
    [("1.2.3", "1.2.3-rc.1"), ("1.10.0", "1.9.9"), ("1.0.0-rc.2", "1.0.0-rc.1"), ("1.0.0-beta", "1.0.0-2")],
)
def test_semver_order(text: str, ordered_after: str) -> None:
    assert parse_semver(text) > parse_semver(ordered_after)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        pytest.param({"spec": {"devices": {"requests": [{"name": "x"}]}}}, "requests[0]", id="request of no kind"),
        pytest.param(
            {"spec": {"devices": {"requests": [request(mode="Some")]}}},
            "requests[0].exactly.allocationMode",
            id="unknown allocation mode",
        ),
        pytest.param(
            {"spec": {"devices": {"requests": [request(selectors=[{"cel": {"expression": "device.("}}])]}}},
            "requests[0].exactly.selectors[0].cel.expression",
            id="a selector that does not compile",
        ),
    ],
)
def test_bad_claims_name_the_field(patch: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as exc:
        resource_claim_from_k8s({"metadata": {"name": "c"}, **patch})
    assert field in exc.value.field


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        pytest.param(
            'quantity("abc").isInteger()',
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            id="not a quantity",
        ),
        pytest.param("1 / 0 == 1", "divide by zero", id="division by zero"),
        pytest.param("device.driver", "no such overload", id="not a bool"),
    ],
)
def test_cel_errors_are_runtime_errors_not_crashes(expression: str, error: str) -> None:
    value = device_value(GPU, resource_slice_from_k8s(slice_("n1", gpu("g0"))[1]).devices[0])
    with pytest.raises(CelError, match=re.escape(error)):
        compile_selector(expression).matches(value)
