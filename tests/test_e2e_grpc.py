"""End to end through a real gRPC server on loopback: the cache API, decisions, errors, health."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from podfit.client import PodfitError
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import scheduler_pb2 as sc

from tests.builders import make_node, make_pod
from tests.conftest import LiveServer


def cluster() -> list[dict[str, Any]]:
    return [
        make_node("n1").capacity(cpu="2", memory="4Gi", pods="10").label("zone", "a").json(),
        make_node("n2").capacity(cpu="4", memory="8Gi", pods="10").label("zone", "b").json(),
        make_pod("busy").node("n1").req(cpu="1500m").json(),
    ]


async def test_apply_get_list_and_stats(live: LiveServer) -> None:
    response = await live.client.apply(cluster())
    assert (response.applied_count, response.generation) == (3, 1)
    assert [r.outcome for r in response.results] == [cc.UPDATE_OUTCOME_APPLIED] * 3
    got = await live.client.get("Pod", "busy", "default")
    assert got.object.pod.spec.node_name == "n1"
    listed = await live.client.list("Node", label_selector="zone=b")
    assert [o.node.metadata.name for o in listed.objects] == ["n2"]
    stats = await live.client.stats()
    assert (stats.nodes, stats.pods, stats.bound_pods, stats.pending_pods, stats.generation) == (2, 1, 1, 0, 1)
    assert stats.memory_bytes_estimate > 0


async def test_reapplying_is_idempotent_and_older_versions_are_stale(live: LiveServer) -> None:
    pod = make_pod("p").json()
    pod["metadata"]["resourceVersion"] = "10"
    first = await live.client.apply([pod])
    again = await live.client.apply([pod])
    assert (again.unchanged_count, again.generation) == (1, first.generation)
    older = dict(pod, metadata={**pod["metadata"], "resourceVersion": "9", "labels": {"x": "y"}})
    stale = await live.client.apply([older])
    assert stale.stale_count == 1
    assert (await live.client.get("Pod", "p")).object.pod.metadata.labels == {}


async def test_a_bad_object_rejects_the_whole_batch(live: LiveServer) -> None:
    bad = make_pod("bad").req(cpu="lots").json()
    with pytest.raises(PodfitError) as info:
        await live.client.apply([make_node("n9").json(), bad])
    assert info.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.field_violations[0][0] == "updates[1].upsert.pod.spec.containers[0].resources.requests.cpu"
    assert (await live.client.stats()).nodes == 0


async def test_replace_resyncs_one_kind(live: LiveServer) -> None:
    await live.client.apply(cluster())
    response = await live.client.replace(
        "Node",
        [make_node("n2").capacity(cpu="4", memory="8Gi", pods="10").label("zone", "b").json(), make_node("n3").json()],
    )
    assert (response.upserted_count, response.deleted_count, response.unchanged_count) == (1, 1, 1)
    listed = await live.client.list("Node")
    assert sorted(o.node.metadata.name for o in listed.objects) == ["n2", "n3"]


async def test_stream_acknowledges_each_batch_in_order(live: LiveServer) -> None:
    async def batches() -> AsyncIterator[cc.StreamRequest]:
        for i, manifest in enumerate(cluster()):
            yield cc.StreamRequest(sequence=i + 1, updates=[cc.Update(upsert=_obj(manifest))])
        bad = cc.ClusterObject(kubernetes_json=b'{"kind": "Pod", "metadata": {}}')
        yield cc.StreamRequest(sequence=99, updates=[cc.Update(upsert=bad)])
        yield cc.StreamRequest(sequence=100, updates=[cc.Update(upsert=_obj(make_pod("late").json()))])

    acks = [ack async for ack in live.client.stream(batches())]
    assert [a.sequence for a in acks] == [1, 2, 3, 99, 100]
    assert [a.generation for a in acks] == [1, 2, 3, 0, 4]
    assert acks[3].error and acks[3].error_field == "updates[0].upsert.pod.metadata.name"
    # What was acknowledged is visible to the next decision.
    assert (await live.client.stats()).pods == 2


def _obj(manifest: dict[str, Any]) -> cc.ClusterObject:
    from podfit.client.manifests import to_cluster_object

    return to_cluster_object(manifest)


async def test_schedule_filters_scores_and_selects(live: LiveServer) -> None:
    await live.client.apply(cluster())
    response = await live.client.schedule(make_pod("web").req(cpu="1").json())
    assert response.selected_node == "n2"
    verdicts = {v.node_name: v for v in response.nodes}
    assert verdicts["n1"].plugin == "NodeResourcesFit"
    assert list(verdicts["n1"].reasons) == ["Insufficient cpu"]
    assert verdicts["n1"].code == sc.STATUS_CODE_UNSCHEDULABLE
    assert [s.node_name for s in response.scores] == ["n2"]
    assert {p.plugin for p in response.scores[0].plugins} >= {"NodeResourcesFit", "TaintToleration"}
    assert response.generation == 1


async def test_assume_reserves_the_node_for_the_next_pod(live: LiveServer) -> None:
    await live.client.apply(cluster())
    first = await live.client.schedule(make_pod("a").req(cpu="3").json(), assume=True)
    assert first.selected_node == "n2" and first.assumed_generation == 2
    second = await live.client.schedule(make_pod("b").req(cpu="3").json(), disable_preemption=True)
    assert second.selected_node == ""
    assert not second.HasField("preemption")
    stored = await live.client.get("Pod", "a")
    assert stored.object.pod.spec.node_name == "n2"


async def test_filter_by_cached_pod_and_node_subset(live: LiveServer) -> None:
    await live.client.apply([*cluster(), make_pod("pending").req(cpu="500m").json()])
    response = await live.client.filter("default/pending", node_names=["n1"])
    assert [(v.node_name, v.fits) for v in response.nodes] == [("n1", True)]


async def test_gated_pods_are_reported_not_placed(live: LiveServer) -> None:
    await live.client.apply(cluster())
    response = await live.client.schedule(make_pod("g").gates("example.com/a", "example.com/b").json())
    assert response.gated and response.selected_node == ""
    assert response.message == "SchedulingGates: waiting for scheduling gates: [example.com/a example.com/b]"


async def test_preempt_names_victims(live: LiveServer) -> None:
    await live.client.apply(
        [
            make_node("n1").capacity(cpu="2", memory="4Gi", pods="10").json(),
            make_pod("low").node("n1").req(cpu="2").priority(1).start_time("2024-01-01T00:00:00Z").json(),
        ]
    )
    response = await live.client.preempt(make_pod("high").req(cpu="1").priority(100).json())
    assert response.nominated_node == "n1"
    assert [(v.namespace, v.name) for v in response.victims] == [("default", "low")]


BAD_REQUESTS = [
    pytest.param("Apply", cc.ApplyRequest(updates=[cc.Update()]), "updates[0]", id="an update with no operation"),
    pytest.param(
        "Apply",
        cc.ApplyRequest(updates=[cc.Update(delete=cc.ObjectKey(kind=cc.OBJECT_KIND_POD))]),
        "updates[0].delete.name",
        id="a delete without a name",
    ),
    pytest.param(
        "Apply",
        cc.ApplyRequest(updates=[cc.Update(upsert=cc.ClusterObject())]),
        "updates[0].upsert.object",
        id="an empty object",
    ),
    pytest.param("Replace", cc.ReplaceRequest(), "kind", id="replace without a kind"),
    pytest.param(
        "Replace",
        cc.ReplaceRequest(kind=cc.OBJECT_KIND_NODE, objects=[_obj({"kind": "Pod", "metadata": {"name": "p"}})]),
        "objects[0]",
        id="replace with an object of another kind",
    ),
    pytest.param("Get", cc.GetRequest(key=cc.ObjectKey(kind=cc.OBJECT_KIND_NODE)), "key.name", id="get without a name"),
    pytest.param(
        "List",
        cc.ListRequest(kind=cc.OBJECT_KIND_POD, label_selector="a in b"),
        "label_selector",
        id="list with a malformed selector",
    ),
    pytest.param("Filter", sc.FilterRequest(), "pod", id="filter without a pod"),
    pytest.param(
        "Score",
        sc.ScoreRequest(pod=sc.PodReference(kubernetes_json=b"[]")),
        "pod.kubernetes_json",
        id="score with JSON that is not an object",
    ),
    pytest.param(
        "Schedule",
        sc.ScheduleRequest(
            pod=sc.PodReference(pod=make_pod().obj and _obj(make_pod().json()).pod), node_names=["nowhere"]
        ),
        "node_names[0]",
        id="schedule on an unknown node",
    ),
    pytest.param(
        "Schedule",
        sc.ScheduleRequest(pod=sc.PodReference(pod=_obj(make_pod().json()).pod), scheduler_name="nobody"),
        "scheduler_name",
        id="an unknown profile",
    ),
    pytest.param(
        "Preempt",
        sc.PreemptRequest(pod=sc.PodReference(kubernetes_json=json.dumps(make_node("n").json()).encode())),
        "pod.kubernetes_json.kind",
        id="preempt with a node instead of a pod",
    ),
]


@pytest.mark.parametrize(("method", "request_message", "field"), BAD_REQUESTS)
async def test_bad_input_is_invalid_argument_with_the_field(
    live: LiveServer, method: str, request_message: Any, field: str
) -> None:
    stub = live.client.cache if method in ("Apply", "Replace", "Get", "List") else live.client.scheduler
    with pytest.raises(PodfitError) as info:
        await live.client._call(getattr(stub, method), request_message, 5)
    assert info.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.field_violations[0][0] == field
    assert info.value.reason in ("INVALID_OBJECT", "UNKNOWN_PROFILE")
    # The cache is untouched and the server keeps serving.
    assert (await live.client.stats()).generation == 0


async def test_missing_objects_are_not_found(live: LiveServer) -> None:
    with pytest.raises(PodfitError) as info:
        await live.client.get("Pod", "ghost")
    assert info.value.code is grpc.StatusCode.NOT_FOUND
    with pytest.raises(PodfitError) as info:
        await live.client.schedule("default/ghost")
    assert info.value.code is grpc.StatusCode.NOT_FOUND


async def test_health_and_reflection(live: LiveServer) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    async with grpc.aio.insecure_channel(live.target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "podfit.v1.Scheduler", "podfit.v1.ClusterCache"):
            reply = await health.Check(health_pb2.HealthCheckRequest(service=service))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)

        async def ask() -> AsyncIterator[reflection_pb2.ServerReflectionRequest]:
            yield reflection_pb2.ServerReflectionRequest(list_services="")

        names = set()
        async for answer in stub.ServerReflectionInfo(ask()):
            names |= {s.name for s in answer.list_services_response.service}
        assert {"podfit.v1.Scheduler", "podfit.v1.ClusterCache", "grpc.health.v1.Health"} <= names


async def test_spans_and_metrics_are_recorded(live: LiveServer) -> None:
    await live.client.apply(cluster())
    await live.client.schedule(make_pod("web").req(cpu="1").json())
    spans = {s.name: s for s in live.spans.get_finished_spans()}
    schedule = spans["podfit.v1.Scheduler/Schedule"]
    assert schedule.attributes is not None
    assert schedule.attributes["podfit.pod"] == "default/web"
    assert schedule.attributes["podfit.selected"] == "n2"
    assert schedule.attributes["podfit.nodes"] == 2
    assert schedule.attributes["rpc.grpc.status_code"] == "OK"
    data = live.metrics.get_metrics_data()
    assert data is not None
    names = {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert {
        "podfit.rpc.duration",
        "podfit.decision.duration",
        "podfit.cache.objects",
        "podfit.cache.generation",
        "podfit.scheduler.pending_pods",
    } <= names


async def test_oversized_messages_are_refused() -> None:
    from podfit.server.settings import Settings

    from tests.conftest import start_live_server

    server = await start_live_server(Settings(max_message_bytes=4096))
    try:
        pods = [make_pod(f"p{i}").label("blob", "x" * 60).json() for i in range(100)]
        with pytest.raises(PodfitError) as info:
            await server.client.apply(pods)
        assert info.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        await server.client.close()
        await server.running.stop(0)


async def test_basic_view_answers_without_per_node_lists(live: LiveServer) -> None:
    await live.client.apply(cluster())
    full = await live.client.schedule(make_pod("web").req(cpu="1").json())
    basic = await live.client.schedule(make_pod("web").req(cpu="1").json(), view="basic")
    assert (basic.selected_node, basic.best_count, basic.feasible_count) == (
        full.selected_node,
        len(full.best_nodes),
        full.feasible_count,
    )
    assert (len(basic.nodes), len(basic.scores), len(basic.best_nodes), len(full.nodes)) == (0, 0, 0, 2)


async def test_schedule_stream_places_pods_in_order_with_assume(live: LiveServer) -> None:
    from podfit.client import schedule_request

    await live.client.apply(cluster())
    requests = [schedule_request(make_pod(f"p{i}").req(cpu="1").json(), assume=True, view="basic") for i in range(5)]
    answers = [a async for a in live.client.schedule_stream(requests)]
    # n2 has 4 cpu free, n1 has 500m: four pods fit on n2, the fifth nowhere.
    assert [a.selected_node for a in answers] == ["n2", "n2", "n2", "n2", ""]
    assert [a.assumed_generation for a in answers[:4]] == [2, 3, 4, 5]
    assert answers[4].HasField("preemption")


# -- ScheduleBatch ---------------------------------------------------------------------------------


async def test_schedule_batch_places_replicas_in_order(live: LiveServer) -> None:
    await live.client.apply(cluster())
    pods = [make_pod(f"r{i}").req(cpu="1").json() for i in range(5)]
    response = await live.client.schedule_batch(pods, view="basic")
    # n2 has 4 cpu free, n1 500m: the first four go to n2, each seeing the ones before it.
    assert [r.selected_node for r in response.results] == ["n2", "n2", "n2", "n2", ""]
    assert [r.assumed_generation for r in response.results] == [2, 3, 4, 5, 0]
    assert (response.generation, response.assumed_generation, response.placed_count) == (1, 5, 4)
    assert not response.all_placed and response.results[4].HasField("preemption")
    assert all(not r.nodes and not r.scores for r in response.results)
    assert (await live.client.get("Pod", "r3")).object.pod.spec.node_name == "n2"


async def test_schedule_batch_full_view_and_cached_pods(live: LiveServer) -> None:
    await live.client.apply([*cluster(), make_pod("pending").req(cpu="1").json()])
    response = await live.client.schedule_batch(["default/pending", make_pod("web").req(cpu="1").json()])
    assert [r.selected_node for r in response.results] == ["n2", "n2"]
    assert response.all_placed and response.placed_count == 2 and response.assumed_generation == 3
    assert [len(r.nodes) for r in response.results] == [2, 2]
    assert response.results[1].scores[0].node_name == "n2"
    assert (await live.client.get("Pod", "pending")).object.pod.spec.node_name == "n2"


async def _observable(live: LiveServer) -> Any:
    pods = await live.client.list("Pod")
    return (await live.client.stats(), sorted(o.SerializeToString(deterministic=True) for o in pods.objects))


@pytest.mark.parametrize(
    ("cpus", "placed"),
    [
        pytest.param(["1", "1", "1", "1"], True, id="four fit: all assumed"),
        pytest.param(["1", "1", "1", "1", "1"], False, id="the fifth does not fit: none assumed"),
        pytest.param(["3", "2"], False, id="the second fits only without the first: none assumed"),
    ],
)
async def test_schedule_batch_all_or_nothing(live: LiveServer, cpus: list[str], placed: bool) -> None:
    await live.client.apply(cluster())
    before = await _observable(live)
    pods = [make_pod(f"g{i}").label("gang", "g").req(cpu=cpu).json() for i, cpu in enumerate(cpus)]
    response = await live.client.schedule_batch(pods, all_or_nothing=True, disable_preemption=True, view="basic")
    assert response.all_placed is placed
    assert len(response.results) == len(pods)
    assert not any(r.HasField("preemption") for r in response.results)
    if placed:
        assert [r.assumed_generation for r in response.results] == list(range(2, 2 + len(pods)))
        assert (await live.client.stats()).bound_pods == 1 + len(pods)
    else:
        assert (await _observable(live)) == before
        assert response.generation == 1 and response.assumed_generation == 0 and response.placed_count == 0
        assert {r.generation for r in response.results} == {1}
        assert {r.assumed_generation for r in response.results} == {0}
        # The next decision sees the cache as it was before the batch.
        again = await live.client.schedule(pods[0], view="basic")
        assert (again.generation, again.selected_node) == (1, response.results[0].selected_node)


BAD_BATCHES = [
    pytest.param(
        [make_pod("a").json(), make_pod("b").req(cpu="lots").json()],
        grpc.StatusCode.INVALID_ARGUMENT,
        "pods[1].pod.spec.containers[0].resources.requests.cpu",
        id="a bad quantity in the second pod",
    ),
    pytest.param(
        [make_pod("a").json(), {"kind": "Pod", "metadata": {}}],
        grpc.StatusCode.INVALID_ARGUMENT,
        "pods[1].pod.metadata.name",
        id="a pod without a name",
    ),
    pytest.param(
        [make_pod("a").json(), make_pod("b").json(), make_pod("a").json()],
        grpc.StatusCode.INVALID_ARGUMENT,
        "pods[2]",
        id="the same pod twice",
    ),
    pytest.param(
        [make_pod("a").json(), make_pod("b").scheduler("nobody").json()],
        grpc.StatusCode.INVALID_ARGUMENT,
        "pods[1]",
        id="a pod naming an unknown profile",
    ),
    pytest.param([make_pod("a").json(), "default/ghost"], grpc.StatusCode.NOT_FOUND, None, id="an unknown cached pod"),
]


@pytest.mark.parametrize(("pods", "code", "field"), BAD_BATCHES)
async def test_a_bad_pod_in_a_batch_is_reported_at_its_index(
    live: LiveServer, pods: list[Any], code: grpc.StatusCode, field: str | None
) -> None:
    await live.client.apply(cluster())
    with pytest.raises(PodfitError) as info:
        await live.client.schedule_batch(pods)
    assert info.value.code is code
    if field is None:
        assert "pods[1]" in info.value.message and "default/ghost" in info.value.message
    else:
        assert info.value.field_violations[0][0] == field
    assert (await live.client.stats()).generation == 1


async def test_batch_with_an_unknown_profile_for_all_pods_names_the_request_field(live: LiveServer) -> None:
    await live.client.apply(cluster())
    with pytest.raises(PodfitError) as info:
        await live.client.schedule_batch([make_pod("a").json()], scheduler_name="nobody")
    assert info.value.field_violations[0][0] == "scheduler_name" and info.value.reason == "UNKNOWN_PROFILE"


@pytest.mark.parametrize("batch", [False, True], ids=["Schedule", "ScheduleBatch"])
async def test_assuming_a_refused_pod_update_is_invalid_argument(live: LiveServer, batch: bool) -> None:
    """Replacing a gated cached pod by an ungated one with another nodeSelector is an update
    kube-apiserver refuses; assuming it is refused alike, and nothing is assumed."""
    await live.client.apply([*cluster(), make_pod("gw").gates("example.com/a").node_selector(zone="a").json()])
    changed = make_pod("gw").node_selector(zone="b").json()
    with pytest.raises(PodfitError) as info:
        if batch:
            await live.client.schedule_batch([make_pod("first").json(), changed])
        else:
            await live.client.schedule(changed, assume=True)
    assert info.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.field_violations[0][0] == ("pods[1]" if batch else "pod") + ".spec.nodeSelector"
    assert (await live.client.stats()).generation == 1
