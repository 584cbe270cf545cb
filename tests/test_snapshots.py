"""Frozen snapshots (ClusterCache.freeze): a reader keeps one generation, exactly, while the cache goes on
being written — what lets a what-if run beside decisions and updates instead of holding them back."""

from __future__ import annotations

import asyncio
import gc
import json
import time
import weakref
from collections.abc import Callable
from typing import Any

import grpc
import numpy as np
import pytest
from podfit.server.cache.cluster_cache import ClusterCache, Delete, Upsert
from podfit.server.model import Kind
from podfit.server.model.objects import node_from_k8s, pod_from_k8s
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import scheduler_pb2 as sc
from podfit.v1 import simulation_pb2 as sim

from tests.builders import make_node, make_pod
from tests.conftest import LiveServer


def _node(name: str, cpu: str = "4", zone: str = "a") -> Upsert:
    return Upsert(Kind.NODE, node_from_k8s(make_node(name).label("zone", zone).capacity(cpu=cpu, pods="110").json()))


def _pod(name: str, node: str = "", cpu: str = "1") -> Upsert:
    built = make_pod(name).req(cpu=cpu)
    return Upsert(Kind.POD, pod_from_k8s((built.node(node) if node else built).json()))


def _cluster() -> ClusterCache:
    cache = ClusterCache()
    cache.apply([_node("n1"), _node("n2"), _node("n3", zone="b"), _pod("p1", "n1"), _pod("p2", "n2")])
    return cache


def _view(snapshot: Any) -> dict[str, Any]:
    """Everything a plugin can read of a snapshot's nodes, as plain values."""
    table = snapshot.table
    rows = snapshot.rows
    return {
        "generation": snapshot.generation,
        "names": list(snapshot.names),
        "pods": {info.name: sorted(info.pods) for info in snapshot.node_infos},
        "map": {name: sorted(info.pods) for name, info in snapshot.node_info_map.items()},
        "requested": table.requested[rows].tolist(),
        "pod_count": table.pod_count[rows].tolist(),
        "zone": table.label_codes("zone", rows).tolist(),
        "infos": [table.infos[row].name for row in rows.tolist()],
    }


WRITES: dict[str, Callable[[ClusterCache], None]] = {
    "a pod bound to a node": lambda c: c.apply([_pod("p3", "n1")]),
    "a bound pod deleted": lambda c: c.apply([Delete(Kind.POD, "default", "p1")]),
    "a node added": lambda c: c.apply([_node("n0", zone="c")]),
    "a node removed with its pods": lambda c: c.apply([Delete(Kind.NODE, "", "n2")]),
    "a node relabelled": lambda c: c.apply([_node("n1", zone="z")]),
    "many pods over every node": lambda c: c.apply([_pod(f"q{i}", f"n{1 + i % 3}") for i in range(30)]),
    "a batch undone": lambda c: _undone(c),
}


def _undone(cache: ClusterCache) -> None:
    tentative = cache.tentative()
    tentative.apply([_pod("t1", "n1"), _pod("t2", "n3")])
    tentative.rollback()


@pytest.mark.parametrize("write", list(WRITES), ids=list(WRITES))
def test_a_frozen_snapshot_stays_as_it_was_while_the_cache_is_written(write: str) -> None:
    cache = _cluster()
    frozen = cache.freeze()
    before = _view(frozen)
    WRITES[write](cache)
    WRITES[write](cache) if write == "a batch undone" else None
    assert _view(frozen) == before
    if write != "a batch undone":
        assert _view(cache.snapshot()) != before, "the write reached the live cache"


@pytest.mark.parametrize("write", list(WRITES), ids=list(WRITES))
def test_the_live_cache_after_a_freeze_equals_one_never_frozen(write: str) -> None:
    """Copy-on-write changes nothing a decision sees: the same writes on a cache frozen between them and
    on one never frozen leave the same state."""
    frozen_often, never = _cluster(), _cluster()
    for cache, freeze in ((frozen_often, True), (never, False)):
        if freeze:
            cache.freeze()
        WRITES[write](cache)
        if freeze:
            cache.freeze()
        cache.apply([_pod("after", "n3")])
    assert _view(frozen_often.snapshot()) == _view(never.snapshot())


def test_a_frozen_snapshot_keeps_at_most_one_copy_of_each_node() -> None:
    """10,000 updates during one reader: each node is cloned once (at its first change), whatever follows."""
    cache = ClusterCache()
    cache.apply([_node(f"n{i}") for i in range(50)])
    frozen = cache.freeze()
    clones: set[int] = set()
    for i in range(10_000):
        cache.apply([_pod(f"p{i % 500}", f"n{i % 50}", cpu=f"{1 + i % 3}00m")])
        clones.update(id(info) for info in cache.snapshot().node_infos)
    originals = {id(info) for info in frozen.node_infos}
    assert len(clones - originals) <= 50
    assert all(not info.pods for info in frozen.node_infos)
    table = weakref.ref(frozen.table)
    del frozen
    gc.collect()
    assert table() is None, "the frozen table outlived its last reader"


