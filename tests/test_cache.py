"""Cache bookkeeping: NodeInfo aggregates, versions, idempotency, replace, pending and nominated pods."""

import json
from typing import Any

import pytest
from podfit.server.cache.cluster_cache import ClusterCache, Delete, Outcome, Upsert
from podfit.server.model import Kind, Node
from podfit.server.model.objects import node_from_k8s, pod_from_k8s

from tests.builders import make_cache, make_node, make_pod


def upsert(builder: Any) -> Upsert:
    kind = Kind.POD if builder.json()["kind"] == "Pod" else Kind.NODE
    return Upsert(kind, builder.obj(), repr(builder.json()).encode())


def versioned(builder: Any, rv: str) -> Upsert:
    data = builder.json()
    data["metadata"]["resourceVersion"] = rv
    return Upsert(Kind.POD, pod_from_k8s(data), repr(data).encode())


def test_bound_pods_add_to_their_node() -> None:
    cache = ClusterCache()
    cache.apply([upsert(make_node("n1")), upsert(make_pod("a").node("n1").req(cpu="1", memory="1Gi").host_port(80))])
    info = cache.snapshot().node_info_map["n1"]
    assert info.requested == {"cpu": 1000, "memory": 2**30}
    assert set(info.pods) == {"default/a"}
    assert info.used_ports.conflicts("", "TCP", 80)


def test_updating_a_pod_replaces_its_contribution() -> None:
    cache = ClusterCache()
    cache.apply([upsert(make_node("n1")), upsert(make_pod("a").node("n1").req(cpu="1"))])
    cache.apply([upsert(make_pod("a").node("n1").req(cpu="2"))])
    assert cache.snapshot().node_info_map["n1"].requested == {"cpu": 2000}


def test_moving_a_pod_between_nodes() -> None:
    cache = ClusterCache()
    cache.apply([upsert(make_node("n1")), upsert(make_node("n2")), upsert(make_pod("a").node("n1").req(cpu="1"))])
    cache.apply([upsert(make_pod("a").node("n2").req(cpu="1"))])
    snap = cache.snapshot()
    assert snap.node_info_map["n1"].requested == {}
    assert snap.node_info_map["n2"].requested == {"cpu": 1000}


def test_deleting_a_pod_frees_its_node() -> None:
    cache = ClusterCache()
    cache.apply([upsert(make_node("n1")), upsert(make_pod("a").node("n1").req(cpu="1").host_port(80))])
    result = cache.apply([Delete(Kind.POD, "default", "a")])
    info = cache.snapshot().node_info_map["n1"]
    assert result.outcomes == [Outcome.APPLIED]
    assert (info.requested, info.pods, len(info.used_ports)) == ({}, {}, 0)


def test_pods_arriving_before_their_node_are_counted_when_it_appears() -> None:
    cache = ClusterCache()
    cache.apply([upsert(make_pod("a").node("n1").req(cpu="1"))])
    assert cache.snapshot().node_infos == []
    cache.apply([upsert(make_node("n1"))])
    assert cache.snapshot().node_info_map["n1"].requested == {"cpu": 1000}


def test_node_update_keeps_its_pods_and_removal_keeps_them_for_later() -> None:
    cache = ClusterCache()
    cache.apply([upsert(make_node("n1")), upsert(make_pod("a").node("n1").req(cpu="1"))])
    cache.apply([upsert(make_node("n1").label("zone", "z1"))])
    assert cache.snapshot().node_info_map["n1"].requested == {"cpu": 1000}
    cache.apply([Delete(Kind.NODE, "", "n1")])
    assert cache.snapshot().node_infos == []
    cache.apply([upsert(make_node("n1"))])
    assert cache.snapshot().node_info_map["n1"].requested == {"cpu": 1000}


def test_terminal_pods_hold_nothing() -> None:
    cache = ClusterCache()
    cache.apply([upsert(make_node("n1")), upsert(make_pod("done").node("n1").req(cpu="1").phase("Succeeded"))])
    assert cache.snapshot().node_info_map["n1"].pods == {}
    assert cache.count(Kind.POD) == 1


