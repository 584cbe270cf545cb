"""The soak: concurrent feeders (Stream, Apply) and deciders (Schedule with assume, Filter) against a real
server, checking read-your-writes, no lost update and no overbooking; short here, long with
``podfit bench soak --duration 60``."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from podfit.client import AsyncClient
from podfit.client.cli import main
from podfit.client.soak import NAMESPACE, NODE_CPU_MILLIS, Soak, _node, _pod

from tests.conftest import LiveServer


async def test_a_short_soak_finds_every_acknowledged_write_and_no_overbooking(live: LiveServer) -> None:
    report = await Soak(live.client, seed=1).run(5.0)
    assert report.ok, report.summary()
    for op in ("stream_batch", "filter", "schedule_assume", "get", "apply_delete", "list"):
        assert report.ops[op] > 0, report.summary()
    assert report.ops["schedule_assume"] > 100 and report.ops["stream_batch"] > 100, report.summary()


async def _relabel_behind_its_back(client: AsyncClient, soak: Soak) -> None:
    node = soak.nodes[0]
    await client.apply([_node(node, soak.acked.versions[node] + 100)])


async def _delete_an_acknowledged_pod(client: AsyncClient, soak: Soak) -> None:
    name = next(iter(soak.acked.pending))
    await client.delete("Pod", name, NAMESPACE)


async def _overbook_a_node(client: AsyncClient, soak: Soak) -> None:
    # More than a whole node: overbooked whatever the soak left bound there (the reaper may have emptied it).
    pod = _pod("intruder", cpu_millis=NODE_CPU_MILLIS + 1000)
    pod["spec"]["nodeName"] = soak.nodes[1]
    await client.apply([pod])


@pytest.mark.parametrize(
    ("tamper", "violation"),
    [
        pytest.param(_relabel_behind_its_back, "lost update: soak-node-000 at version", id="a node changed unseen"),
        pytest.param(_delete_an_acknowledged_pod, "lost update: acknowledged pod pending-", id="a pod vanished"),
        pytest.param(_overbook_a_node, "overbooking: soak-node-001", id="a node holds more than it has"),
    ],
)
async def test_the_checks_catch_what_they_look_for(
    live: LiveServer, tamper: Callable[[AsyncClient, Soak], Awaitable[None]], violation: str
) -> None:
    soak = Soak(live.client, nodes=4, seed=2)
    assert (await soak.run(0.5)).ok
    await tamper(live.client, soak)
    await soak.verify()
    assert any(v.startswith(violation) for v in soak.report.violations), soak.report.violations


def test_podfit_bench_soak_runs_against_its_own_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "soak.json"
    assert main(["bench", "soak", "--duration", "1", "--json", str(out)]) == 0
    body = json.loads(out.read_text())["soak"]
    assert body["ok"] and body["ops_per_second"] > 0 and not body["errors"]
    assert "violations: none" in capsys.readouterr().out
