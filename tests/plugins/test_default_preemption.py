"""DefaultPreemption's PostFilter: victim selection, PDB handling, node ranking and the status text.

The profile here pairs the real TaintToleration, DynamicResources and DefaultPreemption plugins with two
small test plugins, so that these tests depend on the preemption logic only: a cpu-only fit check (like
NodeResourcesFit's) and a PreFilter-state plugin whose verdict is right only if preemption keeps its
state in step through ``run_remove_pod`` / ``run_add_pod``.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest
from podfit.server.cache.cluster_cache import Delete, Upsert
from podfit.server.cache.node_info import NodeInfo
from podfit.server.cache.node_table import NodeTable
from podfit.server.cache.snapshot import Snapshot
from podfit.server.engine import Engine
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import Int32Array, IntpArray, Plugin, PreemptionResult, PreFilterResult
from podfit.server.framework.profile import Profile
from podfit.server.framework.status import Status, unresolvable, unschedulable
from podfit.server.model import Kind, Pod, PodDisruptionBudget, ValidationError
from podfit.server.model.decode import object_from_k8s
from podfit.server.model.objects import pod_from_k8s
from podfit.server.plugins import default_preemption, dynamic_resources, node_affinity, taint_toleration
from podfit.server.plugins.default_preemption import DefaultPreemption

from tests.builders import NodeBuilder, PodBuilder, make_cache, make_node, make_pdb, make_pod

CacheItem = PodBuilder | NodeBuilder | tuple[Kind, Mapping[str, Any]]

_BLOCKERS_KEY = "PreFilterNoBlockers"
REASON_BLOCKER = "node(s) had a blocker pod"
INT32_MIN = -(2**31)


class _CpuFit:
    """NodeResourcesFit's verdict for cpu alone: Unresolvable when the node could never hold the pod.
    It reads only its rows' columns, so dry runs may batch nodes when no PreFilter state is in play."""

    name = "CpuFit"
    row_local = True

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        want = pod.requests.get("cpu", 0)
        column = table.resources.get("cpu")
        allocatable = table.allocatable[rows, column] if column is not None else np.zeros(len(rows), dtype=np.int64)
        requested = table.requested[rows, column] if column is not None else np.zeros(len(rows), dtype=np.int64)
        codes = np.where(want > allocatable, 1, np.where(requested + want > allocatable, 2, 0)).astype(np.int32)
        return codes, [unresolvable("Insufficient cpu"), unschedulable("Insufficient cpu")]


class _Counts:
    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def clone(self) -> _Counts:
        return _Counts(dict(self.counts))


def _is_blocker(pod: Pod) -> bool:
    return pod.labels.get("blocker") == "true"


class _NoBlockers:
    """Rejects nodes running a pod labelled blocker=true, judged from PreFilter state only."""

    name = "NoBlockers"

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> tuple[PreFilterResult | None, None]:
        counts = {info.name: sum(1 for p in info.pods.values() if _is_blocker(p)) for info in snapshot.node_infos}
        state.write(_BLOCKERS_KEY, _Counts(counts))
        return None, None

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo, snapshot: Snapshot) -> None:
        if _is_blocker(pod_to_add):
            state.read(_BLOCKERS_KEY, _Counts).counts[node_info.name] += 1

    def remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo, snapshot: Snapshot
    ) -> None:
        if _is_blocker(pod_to_remove):
            state.read(_BLOCKERS_KEY, _Counts).counts[node_info.name] -= 1

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        counts = state.read(_BLOCKERS_KEY, _Counts).counts
        infos = table.infos
        blocked = [counts[info.name] > 0 if (info := infos[row]) is not None else False for row in rows.tolist()]
        return np.array(blocked, dtype=np.int32), [unschedulable(REASON_BLOCKER)]


def _profile(with_dra: bool = True, with_blockers: bool = True) -> Profile:
    """Without the blockers plugin no PreFilter state follows removed pods: dry runs batch the nodes."""
    affinity = node_affinity.new({})
    taints = taint_toleration.new({})
    cpu, blockers = _CpuFit(), _NoBlockers()
    preemption = default_preemption.new({})
    stateful: list[Any] = [blockers] if with_blockers else []
    dra: list[Any] = [dynamic_resources.new({})] if with_dra else []
    plugins: dict[str, Plugin] = {p.name: p for p in (affinity, taints, cpu, *stateful, *dra, preemption)}
    return Profile(
        pre_filter=[affinity, *stateful, *dra],
        filter=[taints, affinity, cpu, *stateful],
        post_filter=[*dra, preemption],
        plugins=plugins,
    )


def _preempt(pod: PodBuilder, *objects: CacheItem, with_dra: bool = True) -> PreemptionResult:
    engine = Engine(make_cache(*objects), {"default-scheduler": _profile(with_dra)})
    return engine.preempt(pod.obj())


def _node(name: str, cpu: str = "2") -> NodeBuilder:
    return make_node(name).capacity(cpu=cpu)


def _pod(name: str, node: str, cpu: str, priority: int, start: int | None = None, **labels: str) -> PodBuilder:
    """A bound pod; ``start`` is the second of its start time (None = not started)."""
    pod = make_pod(name).node(node).req(cpu=cpu).priority(priority).labels(**labels)
    if start is not None:
        pod.start_time(f"2024-01-01T00:00:{start:02d}Z")
    return pod


