"""NodeResourcesFit: Filter on free allocatable and pod count, Score by resource-allocation strategy."""

from __future__ import annotations

import re
from typing import Any

import pytest
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.status import Code, Status, unresolvable, unschedulable
from podfit.server.plugins import node_resources_fit

from tests.builders import NodeBuilder, PodBuilder, make_cache, make_node, make_pod, node_info
from tests.plugins.harness import filter_one, filter_snapshot, one_row

GPU = "example.com/gpu"


def small_node(**extra: str) -> NodeBuilder:
    return make_node("node").allocatable({"cpu": "1", "memory": "1Gi", "pods": "3", **extra})


def bound(name: str, requests: dict[str, str] | None = None) -> PodBuilder:
    pod = make_pod(name).node("node")
    return pod.container(requests) if requests is not None else pod.container()


@pytest.mark.parametrize(
    ("args", "pod", "node", "on_node", "want"),
    [
        pytest.param(
            {},
            make_pod().req(cpu="500m", memory="512Mi"),
            small_node(),
            [bound("a", {"cpu": "500m"})],
            None,
            id="a pod fits when every request fits in the free allocatable",
        ),
        pytest.param(
            {},
            make_pod().req(cpu="600m"),
            small_node(),
            [bound("a", {"cpu": "500m"})],
            unschedulable("Insufficient cpu"),
            id="a request above the free room but within allocatable is Unschedulable",
        ),
        pytest.param(
            {},
            make_pod().req(cpu="1500m"),
            small_node(),
            [],
            unresolvable("Insufficient cpu"),
            id="a request above the whole allocatable is UnschedulableAndUnresolvable",
        ),
        pytest.param(
            {},
            make_pod().req(memory="768Mi"),
            small_node(),
            [bound("a", {"memory": "512Mi"})],
            unschedulable("Insufficient memory"),
            id="memory is checked like cpu",
        ),
        pytest.param(
            {},
            make_pod().req(ephemeral_storage="2Gi"),
            small_node(ephemeral_storage="1Gi"),
            [],
            unresolvable("Insufficient ephemeral-storage"),
            id="ephemeral-storage is checked against allocatable",
        ),
        pytest.param(
            {},
            make_pod().container({GPU: "1"}),
            small_node(),
            [],
            unresolvable(f"Insufficient {GPU}"),
            id="an extended resource the node does not offer is unresolvable",
        ),
        pytest.param(
            {},
            make_pod().container({GPU: "1"}),
            small_node(**{GPU: "1"}),
            [bound("a", {GPU: "1"})],
            unschedulable(f"Insufficient {GPU}"),
            id="an extended resource in use by other pods is Unschedulable",
        ),
        pytest.param(
            {},
            make_pod().req(cpu="100m"),
            small_node(),
            [bound("a"), bound("b"), bound("c")],
            unschedulable("Too many pods"),
            id="a node at its pod count rejects the pod",
        ),
        pytest.param(
            {},
            make_pod().req(cpu="100m"),
            make_node("node").allocatable({"cpu": "1", "memory": "1Gi"}),
            [],
            unschedulable("Too many pods"),
            id="a node without a pods allocatable admits no pod",
        ),
        pytest.param(
            {},
            make_pod().req(cpu="2", memory="768Mi", ephemeral_storage="1").container({GPU: "1"}),
            small_node(ephemeral_storage="0"),
            [bound("a", {"memory": "512Mi"}), bound("b"), bound("c")],
            Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                (
                    "Too many pods",
                    "Insufficient cpu",
                    "Insufficient memory",
                    "Insufficient ephemeral-storage",
                    f"Insufficient {GPU}",
                ),
            ),
            id="all reasons are reported in order and one unresolvable one makes the whole status unresolvable",
        ),
        pytest.param(
            {},
            make_pod().container(),
            small_node(),
            [bound("a", {"cpu": "1", "memory": "1Gi"})],
            None,
            id="a pod requesting nothing ignores exhausted resources",
        ),
        pytest.param(
            {},
            make_pod().container(),
            small_node(),
            [bound("a"), bound("b"), bound("c")],
            unschedulable("Too many pods"),
            id="a pod requesting nothing is still checked for the pod count",
        ),
        pytest.param(
            {},
            make_pod().req(cpu="200m").init_container({"cpu": "900m"}),
            small_node(),
            [bound("a", {"cpu": "500m"})],
            unschedulable("Insufficient cpu"),
            id="an init container's larger request is the pod's effective request",
        ),
        pytest.param(
            {},
            make_pod().req(cpu="400m").overhead(cpu="200m"),
            small_node(),
            [bound("a", {"cpu": "500m"})],
            unschedulable("Insufficient cpu"),
            id="pod overhead adds to the request",
        ),
        pytest.param(
            {"ignoredResources": [GPU]},
            make_pod().container({GPU: "1"}),
            small_node(),
            [],
            None,
            id="ignoredResources skips the named extended resource",
        ),
        pytest.param(
            {"ignoredResourceGroups": ["example.com"]},
            make_pod().container({GPU: "1"}),
            small_node(),
            [],
            None,
            id="ignoredResourceGroups skips every extended resource of the group",
        ),
        pytest.param(
            {"ignoredResources": ["hugepages-2Mi"]},
            make_pod().container({"hugepages-2Mi": "2Mi"}),
            small_node(),
            [],
            unresolvable("Insufficient hugepages-2Mi"),
            id="ignoredResources does not apply to native resources such as hugepages",
        ),
        pytest.param(
            {},
            make_pod().container({"foo": "1"}),
            small_node(),
            [],
            None,
            id="an unprefixed non-standard resource is not tracked",
        ),
    ],
)
def test_filter(
    args: dict[str, Any], pod: PodBuilder, node: NodeBuilder, on_node: list[PodBuilder], want: Status | None
) -> None:
    plugin = node_resources_fit.new(args)
    state = CycleState()
    assert plugin.pre_filter(state, pod.obj(), make_cache().snapshot()) == (None, None)
    assert filter_one(plugin, state, pod.obj(), node_info(node, *on_node)) == want


