"""NodeResourcesFit and NodeResourcesBalancedAllocation over rows: each row answers alike with or without
the others, on every public conformance case under each scoring configuration and on edge cases the cases
do not reach (unfittable requests, missing or zero allocatable, many extended resources, amounts outside
the int64-exact range, scored over Python ints and checked against upstream's formulas by hand)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from podfit.server.cache.cluster_cache import ClusterCache
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.status import Code, Status, unresolvable, unschedulable
from podfit.server.model import Pod
from podfit.server.model.objects import pod_from_k8s
from podfit.server.plugins import node_resources_balanced_allocation as balanced
from podfit.server.plugins import node_resources_fit as fit

from tests.builders import NodeBuilder, PodBuilder, make_cache, make_node, make_pod
from tests.conformance_support import cache_from_case, load_cases
from tests.plugins.harness import filter_one, filter_rows
from tests.plugins.row_harness import assert_filter_equivalent, assert_score_equivalent

GPU = "example.com/gpu"


def _shape(*points: tuple[int, int]) -> dict[str, Any]:
    return {"shape": [{"utilization": u, "score": s} for u, s in points]}


FIT_ARGS: dict[str, dict[str, Any]] = {
    "default": {},
    "most-allocated": {"scoringStrategy": {"type": "MostAllocated"}},
    "most-allocated-weighted": {
        "scoringStrategy": {
            "type": "MostAllocated",
            "resources": [
                {"name": "cpu", "weight": 3},
                {"name": "memory", "weight": 1},
                {"name": "ephemeral-storage", "weight": 2},
                {"name": GPU, "weight": 5},
            ],
        }
    },
    "least-allocated-extended": {
        "scoringStrategy": {
            "type": "LeastAllocated",
            "resources": [{"name": "cpu", "weight": 1}, {"name": GPU, "weight": 4}, {"name": "hugepages-2Mi"}],
        }
    },
    "ratio-increasing": {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}, {"name": GPU, "weight": 5}],
            "requestedToCapacityRatio": _shape((0, 0), (30, 7), (100, 10)),
        }
    },
    "ratio-decreasing-inner-points": {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 3}, {"name": "pods"}],
            "requestedToCapacityRatio": _shape((10, 10), (45, 3), (90, 0)),
        }
    },
    "ignored-resources": {"ignoredResources": [GPU]},
    "ignored-resource-groups": {"ignoredResourceGroups": ["example.com"]},
}

BALANCED_ARGS: dict[str, dict[str, Any]] = {
    "default": {},
    "ephemeral-storage": {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "ephemeral-storage"}]},
    "extended": {
        "resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "ephemeral-storage"}, {"name": GPU}],
    },
    "extended-first-and-untracked": {
        "resources": [{"name": GPU}, {"name": "memory"}, {"name": "pods"}, {"name": "hugepages-1Gi"}],
    },
    # Only pods requesting a GPU are scored (others skip); where no node has one nothing counts.
    "nothing-counted": {"resources": [{"name": GPU}, {"name": "hugepages-2Mi"}]},
}


def _fit(name: str) -> fit.NodeResourcesFit:
    return fit.new(FIT_ARGS[name])


def _balanced(name: str) -> balanced.NodeResourcesBalancedAllocation:
    return balanced.new(BALANCED_ARGS[name])


@functools.cache
def _conformance() -> list[tuple[str, ClusterCache, Pod]]:
    return [(case["id"], cache_from_case(case), pod_from_k8s(case["pod"])) for case in load_cases()]


@pytest.mark.parametrize("name", FIT_ARGS)
def test_fit_answers_each_row_alike_on_conformance_cases(name: str) -> None:
    plugin = _fit(name)
    filtered = scored = 0
    for case_id, cache, pod in _conformance():
        filtered += assert_filter_equivalent(plugin, pod, cache, case_id)
        scored += assert_score_equivalent(plugin, pod, cache, case_id)
    assert filtered > 100 and scored > 100


@pytest.mark.parametrize("name", BALANCED_ARGS)
def test_balanced_allocation_answers_each_row_alike_on_conformance_cases(name: str) -> None:
    plugin = _balanced(name)
    scored = sum(assert_score_equivalent(plugin, pod, cache, case_id) for case_id, cache, pod in _conformance())
    assert scored > 100


# -- edge cases ------------------------------------------------------------------------------------


def _node(name: str, **allocatable: str) -> NodeBuilder:
    return make_node(name).allocatable({k.replace("_", "-"): v for k, v in allocatable.items()})


def _bound(name: str, node: str, requests: Mapping[str, str] | None = None) -> PodBuilder:
    pod = make_pod(name).node(node)
    return pod.container(requests) if requests is not None else pod.container()


MANY = [f"example.com/r{i:02d}" for i in range(12)]

EDGE_CASES: dict[str, tuple[list[NodeBuilder | PodBuilder], PodBuilder]] = {
    "request above allocatable mixed with a full pod count": (
        [
            _node("full-and-small", cpu="4", memory="1Gi", pods="1"),
            _bound("a", "full-and-small", {"cpu": "1"}),
            _node("full", cpu="16", memory="64Gi", pods="1"),
            _bound("b", "full", {"cpu": "1"}),
            _node("busy", cpu="8", memory="64Gi", pods="10"),
            _bound("c", "busy", {"cpu": "7", "memory": "60Gi"}),
            _node("roomy", cpu="16", memory="64Gi", pods="10"),
            _node("overcommitted", cpu="8", memory="8Gi", pods="10"),
            _bound("d", "overcommitted", {"cpu": "9", "memory": "9Gi"}),
        ],
        make_pod().req(cpu="6", memory="2Gi"),
    ),
    "extended resource missing on some nodes": (
        [
            _node("two-gpus", cpu="4", memory="8Gi", pods="10", **{GPU: "2"}),
            _node("no-gpu", cpu="4", memory="8Gi", pods="10"),
            _node("gpu-used", cpu="4", memory="8Gi", pods="10", **{GPU: "1"}),
            _bound("a", "gpu-used", {GPU: "1"}),
            _node("zero-gpus", cpu="4", memory="8Gi", pods="10", **{GPU: "0"}),
            _node("small", cpu="1", memory="8Gi", pods="10", **{GPU: "4"}),
        ],
        make_pod().req(cpu="2", memory="1Gi", **{GPU: "1"}),
    ),
    "extended resource no node has, besides other reasons": (
        [
            _node("plain", cpu="4", memory="8Gi", pods="10", **{GPU: "1"}),
            _node("tiny", cpu="1", memory="8Gi", pods="0"),
        ],
        make_pod().req(cpu="2", **{"example.com/fpga": "1"}),
    ),
    "zero-request pod": (
        [
            _node("free", cpu="4", memory="8Gi", pods="2"),
            _node("full", cpu="4", memory="8Gi", pods="1"),
            _bound("a", "full"),
            _node("no-pods", cpu="4", memory="8Gi"),
            _node("busy", cpu="1", memory="1Gi", pods="5"),
            _bound("b", "busy", {"cpu": "900m", "memory": "1Gi"}),
        ],
        make_pod().container(),
    ),
    "allocatable zero or absent": (
        [
            _node("zero-cpu", cpu="0", memory="8Gi", pods="10", ephemeral_storage="10Gi"),
            _node("zero-memory", cpu="4", memory="0", pods="10"),
            _node("nothing"),
            _node("only-storage", ephemeral_storage="1Gi", pods="3", **{GPU: "2"}),
            _node("normal", cpu="4", memory="8Gi", pods="10", ephemeral_storage="100Gi", **{GPU: "8"}),
            _bound("a", "normal", {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi", GPU: "3"}),
        ],
        make_pod().req(cpu="100m", memory="128Mi", ephemeral_storage="1Gi", **{GPU: "1"}),
    ),
    "storage request only": (
        [
            _node("roomy", cpu="4", memory="8Gi", pods="10", ephemeral_storage="100Gi"),
            _node("none", cpu="4", memory="8Gi", pods="10"),
            _node("used", cpu="4", memory="8Gi", pods="10", ephemeral_storage="10Gi"),
            _bound("a", "used", {"ephemeral-storage": "9Gi"}),
        ],
        make_pod().req(ephemeral_storage="5Gi"),
    ),
    "more extended resources than the lookup table's bits": (
        [
            _node("all", cpu="4", memory="8Gi", pods="10", **dict.fromkeys(MANY, "3")),
            _node("half", cpu="4", memory="8Gi", pods="10", **dict.fromkeys(MANY[::2], "1")),
            _node("other-half", cpu="1", memory="8Gi", pods="0", **dict.fromkeys(MANY[1::2], "5")),
            _node("none", cpu="4", memory="8Gi", pods="10"),
        ],
        make_pod().req(cpu="2", **dict.fromkeys(MANY, "2")),
    ),
    "amounts beyond 2^53": (
        [
            _node("huge-memory", cpu="4", memory="100P", pods="10"),
            _node("normal", cpu="4", memory="8Gi", pods="10", ephemeral_storage="1Gi"),
        ],
        make_pod().req(cpu="1", memory="1Gi"),
    ),
    "a request near int64's limit": (
        [_node("normal", cpu="4", memory="8Gi", pods="10"), _node("huge", cpu="4", memory="8E", pods="10")],
        make_pod().req(cpu="1", memory="7E"),
    ),
}


def _edge_plugins() -> list[Any]:
    return [_fit(name) for name in FIT_ARGS] + [_balanced(name) for name in BALANCED_ARGS]


@pytest.mark.parametrize("case", EDGE_CASES)
def test_edge_cases_answer_each_row_alike(case: str) -> None:
    objects, pod_builder = EDGE_CASES[case]
    cache = make_cache(*objects)
    pod = pod_builder.obj()
    for plugin in _edge_plugins():
        if isinstance(plugin, fit.NodeResourcesFit):
            assert assert_filter_equivalent(plugin, pod, cache, case) == len(cache.snapshot().node_infos)
        assert_score_equivalent(plugin, pod, cache, case)


def _filter_rows(plugin: fit.NodeResourcesFit, case: str) -> tuple[list[str], list[Status | None], list[Status]]:
    objects, pod_builder = EDGE_CASES[case]
    snapshot = make_cache(*objects).snapshot()
    pod = pod_builder.obj()
    state = CycleState()
    plugin.pre_filter(state, pod, snapshot)
    assert snapshot.table is not None and snapshot.rows is not None
    codes, statuses = plugin.filter_rows(state, pod, snapshot.table, snapshot.rows)
    verdicts = [None if code == 0 else statuses[code - 1] for code in codes.tolist()]
    return [info.name for info in snapshot.node_infos], verdicts, statuses


@pytest.mark.parametrize(
    ("case", "want"),
    [
        pytest.param(
            "request above allocatable mixed with a full pod count",
            {
                "full-and-small": unresolvable(fit.REASON_TOO_MANY_PODS, "Insufficient cpu", "Insufficient memory"),
                "full": unschedulable(fit.REASON_TOO_MANY_PODS),
                "busy": unschedulable("Insufficient cpu"),
                "roomy": None,
                "overcommitted": unschedulable("Insufficient cpu", "Insufficient memory"),
            },
            id="too many pods comes first; only exceeding the whole allocatable is unresolvable",
        ),
        pytest.param(
            "extended resource missing on some nodes",
            {
                "two-gpus": None,
                "no-gpu": unresolvable(f"Insufficient {GPU}"),
                "gpu-used": unschedulable(f"Insufficient {GPU}"),
                "zero-gpus": unresolvable(f"Insufficient {GPU}"),
                "small": unresolvable("Insufficient cpu"),
            },
            id="a missing extended resource counts as zero allocatable",
        ),
        pytest.param(
            "extended resource no node has, besides other reasons",
            {
                "plain": unresolvable("Insufficient example.com/fpga"),
                "tiny": unresolvable(fit.REASON_TOO_MANY_PODS, "Insufficient cpu", "Insufficient example.com/fpga"),
            },
            id="a resource without a table column fails every node",
        ),
    ],
)
def test_filter_rows_verdicts(case: str, want: dict[str, Status | None]) -> None:
    names, verdicts, statuses = _filter_rows(_fit("default"), case)
    assert dict(zip(names, verdicts, strict=True)) == want
    # One Status per distinct verdict, each used.
    assert len(set(statuses)) == len(statuses) == len({v for v in verdicts if v is not None})


def test_filter_rows_many_resources_groups_verdicts() -> None:
    """Past the lookup table's bits np.unique groups the verdicts; still one Status per distinct one."""
    names, verdicts, statuses = _filter_rows(_fit("default"), "more extended resources than the lookup table's bits")
    by_name = dict(zip(names, verdicts, strict=True))
    assert by_name["all"] is None
    half = by_name["half"]
    assert half is not None and half.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert half.reasons == tuple(f"Insufficient {name}" for name in MANY)
    assert by_name["none"] == half
    other = by_name["other-half"]
    assert other is not None
    assert other.reasons == (
        fit.REASON_TOO_MANY_PODS,
        "Insufficient cpu",
        *(f"Insufficient {name}" for name in MANY[::2]),
    )
    assert len(set(statuses)) == len(statuses) == 2