def _incoming(cpu: str, priority: int, policy: str = "") -> PodBuilder:
    return make_pod("incoming").req(cpu=cpu).priority(priority, policy)


def _victims(result: PreemptionResult) -> list[str]:
    return [v.name for v in result.victims]


DB_PDB = {"matchLabels": {"app": "db"}}


# -- victims on one node -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("objects", "incoming", "victims", "violations"),
    [
        pytest.param(
            [_node("n1"), _pod("same", "n1", "1", 5, 1), _pod("lower", "n1", "1", 4, 2)],
            _incoming("1", 5),
            ["lower"],
            0,
            id="only pods with strictly lower priority than the preemptor are victims",
        ),
        pytest.param(
            [_node("n1", "3"), _pod("p1", "n1", "1", 1, 1), _pod("p2", "n1", "1", 2, 2), _pod("p3", "n1", "1", 3, 3)],
            _incoming("2", 10),
            ["p2", "p1"],
            0,
            id="the most important victims are reprieved first so the least important ones go",
        ),
        pytest.param(
            [_node("n1"), _pod("older", "n1", "1", 1, 1), _pod("newer", "n1", "1", 1, 2)],
            _incoming("1", 10),
            ["newer"],
            0,
            id="at equal priority the pod that started later is evicted",
        ),
        pytest.param(
            [_node("n1"), _pod("unstarted", "n1", "1", 1, None), _pod("started", "n1", "1", 1, 30)],
            _incoming("1", 10),
            ["unstarted"],
            0,
            id="a pod without a start time counts as started now and so is the least important",
        ),
        pytest.param(
            [
                _node("n1"),
                _pod("guarded", "n1", "1", 1, 1, app="db"),
                _pod("free", "n1", "1", 2, 2),
                make_pdb("db", DB_PDB, 0),
            ],
            _incoming("1", 10),
            ["free"],
            0,
            id="a victim whose eviction would violate a PDB is reprieved before a more important unguarded one",
        ),
        pytest.param(
            [_node("n1"), _pod("guarded", "n1", "1", 1, 1, app="db"), _pod("free", "n1", "1", 2, 2)],
            _incoming("1", 10),
            ["guarded"],
            0,
            id="without a PDB the least important pod is the victim",
        ),
        pytest.param(
            [
                _node("n1"),
                _pod("a", "n1", "1", 1, 1, app="db"),
                _pod("b", "n1", "1", 2, 2, app="db"),
                make_pdb("db", DB_PDB, 1),
            ],
            _incoming("2", 10),
            ["b", "a"],
            1,
            id="each eviction uses one allowed disruption so only the second victim violates the PDB",
        ),
        pytest.param(
            [
                _node("n1"),
                _pod("guarded", "n1", "1", 1, 1, app="db"),
                _pod("free", "n1", "1", 2, 2),
                make_pdb("db", DB_PDB, 0, min_available=5),
            ],
            _incoming("1", 10),
            ["free"],
            0,
            id="only status.disruptionsAllowed counts, not the PDB's minAvailable",
        ),
        pytest.param(
            [
                _node("n1"),
                _pod("guarded", "n1", "1", 1, 1, app="db"),
                _pod("free", "n1", "1", 2, 2),
                make_pdb("db", {}, 0),
            ],
            _incoming("1", 10),
            ["guarded"],
            0,
            id="a PDB with an empty selector protects nothing",
        ),
        pytest.param(
            [
                _node("n1"),
                _pod("guarded", "n1", "1", 1, 1, app="db"),
                _pod("free", "n1", "1", 2, 2),
                make_pdb("db", None, 0),
            ],
            _incoming("1", 10),
            ["guarded"],
            0,
            id="a PDB without a selector protects nothing",
        ),
        pytest.param(
            [
                _node("n1"),
                _pod("guarded", "n1", "1", 1, 1, app="db"),
                _pod("free", "n1", "1", 2, 2),
                make_pdb("db", DB_PDB, 0, namespace="other"),
            ],
            _incoming("1", 10),
            ["guarded"],
            0,
            id="a PDB in another namespace protects nothing",
        ),
        pytest.param(
            [_node("n1"), _pod("guarded", "n1", "2", 1, 1, app="db"), make_pdb("db", DB_PDB, 0)],
            _incoming("1", 10),
            ["guarded"],
            1,
            id="a PDB-guarded pod is still evicted when nothing else makes room and counts as a violation",
        ),
        pytest.param(
            [
                _node("n1", "4"),
                _pod("blocker", "n1", "1", 1, 1, blocker="true"),
                _pod("bystander", "n1", "1", 0, 2),
                _pod("important", "n1", "1", 20, 3),
            ],
            _incoming("1", 10),
            ["blocker"],
            0,
            id="removing and re-adding victims keeps PreFilter state in step so only the blocking pod goes",
        ),
    ],
)
def test_victims_on_one_node(
    objects: list[CacheItem], incoming: PodBuilder, victims: list[str], violations: int
) -> None:
    result = _preempt(incoming, *objects)
    assert result.nominated_node == "n1"
    assert result.code == "Success"
    assert result.message == ""
    assert _victims(result) == victims
    assert result.num_pdb_violations == violations


