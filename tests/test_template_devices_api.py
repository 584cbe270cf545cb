"""Template nodes with devices through the API, the SDK and the CLI: Simulate's HypotheticalNodes and
EstimateScaleUp's NodeGroups carry the ResourceSlices of one node, as Kubernetes JSON or typed messages;
each new node gets its own devices, and a slice that is not node-local is refused at its field path.
(Exactness against nodes Applied for real: tests/test_template_devices.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from podfit.client import PodfitError
from podfit.client.cli import main
from podfit.client.conformance import LocalServer
from podfit.client.manifests import to_cluster_object
from podfit.k8s.convert import manifest_to_object
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import simulation_pb2 as sim

from tests.builders import make_node, make_pod
from tests.conftest import LiveServer

EXAMPLES = Path(__file__).resolve().parents[1] / "deploy" / "examples"
GPU = "gpu.example.com"


def _slice(gpus: int, node: str | None = "gpu-node", name: str = "gpus") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": GPU,
        "pool": {"name": "gpu-node", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": "h100"}}} for i in range(gpus)],
    }
    spec.update({"nodeName": node} if node is not None else {"allNodes": True})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def _cluster(claims: int) -> list[dict[str, Any]]:
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": GPU},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]},
    }
    request = {"name": "gpu", "exactly": {"deviceClassName": GPU}}
    return [
        make_node("cpu-only").capacity(cpu="8", memory="32Gi", pods="110").json(),
        device_class,
        *(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": f"c{i}", "namespace": "default"},
                "spec": {"devices": {"requests": [request]}},
            }
            for i in range(claims)
        ),
    ]


def _pods(count: int) -> list[dict[str, Any]]:
    pods = []
    for i in range(count):
        pod = make_pod(f"p{i}").req(cpu="1")
        pod.spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"c{i}"}]
        pods.append(pod.json())
    return pods


TEMPLATE = make_node("gpu-node").capacity(cpu="32", memory="128Gi", pods="110").json()
FORMS = {
    "Kubernetes JSON": lambda manifest: cc.ClusterObject(kubernetes_json=json.dumps(manifest).encode()),
    "typed message": lambda manifest: to_cluster_object(manifest_to_object(manifest)),
}


@pytest.mark.parametrize("form", list(FORMS), ids=[f"slices as {f}" for f in FORMS])
async def test_simulate_gives_each_hypothetical_node_its_own_devices(live: LiveServer, form: str) -> None:
    await live.client.apply(_cluster(5))
    encode = FORMS[form]
    scenario = sim.Scenario(
        add_nodes=[
            sim.HypotheticalNodes(template=encode(TEMPLATE), count=2, resource_slices=[encode(_slice(2))]),
        ]
    )
    answer = await live.client.simulate(_pods(5), scenario)
    placed = [p.node_name for p in answer.placements]
    # Two GPUs per copy: four pods find one, the fifth none (cpu-only has no device at all).
    assert sorted(placed[:4]) == ["gpu-node-sim-0", "gpu-node-sim-0", "gpu-node-sim-1", "gpu-node-sim-1"]
    assert placed[4] == ""
    reasons = {v.node_name: list(v.reasons) for v in answer.placements[4].rejections}
    assert reasons == {n: ["cannot allocate all claims"] for n in ("cpu-only", "gpu-node-sim-0", "gpu-node-sim-1")}


async def test_without_slices_a_template_has_no_devices(live: LiveServer) -> None:
    await live.client.apply(_cluster(1))
    scenario = sim.Scenario(add_nodes=[sim.HypotheticalNodes(template=to_cluster_object(TEMPLATE), count=1)])
    answer = await live.client.simulate(_pods(1), scenario)
    assert answer.placements[0].node_name == ""


async def test_estimate_counts_nodes_by_their_devices(live: LiveServer) -> None:
    await live.client.apply(_cluster(20))
    pods = _pods(20)
    answer = await live.client.estimate_scale_up(
        [[pod] for pod in pods],
        [("eight", TEMPLATE, 0, 10, [_slice(8)]), ("two", TEMPLATE, 0, 5, [_slice(2)]), ("none", TEMPLATE, 0, 10)],
    )
    got = {e.node_group_id: (e.node_count, len(e.scheduled), len(e.unscheduled)) for e in answer.estimates}
    # 20 GPUs: three nodes of eight; five nodes of two hold ten pods; no devices, no pod.
    assert got == {"eight": (3, 20, 0), "two": (5, 10, 10), "none": (0, 0, 20)}


@pytest.mark.parametrize(
    ("where", "slices", "path"),
    [
        pytest.param(
            "simulate",
            [_slice(1), _slice(1, node=None, name="fabric")],
            "scenario.add_nodes[0].resource_slices[1].spec.nodeName",
            id="a slice for every node is refused in a scenario's template",
        ),
        pytest.param(
            "estimate",
            [_slice(1, node=None)],
            "node_groups[0].template_resource_slices[0].spec.nodeName",
            id="a slice for every node is refused in a node group's template",
        ),
        pytest.param(
            "estimate",
            [make_node("not-a-slice").json()],
            "node_groups[0].template_resource_slices[0]",
            id="a template's slices must be ResourceSlices",
        ),
    ],
)
async def test_template_slices_must_be_node_local_resource_slices(
    live: LiveServer, where: str, slices: list[dict[str, Any]], path: str
) -> None:
    await live.client.apply(_cluster(1))
    with pytest.raises(PodfitError) as caught:
        if where == "simulate":
            scenario = sim.Scenario(
                add_nodes=[
                    sim.HypotheticalNodes(
                        template=to_cluster_object(TEMPLATE),
                        count=1,
                        resource_slices=[to_cluster_object(s) for s in slices],
                    )
                ]
            )
            await live.client.simulate(_pods(1), scenario)
        else:
            await live.client.estimate_scale_up([_pods(1)], [("g", TEMPLATE, 0, 1, slices)])
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert path in str(caught.value)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with LocalServer() as local:
        assert main(["--target", local.target, "apply", "-f", str(EXAMPLES / "gpu-cluster.yaml")]) == 0
        yield local.target


def test_the_cli_estimates_gpu_node_groups_from_the_example(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--target", server, "estimate", "-f", str(EXAMPLES / "gpu-node-groups.yaml")])
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:4] for line in out.splitlines() if line.strip()}
    assert code == 0
    # Ten pods claiming one GPU each: two nodes of eight H100s, three of four L4s.
    assert rows["h100x8"] == ["2", "10", "0"]
    assert rows["l4x4"] == ["3", "10", "0"]


def test_the_cli_simulates_a_scenario_with_template_slices(
    server: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scenario = {
        "kind": "Scenario",
        "addNodes": [{"count": 1, "template": {**TEMPLATE, "kind": "Node"}, "resourceSlices": [_slice(1)]}],
    }
    pods = [p | {"metadata": {**p["metadata"], "namespace": "ml"}} for p in _pods(2)]
    for i, pod in enumerate(pods):
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"train-{i}-gpu"}]
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump_all([scenario, *pods]))
    code = main(["--target", server, "-o", "json", "simulate", "-f", str(path)])
    assert code == 0
    body = json.loads(capsys.readouterr().out)
    # One GPU on the one copy: the first pod takes it, the second finds none.
    assert [p.get("nodeName", "") for p in body["placements"]] == ["gpu-node-sim-0", ""]
