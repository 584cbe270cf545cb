"""Incremental decisions: an engine that keeps row-local answers between decisions must answer exactly as
a fresh engine does, on a cluster that keeps changing, and must re-evaluate only the rows that changed."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from podfit.server.cache.cluster_cache import ClusterCache, Delete, Upsert
from podfit.server.config import default_profile
from podfit.server.engine import Engine
from podfit.server.model import Kind, Pod
from podfit.server.plugins.node_resources_fit import NodeResourcesFit
from podfit.server.plugins.taint_toleration import TaintToleration
from podfit.server.service import SchedulingService
from podfit.server.transport.stored_forms import PROTOBUF_FORMS

from tests.builders import PodBuilder, make_cache, make_node, make_pod
from tests.test_schedule_flows import given

ZONE = "topology.kubernetes.io/zone"


def _probes() -> dict[str, PodBuilder]:
    return {
        "replica": make_pod("r").labels(app="web").req(cpu="500m", memory="1Gi"),
        "tolerating": make_pod("t").req(cpu="1").toleration("dedicated", "Exists"),
        "node-affinity": make_pod("na").req(cpu="1").node_selector(disk="ssd"),
        "host-port": make_pod("hp").req(cpu="100m").host_port(8080),
        "spread": make_pod("s")
        .labels(app="web")
        .req(cpu="250m")
        .spread(1, ZONE, selector={"matchLabels": {"app": "web"}}),
        "anti-affinity": make_pod("aa")
        .labels(app="web")
        .req(cpu="250m")
        .pod_term("podAntiAffinity", {"app": "db"}, "kubernetes.io/hostname"),
    }


def _node(rng: random.Random, name: str) -> Any:
    node = (
        make_node(name)
        .labels(**{ZONE: rng.choice("abc")})
        .capacity(cpu=rng.choice(["2", "4", "8"]), memory="8Gi", pods="12")
    )
    if rng.random() < 0.3:
        node = node.labels(disk="ssd")
    if rng.random() < 0.2:
        node = node.taint("dedicated", "x")
    if rng.random() < 0.1:
        node = node.unschedulable()
    return node


def _pod(rng: random.Random, name: str, node: str) -> PodBuilder:
    pod = make_pod(name).labels(app=rng.choice(["web", "db", "batch"])).node(node)
    pod = pod.req(cpu=rng.choice(["100m", "500m", "1"]), memory=rng.choice(["256Mi", "1Gi"]))
    if rng.random() < 0.1:
        pod = pod.host_port(8080)
    return pod


def _answer(engine: Engine, cache: ClusterCache, pod: Pod) -> tuple[Any, ...]:
    decision, _, _ = engine.decide(pod, snapshot=cache.snapshot())
    return (
        {v.node_name: v.status for v in decision.verdicts},
        [(s.node_name, s.total, s.plugins) for s in decision.scores],
    )


def _churn(rng: random.Random, cache: ClusterCache, step: int) -> None:
    """One random change of the kinds a live cluster sees."""
    names = cache.snapshot().names.tolist()
    action = rng.random()
    if action < 0.45:
        cache.apply([Upsert(Kind.POD, _pod(rng, f"p{step}", rng.choice(names)).obj())])
    elif action < 0.7:
        pods = [p for info in cache.snapshot().node_infos for p in info.pods.values()]
        if pods:
            victim = rng.choice(pods)
            cache.apply([Delete(Kind.POD, victim.namespace, victim.name)])
    elif action < 0.85:
        cache.apply([Upsert(Kind.NODE, _node(rng, rng.choice(names)).obj())])
    elif action < 0.93:
        cache.apply([Upsert(Kind.NODE, _node(rng, f"n-new-{step}").obj())])
    elif len(names) > 3:
        cache.apply([Delete(Kind.NODE, "", rng.choice(names))])


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_incremental_decisions_equal_from_scratch_on_a_churning_cluster(seed: int) -> None:
    rng = random.Random(seed)
    cache = make_cache(*[_node(rng, f"n{i:02d}") for i in range(24)])
    warm = Engine(cache, {"default-scheduler": default_profile()})
    probes = {name: builder.obj() for name, builder in _probes().items()}
    for step in range(60):
        _churn(rng, cache, step)
        for name, pod in probes.items():
            cold = Engine(cache, {"default-scheduler": default_profile()})
            assert _answer(warm, cache, pod) == _answer(cold, cache, pod), f"step {step}, probe {name}"


def test_replicas_with_assume_equal_from_scratch() -> None:
    rng = random.Random(7)
    cache = make_cache(*[_node(rng, f"n{i:02d}") for i in range(30)])
    warm = Engine(cache, {"default-scheduler": default_profile()})
    replica = _probes()["replica"]
    for i in range(40):
        pod = replica.obj()
        cold = Engine(cache, {"default-scheduler": default_profile()})
        assert _answer(warm, cache, pod) == _answer(cold, cache, pod), f"replica {i}"
        decision, _, _ = warm.decide(pod, snapshot=cache.snapshot())
        if not decision.selected:
            break
        assumed = make_pod(f"r{i}").labels(app="web").req(cpu="500m", memory="1Gi").node(decision.selected)
        cache.apply([Upsert(Kind.POD, assumed.obj())])


def _rows_filtered(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many rows each NodeResourcesFit Filter call evaluates, from now on."""
    seen: list[int] = []
    original = NodeResourcesFit.filter_rows

    def counting(self: NodeResourcesFit, state: Any, pod: Pod, table: Any, rows: np.ndarray) -> Any:
        seen.append(len(rows))
        return original(self, state, pod, table, rows)

    monkeypatch.setattr(NodeResourcesFit, "filter_rows", counting)
    return seen