def test_pending_and_nominated_pods_are_indexed() -> None:
    cache = ClusterCache()
    cache.apply([upsert(make_pod("p")), upsert(make_pod("q").nominated("n1"))])
    snap = cache.snapshot()
    assert {p.name for p in cache.pending_pods} == {"p", "q"}
    assert [p.name for p in snap.nominated_pods["n1"]] == ["q"]
    cache.apply([upsert(make_pod("q").node("n1"))])
    assert "n1" not in cache.snapshot().nominated_pods


@pytest.mark.parametrize(
    ("first", "second", "outcome"),
    [
        pytest.param("5", "4", Outcome.STALE, id="an older resourceVersion is stale"),
        pytest.param("5", "6", Outcome.APPLIED, id="a newer resourceVersion applies"),
        pytest.param("9", "10", Outcome.APPLIED, id="versions compare as numbers, not strings"),
        pytest.param("", "1", Outcome.APPLIED, id="an update without a version always applies"),
    ],
)
def test_resource_versions(first: str, second: str, outcome: str) -> None:
    cache = ClusterCache()
    cache.apply([versioned(make_pod("a").req(cpu="1"), first)])
    result = cache.apply([versioned(make_pod("a").req(cpu="2"), second)])
    assert result.outcomes == [outcome]


def test_reapplying_the_same_update_is_idempotent() -> None:
    cache = ClusterCache()
    first = cache.apply([upsert(make_node("n1")), upsert(make_pod("a").node("n1").req(cpu="1"))])
    again = cache.apply([upsert(make_node("n1")), upsert(make_pod("a").node("n1").req(cpu="1"))])
    assert again.outcomes == [Outcome.UNCHANGED, Outcome.UNCHANGED]
    assert again.generation == first.generation
    assert cache.snapshot().node_info_map["n1"].requested == {"cpu": 1000}


def test_deleting_an_unknown_object_is_a_no_op() -> None:
    cache = ClusterCache()
    result = cache.apply([Delete(Kind.POD, "default", "ghost")])
    assert (result.outcomes, result.generation) == ([Outcome.UNCHANGED], 0)


def test_a_stale_delete_is_ignored() -> None:
    cache = ClusterCache()
    cache.apply([versioned(make_pod("a"), "7")])
    assert cache.apply([Delete(Kind.POD, "default", "a", "6")]).outcomes == [Outcome.STALE]
    assert cache.count(Kind.POD) == 1


def test_one_generation_per_batch() -> None:
    cache = ClusterCache()
    result = cache.apply([upsert(make_node("n1")), upsert(make_node("n2")), upsert(make_pod("a"))])
    assert result.generation == 1


def test_replace_makes_the_set_whole() -> None:
    cache = ClusterCache()
    cache.apply([upsert(make_node("n1")), upsert(make_node("n2"))])
    generation, upserted, deleted, unchanged = cache.replace(
        Kind.NODE, [upsert(make_node("n2")), upsert(make_node("n3"))]
    )
    assert (upserted, deleted, unchanged) == (1, 1, 1)
    assert [n.name for n in cache.snapshot().node_infos] == ["n2", "n3"]
    assert generation == 2


def test_snapshot_lists_nodes_by_name_and_counts_images() -> None:
    cache = ClusterCache()
    cache.apply(
        [
            upsert(make_node("b").image(100, "nginx:1")),
            upsert(make_node("a").image(100, "nginx:1", "nginx@sha")),
        ]
    )
    snap = cache.snapshot()
    assert [n.name for n in snap.node_infos] == ["a", "b"]
    assert snap.images["nginx:1"].num_nodes == 2
    assert snap.images["nginx@sha"].num_nodes == 1


def test_snapshot_views_follow_namespace_pdb_and_nomination_changes() -> None:
    from podfit.server.model.objects import namespace_from_k8s, pdb_from_k8s

    cache = ClusterCache()
    assert cache.snapshot().namespaces == {} and cache.snapshot().pdbs == []
    cache.apply([Upsert(Kind.NAMESPACE, namespace_from_k8s({"metadata": {"name": "a", "labels": {"t": "1"}}}))])
    assert cache.snapshot().namespaces["a"].labels == {"t": "1"}
    cache.apply([Upsert(Kind.POD_DISRUPTION_BUDGET, pdb_from_k8s({"metadata": {"name": "b"}}))])
    assert [p.name for p in cache.snapshot().pdbs] == ["b"]
    cache.apply([upsert(make_pod("q").nominated("n1"))])
    assert [p.name for p in cache.snapshot().nominated_pods["n1"]] == ["q"]
    cache.apply([Delete(Kind.POD, "default", "q"), Delete(Kind.NAMESPACE, "", "a")])
    assert cache.snapshot().nominated_pods == {} and cache.snapshot().namespaces == {}