def score(args: dict[str, Any], pod: PodBuilder, node: NodeBuilder, *on_node: PodBuilder) -> int:
    plugin = node_resources_fit.new(args)
    state = CycleState()
    info = node_info(node, *on_node)
    table, rows = one_row(info)
    assert plugin.pre_score(state, pod.obj(), make_cache().snapshot(), rows) is None
    return int(plugin.score_rows(state, pod.obj(), table, rows)[0])


def strategy(
    kind: str, resources: list[tuple[str, int]] | None = None, shape: list[tuple[int, int]] | None = None
) -> dict[str, Any]:
    data: dict[str, Any] = {"type": kind}
    if resources is not None:
        data["resources"] = [{"name": n, "weight": w} for n, w in resources]
    if shape is not None:
        data["requestedToCapacityRatio"] = {"shape": [{"utilization": u, "score": s} for u, s in shape]}
    return {"scoringStrategy": data}


NODE = make_node("node").allocatable({"cpu": "1", "memory": "1000Mi", "pods": "110", GPU: "4"})
LINEAR_UP = [(0, 0), (100, 10)]


@pytest.mark.parametrize(
    ("args", "pod", "on_node", "want"),
    [
        pytest.param({}, make_pod().req(cpu="250m", memory="250Mi"), [], 75, id="LeastAllocated scores the free share"),
        pytest.param(
            {},
            make_pod().req(cpu="250m", memory="500Mi"),
            [bound("a", {"cpu": "250m", "memory": "100Mi"})],
            45,
            id="LeastAllocated averages cpu and memory and counts existing requests",
        ),
        pytest.param(
            {},
            make_pod().req(cpu="100m", memory="100Mi"),
            [bound("a", {"cpu": "333m", "memory": "1Mi"})],
            72,
            id="LeastAllocated truncates each resource score and the average",
        ),
        pytest.param(
            {},
            make_pod().container(),
            [],
            85,
            id="a pod without requests is scored as 100m cpu and 200Mi memory",
        ),
        pytest.param(
            {},
            make_pod().req(cpu="250m", memory="250Mi"),
            [bound("a")],
            60,
            id="existing pods without requests also count with the non-zero defaults",
        ),
        pytest.param(
            {},
            make_pod().req(cpu="2", memory="250Mi"),
            [],
            37,
            id="LeastAllocated gives 0 to a resource requested beyond capacity",
        ),
        pytest.param(
            strategy("LeastAllocated", [("cpu", 3), ("memory", 1)]),
            make_pod().req(cpu="500m", memory="1000Mi"),
            [],
            37,
            id="resource weights weight the average",
        ),
        pytest.param(
            strategy("MostAllocated"),
            make_pod().req(cpu="250m", memory="500Mi"),
            [],
            37,
            id="MostAllocated scores the used share",
        ),
        pytest.param(
            strategy("MostAllocated"),
            make_pod().req(cpu="2", memory="500Mi"),
            [],
            75,
            id="MostAllocated caps a resource requested beyond capacity at 100",
        ),
        pytest.param(
            strategy("MostAllocated", [("cpu", 1), (GPU, 1)]),
            make_pod().req(cpu="500m"),
            [],
            50,
            id="an extended resource the pod does not request is left out of the average",
        ),
        pytest.param(
            strategy("MostAllocated", [("cpu", 1), (GPU, 1)]),
            make_pod().container({"cpu": "500m", GPU: "1"}),
            [],
            37,
            id="a requested extended resource is scored against the node's allocatable",
        ),
        pytest.param(
            strategy("MostAllocated", [("cpu", 1), ("example.com/fpga", 1)]),
            make_pod().container({"cpu": "500m", "example.com/fpga": "1"}),
            [],
            50,
            id="a resource the node does not offer is left out of the average",
        ),
        pytest.param(
            strategy("RequestedToCapacityRatio", shape=LINEAR_UP),
            make_pod().req(cpu="250m", memory="500Mi"),
            [],
            38,
            id="RequestedToCapacityRatio rounds the weighted average",
        ),
        pytest.param(
            strategy("RequestedToCapacityRatio", shape=LINEAR_UP),
            make_pod().req(cpu="750m", memory="500Mi"),
            [],
            63,
            id="RequestedToCapacityRatio rounds halves away from zero",
        ),
        pytest.param(
            strategy("RequestedToCapacityRatio", shape=[(0, 10), (100, 0)]),
            make_pod().req(cpu="1", memory="500Mi"),
            [],
            50,
            id="RequestedToCapacityRatio leaves resources scoring 0 out of the average",
        ),
        pytest.param(
            strategy("RequestedToCapacityRatio", shape=[(50, 0), (60, 10)]),
            make_pod().req(cpu="550m", memory="300Mi"),
            [],
            50,
            id="the shape is flat outside its points and linear between them",
        ),
        pytest.param(
            strategy("RequestedToCapacityRatio", shape=[(0, 0), (30, 10)]),
            make_pod().req(cpu="2", memory="1Mi"),
            [],
            100,
            id="a resource requested beyond capacity scores as full utilisation",
        ),
    ],
)
def test_score(args: dict[str, Any], pod: PodBuilder, on_node: list[PodBuilder], want: int) -> None:
    assert score(args, pod, NODE, *on_node) == want


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            {"scoringStrategy": {"type": "Balanced"}},
            "NodeResourcesFitArgs.scoringStrategy.type: Unsupported value",
            id="an unknown scoring strategy is rejected",
        ),
        pytest.param(
            strategy("LeastAllocated", [("cpu", 101)]),
            "NodeResourcesFitArgs.scoringStrategy.resources[0].weight",
            id="a resource weight above 100 is rejected",
        ),
        pytest.param(
            strategy("LeastAllocated", [("cpu", -1)]),
            "NodeResourcesFitArgs.scoringStrategy.resources[0].weight",
            id="a negative resource weight is rejected",
        ),
        pytest.param(
            strategy("RequestedToCapacityRatio"),
            "NodeResourcesFitArgs.scoringStrategy.requestedToCapacityRatio.shape",
            id="RequestedToCapacityRatio needs a shape",
        ),
        pytest.param(
            strategy("RequestedToCapacityRatio", shape=[(50, 1), (50, 2)]),
            "NodeResourcesFitArgs.scoringStrategy.requestedToCapacityRatio.shape[1].utilization",
            id="shape utilizations must increase",
        ),
        pytest.param(
            strategy("RequestedToCapacityRatio", shape=[(0, 11)]),
            "NodeResourcesFitArgs.scoringStrategy.requestedToCapacityRatio.shape[0].score",
            id="shape scores above 10 are rejected",
        ),
        pytest.param(
            strategy("RequestedToCapacityRatio", shape=[(101, 1)]),
            "NodeResourcesFitArgs.scoringStrategy.requestedToCapacityRatio.shape[0].utilization",
            id="shape utilizations above 100 are rejected",
        ),
        pytest.param(
            {"ignoredResourceGroups": ["example.com/gpu"]},
            "NodeResourcesFitArgs.ignoredResourceGroups[0]",
            id="a resource group containing a slash is rejected",
        ),
        pytest.param(
            {"ignoredResources": ["not a name"]},
            "NodeResourcesFitArgs.ignoredResources[0]",
            id="an ignored resource that is not a qualified name is rejected",
        ),
        pytest.param({"scoringstrategy": {}}, "NodeResourcesFitArgs: unknown field", id="unknown fields are rejected"),
    ],
)
def test_invalid_args(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        node_resources_fit.new(args)


def test_zero_weight_defaults_to_one() -> None:
    """A weight of 0 (or none) means 1, as upstream's defaulting does."""
    args = strategy("MostAllocated", [("cpu", 0), ("memory", 3)])
    pod = make_pod().req(cpu="500m", memory="250Mi")
    assert score(args, pod, NODE) == 31


@pytest.mark.parametrize(
    ("name", "scalar", "extended"),
    [
        pytest.param("example.com/gpu", True, True, id="a domain-prefixed name is an extended resource"),
        pytest.param("kubernetes.io/foo", True, False, id="kubernetes.io names are native scalar resources"),
        pytest.param("hugepages-1Gi", True, False, id="hugepages are scalar but not extended"),
        pytest.param("attachable-volumes-aws-ebs", True, False, id="attachable volumes are scalar"),
        pytest.param("foo", False, False, id="an unprefixed name is neither scalar nor extended"),
        pytest.param("requests.example.com/gpu", False, False, id="quota-prefixed names are not extended"),
        pytest.param("Example.com/gpu", False, False, id="an invalid domain prefix is not extended"),
    ],
)
def test_resource_kinds(name: str, scalar: bool, extended: bool) -> None:
    assert (node_resources_fit.is_scalar_resource(name), node_resources_fit.is_extended_resource(name)) == (
        scalar,
        extended,
    )


# More checks than an int64 bitmask holds: bit 0 marks unresolvable, bit 1 the pod count, bit 2 + j the
# pod's j-th checked resource (cpu first, then the extended ones by name). cpu and 63 extended resources
# are 64 checks, so the last two resources' bits are 64 and 65, past int64: the verdicts take Python ints.
WIDE = [f"example.com/r{i:02d}" for i in range(63)]
WIDE_LAST = WIDE[-1]


def wide_node(name: str, cpu: str = "4", pods: str = "10", **amounts: str) -> NodeBuilder:
    return make_node(name).allocatable(
        {"cpu": cpu, "memory": "8Gi", "pods": pods, **dict.fromkeys(WIDE, "3"), **amounts}
    )


WIDE_NODES: list[NodeBuilder | PodBuilder] = [
    wide_node("all"),
    make_node("none").allocatable({"cpu": "4", "memory": "8Gi", "pods": "10"}),
    wide_node("last-short", **{WIDE_LAST: "1"}),
    wide_node("last-used"),
    make_pod("uses-last").node("last-used").container({WIDE_LAST: "2"}),
    wide_node("full-and-small", cpu="1", pods="1"),
    make_pod("fills").node("full-and-small").container(),
]


@pytest.mark.parametrize(
    ("node", "want"),
    [
        pytest.param("all", None, id="every one of the 64 checks fits"),
        pytest.param(
            "none",
            unresolvable(*(f"Insufficient {name}" for name in WIDE)),
            id="63 missing extended resources: all reported, in order",
        ),
        pytest.param(
            "last-short",
            unresolvable(f"Insufficient {WIDE_LAST}"),
            id="only the 64th check (bit 65) fails beyond the whole allocatable",
        ),
        pytest.param(
            "last-used",
            unschedulable(f"Insufficient {WIDE_LAST}"),
            id="only the 64th check fails on what is used",
        ),
        pytest.param(
            "full-and-small",
            unresolvable(node_resources_fit.REASON_TOO_MANY_PODS, "Insufficient cpu"),
            id="too many pods and cpu, the 63 extended resources fitting",
        ),
    ],
)
def test_filter_beyond_63_verdict_bits(node: str, want: Status | None) -> None:
    plugin = node_resources_fit.new({})
    pod = make_pod().req(cpu="2", **dict.fromkeys(WIDE, "2")).obj()
    snapshot = make_cache(*WIDE_NODES).snapshot()
    state = CycleState()
    assert plugin.pre_filter(state, pod, snapshot) == (None, None)
    # The node among all the others (each distinct verdict one Status), and the node alone.
    assert filter_snapshot(plugin, state, pod, snapshot)[node] == want
    assert filter_one(plugin, state, pod, snapshot.node_info_map[node], like=snapshot) == want
