"""A smoke run of every `podfit bench` workload at a small size, so the harness cannot rot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from podfit.client import bench
from podfit.client.cli import main

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
    assert set(entry["latency_ms"]) == {"p50", "p90", "p99"}
    assert "| SchedulingBasic/6Nodes_10Pods | grpc | 5 |" in capsys.readouterr().out
    assert entry["server_rss_mib"] > 10
    assert entry["server_rss_after_load_mib"] > 10 and entry["cache_estimate_mib"] >= 0


async def test_full_view_is_measured_as_its_own_mode(live: LiveServer) -> None:
    results = await bench.run(["SchedulingBasic/5Nodes_10Pods"], live.target, decisions=4, stream=False, view="full")
    assert [r.mode for r in results] == ["grpc (full view)"] and len(results[0].latencies_ms) == 4