def test_only_changed_rows_are_evaluated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _rows_filtered(monkeypatch)
    cache = make_cache(*[make_node(f"n{i:03d}") for i in range(200)])
    engine = Engine(cache, {"default-scheduler": default_profile()})
    pod = make_pod("r").req(cpu="1").obj()
    engine.decide(pod)
    assert seen == [200]
    seen.clear()
    engine.decide(pod)
    assert seen == [] or seen == [0]
    cache.apply([Upsert(Kind.POD, make_pod("x").req(cpu="1").node("n007").obj())])
    seen.clear()
    engine.decide(pod)
    assert seen == [1]
    # Another pod shape has its own answers.
    seen.clear()
    engine.decide(make_pod("other").req(cpu="2").obj())
    assert seen == [200]


def _rows_seen(monkeypatch: pytest.MonkeyPatch, plugin: type, method: str) -> list[int]:
    """How many rows each call of ``plugin.method`` evaluates, from now on."""
    seen: list[int] = []
    original = getattr(plugin, method)

    def counting(self: Any, state: Any, pod: Pod, table: Any, rows: np.ndarray) -> Any:
        seen.append(len(rows))
        return original(self, state, pod, table, rows)

    monkeypatch.setattr(plugin, method, counting)
    return seen


@pytest.mark.parametrize(
    ("change", "pod_rows", "node_rows"),
    [
        pytest.param(make_pod("x").req(cpu="1").node("n007"), 1, 0, id="a pod lands: Node readers skip the row"),
        pytest.param(make_node("n007").taint("dedicated", "x", "PreferNoSchedule"), 1, 1,
                     id="the Node changes: every plugin reads the row again"),
    ],
)  # fmt: skip
def test_plugins_that_read_only_the_node_skip_rows_whose_pods_changed(
    monkeypatch: pytest.MonkeyPatch, change: Any, pod_rows: int, node_rows: int
) -> None:
    fit = _rows_filtered(monkeypatch)
    taint_filter = _rows_seen(monkeypatch, TaintToleration, "filter_rows")
    taint_score = _rows_seen(monkeypatch, TaintToleration, "score_rows")
    cache = make_cache(*[make_node(f"n{i:03d}") for i in range(200)])
    engine = Engine(cache, {"default-scheduler": default_profile()})
    pod = make_pod("r").req(cpu="1").obj()
    engine.decide(pod)
    assert fit == [200] and taint_filter == [200] and taint_score == [200]
    kind = Kind.POD if isinstance(change, PodBuilder) else Kind.NODE
    cache.apply([Upsert(kind, change.obj())])
    for seen in (fit, taint_filter, taint_score):
        seen.clear()
    engine.decide(pod)
    assert sum(fit) == pod_rows and sum(taint_filter) == node_rows and sum(taint_score) == node_rows
    cold = Engine(cache, {"default-scheduler": default_profile()})
    assert _answer(engine, cache, pod) == _answer(cold, cache, pod)


