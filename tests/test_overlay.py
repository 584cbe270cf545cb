"""Overlays (forked snapshots): a decision on an overlay equals the same decision on a cache changed the
same way, overlays never touch the cache they were forked from, and overlays side by side stay apart."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

import numpy as np
import pytest
from podfit.server.cache.cluster_cache import ClusterCache, Delete, Upsert
from podfit.server.cache.overlay import Overlay, OverlayError
from podfit.server.cache.pod_index import PodQuery
from podfit.server.cache.snapshot import Snapshot
from podfit.server.config import default_profile
from podfit.server.engine import Engine
from podfit.server.model import Kind, LabelSelector

from tests.builders import NodeBuilder, PodBuilder, make_cache, make_node, make_pod

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def _node(name: str, zone: str, cpu: str = "4") -> NodeBuilder:
    return make_node(name).labels(**{ZONE: zone}).capacity(cpu=cpu, memory="16Gi", pods="20")


def _web(name: str, node: str, cpu: str = "1", priority: int = 0) -> PodBuilder:
    return make_pod(name).labels(app="web").node(node).req(cpu=cpu).priority(priority)


def _cluster() -> list[Any]:
    return [
        _node("a1", "a"),
        _node("a2", "a"),
        _node("b1", "b"),
        _node("b2", "b", cpu="2"),
        _node("c1", "c").image(500_000_000, "registry/app:1"),
        _web("w1", "a1"),
        _web("w2", "a1"),
        _web("w3", "b1", cpu="2"),
        make_pod("db").labels(app="db").node("c1").req(cpu="1").pod_term("podAntiAffinity", {"app": "web"}, HOSTNAME),
        make_pod("low").labels(app="batch").node("b2").req(cpu="2").priority(-10),
    ]


def _probes() -> dict[str, PodBuilder]:
    return {
        "plain": make_pod("p-plain").req(cpu="1"),
        "spread": make_pod("p-spread")
        .labels(app="web")
        .req(cpu="1")
        .spread(1, ZONE, selector={"matchLabels": {"app": "web"}}),
        "anti-affinity": make_pod("p-anti")
        .labels(app="web")
        .req(cpu="1")
        .pod_term("podAntiAffinity", {"app": "web"}, HOSTNAME),
        "preferred-affinity": make_pod("p-pref")
        .labels(app="x")
        .req(cpu="1")
        .pod_term("podAffinity", {"app": "web"}, ZONE, weight=50),
        "image": make_pod("p-image").container({"cpu": "1"}, image="registry/app:1"),
        "big": make_pod("p-big").req(cpu="3").priority(100),
    }


@dataclass(frozen=True)
class Change:
    """One change, applied to an overlay and, as cache updates, to a second cache."""

    on_overlay: Callable[[Overlay], object]
    on_cache: Callable[[ClusterCache], object]


def _bind(pod: PodBuilder) -> Change:
    return Change(lambda o: o.bind_pod(pod.obj()), lambda c: c.apply([Upsert(Kind.POD, pod.obj())]))


def _unbind(name: str, node: str) -> Change:
    def on_overlay(o: Overlay) -> None:
        info = o.node(node)
        assert info is not None
        o.remove_pod(info.pods[f"default/{name}"])

    return Change(on_overlay, lambda c: c.apply([Delete(Kind.POD, "default", name)]))


def _upsert_node(node: NodeBuilder, new: bool = False) -> Change:
    return Change(
        (lambda o: o.add_node(node.obj())) if new else (lambda o: o.update_node(node.obj())),
        lambda c: c.apply([Upsert(Kind.NODE, node.obj())]),
    )


def _remove_node(name: str) -> Change:
    """The node goes, and its pods with it (an overlay does not keep orphans to re-attach)."""

    def on_cache(cache: ClusterCache) -> None:
        info = cache.snapshot().get(name)
        assert info is not None
        pods = [Delete(Kind.POD, p.namespace, p.name) for p in info.pods.values()]
        cache.apply([Delete(Kind.NODE, "", name), *pods])

    return Change(lambda o: o.remove_node(name), on_cache)


SCENARIOS: dict[str, list[Change]] = {
    "nothing changed": [],
    "a hypothetical node in a new zone": [_upsert_node(_node("d1", "d"), new=True)],
    "hypothetical nodes by the hundred": [
        _upsert_node(_node(f"h{i:03d}", f"z{i % 7}", cpu="8").image(500_000_000, "registry/app:1"), new=True)
        for i in range(300)
    ],
    "a node removed with its pods": [_remove_node("a1")],
    "a node cordoned": [_upsert_node(_node("b1", "b").unschedulable())],
    "a node tainted": [_upsert_node(_node("a2", "a").taint("dedicated", "x"))],
    "a node moved to another zone": [_upsert_node(_node("c1", "a").image(500_000_000, "registry/app:1"))],
    "pods bound": [_bind(_web("w4", "a2")), _bind(_web("w5", "c1"))],
    "pods removed": [_unbind("w1", "a1"), _unbind("db", "c1")],
    "a pod bound to a hypothetical node": [
        _upsert_node(_node("d1", "d"), new=True),
        _bind(_web("w6", "d1")),
    ],
    "removed then re-added under the same name": [
        _remove_node("b2"),
        _upsert_node(_node("b2", "c", cpu="8"), new=True),
    ],
}


def _answers(engine: Engine, snapshot: Snapshot) -> dict[str, Any]:
    answers: dict[str, Any] = {}
    for probe, pod in _probes().items():
        decision, _, _ = engine.decide(pod.obj(), snapshot=snapshot)
        scores = [(s.node_name, s.total, s.plugins) for s in decision.scores]
        preemption = engine.preempt(pod.obj(), snapshot=snapshot)
        answers[probe] = (
            {v.node_name: v.status for v in decision.verdicts},
            scores,
            (preemption.nominated_node, sorted(p.key for p in preemption.victims), preemption.message),
        )
    return answers


@pytest.mark.parametrize("changes", list(SCENARIOS.values()), ids=list(SCENARIOS))
def test_overlay_decisions_equal_a_cache_changed_the_same_way(changes: list[Change]) -> None:
    base = make_cache(*_cluster())
    changed = make_cache(*_cluster())
    overlay = Overlay(base.snapshot())
    for change in changes:
        change.on_overlay(overlay)
        change.on_cache(changed)
    engine = Engine(base, {"default-scheduler": default_profile()})
    assert _answers(engine, overlay.snapshot()) == _answers(engine, changed.snapshot())


def _cache_state(cache: ClusterCache) -> tuple[Any, ...]:
    snapshot = cache.snapshot()
    table = snapshot.table
    index = snapshot.cache_index()
    web = index.pod_counts(PodQuery(((None, LabelSelector(match_labels=(("app", "web"),))),))).copy()
    return (
        snapshot.names.tolist(),
        [sorted(info.pods) for info in snapshot.node_infos],
        table.requested.copy(),
        table.unschedulable.copy(),
        {k: c.codes.copy() for k, c in table.labels.items()},
        dict(table.row_of),
        web,
        dict(snapshot.images),
    )


def _assert_same_state(a: tuple[Any, ...], b: tuple[Any, ...]) -> None:
    for x, y in zip(a, b, strict=True):
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y)
        elif isinstance(x, dict) and x and isinstance(next(iter(x.values())), np.ndarray):
            assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
        else:
            assert x == y


@pytest.mark.parametrize("changes", list(SCENARIOS.values()), ids=list(SCENARIOS))
def test_overlays_leave_the_cache_untouched(changes: list[Change]) -> None:
    cache = make_cache(*_cluster())
    engine = Engine(cache, {"default-scheduler": default_profile()})
    before, answers = _cache_state(cache), _answers(engine, cache.snapshot())
    overlay = Overlay(cache.snapshot())
    for change in changes:
        change.on_overlay(overlay)
    _answers(engine, overlay.snapshot())
    _assert_same_state(_cache_state(cache), before)
    assert _answers(engine, cache.snapshot()) == answers


def test_overlays_side_by_side_stay_apart() -> None:
    base = make_cache(*_cluster())
    engine = Engine(base, {"default-scheduler": default_profile()})
    first_changes = SCENARIOS["a node removed with its pods"] + SCENARIOS["pods bound"]
    second_changes = SCENARIOS["a hypothetical node in a new zone"] + SCENARIOS["a node cordoned"]
    first, second = Overlay(base.snapshot()), Overlay(base.snapshot())
    first_cache, second_cache = make_cache(*_cluster()), make_cache(*_cluster())
    # Interleaved, as concurrent simulations would change them.
    for a, b in zip_longest(first_changes, second_changes):
        for change, overlay, cache in ((a, first, first_cache), (b, second, second_cache)):
            if change is not None:
                change.on_overlay(overlay)
                change.on_cache(cache)
    assert _answers(engine, first.snapshot()) == _answers(engine, first_cache.snapshot())
    assert _answers(engine, second.snapshot()) == _answers(engine, second_cache.snapshot())


def test_a_fork_of_an_overlay_starts_from_its_changes_and_then_goes_its_own_way() -> None:
    base = make_cache(*_cluster())
    engine = Engine(base, {"default-scheduler": default_profile()})
    parent = Overlay(base.snapshot())
    SCENARIOS["pods bound"][0].on_overlay(parent)
    child = parent.fork()
    SCENARIOS["a node removed with its pods"][0].on_overlay(child)
    parent_cache, child_cache = make_cache(*_cluster()), make_cache(*_cluster())
    SCENARIOS["pods bound"][0].on_cache(parent_cache)
    SCENARIOS["pods bound"][0].on_cache(child_cache)
    SCENARIOS["a node removed with its pods"][0].on_cache(child_cache)
    assert _answers(engine, parent.snapshot()) == _answers(engine, parent_cache.snapshot())
    assert _answers(engine, child.snapshot()) == _answers(engine, child_cache.snapshot())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(lambda o: o.add_node(_node("a1", "a").obj()), "already exists", id="adding an existing node"),
        pytest.param(lambda o: o.remove_node("nope"), "not in the cluster", id="removing an unknown node"),
        pytest.param(
            lambda o: o.update_node(_node("nope", "a").obj()), "not in the cluster", id="updating an unknown node"
        ),
        pytest.param(
            lambda o: o.bind_pod(_web("x", "nope").obj()), "not in the cluster", id="binding to an unknown node"
        ),
        pytest.param(lambda o: o.bind_pod(make_pod("x").obj()), "has no node", id="binding without a node"),
        pytest.param(lambda o: o.remove_pod(_web("x", "a1").obj()), "is not bound", id="removing a pod not there"),
    ],
)
def test_changes_that_do_not_apply_are_refused(change: Callable[[Overlay], object], message: str) -> None:
    overlay = Overlay(make_cache(*_cluster()).snapshot())
    with pytest.raises(OverlayError, match=message):
        change(overlay)


def test_an_overlay_costs_what_it_changes_not_the_cluster() -> None:
    """Forking shares every column; only the columns a change writes are copied, once."""
    cache = make_cache(*[_node(f"n{i:04d}", f"z{i % 3}") for i in range(2000)])
    snapshot = cache.snapshot()
    overlay = Overlay(snapshot)
    assert overlay.table.requested is snapshot.table.requested
    assert overlay.table.labels[ZONE].codes is snapshot.table.labels[ZONE].codes
    overlay.bind_pod(_web("w", "n0001").obj())
    assert overlay.table.requested is not snapshot.table.requested
    # Binding a pod changes no label: label columns are still shared.
    assert overlay.table.labels[ZONE].codes is snapshot.table.labels[ZONE].codes
    assert overlay.table.labels[ZONE].names is snapshot.table.labels[ZONE].names
    assert len(overlay.changed_nodes) == 1
