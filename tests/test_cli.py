"""The podfit CLI against a real podfit-server subprocess: tables, -o json, one-line errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from podfit.client.cli import main
from podfit.client.conformance import LocalServer

EXAMPLES = Path(__file__).resolve().parents[1] / "deploy" / "examples"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with LocalServer() as local:
        yield local.target


def run(capsys: pytest.CaptureFixture[str], target: str, *args: str) -> tuple[int, str, str]:
    code = main(["--target", target, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_apply_then_schedule_prints_the_node_and_scores(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, server, "apply", "--replace", "-f", str(EXAMPLES / "cluster.yaml"))
    assert code == 0 and out.startswith("3 nodes, 2 pods, ") and " replaced, " in out
    code, out, _ = run(capsys, server, "schedule", "-f", str(EXAMPLES / "pod.yaml"))
    assert code == 0
    assert out.splitlines()[0] == "selected node: node-b"
    assert "PodTopologySpread" in out and "TOTAL" in out


def test_schedule_json_carries_selected_node(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, server, "apply", "--replace", "-f", str(EXAMPLES / "cluster.yaml"))
    code, out, _ = run(capsys, server, "-o", "json", "schedule", "-f", str(EXAMPLES / "pod.yaml"))
    body = json.loads(out)
    assert code == 0 and body["selectedNode"] == "node-b"
    assert {n["nodeName"] for n in body["nodes"]} == {"node-a", "node-b", "node-gpu"}


def test_filter_table_names_the_rejecting_plugin(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, server, "apply", "--replace", "-f", str(EXAMPLES / "cluster.yaml"))
    code, out, _ = run(capsys, server, "filter", "-f", str(EXAMPLES / "pod.yaml"))
    gpu = next(line for line in out.splitlines() if line.startswith("node-gpu"))
    # TaintToleration runs before NodeAffinity, so it is named although both reject the node.
    assert code == 0 and "TaintToleration" in gpu and "UnschedulableAndUnresolvable" in gpu


def test_preempt_table_lists_victims(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, server, "apply", "--replace", "-f", str(EXAMPLES / "cluster.yaml"))
    code, out, _ = run(capsys, server, "preempt", "-f", str(EXAMPLES / "urgent-pod.yaml"))
    assert code == 0
    assert "evict on node node-b" in out and "batch-1" in out
    code, out, _ = run(capsys, server, "-o", "json", "preempt", "-f", str(EXAMPLES / "urgent-pod.yaml"))
    assert json.loads(out)["victims"][0]["name"] == "batch-1"


def test_get_delete_and_stats(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, server, "apply", "--replace", "-f", str(EXAMPLES / "cluster.yaml"))
    code, out, _ = run(capsys, server, "-o", "json", "get", "pods", "web-1", "-n", "shop")
    assert code == 0 and json.loads(out)["spec"]["nodeName"] == "node-a"
    code, out, _ = run(capsys, server, "delete", "pod", "web-1", "-n", "shop")
    assert code == 0 and out == 'pod "web-1" deleted\n'
    code, out, _ = run(capsys, server, "-o", "json", "stats")
    assert json.loads(out)["pods"] == 1


def test_apply_from_stdin_json_lines(
    server: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    lines = '{"kind": "Node", "metadata": {"name": "x1"}, "status": {"allocatable": {"cpu": "1"}}}\n' * 2
    monkeypatch.setattr("sys.stdin", io.StringIO(lines))
    code, out, _ = run(capsys, server, "apply", "-v", "-f", "-")
    assert code == 0 and "node/x1" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["apply", "-f", "/nonexistent.yaml"], "cannot read", id="a missing file"),
        pytest.param(["get", "deployments"], "is not a kind podfit holds", id="an unknown kind"),
        pytest.param(["get", "pod", "ghost"], 'Error from server (NotFound): pods "ghost"', id="a missing object"),
    ],
)
def test_errors_are_one_line(server: str, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, out, err = run(capsys, server, *args)
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err


def test_bad_manifest_reports_the_field(server: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - resources: {requests: {cpu: lots}}\n")
    code, _, err = run(capsys, server, "apply", "-f", str(bad))
    assert code == 1 and "INVALID_ARGUMENT" in err and "requests.cpu" in err


def test_unreachable_server(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "127.0.0.1:1", "stats")
    assert code == 1 and "UNAVAILABLE" in err


def _documents(path: Path, manifests: list[dict[str, object]]) -> str:
    import yaml

    path.write_text(yaml.safe_dump_all(manifests))
    return str(path)


@pytest.mark.parametrize(
    ("flags", "pods", "nodes", "summary", "reserved"),
    [
        pytest.param(
            ["--assume"], 2, ["node-1", "node-1"], "placed 2/2 pods (generation {})", 2, id="two pods: a batch"
        ),
        pytest.param(
            ["--assume"], 4, ["node-1"] * 3 + ["-"], "placed 3/4 pods (generation {})", 3, id="the fourth does not fit"
        ),
        pytest.param(
            [],
            4,
            ["node-1"] * 3 + ["-"],
            "3/4 pods fit; nothing reserved (--assume to reserve them)",
            0,
            id="without --assume: a dry run, each pod still seeing the earlier ones",
        ),
        pytest.param(
            ["--assume", "--all-or-nothing"],
            4,
            ["node-1"] * 3 + ["-"],
            "not every pod fits: nothing assumed (all-or-nothing; generation {})",
            0,
            id="all or nothing",
        ),
    ],
)
def test_schedule_several_pods_is_one_batch(
    server: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    flags: list[str],
    pods: int,
    nodes: list[str],
    summary: str,
    reserved: int,
) -> None:
    from tests.builders import make_node, make_pod

    cluster = _documents(tmp_path / "cluster.yaml", [make_node("node-1").capacity(cpu="3", pods="10").json()])
    code, _, _ = run(capsys, server, "apply", "--replace", "-f", cluster)
    assert code == 0
    manifests = [make_pod(f"web-{i}").req(cpu="1").json() for i in range(pods)]
    half = len(manifests) // 2
    first = _documents(tmp_path / "a.yaml", manifests[:half])
    second = _documents(tmp_path / "b.yaml", manifests[half:])
    code, out, err = run(capsys, server, "schedule", "-f", first, "-f", second, *flags)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "NODE", "OUTCOME"]
    assert [line.split()[2] for line in lines[1:-1]] == nodes
    generation = json.loads(run(capsys, server, "-o", "json", "stats")[1])["generation"]
    assert lines[-1] == summary.format(generation)
    code, out, _ = run(capsys, server, "-o", "json", "get", "pods")
    bound = [m["spec"].get("nodeName") for m in json.loads(out)["items"]]
    assert sum(1 for b in bound if b) == reserved


@pytest.mark.parametrize(
    ("argv", "target", "output"),
    [
        pytest.param(["--target", "a:1", "-o", "json", "stats"], "a:1", "json", id="before the subcommand"),
        pytest.param(["stats", "--target", "a:1", "-o", "json"], "a:1", "json", id="after the subcommand"),
        pytest.param(["-o", "yaml", "stats", "--target", "a:1"], "a:1", "yaml", id="one before, one after"),
        pytest.param(["--target", "a:1", "stats"], "a:1", "table", id="an unrepeated flag keeps its value"),
        pytest.param(["stats"], None, "table", id="the defaults"),
        pytest.param(
            ["feed", "--kubeconfig", "k.yaml", "--target", "b:2"],
            "b:2",
            "table",
            id="podfit feed as the issue spells it",
        ),
    ],
)
def test_global_flags_go_before_or_after_the_subcommand(argv: list[str], target: str | None, output: str) -> None:
    from podfit.client.cli import build_parser

    args = build_parser().parse_args(argv)
    assert (args.target, args.output) == (target, output)
