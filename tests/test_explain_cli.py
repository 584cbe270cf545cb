"""``podfit explain`` and pods named by reference, through the real console script against a
podfit-server subprocess: the FitError line first, nodes grouped by reason, the closest candidates,
preemption, gates, and where a pod that fits would go."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from podfit.client import cli
from podfit.client.conformance import LocalServer

EXAMPLES = Path(__file__).resolve().parents[1] / "deploy" / "examples"
PODFIT = Path(sys.executable).parent / "podfit"
URGENT_FIT = "shop/urgent: 0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu."
# kube-scheduler v1.37 (the default) ends the event text with where preemption nominated the pod.
URGENT_SUMMARY = f"{URGENT_FIT} preemption: found a potential placement for pod on node node-b, preempting 1 victims"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with LocalServer() as local:
        yield local.target


def podfit(target: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PODFIT), "--target", target, *args], capture_output=True, text=True, timeout=60, env=dict(os.environ)
    )


def urgent(**spec: object) -> dict[str, object]:
    pod = yaml.safe_load((EXAMPLES / "urgent-pod.yaml").read_text())
    pod["spec"].update(spec)
    return pod


def cluster(target: str, *extra: dict[str, object], tmp_path: Path) -> None:
    """The example cluster, plus ``extra`` objects (pending pods to name), as the whole cache."""
    path = tmp_path / "extra.yaml"
    path.write_text(yaml.safe_dump_all(extra))
    args = ["apply", "--replace", "-f", str(EXAMPLES / "cluster.yaml")] + (["-f", str(path)] if extra else [])
    # ``podfit apply --replace``'s own code in this process: a set-up step need not pay a console script's
    # start (the commands under test run through the console script).
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = cli.main(["--target", target, *args])
    assert code == 0, err.getvalue()


@pytest.mark.parametrize(
    "how",
    [
        pytest.param(("-f", str(EXAMPLES / "urgent-pod.yaml")), id="by file"),
        pytest.param(("urgent", "-n", "shop"), id="by name"),
    ],
)
def test_explain_a_pod_that_only_preemption_can_place(server: str, tmp_path: Path, how: tuple[str, ...]) -> None:
    cluster(server, urgent(), tmp_path=tmp_path)
    result = podfit(server, "explain", *how)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == URGENT_SUMMARY
    assert "      2  NodeResourcesFit: Insufficient cpu [Unschedulable]" in lines
    assert "  node-b    NodeResourcesFit: Insufficient cpu (preemption makes room here)" in lines
    assert (
        "Preemption would help: evicting 1 pod(s) on node-b makes room: shop/batch-1 (priority 10) "
        "(0 PodDisruptionBudget violation(s))." in lines
    )


def test_explain_as_data_carries_the_same_content(server: str, tmp_path: Path) -> None:
    cluster(server, tmp_path=tmp_path)
    body = json.loads(podfit(server, "-o", "json", "explain", "-f", str(EXAMPLES / "urgent-pod.yaml")).stdout)
    as_yaml = yaml.safe_load(podfit(server, "explain", "-f", str(EXAMPLES / "urgent-pod.yaml"), "-o", "yaml").stdout)
    assert as_yaml == body
    assert f"{body['pod']}: {body['summary']}" == URGENT_SUMMARY
    assert [(g["plugin"], g["count"], g["nodes"]) for g in body["groups"]] == [
        ("NodeResourcesFit", 2, ["node-a", "node-b"]),
        ("TaintToleration", 1, ["node-gpu"]),
    ]
    assert body["preemption"]["helps"] and body["preemption"]["victims"][0]["name"] == "batch-1"


def test_explain_when_preemption_cannot_help(server: str, tmp_path: Path) -> None:
    never = urgent(preemptionPolicy="Never")
    cluster(server, tmp_path=tmp_path)
    path = tmp_path / "never.yaml"
    path.write_text(yaml.safe_dump(never))
    lines = podfit(server, "explain", "-f", str(path)).stdout.splitlines()
    assert lines[0] == (f"{URGENT_FIT} preemption: not eligible due to preemptionPolicy=Never.")
    assert lines[-1] == "Preemption would not help: not eligible due to preemptionPolicy=Never."


def test_explain_a_gated_pod_names_its_gates(server: str, tmp_path: Path) -> None:
    gated = urgent(schedulingGates=[{"name": "example.com/quota"}, {"name": "example.com/review"}])
    cluster(server, gated, tmp_path=tmp_path)
    result = podfit(server, "explain", "urgent", "-n", "shop")
    assert result.stdout.splitlines() == [
        "shop/urgent: gated: SchedulingGates: waiting for scheduling gates: [example.com/quota example.com/review]",
        "The pod is gated by 2 scheduling gate(s): example.com/quota, example.com/review. kube-scheduler does not "
        "try to place it until every gate is removed from spec.schedulingGates.",
    ]


def test_explain_a_pod_that_fits_says_where_and_why(server: str, tmp_path: Path) -> None:
    cluster(server, tmp_path=tmp_path)
    lines = podfit(server, "explain", "-f", str(EXAMPLES / "pod.yaml")).stdout.splitlines()
    assert lines[0] == "shop/web-2: fits: node-b is chosen (2 of 3 nodes fit)"
    assert lines[1].startswith("It would go to node-b: score ")
    assert lines[2].startswith("Next best: node-a with ")


def test_a_large_cluster_is_grouped_not_listed(server: str, tmp_path: Path) -> None:
    nodes = [
        {"kind": "Node", "metadata": {"name": f"n{i:03d}"}, "status": {"allocatable": {"cpu": "1", "pods": "110"}}}
        for i in range(200)
    ]
    path = tmp_path / "nodes.yaml"
    path.write_text(yaml.safe_dump_all(nodes))
    assert podfit(server, "apply", "--replace", "-f", str(path)).returncode == 0
    lines = podfit(server, "explain", "-f", str(EXAMPLES / "urgent-pod.yaml")).stdout.splitlines()
    assert lines[0].startswith("shop/urgent: 0/200 nodes are available: 200 node(s) didn't match Pod's node affinity")
    assert len(lines) < 20
    assert any(line.endswith("e.g. n000, n001, n002 and 197 more") for line in lines)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        pytest.param("filter", URGENT_SUMMARY.removeprefix("shop/urgent: "), id="filter prints the FitError first"),
        pytest.param("schedule", URGENT_SUMMARY.removeprefix("shop/urgent: "), id="schedule prints the FitError first"),
        pytest.param("preempt", "preemption: evict on node node-b (0 PDB violations)", id="preempt"),
    ],
)
def test_decision_commands_name_a_cached_pod(server: str, tmp_path: Path, command: str, expected: str) -> None:
    cluster(server, urgent(), tmp_path=tmp_path)
    result = podfit(server, command, "urgent", "-n", "shop")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == expected


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("explain",), id="neither a name nor a file"),
        pytest.param(("explain", "urgent", "-f", str(EXAMPLES / "urgent-pod.yaml")), id="both a name and a file"),
    ],
)
def test_a_pod_is_named_exactly_once(server: str, args: tuple[str, ...]) -> None:
    result = podfit(server, *args)
    assert result.returncode == 1
    # One prefix, as every runtime error has it ("podfit: "), never "podfit: podfit explain: ...".
    assert result.stderr.strip() == "podfit: explain: name a cached pod (POD [-n NAMESPACE]) or give -f FILE, not both"


def test_an_unknown_cached_pod_is_one_line(server: str, tmp_path: Path) -> None:
    cluster(server, tmp_path=tmp_path)
    result = podfit(server, "explain", "nope", "-n", "shop")
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "shop/nope" in result.stderr


def test_schedule_of_one_file_with_several_pods_is_still_a_batch(server: str, tmp_path: Path) -> None:
    cluster(server, tmp_path=tmp_path)
    path = tmp_path / "two.yaml"
    pods = [
        {"kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "shop"}, "spec": {"containers": [{"name": "c"}]}}
        for i in range(2)
    ]
    path.write_text(yaml.safe_dump_all(pods))
    lines = podfit(server, "schedule", "-f", str(path), "--assume").stdout.splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "NODE", "OUTCOME"]
    assert lines[-1].startswith("placed 2/2 pods")


ROOM = {"memory": "4Gi", "pods": "10"}
BOUND_CLUSTER = [
    {"kind": "Node", "metadata": {"name": "full"}, "status": {"allocatable": {"cpu": "2", **ROOM}}},
    {"kind": "Node", "metadata": {"name": "small"}, "status": {"allocatable": {"cpu": "1", **ROOM}}},
    {"kind": "Pod", "metadata": {"name": "big", "namespace": "shop"},
     "spec": {"nodeName": "full", "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}},
]  # fmt: skip


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        pytest.param("schedule", "selected node: full", id="schedule"),
        pytest.param("explain", "shop/big: fits: full is chosen (1 of 2 nodes fit)", id="explain"),
    ],
)
def test_a_bound_pod_named_is_answered_as_if_pending_again(
    server: str, tmp_path: Path, command: str, expected: str
) -> None:
    """big fills its node: asked about by name, its own reservation there does not count against it (else
    kube-scheduler's view of it pending again would not be "Insufficient cpu" on its own node)."""
    path = tmp_path / "bound.yaml"
    path.write_text(yaml.safe_dump_all(BOUND_CLUSTER))
    assert podfit(server, "apply", "--replace", "-f", str(path)).returncode == 0
    result = podfit(server, command, "big", "-n", "shop")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == expected
    verdicts = podfit(server, "-o", "json", "filter", "big", "-n", "shop")
    nodes = {n["nodeName"]: n.get("fits", False) for n in json.loads(verdicts.stdout)["nodes"]}
    assert nodes == {"full": True, "small": False}