def test_rows_changed_after_an_undone_batch_are_evaluated_again() -> None:
    """An all-or-nothing batch that fails is undone and its generation numbers are issued again; answers
    kept from inside the batch must not pass for current ones afterwards."""
    svc = SchedulingService({"default-scheduler": default_profile()}, forms=PROTOBUF_FORMS)
    svc.apply([Upsert(Kind.NODE, make_node(f"n{i}").capacity(cpu="2", pods="10").obj()) for i in range(3)])
    replica = _probes()["replica"]
    batch = [given(make_pod(f"b{i}").labels(app="web").req(cpu="500m", memory="1Gi")) for i in range(4)]
    placement = svc.schedule_batch([*batch, given(make_pod("huge").req(cpu="64"))], all_or_nothing=True)
    assert not placement.all_placed and svc.generation == 1
    # The same generation numbers again, with other contents.
    for i in range(4):
        svc.apply([Upsert(Kind.POD, make_pod(f"x{i}").req(cpu="1500m").node(f"n{i % 3}").obj())])
    cold = Engine(svc.cache, {"default-scheduler": default_profile()})
    assert _answer(svc.engine, svc.cache, replica.obj()) == _answer(cold, svc.cache, replica.obj())


def test_a_freeze_keeps_the_answers_of_unchanged_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """A freeze hands the cache a fork of its table: the memo follows it and re-evaluates only what changed."""
    seen = _rows_filtered(monkeypatch)
    cache = make_cache(*[make_node(f"n{i:03d}") for i in range(200)])
    engine = Engine(cache, {"default-scheduler": default_profile()})
    pod = make_pod("r").req(cpu="1").obj()
    engine.decide(pod, snapshot=cache.snapshot())
    cache.freeze()
    cache.apply([Upsert(Kind.POD, make_pod("x").req(cpu="1").node("n007").obj())])
    seen.clear()
    engine.decide(pod, snapshot=cache.snapshot())
    assert seen == [1]


@pytest.mark.parametrize("seed", [5, 6])
def test_decisions_over_frozen_and_live_generations_in_turn_equal_from_scratch(seed: int) -> None:
    """Readers of a frozen generation and of the live cache take turns on one engine (as decisions do
    while a batch writes): an older generation never takes a newer generation's answers."""
    rng = random.Random(seed)
    cache = make_cache(*[_node(rng, f"n{i:02d}") for i in range(24)])
    warm = Engine(cache, {"default-scheduler": default_profile()})
    probes = {name: builder.obj() for name, builder in _probes().items()}
    frozen = cache.freeze()
    for step in range(40):
        _churn(rng, cache, step)
        if step % 7 == 0:
            frozen = cache.freeze()
        for name, pod in probes.items():
            for label, snapshot in (("live", cache.snapshot()), ("frozen", frozen)):
                cold = Engine(cache, {"default-scheduler": default_profile()})
                got, _, _ = warm.decide(pod, snapshot=snapshot)
                want, _, _ = cold.decide(pod, snapshot=snapshot)
                assert [(v.node_name, v.status) for v in got.verdicts] == [
                    (v.node_name, v.status) for v in want.verdicts
                ], f"step {step}, probe {name}, {label}"
                assert [(s.node_name, s.total) for s in got.scores] == [(s.node_name, s.total) for s in want.scores]