def _sent(cache: ClusterCache, data: dict[str, Any], path: str = "Nodes.items[0]") -> Node:
    """A node as the extender hands it over: its raw JSON, what its metadata says, and a loader."""
    meta = data["metadata"]
    raw = json.dumps(data).encode()
    return cache.node_from_k8s(raw, path, meta["name"], meta.get("uid", ""), meta["resourceVersion"], json.loads)


def _fail(source: Any) -> Any:
    raise AssertionError(f"{source!r} was loaded")


def _node_json(rv: str, uid: str = "u-a", cpu: str = "4") -> dict[str, Any]:
    data = make_node("a").capacity(cpu=cpu).json()
    data["metadata"].update({"uid": uid, "resourceVersion": rv} if uid else {"resourceVersion": rv})
    return data


@pytest.mark.parametrize(
    ("sent", "same_as_cached", "reused_on_resend"),
    [
        pytest.param(_node_json("7"), True, True, id="uid and resourceVersion of the cached node: that node"),
        pytest.param(_node_json("8", cpu="8"), False, True, id="a newer version: converted once, then reused"),
        pytest.param(_node_json("7", uid="u-other"), False, True, id="another uid: converted once, then reused"),
        pytest.param(_node_json("7", uid=""), False, False, id="no uid: converted every time"),
    ],
)
def test_caller_sent_nodes_are_converted_once_per_version(
    sent: dict[str, Any], same_as_cached: bool, reused_on_resend: bool
) -> None:
    cache = ClusterCache()
    cache.apply([Upsert(Kind.NODE, _sent(cache, _node_json("7")))])
    cached = cache.snapshot().node_info_map["a"].node
    first = _sent(cache, sent)
    assert (first is cached) is same_as_cached
    assert (_sent(cache, sent) is first) is reused_on_resend
    assert first.allocatable == node_from_k8s(sent).allocatable
    if reused_on_resend:
        # A version seen before (or the cached one) is never loaded again, let alone converted.
        meta = sent["metadata"]
        unread = cache.node_from_k8s(b"not json", "x", meta["name"], meta["uid"], meta["resourceVersion"], _fail)
        assert unread is first
    # The overlay for caller-sent nodes is skipped exactly when nothing differs from the cache.
    assert (cache.snapshot_with_nodes([first]).pod_index is None) == (first == cached)


def test_caller_sent_nodes_are_validated_with_their_path() -> None:
    cache = ClusterCache()
    bad = _node_json("1")
    bad["status"]["allocatable"]["cpu"] = "lots"
    with pytest.raises(ValueError, match=r"Nodes.items\[3\].status.allocatable.cpu"):
        _sent(cache, bad, "Nodes.items[3]")


# -- tentative batches --------------------------------------------------------------------------------


def _zoned_cluster() -> list[Upsert]:
    return [
        upsert(make_node("a1").label("zone", "a").capacity(cpu="4", memory="8Gi", pods="20")),
        upsert(make_node("a2").label("zone", "a").capacity(cpu="4", memory="8Gi", pods="20")),
        upsert(make_node("b1").label("zone", "b").capacity(cpu="4", memory="8Gi", pods="20")),
        upsert(make_pod("old").node("b1").label("app", "web").req(cpu="1")),
        upsert(make_pod("waiting").label("app", "web").nominated("a2").req(cpu="1")),
    ]


def _web(name: str) -> Any:
    return (
        make_pod(name)
        .label("app", "web")
        .req(cpu="500m")
        .spread(1, "zone", "ScheduleAnyway", {"matchLabels": {"app": "web"}})
        .affinity(
            "podAntiAffinity",
            {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"},
                    }
                ]
            },
        )
    )