def test_rows_subset_in_any_order() -> None:
    """The runtime passes the still-pending rows, not the whole table, in any order: each row's answer is
    its answer alone."""
    objects, pod_builder = EDGE_CASES["allocatable zero or absent"]
    snapshot = make_cache(*objects).snapshot()
    pod = pod_builder.obj()
    assert snapshot.table is not None and snapshot.rows is not None
    pick = np.array([4, 0, 2], dtype=np.intp)
    rows = snapshot.rows[pick]
    infos = [snapshot.node_infos[i] for i in pick.tolist()]
    for plugin in _edge_plugins():
        state = CycleState()
        plugin_any: Any = plugin
        if isinstance(plugin, fit.NodeResourcesFit):
            plugin.pre_filter(state, pod, snapshot)
            got = filter_rows(plugin, state, pod, snapshot.table, rows)
            assert got == [filter_one(plugin, state, pod, info, like=snapshot) for info in infos]
        plugin_any.pre_score(state, pod, snapshot, rows)
        want = [int(plugin_any.score_rows(state, pod, snapshot.table, rows[i : i + 1])[0]) for i in range(len(rows))]
        assert plugin_any.score_rows(state, pod, snapshot.table, rows).tolist() == want
    # Without PreScore state (its SKIP ignored), a pod requesting none of the resources scores 0.
    idle = make_pod().container().obj()
    for plugin in (_balanced("default"), _balanced("nothing-counted")):
        assert plugin.score_rows(CycleState(), idle, snapshot.table, rows).tolist() == [0, 0, 0]
    empty = np.zeros(0, dtype=np.intp)
    codes, statuses = _fit("default").filter_rows(CycleState(), pod, snapshot.table, empty)
    assert len(codes) == 0 and statuses == []
    assert len(_fit("ratio-increasing").score_rows(CycleState(), pod, snapshot.table, empty)) == 0


