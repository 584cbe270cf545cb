"""``podfit simulate``, ``estimate`` and ``drain --dry-run`` against a real podfit-server subprocess, on
the README's example files, and the what-if documents they read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from podfit.client import whatif
from podfit.client.cli import main
from podfit.client.conformance import LocalServer
from podfit.k8s.convert import ConversionError

EXAMPLES = Path(__file__).resolve().parents[1] / "deploy" / "examples"
NODE = {"kind": "Node", "metadata": {"name": "t"}, "status": {"allocatable": {"cpu": "4", "pods": "10"}}}


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with LocalServer() as local:
        assert main(["--target", local.target, "apply", "--replace", "-f", str(EXAMPLES / "cluster.yaml")]) == 0
        yield local.target


def run(capsys: pytest.CaptureFixture[str], target: str, *args: str) -> tuple[int, str, str]:
    code = main(["--target", target, *args])
    out, err = capsys.readouterr()
    return code, out, err


def rows(out: str) -> dict[str, list[str]]:
    """Table lines by their first column."""
    return {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}


def test_simulate_places_pods_in_the_scenario(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, server, "simulate", "-f", str(EXAMPLES / "scenario.yaml"))
    table = rows(out)
    assert code == 0
    # node-b is cordoned; the empty, larger hypothetical node outscores node-a for both 2-CPU pods, and
    # nothing has room for 6 CPU after them.
    assert [line.split()[2] for line in out.splitlines() if line.startswith("shop")] == ["big-sim-0", "big-sim-0", "-"]
    assert table["big-sim-0"][:3] == ["big-sim-0", "2", "50%"]
    assert "placed 2/3 pods" in out


def test_simulate_json_is_the_response(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, server, "-o", "json", "simulate", "-f", str(EXAMPLES / "scenario.yaml"))
    body = json.loads(out)
    assert code == 0
    assert [p.get("nodeName", "") for p in body["placements"]] == ["big-sim-0", "big-sim-0", ""]
    assert body["placements"][2]["rejections"]


def test_estimate_compares_node_groups(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, server, "estimate", "-f", str(EXAMPLES / "node-groups.yaml"))
    table = rows(out)
    assert code == 0
    # Six pods of 1.5 CPU: two fit a 4-CPU node, all six a 16-CPU node.
    assert table["small"][:4] == ["small", "3", "6", "0"]
    assert table["large"][:4] == ["large", "1", "6", "0"]
    assert "1 equivalence group " in out


@pytest.mark.parametrize(
    ("args", "node", "removable", "reason"),
    [
        pytest.param(["node-a"], "node-a", False, "NotEnoughPdb", id="a PDB with no disruption left blocks"),
        pytest.param(["node-b"], "node-b", False, "", id="the Job's pod fits nowhere else"),
        pytest.param(["node-gpu"], "node-gpu", True, "", id="an empty node can go"),
        pytest.param(
            ["node-b", "--skip-nodes-with-custom-controller-pods=false", "--now", "2026-11-24T12:00:00Z"],
            "node-b",
            False,
            "",
            id="flags and --now are passed",
        ),
        pytest.param(
            ["node-b", "--expendable-pods-priority-cutoff", "11"],
            "node-b",
            True,
            "",
            id="the Job's priority-10 pod is expendable below cutoff 11: left out",
        ),
        pytest.param(
            ["node-b", "--destinations", "all-but-removed", "--skip-terminal-pods=false"],
            "node-b",
            False,
            "",
            id="the planner's own flags are accepted",
        ),
    ],
)
def test_drain_dry_run(
    server: str, capsys: pytest.CaptureFixture[str], args: list[str], node: str, removable: bool, reason: str
) -> None:
    code, out, _ = run(capsys, server, "-o", "json", "drain", "--dry-run", *args)
    (answer,) = json.loads(out)["nodes"]
    assert code == 0 and answer["nodeName"] == node
    assert answer["removable"] is removable
    assert answer.get("blockingPod", {}).get("reason", "") == reason
    code, out, _ = run(capsys, server, "drain", "--dry-run", *args)
    assert code == 0 and rows(out)[node][1] == ("yes" if removable else "no")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["drain", "node-a"], "podfit: drain only simulates: add --dry-run", id="drain without --dry-run"),
        pytest.param(["drain", "--dry-run", "--now", "yesterday", "node-a"], "RFC 3339", id="unreadable --now"),
        pytest.param(["drain", "--dry-run", "--now", "2026-11-24T12:00:00", "node-a"], "time zone", id="naive --now"),
        pytest.param(["drain", "--dry-run", "nope"], "node_names[0]", id="unknown node"),
    ],
)
def test_drain_errors_are_one_line(
    server: str, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = run(capsys, server, *args)
    assert code == 1 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1
    assert not err.startswith("podfit: podfit"), err


def test_drain_flag_values_are_checked(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--target", server, "drain", "--dry-run", "--skip-nodes-with-local-storage=maybe", "node-a"])
    assert exited.value.code == 2
    assert "'maybe' is not true or false" in capsys.readouterr().err


def pod(name: str, owner: str | None = "rs", cpu: str = "1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if owner:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": owner, "uid": f"uid-{owner}", "controller": True}]
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    return {"kind": "Pod", "metadata": meta, "spec": spec}


@pytest.mark.parametrize(
    ("pods", "want"),
    [
        pytest.param([pod("a"), pod("b")], [["a", "b"]], id="same controller and spec: one group"),
        pytest.param([pod("a"), pod("b", cpu="2")], [["a"], ["b"]], id="different specs"),
        pytest.param([pod("a"), pod("b", owner="other")], [["a"], ["b"]], id="different controllers"),
        pytest.param([pod("a", None), pod("b", None)], [["a"], ["b"]], id="no controller: each alone"),
        pytest.param([pod("a"), pod("x", "o"), pod("b")], [["a", "b"], ["x"]], id="a group stands where it began"),
    ],
)
def test_equivalence_groups(pods: list[dict[str, Any]], want: list[list[str]]) -> None:
    got = whatif.equivalence_groups(pods)
    assert [[p["metadata"]["name"] for p in group] for group in got] == want


@pytest.mark.parametrize(
    ("documents", "field"),
    [
        pytest.param([{"kind": "Scenario", "addNode": []}], "scenario.addNode", id="misspelt scenario field"),
        pytest.param(
            [{"kind": "Scenario", "addNodes": [{"count": 1}]}], "scenario.addNodes[0].template", id="no template"
        ),
        pytest.param(
            [{"kind": "Scenario", "addNodes": [{"template": NODE, "count": "2"}]}],
            "scenario.addNodes[0].count",
            id="count not a number",
        ),
        pytest.param(
            [{"kind": "Scenario", "taintNodes": [{"nodeName": "n", "taint": {"key": "k", "effect": "Never"}}]}],
            "scenario.taintNodes[0].taint.effect",
            id="unknown taint effect",
        ),
        pytest.param([{"kind": "Scenario", "removePods": [""]}], "scenario.removePods[0]", id="empty pod key"),
        pytest.param([{"kind": "Scenario"}], "pods", id="nothing to place"),
        pytest.param([{"kind": "Scenario", "pods": ["a"]}, {"kind": "Scenario"}], "scenario", id="two scenarios"),
        pytest.param([{"kind": "Node"}, pod("a")], "documents[0].kind", id="a Node is not placed"),
    ],
)
def test_scenario_documents_reject_bad_fields(documents: list[dict[str, Any]], field: str) -> None:
    with pytest.raises(ConversionError) as raised:
        whatif.simulate_request(documents)
    assert raised.value.field == field


@pytest.mark.parametrize(
    ("documents", "field"),
    [
        pytest.param([pod("a")], "node_groups", id="no node group"),
        pytest.param([{"kind": "NodeGroup", "id": "g", "maxSize": 3, "template": NODE}], "pods", id="no pods"),
        pytest.param([{"kind": "NodeGroup", "maxSize": 3, "template": NODE}, pod("a")], "documents[0].id", id="no id"),
        pytest.param(
            [{"kind": "NodeGroup", "id": "g", "template": NODE}, pod("a")], "documents[0].maxSize", id="no max"
        ),
        pytest.param(
            [{"kind": "NodeGroup", "id": "g", "maxSize": 1}, pod("a")], "documents[0].template", id="no template"
        ),
        pytest.param([{"kind": "Service"}], "documents[0].kind", id="another kind"),
    ],
)
def test_estimate_documents_reject_bad_fields(documents: list[dict[str, Any]], field: str) -> None:
    with pytest.raises(ConversionError) as raised:
        whatif.estimate_request(documents)
    assert raised.value.field == field