def test_a_worker_image_is_the_frozen_state() -> None:
    import pickle

    cache = _cluster()
    image = cache.image()
    cache.apply([_pod("later", "n1"), _node("n9")])
    restored = ClusterCache()
    restored.restore_image(pickle.loads(pickle.dumps(image)))
    assert restored.generation == cache.generation - 1
    assert {e.obj.name for e in restored.entries(Kind.POD)} == {"p1", "p2"}
    assert np.array_equal(restored.snapshot().table.pod_count[restored.snapshot().rows], [1, 1, 0])


# -- through a real server: an update sent during a what-if is decided on before the what-if ends ---


def _long_simulate(size: int = 5000) -> sim.SimulateRequest:
    """``size`` template nodes and as many pods: seconds of work (5,000 of each: about 20 s here)."""
    template = cc.ClusterObject(
        kubernetes_json=json.dumps(make_node("template").capacity(cpu="4", memory="8Gi", pods="110").json()).encode()
    )
    pods = [
        sc.PodReference(kubernetes_json=json.dumps(make_pod(f"p{i}").req(cpu="2").json()).encode()) for i in range(size)
    ]
    scenario = sim.Scenario(add_nodes=[sim.HypotheticalNodes(template=template, count=size)])
    return sim.SimulateRequest(scenario=scenario, pods=pods)


async def test_an_update_during_a_what_if_is_decided_on_before_it_ends(live: LiveServer) -> None:
    await live.client.apply([make_node(f"n{i:04d}").capacity(cpu="1", pods="110").json() for i in range(2000)])
    before = (await live.client.stats()).generation
    heavy = asyncio.ensure_future(live.client._call(live.client.simulation.Simulate, _long_simulate(1500), 30.0))
    gate = live.running.service.gate
    while not gate.heavy_running:
        await asyncio.sleep(0.01)
    started = time.monotonic()
    applied = await live.client.apply([make_node("big").capacity(cpu="64", pods="110").json()])
    decided = await live.client.schedule(make_pod("large").req(cpu="32").json())
    assert time.monotonic() - started < 1.0, "the update and the decision waited for the what-if"
    assert gate.heavy_running, "the what-if ended before the update was decided on"
    assert decided.selected_node == "big" and decided.generation == applied.generation > before
    answer = await heavy
    assert answer.base_generation == before, "the what-if read the generation current when it started"


async def test_a_what_if_cancelled_mid_run_leaves_nothing_behind(live: LiveServer) -> None:
    await live.client.apply([make_node(f"n{i:04d}").capacity(cpu="1", pods="110").json() for i in range(2000)])
    heavy = asyncio.ensure_future(live.client._call(live.client.simulation.Simulate, _long_simulate(), 30.0))
    gate = live.running.service.gate
    while not gate.heavy_running:
        await asyncio.sleep(0.01)
    heavy.cancel()
    async with asyncio.timeout(2):
        while gate.heavy_running:
            await asyncio.sleep(0.01)
    with pytest.raises((asyncio.CancelledError, grpc.aio.AioRpcError)):
        await heavy
    assert (await live.client.schedule(make_pod("after").req(cpu="1").json())).selected_node


def test_readers_share_a_frozen_snapshot_while_nothing_changes() -> None:
    """Back-to-back readers with no write between them read one snapshot (and build its index once)."""
    cache = _cluster()
    first = cache.freeze()
    assert cache.freeze() is first
    cache.apply([_pod("p9", "n3")])
    second = cache.freeze()
    assert second is not first and second.generation == first.generation + 1
    assert _view(first)["pods"]["n3"] == [] and _view(second)["pods"]["n3"] == ["default/p9"]
    del first, second
    gc.collect()
    assert cache.freeze().generation == cache.generation  # a new one once nobody holds the last


async def test_decisions_go_on_while_a_batch_writes(live: LiveServer) -> None:
    """A batch that reserves is a writer: updates and other reservations wait for it, but decisions that
    reserve nothing answer at once, from the generation the batch started from."""
    await live.client.apply([make_node(f"n{i:04d}").capacity(cpu="1", pods="110").json() for i in range(2000)])
    await live.client.apply([make_pod("named").req(cpu="500m").json()])
    before = (await live.client.stats()).generation
    batch = ["default/named", *(make_pod(f"b{i}").req(cpu="500m").json() for i in range(3500))]
    writing = asyncio.ensure_future(live.client.schedule_batch(batch, view="basic", timeout=60))
    gate = live.running.service.gate
    while not gate.busy:
        await asyncio.sleep(0.01)
    started = time.monotonic()
    decided = await live.client.schedule(make_pod("reader").req(cpu="500m").json())
    # The batch bound this pod first thing; readers still see it as it was, pending.
    named = await live.client.schedule("default/named")
    filtered = await live.client.filter(make_pod("reader").req(cpu="500m").json())
    assert time.monotonic() - started < 1.0, "the decisions waited for the batch"
    assert gate.busy, "the batch ended before the decisions were answered"
    assert decided.generation == named.generation == filtered.generation == before
    assert decided.selected_node and named.selected_node and filtered.feasible_count == 2000
    placed = await writing
    assert placed.placed_count == 3501
    after = await live.client.schedule(make_pod("reader").req(cpu="500m").json())
    assert after.generation == placed.assumed_generation > before