# Upstream's formulas by hand, in Python ints (exact at any size), for the cases beyond int64-exact
# arithmetic. LeastAllocated per resource: (allocatable - requested) * 100 // allocatable, 0 when
# requested exceeds allocatable; the node score averages cpu and memory. BalancedAllocation:
# fractions min(requested / allocatable, 1), std = |f_cpu - f_mem| / 2, score int((1 - std) * 100).
_P, _E, _GI = 2**50, 10**18, 2**30


def _least(requested: int, allocatable: int) -> int:
    return 0 if requested > allocatable else (allocatable - requested) * 100 // allocatable


def _balanced_two(cpu: float, memory: float) -> int:
    return int((1 - abs(min(cpu, 1.0) - min(memory, 1.0)) / 2) * 100)


@pytest.mark.parametrize(
    ("case", "want_fit", "want_balanced"),
    [
        pytest.param(
            "amounts beyond 2^53",
            {
                "huge-memory": (_least(1000, 4000) + _least(_GI, 100 * _P)) // 2,
                "normal": (_least(1000, 4000) + _least(_GI, 8 * _GI)) // 2,
            },
            {"huge-memory": _balanced_two(0.25, _GI / (100 * _P)), "normal": _balanced_two(0.25, 0.125)},
            id="memory of 100Pi: 87 and 81, balanced 87 and 93",
        ),
        pytest.param(
            "a request near int64's limit",
            {
                "huge": (_least(1000, 4000) + _least(7 * _E, 8 * _E)) // 2,
                "normal": (_least(1000, 4000) + _least(7 * _E, 8 * _GI)) // 2,
            },
            {"huge": _balanced_two(0.25, 7 / 8), "normal": _balanced_two(0.25, 7 * _E / (8 * _GI))},
            id="7E of 8E: (8E - 7E) * 100 passes int64",
        ),
    ],
)
def test_scores_beyond_int64_exact_amounts(case: str, want_fit: dict[str, int], want_balanced: dict[str, int]) -> None:
    objects, pod_builder = EDGE_CASES[case]
    snapshot = make_cache(*objects).snapshot()
    pod = pod_builder.obj()
    names = snapshot.names.tolist()
    for plugin, want in ((_fit("default"), want_fit), (_balanced("default"), want_balanced)):
        state = CycleState()
        plugin.pre_score(state, pod, snapshot, snapshot.rows)
        got = plugin.score_rows(state, pod, snapshot.table, snapshot.rows)
        assert got.dtype == np.int64
        assert dict(zip(names, got.tolist(), strict=True)) == want
