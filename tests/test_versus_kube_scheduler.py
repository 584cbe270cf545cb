"""kube-scheduler-loop, the yardstick of podfit's performance figures, at small sizes: on each supported
release every workload binds every measured pod (preempting where it must), and with podfit as its
extender too, so neither the loop nor the same-run harness can rot."""

from __future__ import annotations

import pytest

from benchmarks.versus_kube_scheduler import Row, loop_binary, run_loop, run_with_extender, run_with_null_extender
from tests.control_plane import RELEASES

WORKLOADS = ["SchedulingBasic", "TopologySpreading", "SchedulingPodAntiAffinity", "PreemptionBasic"]


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("release", sorted(RELEASES.values()))
def test_the_loop_binds_every_measured_pod(release: str, workload: str) -> None:
    # Anti-affinity: every init pod repels the measured ones from its node, so leave most nodes empty.
    init_pods = 40 if workload == "SchedulingPodAntiAffinity" else 400
    result = run_loop(loop_binary(release), Row(workload, 100, init_pods, "unary", ""), 30, timeout="60s")
    assert result["kubernetes"] == release
    assert (result["workload"], result["nodes"], result["pods"]) == (workload, 100, 30)
    assert result["throughput"]["avg"] > 0
    if workload == "PreemptionBasic":
        # Four 100m pods on each 4-CPU node; a 3900m preemptor evicts three of them.
        assert (result["preemptions"], result["preemption_victims"]) == (30, 90)
    else:
        assert result["preemptions"] == 0


@pytest.mark.parametrize("node_cache_capable", [True, False], ids=["node-names", "full-node-objects"])
def test_the_loop_schedules_through_podfit_as_its_extender(node_cache_capable: bool) -> None:
    mode = "extender" if node_cache_capable else "extender-nodes"
    result = run_with_extender(
        loop_binary(RELEASES["v1.37"]), Row("SchedulingBasic", 100, 200, mode, ""), 30, timeout="60s"
    )
    assert result["extender"].endswith("/scheduler")
    assert result["pods"] == 30 and result["throughput"]["avg"] > 0


@pytest.mark.parametrize("node_cache_capable", [True, False], ids=["node-names", "full-node-objects"])
def test_the_loop_schedules_through_the_null_extender(node_cache_capable: bool) -> None:
    """The bound on any extender: the null extender's answers keep every node and bind every pod."""
    mode = "null-extender" if node_cache_capable else "null-extender-nodes"
    result = run_with_null_extender(loop_binary(RELEASES["v1.37"]), Row("SchedulingBasic", 100, 200, mode, ""), 30)
    assert result["extender"].endswith("/scheduler")
    assert result["pods"] == 30 and result["throughput"]["avg"] > 0