# -- choosing the node ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("objects", "ties"),
    [
        pytest.param(
            [
                _node("n1"),
                _pod("guarded", "n1", "2", 1, 1, app="db"),
                make_pdb("db", DB_PDB, 0),
                _node("n2"),
                _pod("free", "n2", "2", 3, 2),
            ],
            ["n2"],
            id="the node with fewer PDB violations wins over lower victim priority",
        ),
        pytest.param(
            [
                _node("n1"),
                _pod("one", "n1", "2", 3, 1),
                _node("n2"),
                _pod("two-a", "n2", "1", 2, 2),
                _pod("two-b", "n2", "1", 2, 3),
            ],
            ["n2"],
            id="the node whose most important victim has the lowest priority wins over fewer victims",
        ),
        pytest.param(
            [
                _node("n1"),
                _pod("a", "n1", "1", 2, 1),
                _pod("b", "n1", "1", 1, 2),
                _node("n2"),
                _pod("c", "n2", "1", 2, 3),
                _pod("d", "n2", "1", 2, 4),
            ],
            ["n1"],
            id="with equal highest victim priority the smaller priority sum wins",
        ),
        pytest.param(
            [
                _node("n1"),
                _pod("a", "n1", "1", -5, 1),
                _pod("b", "n1", "1", -5, 2),
                _node("n2"),
                _pod("c", "n2", "2", -5, 3),
            ],
            ["n2"],
            id="the priority sum offsets negative priorities so more negative victims do not look cheaper",
        ),
        pytest.param(
            [
                _node("n1"),
                _pod("a", "n1", "1", 0, 1),
                _pod("b", "n1", "1", INT32_MIN, 2),
                _node("n2"),
                _pod("c", "n2", "2", 0, 3),
            ],
            ["n2"],
            id="with equal offset priority sums the node with fewer victims wins",
        ),
        pytest.param(
            [
                _node("n1"),
                _pod("early", "n1", "2", 1, 1),
                _node("n2"),
                _pod("late", "n2", "2", 1, 5),
            ],
            ["n2"],
            id="then the node whose highest-priority victims started latest wins",
        ),
        pytest.param(
            [
                _node("n1"),
                _pod("n1-high", "n1", "1", 2, 5),
                _pod("n1-low", "n1", "1", 1, 1),
                _node("n2"),
                _pod("n2-high", "n2", "1", 2, 3),
                _pod("n2-low", "n2", "1", 1, 9),
            ],
            ["n1"],
            id="only the start times of the highest-priority victims decide, not those of lower ones",
        ),
        pytest.param(
            [
                _node("n1"),
                _pod("started", "n1", "2", 1, 1),
                _node("n2"),
                _pod("unstarted", "n2", "2", 1, None),
            ],
            ["n2"],
            id="a victim without a start time counts as started now when ranking nodes",
        ),
        pytest.param(
            [
                _node("n2"),
                _pod("b", "n2", "2", 1, 1),
                _node("n1"),
                _pod("a", "n1", "2", 1, 1),
                _node("n3"),
                _pod("c", "n3", "2", 2, 1),
            ],
            ["n1", "n2"],
            id="nodes tied under every criterion are all reported and the first by name is nominated",
        ),
    ],
)
def test_candidate_ranking(objects: list[CacheItem], ties: list[str]) -> None:
    result = _preempt(_incoming("2", 10), *objects)
    assert list(result.node_ties) == ties
    assert result.nominated_node == ties[0]


# -- when preemption does not help -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("objects", "incoming", "message"),
    [
        pytest.param(
            [_node("n1"), _pod("low", "n1", "2", 1, 1)],
            _incoming("1", 10, "Never"),
            "preemption: not eligible due to preemptionPolicy=Never.",
            id="a pod with preemptionPolicy Never does not preempt",
        ),
        pytest.param(
            [_node("n1"), _pod("a", "n1", "1", 5, 1), _pod("b", "n1", "1", 7, 2)],
            _incoming("1", 5),
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
            id="equal and higher priority pods are never victims",
        ),
        pytest.param(
            [
                _node("n1").taint("dedicated", "x"),
                _pod("low", "n1", "2", 1, 1),
                _node("n2"),
                _pod("eq", "n2", "2", 10, 1),
            ],
            _incoming("1", 10),
            "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
            "1 Preemption is not helpful for scheduling.",
            id="a node rejected as unresolvable is never dry-run even if it holds lower priority pods",
        ),
        pytest.param(
            [
                _node("n1"),
                _pod("low", "n1", "1", 1, 1),
                _pod("high", "n1", "1", 20, 2),
                _node("n2", "1"),
                _pod("low2", "n2", "1", 1, 3),
            ],
            _incoming("2", 10),
            "preemption: 0/2 nodes are available: 1 Insufficient cpu, 1 Preemption is not helpful for scheduling.",
            id="a request larger than allocatable is unresolvable and the rest reports the dry-run filter reason",
        ),
        pytest.param(
            [
                _node("n1"),
                _pod("low", "n1", "1", 1, 1),
                _pod("high", "n1", "1", 20, 2),
                _node("n2"),
                _pod("low2", "n2", "1", 1, 3),
                _pod("high2", "n2", "1", 20, 4),
            ],
            _incoming("2", 10),
            "preemption: 0/2 nodes are available: 2 Insufficient cpu.",
            id="a node where the pod does not fit even without every lower priority pod reports why",
        ),
    ],
)
def test_no_candidate(objects: list[CacheItem], incoming: PodBuilder, message: str) -> None:
    result = _preempt(incoming, *objects)
    assert (result.nominated_node, result.victims, result.node_ties) == ("", (), ())
    assert result.code == "Unschedulable"
    assert result.message == f"no new claims to deallocate, {message}"
    assert result.postfilter == f"Unschedulable: no new claims to deallocate, {message}"


