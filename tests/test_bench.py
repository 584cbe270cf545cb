"""A smoke run of every `podfit bench` workload at a small size, so the harness cannot rot."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from podfit.client import bench
from podfit.client.cli import main
from podfit.v1 import simulation_pb2

from tests.conftest import LiveServer


@pytest.mark.parametrize("kind", sorted(bench.WORKLOADS))
async def test_every_workload_runs_small(live: LiveServer, kind: str) -> None:
    results = await bench.run([f"{kind}/12Nodes_40Pods"], live.target, decisions=8, stream=True, batch=3)
    assert results[0].decisions == 8 and len(results[0].latencies_ms) == 8
    placing = kind not in ("PreemptionBasic", "MixedChurn")
    assert [r.mode for r in results] == (["grpc", "grpc-stream", "grpc-batch3"] if placing else ["grpc"])
    # Batches of 3, 3 and 2 pods: every pod timed by its batch's round trip.
    assert all(len(r.latencies_ms) == len(r.completions) == 8 for r in results)
    body = results[0].as_dict()
    assert set(body) == {"mode", "decisions", "throughput", "latency_ms", "load_seconds", "cache_estimate_mib"}
    assert set(body["throughput"]) == {"avg", "p50", "p90", "p99"} and body["throughput"]["avg"] > 0
    stats = await live.client.stats()
    if kind == "PreemptionBasic":
        assert stats.bound_pods == 40  # preemption never evicts
    elif kind != "SchedulingPodAntiAffinity":
        # Measured pods were assumed onto nodes (twice: unary and stream runs reload the cluster).
        assert stats.bound_pods >= 40 + 8
    if kind == "DynamicResources":
        # The last run's 8 claims, each allocated and reserved as its pod was assumed.
        claims = (await live.client.list("ResourceClaim")).objects
        assert len(claims) == 8
        assert all(c.resource_claim.status.allocation.devices.results for c in claims)
        assert all(len(c.resource_claim.status.reserved_for) == 1 for c in claims)


@pytest.mark.parametrize("name", bench.DEFAULT_WORKLOADS)
async def test_default_workloads_run_scaled_down(live: LiveServer, name: str) -> None:
    """Every default workload, 1,000 times smaller but with its pods-per-node ratio (the 450,000-pod
    one included), so a shape that cannot load (e.g. more pods than fit) fails here, not in a long run."""
    kind, nodes, pods = bench.parse_name(name)
    small = f"{kind}/{max(3, nodes // 1000)}Nodes_{pods // 1000}Pods"
    results = await bench.run([small], live.target, decisions=3, stream=False)
    assert results[0].decisions == 3 and results[0].load_seconds > 0
    stats = await live.client.stats()
    assert stats.nodes == max(3, nodes // 1000)


def test_nodes_are_stamped_like_the_manifests() -> None:
    from podfit.client.manifests import to_cluster_object

    assert bench._nodes(4) == [to_cluster_object(bench.node(i)) for i in range(4)]


def test_workload_names_are_validated() -> None:
    assert bench.parse_name("SchedulingBasic/5000Nodes_10000Pods") == ("SchedulingBasic", 5000, 10000)
    with pytest.raises(ValueError, match="must look like"):
        bench.parse_name("Scheduling/5000Nodes")


def test_cli_bench_writes_the_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    # Without --target the command starts its own podfit-server on a loopback port.
    code = main(["bench", "SchedulingBasic/6Nodes_10Pods", "--decisions", "5", "--json", str(out)])
    assert code == 0
    body = json.loads(out.read_text())
    entry = body["workloads"]["SchedulingBasic/6Nodes_10Pods"]
    assert entry["mode"] == "grpc" and entry["decisions"] == 5
    assert set(entry["latency_ms"]) == {"p50", "p90", "p99", "max"}
    printed = capsys.readouterr().out
    assert "| SchedulingBasic/6Nodes_10Pods | grpc | 5 |" in printed
    # Where it was measured: the machine, its load, who decided (a server started here at its defaults:
    # one process on two cores or fewer, else one per core, and the what-if process beside it from two
    # cores on) and who asked.
    cores = len(os.sched_getaffinity(0))
    processes = 1 if cores <= 2 else cores
    expected = "1 process" if processes == 1 else f"{processes} processes: the cache's owner and {processes - 1} "
    expected += ".*, beside the what-if process" if cores >= 2 else ""
    assert re.search(
        r"^machine: .+, \d+ cores, Python 3\.\d+\.\d+, load \d+\.\d\d, .+; decisions by a podfit-server "
        rf"started here \({expected}\), asked by 1 client$",
        printed,
        re.MULTILINE,
    ), printed
    assert body["machine"] in printed
    assert entry["server_rss_mib"] > 10
    assert entry["server_rss_after_load_mib"] > 10 and entry["cache_estimate_mib"] >= 0


async def test_full_view_is_measured_as_its_own_mode(live: LiveServer) -> None:
    results = await bench.run(["SchedulingBasic/5Nodes_10Pods"], live.target, decisions=4, stream=False, view="full")
    assert [r.mode for r in results] == ["grpc (full view)"] and len(results[0].latencies_ms) == 4


# Simulation workloads at 50 nodes: the what-if scaled down (10 pending pods, 2 drained nodes, 10 added
# nodes), node-00000 still holding 110 pods. Each: what every answer was checked for.
SIMULATION_CASES = {
    "EstimateScaleUp/50Nodes_500Pods": "each of 5 node groups places all 10 pending pods on new nodes",
    "SimulateDrain1Node/50Nodes_500Pods": (
        "1 node(s) removable, each of their 110 pods given a destination off the drained nodes"
    ),
    # Nodes 1 and 25, 8 pods each (390 pods round robin over 49 nodes).
    "SimulateDrain100Nodes/50Nodes_500Pods": (
        "2 node(s) removable, each of their 16 pods given a destination off the drained nodes"
    ),
    "SimulateDrain6Nodes/50Nodes_500Pods": (
        "6 node(s) removable, each of their 48 pods given a destination off the drained nodes"
    ),
    "SimulateAddNodes/50Nodes_500Pods": "10 nodes added and all 10 pods placed on them",
}


@pytest.mark.parametrize(("name", "checked"), list(SIMULATION_CASES.items()), ids=list(SIMULATION_CASES))
async def test_simulation_workloads_run_small_and_check_every_answer(live: LiveServer, name: str, checked: str) -> None:
    # Never streamed or batched: one mode, "decisions" are calls.
    (result,) = await bench.run([name], live.target, decisions=3, stream=True, batch=3)
    assert (result.mode, result.decisions, len(result.latencies_ms), len(result.completions)) == ("grpc", 3, 3, 3)
    body = result.as_dict()
    assert set(body) == {
        "mode",
        "decisions",
        "throughput",
        "latency_ms",
        "load_seconds",
        "cache_estimate_mib",
        "checked",
    }
    assert set(body["latency_ms"]) == {"p50", "p90", "p99", "max"}
    assert body["latency_ms"]["max"] >= body["latency_ms"]["p50"] > 0 and body["throughput"]["avg"] > 0
    assert body["checked"] == checked
    # The simulations never change the cache: the loaded cluster is all there is.
    stats = await live.client.stats()
    assert (stats.nodes, stats.bound_pods) == (50, 500)


@pytest.mark.parametrize("kind", sorted(bench.SIMULATIONS))
def test_an_empty_answer_is_rejected(kind: str) -> None:
    prepared = bench.SIMULATIONS[kind].prepare(bench.SimCluster(50, 500))
    answer = type(prepared.request).__name__.replace("Request", "Response")
    with pytest.raises(bench.BenchError):
        prepared.check(getattr(simulation_pb2, answer)())


@pytest.mark.parametrize(
    ("destination", "error"),
    [
        pytest.param("node-00001", None, id="a real answer passes"),
        pytest.param("node-00000", "without a destination off the drained nodes", id="onto the drained node"),
        pytest.param("", "without a destination off the drained nodes", id="no destination"),
        pytest.param("node-99999", "without a destination off the drained nodes", id="not a node"),
    ],
)
def test_drain_answers_are_checked_pod_by_pod(destination: str, error: str | None) -> None:
    prepared = bench.SIMULATIONS["SimulateDrain1Node"].prepare(bench.SimCluster(50, 500))
    moves = [simulation_pb2.PodMove(namespace="default", name=f"init-{i}", node_name=destination) for i in range(110)]
    answer = simulation_pb2.SimulateDrainResponse(
        nodes=[simulation_pb2.NodeDrain(node_name="node-00000", removable=True, pods_to_move=moves)]
    )
    if error is None:
        prepared.check(answer)
    else:
        with pytest.raises(bench.BenchError, match=error):
            prepared.check(answer)


@pytest.mark.parametrize(
    ("name", "error"),
    [
        # node-00000's 110 pods have nowhere to go: the two other nodes already hold 110 pods each.
        pytest.param("SimulateDrain1Node/3Nodes_330Pods", "node-00000 is not removable: NoPlaceToMovePods", id="drain"),
        pytest.param("SimulateDrain100Nodes/3Nodes_330Pods", "is not removable: NoPlaceToMovePods", id="drain-many"),
    ],
)
async def test_a_wrong_answer_fails_the_run(live: LiveServer, name: str, error: str) -> None:
    with pytest.raises(bench.BenchError, match=f"{name}, call 1: .*{error}"):
        await bench.run([name], live.target, decisions=2, stream=False)


async def test_simulation_calls_default_per_workload(live: LiveServer) -> None:
    (result,) = await bench.run(["SimulateAddNodes/10Nodes_120Pods"], live.target, decisions=None, stream=False)
    assert result.decisions == len(result.latencies_ms) == bench.SIMULATIONS["SimulateAddNodes"].calls


def test_simulation_names() -> None:
    assert (
        bench.expand(["simulation"])
        == list(bench.SIMULATION_WORKLOADS)
        == [
            "EstimateScaleUp/5000Nodes_50000Pods",
            "SimulateDrain1Node/5000Nodes_50000Pods",
            "SimulateDrain100Nodes/5000Nodes_50000Pods",
            "SimulateDrain6Nodes/5000Nodes_50000Pods",
            "SimulateAddNodes/5000Nodes_50000Pods",
        ]
    )
    assert bench.expand([]) == list(bench.DEFAULT_WORKLOADS)
    assert not set(bench.DEFAULT_WORKLOADS) & set(bench.SIMULATION_WORKLOADS)  # opt-in
    assert bench.parse_name("SimulateDrain1Node/50Nodes_500Pods") == ("SimulateDrain1Node", 50, 500)
    with pytest.raises(ValueError, match="at least 3 nodes"):
        bench.expand(["SimulateDrain1Node/2Nodes_10Pods"])


def test_cli_bench_runs_a_simulation_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    code = main(["bench", "SimulateDrain1Node/20Nodes_300Pods", "--decisions", "2", "--json", str(out)])
    assert code == 0
    entry = json.loads(out.read_text())["workloads"]["SimulateDrain1Node/20Nodes_300Pods"]
    assert entry["decisions"] == 2 and set(entry["latency_ms"]) == {"p50", "p90", "p99", "max"}
    assert entry["checked"].startswith("1 node(s) removable, each of their 110 pods")
    printed = capsys.readouterr().out
    assert "| SimulateDrain1Node/20Nodes_300Pods | grpc | 2 |" in printed
    assert "SimulateDrain1Node/20Nodes_300Pods: every answer checked: 1 node(s) removable" in printed


def test_cli_bench_asks_from_concurrent_clients_of_a_server_with_decision_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.json"
    argv = ["bench", "SchedulingBasic/6Nodes_10Pods", "--decisions", "6", "--workers", "2", "--clients", "3"]
    assert main([*argv, "--json", str(out)]) == 0
    entry = json.loads(out.read_text())["workloads"]["SchedulingBasic/6Nodes_10Pods [grpc x3 clients]"]
    assert entry["mode"] == "grpc x3 clients" and entry["decisions"] == 6
    assert (
        "(2 processes: the cache's owner and 1 decision worker, beside the what-if process), asked by 3 concurrent"
        in (capsys.readouterr().out)
    )


def test_cli_bench_mixed_measures_every_caller_idle_and_busy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``podfit bench mixed``: deciders, the extender, a feeder and what-if at once against a server it
    starts (one process here), every caller answered in both phases and what-if only in the busy one."""
    out = tmp_path / "mixed.json"
    small = ["--workers", "1", "--phase-seconds", "2", "--nodes", "100", "--pods", "300"]
    code = main(["bench", "mixed", *small, "--json", str(out)])
    assert code == 0
    body = json.loads(out.read_text())["mixed"]
    assert (body["nodes"], body["pods"]) == (100, 300)
    idle, busy = body["phases"]["idle"], body["phases"]["busy"]
    assert set(idle) == {"schedule", "extender filter", "apply"}
    assert set(busy) == {*idle, "what-if"}
    for phase in (idle, busy):
        for name, kind in phase.items():
            assert kind["errors"] == 0, (name, kind["first_errors"])
            assert kind["answers"] >= 1 and kind["p99_ms"] >= kind["p50_ms"] > 0, name
    # A schedule every 20 ms for 2 s: about 100, fewer only when answers are slow.
    assert idle["schedule"]["answers"] > 40
    printed = capsys.readouterr().out
    assert "busy   what-if" in printed and "100 nodes, 300 bound pods" in printed
