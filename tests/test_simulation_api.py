"""The Simulation service through a real server: scenarios and placements, cluster-autoscaler's estimate
on every public case, field paths on bad input, and a cache that never changes."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from podfit.client import PodfitError
from podfit.client.conformance import answer_estimate_case
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import objects_pb2 as ob
from podfit.v1 import simulation_pb2 as sim

from tests.builders import make_node, make_pod
from tests.conftest import LiveServer
from tests.test_estimator import _cases


def _node(name: str, cpu: str = "2") -> dict[str, Any]:
    return make_node(name).capacity(cpu=cpu, memory="8Gi", pods="10").json()


def _pod(name: str, cpu: str = "1", node: str = "") -> dict[str, Any]:
    builder = make_pod(name).req(cpu=cpu)
    return (builder.node(node) if node else builder).json()


def _template(cpu: str = "4") -> Any:
    return make_node("template").capacity(cpu=cpu, memory="8Gi", pods="10").json()


def _cluster_object(manifest: dict[str, Any]) -> Any:
    from podfit.client.manifests import to_cluster_object

    return to_cluster_object(manifest)


SCENARIOS: dict[str, tuple[sim.Scenario, list[str], list[str]]] = {
    # name: (scenario, pods to place (cpu each, "name:cpu"), expected node per pod ("" = unschedulable))
    "nothing changed: the full cluster takes one more": (sim.Scenario(), ["p1:1", "p2:1"], ["n2", ""]),
    "hypothetical nodes take what the cluster cannot": (
        sim.Scenario(add_nodes=[sim.HypotheticalNodes(template=_cluster_object(_template()), count=2)]),
        ["p1:3", "p2:3", "p3:3"],
        ["template-sim-0", "template-sim-1", ""],
    ),
    "a cordoned node takes nothing": (sim.Scenario(cordon_nodes=["n2"]), ["p1:1"], [""]),
    "a tainted node takes nothing": (
        sim.Scenario(taint_nodes=[sim.NodeTaint(node_name="n2", taint=ob.Taint(key="k", effect="NoSchedule"))]),
        ["p1:1"],
        [""],
    ),
    "a removed node's pods free nothing elsewhere": (sim.Scenario(remove_nodes=["n1"]), ["p1:1", "p2:1"], ["n2", ""]),
}


async def _load(live: LiveServer) -> None:
    await live.client.apply([_node("n1"), _node("n2"), _pod("busy", "2", "n1"), _pod("half", "1", "n2")])


@pytest.mark.parametrize(("scenario", "pods", "want"), list(SCENARIOS.values()), ids=list(SCENARIOS))
async def test_simulate_places_pods_in_the_scenario_and_leaves_the_cache(
    live: LiveServer, scenario: sim.Scenario, pods: list[str], want: list[str]
) -> None:
    await _load(live)
    before = await live.client.stats()
    manifests = [_pod(name, cpu) for name, cpu in (p.split(":") for p in pods)]
    answer = await live.client.simulate(manifests, scenario)
    assert [p.node_name for p in answer.placements] == want
    assert answer.base_generation == before.generation
    for placement in answer.placements:
        # Unschedulable pods say why, node by node.
        assert bool(placement.rejections) == (not placement.node_name)
    after = await live.client.stats()
    assert (after.generation, after.nodes, after.bound_pods) == (before.generation, before.nodes, before.bound_pods)


async def test_hypothetical_nodes_report_their_pods_and_utilisation(live: LiveServer) -> None:
    await _load(live)
    scenario = sim.Scenario(add_nodes=[sim.HypotheticalNodes(template=_cluster_object(_template()), count=1)])
    answer = await live.client.simulate([_pod("p1", "3")], scenario)
    (node,) = answer.hypothetical_nodes
    assert (node.node_name, list(node.pods)) == ("template-sim-0", ["default/p1"])
    assert (node.cpu, node.memory, node.pods_fraction) == (0.75, 0.0, 0.1)


async def test_bound_pods_added_and_removed_in_the_scenario(live: LiveServer) -> None:
    await _load(live)
    freed = sim.Scenario(remove_pods=[cc.ObjectKey(namespace="default", name="busy")])
    assert [p.node_name for p in (await live.client.simulate([_pod("p", "2")], freed)).placements] == ["n1"]
    from podfit.client.manifests import to_pod_reference

    taken = sim.Scenario(add_pods=[to_pod_reference(_pod("other", "1", "n2"))])
    assert [p.node_name for p in (await live.client.simulate([_pod("p", "1")], taken)).placements] == [""]


@pytest.mark.parametrize(
    ("scenario", "field"),
    [
        pytest.param(sim.Scenario(cordon_nodes=["ghost"]), "scenario.cordon_nodes[0]", id="cordoning an unknown node"),
        pytest.param(
            sim.Scenario(remove_nodes=["n1", "ghost"]), "scenario.remove_nodes[1]", id="removing an unknown node"
        ),
        pytest.param(
            sim.Scenario(remove_pods=[cc.ObjectKey(namespace="default", name="ghost")]),
            "scenario.remove_pods[0]",
            id="removing a pod that is not bound",
        ),
        pytest.param(
            sim.Scenario(taint_nodes=[sim.NodeTaint(node_name="n1", taint=ob.Taint(key="k", effect="Sometimes"))]),
            "scenario.taint_nodes[0].taint.effect",
            id="a taint with a bad effect",
        ),
        pytest.param(
            sim.Scenario(add_nodes=[sim.HypotheticalNodes(template=_cluster_object(_pod("x")), count=1)]),
            "scenario.add_nodes[0].template",
            id="a template that is not a node",
        ),
    ],
)
async def test_bad_scenarios_name_the_field(live: LiveServer, scenario: sim.Scenario, field: str) -> None:
    await _load(live)
    with pytest.raises(PodfitError) as raised:
        await live.client.simulate([_pod("p")], scenario)
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert any(f.startswith(field) for f, _ in raised.value.field_violations), raised.value.field_violations


async def test_estimates_match_cluster_autoscaler_through_the_api(live: LiveServer) -> None:
    """Every public estimate case, through Replace and EstimateScaleUp on one server (the replay
    ``podfit conformance`` runs)."""
    mismatches = []
    for case in _cases():
        want, got = await answer_estimate_case(live.client, case)
        if got != want:
            mismatches.append(case["id"])
    assert mismatches == []


async def test_estimate_errors_name_the_field(live: LiveServer) -> None:
    with pytest.raises(PodfitError) as raised:
        await live.client.estimate_scale_up([[_pod("p")]], [("", _template(), 0, 3)])
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in raised.value.field_violations] == ["node_groups[0].id"]
