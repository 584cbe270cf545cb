"""SimulateDrain through a real server: cluster-autoscaler's scale-down planner — what it leaves out, what
stays on a removed node, PDB budgets counted down across nodes, where pods move under either destination
rule, undone failures, its flags, ``now`` — and the drain, removal and estimate corpora replayed by
``podfit conformance``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from podfit.client import PodfitError
from podfit.client.cli import main
from podfit.client.conformance import load_cases
from podfit.v1 import simulation_pb2 as sim

from tests.builders import make_node, make_pod
from tests.conftest import LiveServer
from tests.corpora import corpus as corpus_file

ZONE = "topology.kubernetes.io/zone"
WEB = {"matchLabels": {"app": "web"}}


def node(name: str, cpu: str = "2", zone: str = "") -> dict[str, Any]:
    builder = make_node(name).capacity(cpu=cpu, memory="8Gi", pods="10")
    return (builder.labels(**{ZONE: zone}) if zone else builder).json()


def rs_pod(name: str, on: str, cpu: str = "1", namespace: str = "default", **labels: str) -> dict[str, Any]:
    return make_pod(name, namespace).req(cpu=cpu).labels(**labels).owner("ReplicaSet", "rs").node(on).json()


def replica_set(name: str = "rs", namespace: str = "default", replicas: int | None = 3) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": "any"}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def pdb(allowed: int, namespace: str = "default", name: str = "budget", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": labels}},
        "status": {"disruptionsAllowed": allowed},
    }


def spread_pod(name: str, on: str, **extra: Any) -> dict[str, Any]:
    builder = make_pod(name).req(cpu="100m").labels(app="web").owner("ReplicaSet", "rs").node(on)
    return builder.spread(1, ZONE, selector=WEB, **extra).json()


DAEMONSET = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"}, "spec": {}}


def agent(on: str) -> dict[str, Any]:
    """A DaemonSet pod labelled app=agent: it stays on a removed node."""
    return make_pod(f"agent-{on}").req(cpu="100m").labels(app="agent").owner("DaemonSet", "ds").node(on).json()


def shy_pod(name: str, on: str) -> dict[str, Any]:
    """A pod that will not share a zone with an agent pod (required anti-affinity)."""
    builder = make_pod(name).req(cpu="100m").owner("ReplicaSet", "rs").node(on)
    return builder.pod_term("podAntiAffinity", {"app": "agent"}, ZONE).json()


async def load(live: LiveServer, objects: list[dict[str, Any]]) -> None:
    await live.client.apply([replica_set(), *objects])


def summary(answer: sim.SimulateDrainResponse) -> list[tuple[str, str, dict[str, str]]]:
    """Per node: (unremovable reason or "removable", what blocks or is unplaced, pod -> destination)."""
    rows = []
    for n in answer.nodes:
        why = n.blocking_pod.reason if n.HasField("blocking_pod") else n.unplaced_pod
        moves = {m.name: m.node_name for m in n.pods_to_move} if n.removable else {}
        assert n.removable == (not n.unremovable_reason)
        rows.append((n.unremovable_reason or "removable", why, moves))
    return rows


OTHER_NODES = {"destinations": "other-nodes"}
ALL_BUT_REMOVED = {"destinations": "all-but-removed"}
Summary = list[tuple[str, str, dict[str, str]]]
SCENARIOS: dict[
    str,
    tuple[list[dict[str, Any]], list[str], Summary] | tuple[list[dict[str, Any]], list[str], Summary, dict[str, Any]],
] = {
    # name: (cluster, nodes to drain, expected summary per node[, request options])
    "pods move to the nodes outside the request, first fit in round robin": (
        [node("a"), node("b"), node("c"), rs_pod("p1", "a"), rs_pod("p2", "a")],
        ["a"],
        [("removable", "", {"p1": "b", "p2": "c"})],
    ),
    "a node of the request is never a destination": (
        [node("a"), node("b"), node("c", cpu="1"), rs_pod("p1", "a"), rs_pod("p2", "b")],
        ["a", "b"],
        [("removable", "", {"p1": "c"}), ("NoPlaceToMovePods", "default/p2", {})],
    ),
    "a node whose pods fit nowhere is undone, and the next node uses the room": (
        [node("a", cpu="4"), node("b"), node("c"), rs_pod("big", "a", cpu="3"), rs_pod("p1", "a"), rs_pod("p2", "b")],
        ["a", "b"],
        [("NoPlaceToMovePods", "default/big", {}), ("removable", "", {"p2": "c"})],
    ),
    "the PDB budget is counted down across the nodes of one request": (
        [node("a"), node("b"), node("c"), rs_pod("p1", "a", app="x"), rs_pod("p2", "b", app="x"), pdb(1, app="x")],
        ["a", "b"],
        [("removable", "", {"p1": "c"}), ("BlockedByPod", "NotEnoughPdb", {})],
    ),
    "an unremovable node spends no budget": (
        [
            node("a"),
            node("b"),
            node("c"),
            make_pod("bare").node("a").labels(app="x").json(),
            rs_pod("p2", "b", app="x"),
            pdb(1, app="x"),
        ],
        ["a", "b"],
        [("BlockedByPod", "NotReplicated", {}), ("removable", "", {"p2": "c"})],
    ),
    # Zones: a (the drained node, with no web pod once its own has left), b and c with one web pod each.
    "the removed node keeps its zone counting: no zone can take the pod within maxSkew 1": (
        [node("a", zone="za"), node("b", zone="zb"), node("c", zone="zc"), *(spread_pod(f"w-{z}", z) for z in "abc")],
        ["a"],
        [("NoPlaceToMovePods", "default/w-a", {})],
    ),
    "the removed node is not tainted: zones that honour taints count it too": (
        [
            node("a", zone="za"),
            node("b", zone="zb"),
            node("c", zone="zc"),
            *(spread_pod(f"w-{z}", z, nodeTaintsPolicy="Honor") for z in "abc"),
        ],
        ["a"],
        [("NoPlaceToMovePods", "default/w-a", {})],
    ),
    "a DaemonSet pod stays on the removed node and keeps its zone out of bounds for anti-affinity": (
        [DAEMONSET, node("a", zone="za"), node("b", zone="za"), node("c", zone="zb"), agent("a"), shy_pod("p", "a")],
        ["a"],
        [("removable", "", {"p": "c"})],
    ),
    "a DaemonSet pod left on an earlier removed node repels a later node's pod": (
        [
            DAEMONSET,
            node("a", zone="za"),
            node("b", zone="zb"),
            node("c", zone="za"),
            agent("a"),
            rs_pod("p1", "a", cpu="100m"),
            shy_pod("p2", "b"),
        ],
        ["a", "b"],
        [("removable", "", {"p1": "c"}), ("NoPlaceToMovePods", "default/p2", {})],
    ),
    "an expendable pod is left out: it neither blocks nor moves nor takes room": (
        [
            node("a", cpu="1"),
            node("b", cpu="1"),
            make_pod("bare").node("a").priority(-11).json(),
            make_pod("filler").req(cpu="1").node("b").priority(-11).json(),
            rs_pod("p1", "a"),
        ],
        ["a"],
        [("removable", "", {"p1": "b"})],
    ),
    "a Succeeded pod is left out whatever its restart policy": (
        [node("a"), node("b"), make_pod("done").node("a").phase("Succeeded").json()],
        ["a"],
        [("removable", "", {})],
    ),
    "a removable node counts all its pods down, even when the PDB check said no": (
        [
            node("a"),
            node("b"),
            node("c", cpu="4"),
            {
                **make_pod("safe").req(cpu="100m").labels(app="s").node("a").json(),
                "metadata": {
                    "name": "safe",
                    "namespace": "default",
                    "labels": {"app": "s"},
                    "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
                },
            },
            rs_pod("p1", "a", app="x"),
            rs_pod("p2", "b", app="x"),
            pdb(0, name="budget-s", app="s"),
            pdb(1, name="budget-x", app="x"),
        ],
        ["a", "b"],
        [("removable", "", {"safe": "c", "p1": "c"}), ("BlockedByPod", "NotEnoughPdb", {})],
    ),
    # c has room for one pod: a's pod takes it under podfit's rule; under cluster-autoscaler's, b (a later
    # node of the request) takes it, and then b's own pod and a's both need c.
    "podfit's rule: no node of the request is a destination": (
        [node("a"), node("b"), node("c", cpu="1"), rs_pod("p1", "a"), rs_pod("p2", "b")],
        ["a", "b"],
        [("removable", "", {"p1": "c"}), ("NoPlaceToMovePods", "default/p2", {})],
        OTHER_NODES,
    ),
    "cluster-autoscaler's rule: a later node receives a pod, which moves again on its turn": (
        [node("a"), node("b"), node("c", cpu="1"), rs_pod("p1", "a"), rs_pod("p2", "b")],
        ["a", "b"],
        [("removable", "", {"p1": "b"}), ("NoPlaceToMovePods", "default/p1", {})],
        ALL_BUT_REMOVED,
    ),
    # a (blocked) takes b's first pod and c its second; d's 2-CPU pod would only fit b, removed by then.
    "cluster-autoscaler's rule: an earlier unremovable node receives pods, a removed one none": (
        [
            node("a"),
            node("b", cpu="4"),
            node("c", cpu="1"),
            node("d"),
            make_pod("bare").node("a").json(),
            rs_pod("p1", "b"),
            rs_pod("p2", "b"),
            rs_pod("p3", "d", cpu="2"),
        ],
        ["a", "b", "d"],
        [
            ("BlockedByPod", "NotReplicated", {}),
            ("removable", "", {"p1": "a", "p2": "c"}),
            ("NoPlaceToMovePods", "default/p3", {}),
        ],
        ALL_BUT_REMOVED,
    ),
    "a mirror pod is skipped; a DaemonSet pod whose DaemonSet is not cached blocks": (
        [
            node("a"),
            node("b"),
            make_pod("ds").node("a").owner("DaemonSet", "ds").json(),
            {
                **make_pod("static").node("a").json(),
                "metadata": {
                    "name": "static",
                    "namespace": "default",
                    "annotations": {"kubernetes.io/config.mirror": "x"},
                },
            },
            rs_pod("p1", "a"),
        ],
        ["a"],
        [("BlockedByPod", "ControllerNotFound", {})],
    ),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS.values()), ids=list(SCENARIOS))
async def test_removal_simulation(live: LiveServer, scenario: tuple[Any, ...]) -> None:
    cluster, drain, want, options = (*scenario, {})[:4]
    await load(live, cluster)
    before = await live.client.stats()
    answer = await live.client.simulate_drain(drain, **options)
    assert [n.node_name for n in answer.nodes] == drain
    assert summary(answer) == want
    assert answer.base_generation == before.generation
    after = await live.client.stats()
    assert (after.generation, after.bound_pods) == (before.generation, before.bound_pods)


async def test_daemonset_pods_are_listed_apart_and_not_moved(live: LiveServer) -> None:
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"}, "spec": {}}
    await load(live, [daemonset, node("a"), node("b"), make_pod("ds").node("a").owner("DaemonSet", "ds").json()])
    (drained,) = (await live.client.simulate_drain(["a"])).nodes
    assert (drained.removable, list(drained.daemonset_pods), list(drained.pods_to_move)) == (True, ["default/ds"], [])


def _flag_cluster(kind: str) -> list[dict[str, Any]]:
    pods = {
        "system": rs_pod("sys", "a", namespace="kube-system"),
        "local": {
            **rs_pod("local", "a"),
            "spec": {**rs_pod("local", "a")["spec"], "volumes": [{"name": "data", "hostPath": {"path": "/d"}}]},
        },
        "custom": make_pod("custom").node("a").owner("CustomThing", "c").json(),
        "replicas": rs_pod("few", "a"),
        # Bare pods (NotReplicated when the drain rules see them), of a priority and preemption policy.
        "low": make_pod("low").node("a").priority(-11).json(),
        "at-cutoff": make_pod("at-cutoff").node("a").priority(-10).json(),
        "never": make_pod("never").node("a").priority(-11, "Never").json(),
        "explicit-policy": make_pod("explicit").node("a").priority(-11, "PreemptLowerPriority").json(),
        "zero": make_pod("zero").node("a").priority(0).json(),
        "no-priority": make_pod("no-priority").node("a").json(),
        "succeeded-always": make_pod("done").node("a").phase("Succeeded").json(),
        "failed": make_pod("failed").node("a").phase("Failed").json(),
    }
    return [node("a"), node("b"), replica_set(namespace="kube-system"), pods[kind]]


@pytest.mark.parametrize(
    ("kind", "options", "want"),
    [
        pytest.param("system", {}, "UnmovableKubeSystemPod", id="kube-system pod without a PDB blocks by default"),
        pytest.param("system", {"skip_nodes_with_system_pods": False}, "", id="skip-nodes-with-system-pods=false"),
        pytest.param("local", {}, "LocalStorageRequested", id="hostPath blocks by default"),
        pytest.param("local", {"skip_nodes_with_local_storage": False}, "", id="skip-nodes-with-local-storage=false"),
        pytest.param("custom", {}, "NotReplicated", id="a custom controller's pod blocks by default"),
        pytest.param(
            "custom",
            {"skip_nodes_with_custom_controller_pods": False},
            "",
            id="skip-nodes-with-custom-controller-pods=false",
        ),
        pytest.param("replicas", {"min_replica_count": 3}, "", id="min-replica-count met"),
        pytest.param("replicas", {"min_replica_count": 4}, "MinReplicasReached", id="min-replica-count above replicas"),
        pytest.param("low", {}, "", id="a pod below the default cutoff -10 is left out"),
        pytest.param("explicit-policy", {}, "", id="PreemptLowerPriority spelled out is expendable too"),
        pytest.param("at-cutoff", {}, "NotReplicated", id="a pod at the cutoff is not expendable"),
        pytest.param("never", {}, "NotReplicated", id="a preemptionPolicy Never pod is not expendable"),
        pytest.param(
            "low", {"expendable_pods_priority_cutoff": -20}, "NotReplicated", id="expendable-pods-priority-cutoff=-20"
        ),
        pytest.param("zero", {"expendable_pods_priority_cutoff": 5}, "", id="priority 0 below cutoff 5"),
        pytest.param(
            "no-priority", {"expendable_pods_priority_cutoff": 5}, "NotReplicated", id="a pod without priority never is"
        ),
        pytest.param("succeeded-always", {}, "", id="a Succeeded pod with restartPolicy Always is left out"),
        pytest.param("failed", {}, "", id="a Failed pod is left out"),
        pytest.param(
            "succeeded-always",
            {"skip_terminal_pods": False},
            "NotReplicated",
            id="skip-terminal-pods=false: the drain rules judge it by restart policy",
        ),
        pytest.param("failed", {"skip_terminal_pods": False}, "", id="skip-terminal-pods=false: a Failed pod moves"),
    ],
)
async def test_flags(live: LiveServer, kind: str, options: dict[str, Any], want: str) -> None:
    await load(live, _flag_cluster(kind))
    (drained,) = (await live.client.simulate_drain(["a"], **options)).nodes
    assert drained.blocking_pod.reason == want
    assert drained.removable == (not want)


@pytest.mark.parametrize(
    ("now", "want"),
    [
        # Deleted at 12:00 with the default 30 s grace period: long-terminating after 12:01:00.
        pytest.param(datetime(2024, 6, 25, 12, 0, 50, tzinfo=UTC), "NotReplicated", id="still terminating: it counts"),
        pytest.param(datetime(2024, 6, 25, 12, 1, 1, tzinfo=UTC), "", id="long terminating: skipped"),
    ],
)
async def test_now_judges_terminating_pods(live: LiveServer, now: datetime, want: str) -> None:
    bare = make_pod("bare").node("a").json()
    bare["metadata"]["deletionTimestamp"] = "2024-06-25T12:00:00Z"
    await load(live, [node("a"), node("b"), bare])
    (drained,) = (await live.client.simulate_drain(["a"], now=now)).nodes
    assert drained.blocking_pod.reason == want
    assert [m.name for m in drained.pods_to_move] == []


async def test_an_unknown_destination_rule_is_invalid(live: LiveServer) -> None:
    await load(live, [node("a")])
    request = sim.SimulateDrainRequest(node_names=["a"], destinations=7)  # type: ignore[arg-type]
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await live.client.simulation.SimulateDrain(request)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "destinations" in str(raised.value.details())


@pytest.mark.parametrize(
    ("nodes", "options", "field"),
    [
        pytest.param(["nope"], {}, "node_names[0]", id="unknown node"),
        pytest.param(["a", "a"], {}, "node_names[1]", id="node named twice"),
        pytest.param(["a"], {"min_replica_count": -1}, "options.min_replica_count", id="negative min replicas"),
    ],
)
async def test_bad_requests_name_the_field(
    live: LiveServer, nodes: list[str], options: dict[str, Any], field: str
) -> None:
    await load(live, [node("a")])
    with pytest.raises(PodfitError) as raised:
        await live.client.simulate_drain(nodes, **options)
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in raised.value.field_violations] == [field]


@pytest.mark.parametrize("corpus", ["drain", "removal", "estimate"])
def test_conformance_replays_cluster_autoscaler_corpora(
    corpus: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``podfit conformance`` on each public corpus of cluster-autoscaler's answers, every case passing."""
    cases = corpus_file(f"{corpus}/cases-public.jsonl")
    total = len(load_cases(cases))
    report = tmp_path / "report.json"
    code = main(["conformance", str(cases), "--report-json", str(report)])
    out = capsys.readouterr().out
    assert out.rstrip().endswith(f"{total} passed, 0 failed"), out[-2000:]
    body = json.loads(report.read_text())
    assert code == 0 and (body["total"], body["failed"]) == (total, 0)
    assert all(
        check["match"] == check["total"] > 0 for name, check in body["checks"].items() if name != "pdb_can_remove"
    )