def _contents(cache: ClusterCache) -> Any:
    snapshot = cache.snapshot()
    return (
        cache.generation,
        {kind: sorted((e.obj.name, e.source) for e in cache.entries(kind)) for kind in Kind},
        {name: (info.requested, sorted(info.pods)) for name, info in snapshot.node_info_map.items()},
        sorted(p.key for p in cache.pending_pods),
        {node: sorted(p.key for p in pods) for node, pods in snapshot.nominated_pods.items()},
    )


def _decide(cache: ClusterCache, pod: Any) -> Any:
    from podfit.server.config import default_profile
    from podfit.server.engine import Engine

    decision, _, _ = Engine(cache, {"default-scheduler": default_profile()}).decide(pod.obj())
    return decision.totals(), decision.rejections()


@pytest.mark.parametrize(
    ("changes", "decide_meanwhile"),
    [
        pytest.param(1, False, id="one batch, no decision while tentative"),
        pytest.param(1, True, id="one batch, decisions index it"),
        pytest.param(3, True, id="three batches, decisions index them"),
        pytest.param(-1, True, id="binding a cached nominated pod, then a new one"),
    ],
)
def test_a_rolled_back_tentative_leaves_no_trace(changes: int, decide_meanwhile: bool) -> None:
    """After rollback the cache equals one that never saw the batches, in contents, generation and in
    every later decision (the pod index must not keep the undone pods, nor miss the next real change)."""
    cache, untouched = ClusterCache(), ClusterCache()
    cache.apply(_zoned_cluster())
    untouched.apply(_zoned_cluster())
    _decide(cache, _web("probe"))  # builds the pod index at the starting generation
    before = _contents(cache)
    tentative = cache.tentative()
    batches = (
        [[upsert(make_pod("waiting").label("app", "web").node("a1").req(cpu="1"))], [upsert(_web("t0").node("a2"))]]
        if changes < 0
        else [[upsert(_web(f"t{i}").node("a1"))] for i in range(changes)]
    )
    for batch in batches:
        tentative.apply(batch)
        if decide_meanwhile:
            _decide(cache, _web("probe"))
    assert cache.generation == before[0] + len(batches)
    tentative.rollback()
    assert _contents(cache) == before == _contents(untouched)
    # The next real change (before any decision) lands on both alike, and decisions agree.
    for c in (cache, untouched):
        c.apply([upsert(_web("real").node("b1"))])
    assert _contents(cache) == _contents(untouched)
    assert _decide(cache, _web("probe")) == _decide(untouched, _web("probe"))


@pytest.mark.parametrize(
    ("changes", "want"),
    [
        pytest.param([], ["a", "done", "b"], id="terminal pods too, in the order received"),
        pytest.param([("upsert", "a")], ["done", "b", "a"], id="an update counts as received again"),
        pytest.param([("delete", "done")], ["a", "b"], id="a deleted pod leaves"),
        pytest.param([("delete-node", "n1")], ["a", "done", "b"], id="the node's deletion leaves its pods bound"),
        pytest.param([("move", "b")], ["a", "done"], id="a pod bound elsewhere leaves"),
    ],
)
def test_bound_pods_keep_every_pod_of_a_node(changes: list[tuple[str, str]], want: list[str]) -> None:
    cache = make_cache(
        make_node("n1"),
        make_node("n2"),
        make_pod("a").node("n1"),
        make_pod("done").node("n1").phase("Succeeded"),
        make_pod("b").node("n1"),
    )
    for op, name in changes:
        if op == "upsert":
            cache.apply([Upsert(Kind.POD, make_pod(name).node("n1").label("v", "2").obj())])
        elif op == "delete":
            cache.apply([Delete(Kind.POD, "default", name)])
        elif op == "delete-node":
            cache.apply([Delete(Kind.NODE, "", name)])
        else:
            cache.apply([Delete(Kind.POD, "default", name), Upsert(Kind.POD, make_pod(name).node("n2").obj())])
    assert [p.name for p in cache.bound_pods("n1")] == want
    # The scheduler's view is unchanged: no NodeInfo holds a terminal pod.
    info = cache.snapshot().get("n1")
    assert info is None or all(p.name != "done" for p in info.pods.values())
