"""ClusterCache.Get and List of nodes carry the node's allocation as the scheduler's NodeInfo counts it,
so that `podfit get nodes` shows requested against allocatable without re-deriving effective requests."""

from __future__ import annotations

import pytest
from podfit.v1 import cluster_cache_pb2 as cc

from tests.builders import PodBuilder, make_node, make_pod
from tests.conftest import LiveServer


@pytest.mark.parametrize(
    ("pods", "requested", "pod_count"),
    [
        pytest.param([], {}, 0, id="an empty node requests nothing"),
        pytest.param(
            [make_pod("a").node("n").req(cpu="500m", memory="1Gi"), make_pod("b").node("n").req(cpu="1500m")],
            {"cpu": "2", "memory": str(2**30)},
            2,
            id="the sum of the bound pods, cpu in cores when whole",
        ),
        pytest.param(
            [make_pod("a").node("n").req(cpu="100m").init_container({"cpu": "750m"})],
            {"cpu": "750m"},
            1,
            id="an init container larger than the app containers",
        ),
        pytest.param(
            [make_pod("a").node("n").req(cpu="100m").init_container({"cpu": "200m"}, sidecar=True).overhead(cpu="50m")],
            {"cpu": "350m"},
            1,
            id="a sidecar runs beside the app containers, overhead is added",
        ),
        pytest.param(
            [make_pod("a").node("n").req(cpu="1").phase("Succeeded"), make_pod("b").req(cpu="1")],
            {},
            0,
            id="terminal and pending pods do not count",
        ),
        pytest.param(
            [make_pod("a").node("other").req(cpu="1", **{"example.com/foo": "2"})],
            {},
            0,
            id="another node's pods do not count",
        ),
    ],
)
async def test_get_and_list_carry_the_node_allocation(
    live: LiveServer, pods: list[PodBuilder], requested: dict[str, str], pod_count: int
) -> None:
    nodes = [make_node("n").json(), make_node("other").capacity(**{"example.com/foo": "4"}).json()]
    await live.client.apply([*nodes, *(p.json() for p in pods)])
    got = await live.client.get("Node", "n")
    listed = await live.client.list("Node")
    expected = cc.NodeAllocation(node_name="n", requested=requested, pod_count=pod_count)
    assert got.node_allocation == expected
    assert [a.node_name for a in listed.node_allocations] == [o.node.metadata.name for o in listed.objects]
    assert next(a for a in listed.node_allocations if a.node_name == "n") == expected


async def test_other_kinds_carry_no_allocation(live: LiveServer) -> None:
    await live.client.apply([make_node("n").json(), make_pod("p").node("n").req(cpu="1").json()])
    got = await live.client.get("Pod", "p", "default")
    listed = await live.client.list("Pod")
    assert not got.HasField("node_allocation") and len(listed.node_allocations) == 0