def test_an_unresolvable_prefilter_rejection_ends_post_filter_in_dynamic_resources() -> None:
    """DynamicResources' PreFilter runs last, so after an earlier UnschedulableAndUnresolvable PreFilter
    its PostFilter finds no state and errors before DefaultPreemption runs."""
    conflict = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["n1"]},
                        {"key": "metadata.name", "operator": "In", "values": ["n2"]},
                    ]
                }
            ]
        }
    }
    result = _preempt(_incoming("1", 10).affinity("nodeAffinity", conflict), _node("n1"), _pod("low", "n1", "2", 1, 1))
    assert (result.nominated_node, result.postfilter) == ("", "Error: not found")


def test_message_without_dynamic_resources_has_no_claims_prefix() -> None:
    result = _preempt(_incoming("1", 10, "Never"), _node("n1"), _pod("low", "n1", "2", 1, 1), with_dra=False)
    assert result.message == "preemption: not eligible due to preemptionPolicy=Never."


# -- nominated pods ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nominated", "ties"),
    [
        pytest.param([], ["n1"], id="without nominations the node with the cheaper victim is chosen"),
        pytest.param(
            [make_pod("reserved").req(cpu="1").priority(10).nominated("n1")],
            ["n2"],
            id="a pending pod of equal priority nominated to a node reserves its room there",
        ),
        pytest.param(
            [make_pod("reserved").req(cpu="1").priority(50).nominated("n1")],
            ["n2"],
            id="a pending pod of higher priority nominated to a node reserves its room there",
        ),
        pytest.param(
            [make_pod("reserved").req(cpu="1").priority(5).nominated("n1")],
            ["n1"],
            id="a pending pod of lower priority nominated to a node reserves nothing",
        ),
        pytest.param(
            [make_pod("incoming").req(cpu="2").priority(10).nominated("n1")],
            ["n1"],
            id="the preemptor's own nomination does not reserve room against itself",
        ),
    ],
)
def test_nominated_pods_reserve_room(nominated: list[PodBuilder], ties: list[str]) -> None:
    objects: list[CacheItem] = [
        _node("n1"),
        _pod("cheap", "n1", "2", 1, 1),
        _node("n2"),
        _pod("dear", "n2", "2", 2, 2),
        *nominated,
    ]
    result = _preempt(_incoming("2", 10), *objects)
    assert list(result.node_ties) == ties


# -- engine and plugin plumbing ------------------------------------------------------------------------


def test_preemption_leaves_the_cache_untouched() -> None:
    cache = make_cache(_node("n1"), _pod("low", "n1", "2", 1, 1))
    engine = Engine(cache, {"default-scheduler": _profile()})
    result = engine.preempt(_incoming("1", 10).obj())
    assert _victims(result) == ["low"]
    info = cache.snapshot().get("n1")
    assert info is not None
    assert list(info.pods) == ["default/low"]
    assert info.requested_amount("cpu") == 2000


def test_no_post_filter_when_a_node_fits() -> None:
    result = _preempt(_incoming("1", 10), _node("n1"), _pod("low", "n1", "1", 1, 1))
    assert (result.nominated_node, result.code, result.postfilter) == ("", "", "")


