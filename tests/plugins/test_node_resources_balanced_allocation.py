"""NodeResourcesBalancedAllocation: 100 x (1 - std-dev of requested/allocatable fractions), real requests."""

from __future__ import annotations

import re
from typing import Any

import pytest
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.status import SKIP, Status
from podfit.server.framework.versions import VERSIONS
from podfit.server.plugins import node_resources_balanced_allocation as balanced

from tests.builders import PodBuilder, make_cache, make_node, make_pod, node_info
from tests.plugins.harness import one_row

GPU = "example.com/gpu"
NODE = make_node("node").allocatable(
    {"cpu": "1", "memory": "1000Mi", "ephemeral-storage": "1000", "pods": "110", GPU: "4"}
)


def resources(*names: str) -> dict[str, Any]:
    return {"resources": [{"name": n, "weight": 1} for n in names]}


def score(args: dict[str, Any], pod: PodBuilder, *on_node: PodBuilder) -> int | Status:
    plugin = balanced.new(args)
    state = CycleState()
    info = node_info(NODE, *on_node)
    table, rows = one_row(info)
    status = plugin.pre_score(state, pod.obj(), make_cache().snapshot(), rows)
    if status is not None:
        return status
    return int(plugin.score_rows(state, pod.obj(), table, rows)[0])


@pytest.mark.parametrize(
    ("args", "pod", "on_node", "want"),
    [
        pytest.param({}, make_pod().container(), [], SKIP, id="PreScore skips a pod that requests nothing"),
        pytest.param(
            {},
            make_pod().container({GPU: "1"}),
            [],
            SKIP,
            id="PreScore skips a pod requesting only resources outside the configured set",
        ),
        pytest.param(
            {}, make_pod().req(cpu="500m", memory="500Mi"), [], 100, id="equal cpu and memory shares score 100"
        ),
        pytest.param(
            {},
            make_pod().req(cpu="250m", memory="750Mi"),
            [],
            75,
            id="two resources score 100 times one minus half their difference",
        ),
        pytest.param({}, make_pod().req(cpu="2", memory="500Mi"), [], 75, id="a share above 1 counts as 1"),
        pytest.param(
            {},
            make_pod().req(memory="666Mi"),
            [],
            66,
            id="a missing cpu request counts as zero and the result is truncated",
        ),
        pytest.param(
            {},
            make_pod().req(cpu="500m", memory="500Mi"),
            [make_pod("a").node("node").container()],
            100,
            id="existing pods without requests add nothing",
        ),
        pytest.param(
            {},
            make_pod().req(cpu="250m", memory="250Mi"),
            [make_pod("a").node("node").req(cpu="250m", memory="500Mi")],
            87,
            id="existing requests add to the pod's",
        ),
        pytest.param(
            resources("cpu", "memory", "ephemeral-storage"),
            make_pod().req(cpu="500m", memory="500Mi", ephemeral_storage="200"),
            [],
            85,
            id="three or more resources use the population standard deviation",
        ),
        pytest.param(
            resources("cpu", "memory", GPU),
            make_pod().container({"cpu": "500m", "memory": "500Mi", GPU: "1"}),
            [],
            88,
            id="a requested extended resource takes part",
        ),
        pytest.param(
            resources("cpu", "memory", GPU),
            make_pod().req(cpu="500m", memory="500Mi"),
            [],
            100,
            id="an extended resource the pod does not request is left out",
        ),
        pytest.param(
            resources("cpu", "memory", "example.com/fpga"),
            make_pod().container({"cpu": "500m", "memory": "500Mi", "example.com/fpga": "1"}),
            [],
            100,
            id="a resource the node does not offer is left out",
        ),
        pytest.param(
            resources("cpu"),
            make_pod().req(cpu="300m", memory="900Mi"),
            [],
            100,
            id="a single resource always scores 100",
        ),
    ],
)
def test_score(args: dict[str, Any], pod: PodBuilder, on_node: list[PodBuilder], want: int | Status) -> None:
    assert score(args, pod, *on_node) == want


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            {"resources": [{"name": "cpu", "weight": 2}]},
            "NodeResourcesBalancedAllocationArgs.resources[0].weight",
            id="a weight other than 1 is rejected",
        ),
        pytest.param(
            resources("cpu", "cpu"),
            "NodeResourcesBalancedAllocationArgs.resources[1].name: Duplicate value",
            id="a resource named twice is rejected",
        ),
        pytest.param(
            {"resource": []}, "NodeResourcesBalancedAllocationArgs: unknown field", id="unknown fields are rejected"
        ),
    ],
)
def test_invalid_args(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        balanced.new(args)


def test_zero_weight_defaults_to_one() -> None:
    """Upstream defaulting turns a zero weight into 1 before validation requires exactly 1."""
    plugin = balanced.new({"resources": [{"name": "cpu", "weight": 0}, {"name": "memory"}]})
    assert [(r.name, r.weight) for r in plugin.scorer.resources] == [("cpu", 1), ("memory", 1)]


def score_as(version: str, args: dict[str, Any], pod: PodBuilder, *on_node: PodBuilder) -> int | Status:
    """``score`` with the plugin built from a version's Features, as a profile builds it."""
    plugin = balanced.new(args, VERSIONS[version].features())
    state = CycleState()
    table, rows = one_row(node_info(NODE, *on_node))
    status = plugin.pre_score(state, pod.obj(), make_cache().snapshot(), rows)
    if status is not None:
        return status
    return int(plugin.score_rows(state, pod.obj(), table, rows)[0])


# NODE: 1 CPU, 1000Mi. v1.35 scores the balance with the pod (B_with); v1.37 how the pod changes it:
# 50 + (50 + B_with - B_without) // 2, so 75 when the balance does not move.
@pytest.mark.parametrize(
    ("pod", "on_node", "v135", "v137"),
    [
        pytest.param(make_pod().req(cpu="500m", memory="500Mi"), [], 100, 75,
                     id="an empty node stays balanced: 75 in v1.37"),
        pytest.param(make_pod().req(cpu="500m", memory="0"), [], 75, 62,
                     id="a cpu-only pod unbalances an empty node: with 75, without 100"),
        pytest.param(make_pod().req(cpu="500m", memory="0"), [make_pod("on").node("node").req(memory="500Mi")], 100, 87,
                     id="a cpu pod rebalances a memory-heavy node: with 100, without 75"),
        pytest.param(make_pod().req(cpu="250m", memory="0"), [make_pod("on").node("node").req(cpu="500m")], 62, 68,
                     id="more cpu on a cpu-heavy node: with 62, without 75"),
        pytest.param(make_pod().container(), [], SKIP, SKIP, id="a pod requesting nothing is skipped in both"),
    ],
)  # fmt: skip
def test_each_version_scores_with_its_own_formula(
    pod: PodBuilder, on_node: list[PodBuilder], v135: int | Status, v137: int | Status
) -> None:
    assert score_as("v1.35", {}, pod, *on_node) == v135
    assert score_as("v1.37", {}, pod, *on_node) == v137