@pytest.mark.parametrize(
    ("args", "field"),
    [
        pytest.param({"minCandidateNodesPercentage": 101}, "minCandidateNodesPercentage", id="percentage above 100"),
        pytest.param({"minCandidateNodesPercentage": -1}, "minCandidateNodesPercentage", id="negative percentage"),
        pytest.param({"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute", id="negative absolute"),
        pytest.param(
            {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
            "minCandidateNodesPercentage",
            id="percentage and absolute both zero",
        ),
        pytest.param({"minCandidateNodesAbsolute": "10"}, "minCandidateNodesAbsolute", id="a non-integer value"),
    ],
)
def test_invalid_args_are_rejected(args: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        default_preemption.new(args)
    assert raised.value.field == field


def test_default_args() -> None:
    plugin = default_preemption.new({})
    assert isinstance(plugin, DefaultPreemption)
    assert (plugin.min_candidate_nodes_percentage, plugin.min_candidate_nodes_absolute) == (10, 100)
    custom = default_preemption.new({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 5})
    assert (custom.min_candidate_nodes_percentage, custom.min_candidate_nodes_absolute) == (0, 5)


# -- exhaustive cross-check ----------------------------------------------------------------------------


def _upstream_pick(ranked: dict[str, tuple[list[Pod], int]], now: float) -> list[str]:
    """pickOneNodeForPreemption written out criterion by criterion, keeping every node still tied."""

    def start(p: Pod) -> float:
        return now if p.start_time is None else p.start_time

    def latest_start(victims: list[Pod]) -> float:
        top = max(p.priority for p in victims)
        return min(start(p) for p in victims if p.priority == top)

    criteria: list[Callable[[list[Pod], int], float]] = [
        lambda victims, violations: -violations,
        lambda victims, violations: -victims[0].priority,
        lambda victims, violations: -sum(p.priority + 2**31 for p in victims),
        lambda victims, violations: -len(victims),
        lambda victims, violations: latest_start(victims),
    ]
    nodes = sorted(ranked)
    for criterion in criteria:
        scores = {n: criterion(*ranked[n]) for n in nodes}
        top = max(scores.values())
        nodes = [n for n in nodes if scores[n] == top]
    return nodes


def _millicpu(cpu: str) -> int:
    return int(cpu[:-1]) if cpu.endswith("m") else int(cpu) * 1000


def _random_cluster(seed: int) -> tuple[list[CacheItem], PodBuilder]:
    """Eight nodes of bound pods and a preemptor that fits on none of them as they stand: every node is
    filled until less cpu is free than the preemptor asks for, so each seed runs the PostFilter."""
    rnd = random.Random(seed)
    want, priority = rnd.choice(["1500m", "2"]), rnd.choice([3, 6, 10])
    objects: list[CacheItem] = []
    for n in range(8):
        node, capacity = f"n{n}", rnd.choice([2, 3])
        objects.append(_node(node, str(capacity)))
        pods, requested = rnd.randrange(3, 8), 0
        i = 0
        while i < pods or capacity * 1000 - requested >= _millicpu(want):
            labels = {"app": rnd.choice(["db", "web", "cache"])}
            if rnd.random() < 0.1:
                labels["blocker"] = "true"
            start = rnd.choice([None, 1, 2, 3])
            cpu = rnd.choice(["500m", "1"])
            requested += _millicpu(cpu)
            objects.append(_pod(f"{node}-p{i}", node, cpu, rnd.choice([-3, 0, 1, 5, 8]), start, **labels))
            i += 1
    for app in ("db", "web"):
        objects.append(make_pdb(app, {"matchLabels": {"app": app}}, rnd.randrange(0, 3)))
    return objects, _incoming(want, priority)


@pytest.mark.parametrize("with_blockers", [True, False], ids=["node by node", "nodes in lockstep"])
@pytest.mark.parametrize("seed", range(60))
def test_pruned_search_equals_exhaustive_ranking(seed: int, with_blockers: bool) -> None:
    """Skipping nodes that cannot rank first, or dry-running all nodes in lockstep over one table, never
    changes the answer: each is checked against every node's own SelectVictimsOnNode (seeded random
    clusters where the preemptor fits nowhere without evictions; blocker pods keep PreFilter state in
    play, which forces the node-by-node dry run)."""
    objects, incoming = _random_cluster(seed)
    cache = make_cache(*objects)
    engine = Engine(cache, {"default-scheduler": _profile(with_blockers=with_blockers)})
    pod = incoming.obj()
    result = engine.preempt(pod)
    framework = engine.framework_for(pod)
    snapshot = cache.snapshot()
    _, state, outcome = engine.decide(pod, score=False, snapshot=snapshot)
    assert outcome is not None
    assert not outcome.feasible, f"seed {seed}: the preemptor fits without evictions, so nothing is cross-checked"
    plugin = framework.profile.plugins["DefaultPreemption"]
    assert isinstance(plugin, DefaultPreemption)
    now = 10**10  # later than every start time, like "now"
    ranked: dict[str, tuple[list[Pod], int]] = {}
    for info in snapshot.node_infos:
        status = outcome.statuses[info.name]
        if status is None or status.code.value != "Unschedulable":
            continue
        victims, violations, failure = plugin.select_victims_on_node(
            state, pod, info, snapshot, framework, snapshot.pdbs, now
        )
        if failure is None and victims:
            ranked[info.name] = (victims, violations)
    expected = _upstream_pick(ranked, now) if ranked else []
    assert list(result.node_ties) == expected
    if expected:
        victims, violations = ranked[expected[0]]
        assert (result.code, result.nominated_node) == ("Success", expected[0])
        assert (list(result.victims), result.num_pdb_violations) == (victims, violations)
    else:
        assert (result.code, result.nominated_node, result.victims) == ("Unschedulable", "", ())


def test_the_random_clusters_mostly_end_in_a_nomination() -> None:
    """The cross-check above compares rankings only where some node has victims: most seeds must."""
    nominated = 0
    for seed in range(60):
        objects, incoming = _random_cluster(seed)
        engine = Engine(make_cache(*objects), {"default-scheduler": _profile()})
        nominated += engine.preempt(incoming.obj()).nominated_node != ""
    assert nominated >= 50, nominated


# -- PDB status.disruptedPods (filterPodsWithPDBViolation) ---------------------------------------------

FOO_PDB = {"matchLabels": {"app": "foo"}}


def _foo(name: str, start: int, node: str = "n1", priority: int = 5) -> PodBuilder:
    return _pod(name, node, "1", priority, start, app="foo")


@pytest.mark.parametrize("with_blockers", [True, False], ids=["node by node", "nodes in lockstep"])
@pytest.mark.parametrize(
    ("objects", "incoming", "victims", "violations"),
    [
        pytest.param(
            [_node("n1"), _foo("p1.1", 1), _foo("p1.2", 2), make_pdb("foo", FOO_PDB, 1)],
            _incoming("2", 10),
            ["p1.1", "p1.2"],
            1,
            id="preemption with violation of same pdb (upstream)",
        ),
        pytest.param(
            [_node("n1"), _foo("p1.1", 1), _foo("p1.2", 2), make_pdb("foo", FOO_PDB, 1, disrupted_pods=["p2"])],
            _incoming("2", 10),
            ["p1.1", "p1.2"],
            1,
            id="the pdb lists an evicted pod but not the victim so the victim still violates it (upstream)",
        ),
        pytest.param(
            [_node("n1"), _foo("p1.1", 1), _foo("p1.2", 2), make_pdb("foo", FOO_PDB, 1, disrupted_pods=["p1.2"])],
            _incoming("2", 10),
            ["p1.1", "p1.2"],
            0,
            id="a victim in the pdb's disruptedPods takes nothing from the budget (upstream)",
        ),
        pytest.param(
            [
                _node("n1", "3"),
                _foo("p1.1", 1),
                _foo("p1.2", 2),
                _foo("p1.3", 3),
                make_pdb("foo", FOO_PDB, 1, disrupted_pods=["p1.3"]),
            ],
            _incoming("3", 10),
            ["p1.1", "p1.2", "p1.3"],
            1,
            id="the victim in disruptedPods is non-violating while the others still spend the budget (upstream)",
        ),
        pytest.param(
            [
                _node("n1"),
                _pod("guarded", "n1", "1", 1, 1, app="foo"),
                _pod("free", "n1", "1", 2, 2),
                make_pdb("foo", FOO_PDB, 0, disrupted_pods=["guarded"]),
            ],
            _incoming("1", 10),
            ["guarded"],
            0,
            id="a pod in disruptedPods is no longer reprieved first so the less important pod goes",
        ),
        pytest.param(
            [
                _node("n1"),
                _foo("p1.1", 1),
                _foo("p1.2", 2),
                make_pdb("listing", FOO_PDB, 1, disrupted_pods=["p1.2"]),
                make_pdb("other", FOO_PDB, 1),
            ],
            _incoming("2", 10),
            ["p1.1", "p1.2"],
            1,
            id="disruptedPods exempts a pod only from the budget that lists it",
        ),
        pytest.param(
            [
                _node("n1"),
                _foo("p1.1", 1),
                _foo("p1.2", 2),
                make_pdb("foo", FOO_PDB, 1, namespace="other", disrupted_pods=["p1.1", "p1.2"]),
                make_pdb("here", FOO_PDB, 0, disrupted_pods=["p1.1"]),
            ],
            _incoming("2", 10),
            ["p1.1", "p1.2"],
            1,
            id="disruptedPods names pods of the budget's own namespace only",
        ),
    ],
)
def test_pdb_disrupted_pods(
    objects: list[CacheItem], incoming: PodBuilder, victims: list[str], violations: int, with_blockers: bool
) -> None:
    engine = Engine(make_cache(*objects), {"default-scheduler": _profile(with_blockers=with_blockers)})
    result = engine.preempt(incoming.obj())
    assert (result.code, result.nominated_node) == ("Success", "n1")
    assert _victims(result) == victims
    assert result.num_pdb_violations == violations


def test_pdb_disrupted_pods_are_read_from_kubernetes_json() -> None:
    kind, data = make_pdb("foo", FOO_PDB, 1, disrupted_pods=["a", "b"])
    pdb = object_from_k8s(kind, data, "pdb")
    assert isinstance(pdb, PodDisruptionBudget)
    assert pdb.disrupted_pods == frozenset({"a", "b"})
    assert object_from_k8s(*make_pdb("foo", FOO_PDB, 1), "pdb") == dataclasses.replace(pdb, disrupted_pods=frozenset())
    data["status"]["disruptedPods"] = {"a": "yesterday"}
    with pytest.raises(ValidationError) as raised:
        object_from_k8s(kind, data, "pdb")
    assert raised.value.field == "pdb.status.disruptedPods.a"
    data["status"]["disruptedPods"] = ["a"]
    with pytest.raises(ValidationError) as raised:
        object_from_k8s(kind, data, "pdb")
    assert raised.value.field == "pdb.status.disruptedPods"


# -- PodEligibleToPreemptOthers: victims still terminating on the nominated node ----------------------

NOT_ELIGIBLE_TERMINATING = "preemption: not eligible due to a terminating pod on the nominated node."


def _held() -> PodBuilder:
    """A lower-priority pod holding 2 of n1's 3 cpu: the victim when the preemptor may preempt."""
    return _pod("held", "n1", "2", 1, 1)


def _terminating(priority: int = 1) -> PodBuilder:
    """A victim of an earlier preemption still terminating on n1 (upstream's podTerminatingByPreemption)."""
    return _pod("leaving", "n1", "1", priority, 2).preempted()


@pytest.mark.parametrize(
    ("objects", "incoming", "want"),
    [
        pytest.param(
            [_node("n1", "3"), _held(), _terminating()],
            _incoming("2", 10).nominated("n1"),
            NOT_ELIGIBLE_TERMINATING,
            id="a lower-priority pod preempted by the scheduler still terminating on the nominated node (upstream)",
        ),
        pytest.param(
            [_node("n1", "3"), _held(), _pod("leaving", "n1", "1", 1, 2).terminating()],
            _incoming("2", 10).nominated("n1"),
            ("n1", ["held"]),
            id="a terminating pod without the DisruptionTarget condition is not a victim of preemption (upstream)",
        ),
        pytest.param(
            [
                _node("n1", "3"),
                _held(),
                _pod("leaving", "n1", "1", 1, 2).condition("DisruptionTarget", "True", "PreemptionByScheduler"),
            ],
            _incoming("2", 10).nominated("n1"),
            ("n1", ["held"]),
            id="a pod marked for preemption but without a deletionTimestamp is not terminating",
        ),
        pytest.param(
            [
                _node("n1", "3"),
                _held(),
                _pod("leaving", "n1", "1", 1, 2)
                .condition("DisruptionTarget", "True", "EvictionByEvictionAPI")
                .terminating(),
            ],
            _incoming("2", 10).nominated("n1"),
            ("n1", ["held"]),
            id="a DisruptionTarget condition with another reason does not count",
        ),
        pytest.param(
            [
                _node("n1", "3"),
                _held(),
                _pod("leaving", "n1", "1", 1, 2)
                .condition("DisruptionTarget", "False", "PreemptionByScheduler")
                .condition("DisruptionTarget", "True", "PreemptionByScheduler")
                .terminating(),
            ],
            _incoming("2", 10).nominated("n1"),
            ("n1", ["held"]),
            id="the first DisruptionTarget condition decides and a False one does not count",
        ),
        pytest.param(
            [_node("n1", "3"), _held(), _terminating(priority=10)],
            _incoming("2", 10).nominated("n1"),
            ("n1", ["held"]),
            id="a terminating pod of equal priority is not one the preemptor could have preempted",
        ),
        pytest.param(
            [
                _node("n1", "3"),
                _held(),
                _node("n2", "3"),
                _pod("held2", "n2", "2", 1, 1),
                _pod("leaving2", "n2", "1", 1, 2).preempted(),
            ],
            _incoming("2", 10).nominated("n1"),
            ("n1", ["held"]),
            id="a preempted pod terminating on another node than the nominated one does not count",
        ),
        pytest.param(
            [_node("n1", "3"), _held(), _terminating()],
            _incoming("2", 10),
            ("n1", ["held"]),
            id="a pod without a nominated node is eligible",
        ),
        pytest.param(
            [_node("n1", "3"), _held(), _terminating()],
            _incoming("2", 10).nominated("gone"),
            ("n1", ["held"]),
            id="a nominated node that is not in the cluster counts as unschedulable and unresolvable",
        ),
        pytest.param(
            [_node("n1", "3").taint("dedicated", "x"), _held(), _terminating(), _node("n2"), _pod("low", "n2", "2", 1)],
            _incoming("2", 10).nominated("n1"),
            ("n2", ["low"]),
            id="a nominated node Filter found unschedulable and unresolvable lets the pod preempt elsewhere (upstream)",
        ),
        pytest.param(
            [_node("n1"), _pod("leaving", "n1", "2", 1, 2).preempted()],
            _incoming("2", 10),
            ("n1", ["leaving"]),
            id="a terminating pod is still a potential victim",
        ),
        pytest.param(
            [_node("n1", "3"), _held(), _terminating()],
            _incoming("2", 10, "Never").nominated("n1"),
            "preemption: not eligible due to preemptionPolicy=Never.",
            id="preemptionPolicy Never is checked first",
        ),
    ],
)
def test_eligible_to_preempt_others(
    objects: list[CacheItem], incoming: PodBuilder, want: str | tuple[str, list[str]]
) -> None:
    result = _preempt(incoming, *objects)
    if isinstance(want, str):
        assert (result.nominated_node, result.victims, result.node_ties) == ("", (), ())
        assert result.postfilter == f"Unschedulable: no new claims to deallocate, {want}"
    else:
        assert (result.code, result.message) == ("Success", "")
        assert (result.nominated_node, _victims(result)) == want


def test_not_eligible_message_without_dynamic_resources_has_no_claims_prefix() -> None:
    objects = [_node("n1", "3"), _held(), _terminating()]
    result = _preempt(_incoming("2", 10).nominated("n1"), *objects, with_dra=False)
    assert result.postfilter == f"Unschedulable: {NOT_ELIGIBLE_TERMINATING}"


def test_pod_conditions_are_read_from_kubernetes_json() -> None:
    assert make_pod("p").preempted().obj().preempted_by_scheduler
    assert make_pod("p").preempted().obj().deletion_timestamp is not None
    assert (
        not make_pod("p").condition("Ready").condition("DisruptionTarget", "True", "Other").obj().preempted_by_scheduler
    )
    data = make_pod("p").json()
    data["status"]["conditions"] = [{"type": 3}]
    with pytest.raises(ValidationError) as raised:
        pod_from_k8s(data)
    assert raised.value.field == "pod.status.conditions[0].type"


# -- the per-node reprieve order kept between decisions ---------------------------------------------------

_BEFORE: list[CacheItem] = [
    _node("n1"),
    _node("n2"),
    _pod("a", "n1", "1", 1, 1),
    _pod("b", "n1", "1", 2, 2),
    _pod("c", "n2", "1", 1, 3),
    _pod("d", "n2", "500m", 3, 4),
]


@pytest.mark.parametrize("with_blockers", [True, False], ids=["node by node", "nodes in lockstep"])
@pytest.mark.parametrize(
    ("upserts", "deletes"),
    [
        ([_pod("e", "n2", "500m", 0, 5)], []),
        ([], ["a"]),
        ([_pod("c", "n2", "1", 9, 3)], []),
        ([_pod("f", "n1", "1", 0, None)], ["b"]),
    ],
    ids=["a pod added", "a victim deleted", "a priority changed", "one pod replaced by another"],
)
def test_a_node_whose_pods_changed_is_ordered_afresh(
    upserts: list[PodBuilder], deletes: list[str], with_blockers: bool
) -> None:
    """The reprieve order a node keeps between decisions is dropped when its pods change: the answer
    after a change equals that of a cache built with the changed objects from the start."""
    cache = make_cache(*_BEFORE)
    engine = Engine(cache, {"default-scheduler": _profile(with_blockers=with_blockers)})
    incoming = _incoming("2", 10).obj()
    engine.preempt(incoming)  # every node's order is now kept
    cache.apply([Upsert(Kind.POD, p.obj()) for p in upserts] + [Delete(Kind.POD, "default", name) for name in deletes])
    after = engine.preempt(incoming)
    replaced = {p.obj().name for p in upserts} | set(deletes)
    kept = [o for o in _BEFORE if not (isinstance(o, PodBuilder) and o.obj().name in replaced)]
    fresh = Engine(make_cache(*kept, *upserts), {"default-scheduler": _profile(with_blockers=with_blockers)})
    expected = fresh.preempt(incoming)
    assert expected.nominated_node  # the question has an answer to get wrong
    assert (after.nominated_node, _victims(after), list(after.node_ties), after.num_pdb_violations) == (
        expected.nominated_node,
        _victims(expected),
        list(expected.node_ties),
        expected.num_pdb_violations,
    )


@pytest.mark.parametrize("with_blockers", [True, False], ids=["node by node", "nodes in lockstep"])
def test_a_start_time_in_the_future_orders_after_a_pod_not_started(with_blockers: bool) -> None:
    """Upstream counts a pod without a start time as starting now, so a start time still to come (a
    skewed clock) is less important, and its pod is the one evicted; the kept order (which puts pods
    without a start time last) does not hold then."""
    future = make_pod("future").node("n1").req(cpu="1").priority(1).start_time("2999-01-01T00:00:00Z")
    unstarted = make_pod("unstarted").node("n1").req(cpu="1").priority(1)
    engine = Engine(
        make_cache(_node("n1"), unstarted, future), {"default-scheduler": _profile(with_blockers=with_blockers)}
    )
    assert _victims(engine.preempt(_incoming("1", 10).obj())) == ["future"]


@pytest.mark.parametrize("with_blockers", [True, False], ids=["node by node", "nodes in lockstep"])
def test_request_classes_starting_over_midway_change_no_answer(
    with_blockers: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request-class numbering starts over once distinct request sets pile up past its limit (here two,
    with four in the cluster), before the next dry run: the nodes' kept orders, numbered the old way, are
    made afresh, and the answer is the one a fresh numbering gives."""
    objects: list[CacheItem] = []
    for n, sizes in enumerate([("300m", "600m"), ("900m", "300m"), ("600m", "1200m"), ("1200m", "900m")]):
        objects.append(_node(f"n{n}"))
        objects.extend(_pod(f"n{n}-p{i}", f"n{n}", cpu, i + 1, i + 1) for i, cpu in enumerate(sizes))
    incoming = _incoming("1500m", 10)
    profile = {"default-scheduler": _profile(with_blockers=with_blockers)}
    expected = Engine(make_cache(*objects), profile).preempt(incoming.obj())
    assert expected.nominated_node
    classes = default_preemption._RequestClasses()
    monkeypatch.setattr(classes, "LIMIT", 2)
    monkeypatch.setattr(default_preemption, "_CLASSES", classes)
    engine = Engine(make_cache(*objects), {"default-scheduler": _profile(with_blockers=with_blockers)})
    for _ in range(2):  # the second time, every node holds an order from the old numbering
        result = engine.preempt(incoming.obj())
        assert (result.nominated_node, _victims(result), list(result.node_ties), result.num_pdb_violations) == (
            expected.nominated_node,
            _victims(expected),
            list(expected.node_ties),
            expected.num_pdb_violations,
        )
    assert classes.epoch == 1
