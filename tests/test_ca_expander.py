"""cluster-autoscaler's gRPC expander on its own TLS listener: BestOptions as the autoscaler calls it,
fed with Kubernetes protobuf encoded from objects built here, the choice podfit's simulation makes,
and clear errors."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from grpcplugin import expander_pb2 as ex
from grpcplugin import expander_pb2_grpc as ex_grpc
from podfit.client import AsyncClient
from podfit.k8s import protobuf
from podfit.server.app import RunningServer, create_server
from podfit.server.settings import Settings, SettingsError, resolve

from tests.builders import make_node, make_pod


@dataclass
class Expander:
    running: RunningServer
    stub: ex_grpc.ExpanderStub
    client: AsyncClient


@pytest.fixture
async def expander(pki: dict[str, Path]) -> AsyncIterator[Expander]:
    settings = Settings(
        tls_cert_file=str(pki["server_cert"]), tls_key_file=str(pki["server_key"]), ca_expander_addr="localhost:0"
    )
    running = await create_server(settings, addr="localhost:0", extender_addr="off")
    ca = pki["ca"].read_bytes()
    credentials = grpc.ssl_channel_credentials(root_certificates=ca)
    channel = grpc.aio.secure_channel(f"localhost:{running.ca_expander_port}", credentials)
    client = AsyncClient(f"localhost:{running.port}", tls=True, root_certificates=ca)
    try:
        yield Expander(running, ex_grpc.ExpanderStub(channel), client)
    finally:
        await channel.close()
        await client.close()
        await running.stop(0)


def template(name: str, cpu: str, memory: str, **extra: Any) -> bytes:
    builder = make_node(name).capacity(cpu=cpu, memory=memory, pods="110")
    for key, value in extra.get("taints", {}).items():
        builder = builder.taint(key, value)
    if "labels" in extra:
        builder = builder.labels(**extra["labels"])
    return protobuf.encode(builder.json())


def pods(count: int, cpu: str = "1", memory: str = "1Gi", **extra: Any) -> list[bytes]:
    built = []
    for i in range(count):
        builder = make_pod(f"p{i}").req(cpu=cpu, memory=memory).owner("ReplicaSet", "web")
        if "toleration" in extra:
            builder = builder.toleration(extra["toleration"], "Exists", effect="NoSchedule")
        if "node_selector" in extra:
            builder = builder.node_selector(**extra["node_selector"])
        built.append(protobuf.encode(builder.json()))
    return built


def option(group: str, count: int, pod_bytes: list[bytes]) -> ex.Option:
    return ex.Option(nodeGroupId=group, nodeCount=count, debug=f"{group} x{count}", podBytes=pod_bytes)


CASES: dict[str, tuple[dict[str, bytes], list[ex.Option], list[str]]] = {
    # name: (templates by group, options, the groups of the options returned)
    "the option whose template fits the pods beats one that cannot place them": (
        {"small": template("small", "2", "8Gi"), "big": template("big", "8", "8Gi")},
        [option("small", 1, pods(1, cpu="3")), option("big", 1, pods(1, cpu="3"))],
        ["big"],
    ),
    "least waste wins when every option places every pod": (
        {"c4": template("c4", "4", "4Gi"), "c16": template("c16", "16", "16Gi")},
        [option("c16", 1, pods(4)), option("c4", 1, pods(4))],
        ["c4"],
    ),
    "equal waste: fewer new nodes wins": (
        {"one": template("one", "1", "1Gi"), "two": template("two", "2", "2Gi")},
        [option("one", 2, pods(2)), option("two", 1, pods(2))],
        ["two"],
    ),
    "ties are all returned, in request order": (
        {"a": template("a", "4", "4Gi"), "b": template("b", "4", "4Gi")},
        [option("b", 1, pods(2)), option("a", 1, pods(2))],
        ["b", "a"],
    ),
    "the template's taint is decoded: pods without a toleration cannot use it": (
        {"gpu": template("gpu", "8", "8Gi", taints={"gpu": "yes"}), "cpu": template("cpu", "8", "32Gi")},
        [option("gpu", 1, pods(2)), option("cpu", 1, pods(2))],
        ["cpu"],
    ),
    "the pods' tolerations are decoded too": (
        {"gpu": template("gpu", "8", "8Gi", taints={"gpu": "yes"}), "cpu": template("cpu", "8", "32Gi")},
        [option("gpu", 1, pods(2, toleration="gpu")), option("cpu", 1, pods(2, toleration="gpu"))],
        ["gpu"],
    ),
    "node selectors meet the template's labels": (
        {"ssd": template("ssd", "8", "32Gi", labels={"disk": "ssd"}), "hdd": template("hdd", "4", "8Gi")},
        [
            option("hdd", 1, pods(2, node_selector={"disk": "ssd"})),
            option("ssd", 1, pods(2, node_selector={"disk": "ssd"})),
        ],
        ["ssd"],
    ),
    "no options: none returned": ({}, [], []),
}


def _typed(option: ex.Option) -> ex.Option:
    """The option as an autoscaler predating podBytes sends it: the same bytes in the typed pod field."""
    return ex.Option(
        nodeGroupId=option.nodeGroupId, nodeCount=option.nodeCount, debug=option.debug, pod=option.podBytes
    )


@pytest.mark.parametrize("fields", ["podBytes/nodeBytesMap", "pod/nodeMap (older autoscalers)"])
@pytest.mark.parametrize(("templates", "options", "want"), list(CASES.values()), ids=list(CASES))
async def test_best_options(
    expander: Expander, templates: dict[str, bytes], options: list[ex.Option], want: list[str], fields: str
) -> None:
    await expander.client.apply([make_node("existing").capacity(cpu="1", memory="1Gi", pods="10").json()])
    if fields.startswith("pod/"):
        typed = [_typed(o) for o in options]
        response = await expander.stub.BestOptions(ex.BestOptionsRequest(options=typed, nodeMap=templates))
        assert [o.nodeGroupId for o in response.options] == want
        assert all(o in typed for o in response.options)
        return
    request = ex.BestOptionsRequest(options=options, nodeBytesMap=templates)
    response = await expander.stub.BestOptions(request)
    assert [o.nodeGroupId for o in response.options] == want
    # The options come back as sent, so the autoscaler finds its own.
    assert all(o in options for o in response.options)


async def test_existing_pods_count_for_spreading(expander: Expander) -> None:
    """A zone already holding the app's pods: a template in that zone cannot take more within maxSkew."""
    selector = {"matchLabels": {"app": "web"}}
    await expander.client.apply(
        [
            make_node("a")
            .capacity(cpu="8", memory="8Gi", pods="10")
            .labels(**{"topology.kubernetes.io/zone": "za"})
            .json(),
            make_node("b")
            .capacity(cpu="1", memory="1Gi", pods="10")
            .labels(**{"topology.kubernetes.io/zone": "zb"})
            .json(),
            make_pod("old").req(cpu="100m").labels(app="web").node("a").json(),
        ]
    )
    pending = [
        protobuf.encode(
            make_pod("new")
            .req(cpu="100m")
            .labels(app="web")
            .spread(1, "topology.kubernetes.io/zone", selector=selector)
            .json()
        )
    ]
    templates = {
        "in-za": template("in-za", "4", "4Gi", labels={"topology.kubernetes.io/zone": "za"}),
        "in-zb": template("in-zb", "4", "4Gi", labels={"topology.kubernetes.io/zone": "zb"}),
    }
    request = ex.BestOptionsRequest(
        options=[option("in-za", 1, pending), option("in-zb", 1, pending)], nodeBytesMap=templates
    )
    response = await expander.stub.BestOptions(request)
    assert [o.nodeGroupId for o in response.options] == ["in-zb"]


def _violations(error: grpc.aio.AioRpcError) -> list[str]:
    status = rpc_status.from_call(error)
    assert status is not None
    fields = []
    for detail in status.details:
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            fields.extend(v.field for v in bad.field_violations)
    return fields


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        pytest.param(
            ex.BestOptionsRequest(options=[option("gone", 1, pods(1))]), "nodeBytesMap['gone']", id="missing template"
        ),
        pytest.param(
            ex.BestOptionsRequest(
                options=[option("a", 1, [b"\xff\xff\xff"])], nodeBytesMap={"a": template("a", "4", "4Gi")}
            ),
            "options[0].podBytes[0]",
            id="undecodable pod",
        ),
        pytest.param(
            ex.BestOptionsRequest(options=[option("a", 1, pods(1))], nodeBytesMap={"a": b"k8s\x00garbage"}),
            "nodeBytesMap['a']",
            id="undecodable template",
        ),
        pytest.param(
            ex.BestOptionsRequest(
                options=[option("a", 1, pods(1))] * 100_000, nodeBytesMap={"a": template("a", "4", "4Gi")}
            ),
            "options",
            id="100,000 options, refused by limits.expansionOptions before any work",
        ),
    ],
)
async def test_bad_bytes_are_invalid_argument(expander: Expander, request_: ex.BestOptionsRequest, field: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await expander.stub.BestOptions(request_)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    (violation,) = _violations(raised.value)
    # The path goes on into the bytes where the decoder can say more (a field, a field number).
    assert violation == field or violation.startswith(f"{field}.")


def _gpu_slice(node: str, gpus: int, **where: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": "gpu.example.com",
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": f"gpu-{i}"} for i in range(gpus)],
    }
    spec.update(where or {"nodeName": node})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": node}, "spec": spec}


def _gpu_pods(count: int) -> list[bytes]:
    built = []
    for i in range(count):
        builder = make_pod(f"g{i}").req(cpu="1", memory="1Gi").owner("ReplicaSet", "train")
        builder.spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"claim-{i}"}]
        built.append(protobuf.encode(builder.json()))
    return built


async def _gpu_cluster(expander: Expander, claims: int) -> None:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}
    selector = {"cel": {"expression": 'device.driver == "gpu.example.com"'}}
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [selector]},
        }
    ]
    for i in range(claims):
        objects.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": f"claim-{i}", "namespace": "default"},
                "spec": {"devices": {"requests": [request]}},
            }
        )
    await expander.client.apply(objects)


@pytest.mark.parametrize(
    "encode",
    [
        pytest.param(protobuf.encode, id="slices in Kubernetes protobuf"),
        pytest.param(lambda s: json.dumps(s).encode(), id="slices as Kubernetes JSON"),
    ],
)
async def test_template_resource_slices_make_a_gpu_group_the_best_option(expander: Expander, encode: Any) -> None:
    """Without its slices a GPU group's template takes no claiming pod; with them (podfit's
    templateResourceSlices) each new node brings its own GPUs, and the option with enough of them wins."""
    await _gpu_cluster(expander, 4)
    templates = {"gpu2": template("gpu2", "16", "64Gi"), "gpu4": template("gpu4", "16", "64Gi")}
    options = [option("gpu2", 1, _gpu_pods(4)), option("gpu4", 1, _gpu_pods(4))]
    bare = await expander.stub.BestOptions(ex.BestOptionsRequest(options=options, nodeBytesMap=templates))
    # No devices anywhere: neither option places a pod, so both tie.
    assert [o.nodeGroupId for o in bare.options] == ["gpu2", "gpu4"]
    slices = {
        "gpu2": ex.ResourceSlices(items=[encode(_gpu_slice("gpu2", 2))]),
        "gpu4": ex.ResourceSlices(items=[encode(_gpu_slice("gpu4", 4))]),
    }
    request = ex.BestOptionsRequest(options=options, nodeBytesMap=templates, templateResourceSlices=slices)
    response = await expander.stub.BestOptions(request)
    assert [o.nodeGroupId for o in response.options] == ["gpu4"]


async def test_a_template_slice_for_every_node_is_refused(expander: Expander) -> None:
    await _gpu_cluster(expander, 1)
    slices = {"gpu": ex.ResourceSlices(items=[protobuf.encode(_gpu_slice("gpu", 1, allNodes=True))])}
    request = ex.BestOptionsRequest(
        options=[option("gpu", 1, _gpu_pods(1))],
        nodeBytesMap={"gpu": template("gpu", "4", "4Gi")},
        templateResourceSlices=slices,
    )
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await expander.stub.BestOptions(request)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert _violations(raised.value) == ["templateResourceSlices['gpu'].items[0].spec.nodeName"]


async def test_the_listener_is_tls_only_and_serves_only_the_expander(expander: Expander) -> None:
    port = expander.running.ca_expander_port
    async with grpc.aio.insecure_channel(f"localhost:{port}") as plain:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await ex_grpc.ExpanderStub(plain).BestOptions(ex.BestOptionsRequest(), timeout=3)
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
    async with AsyncClient(
        f"localhost:{port}", tls=True, root_certificates=expander.client.config.root_certificates
    ) as c:
        with pytest.raises(Exception) as refused:
            await c.stats(timeout=3)
        assert "UNIMPLEMENTED" in str(refused.value)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--ca-expander-addr", "localhost:9443"], "needs tls.certFile", id="no certificate"),
        pytest.param(["--ca-expander-addr", "nowhere"], "must be HOST:PORT", id="not an address"),
        pytest.param(
            ["--ca-expander-addr", "0.0.0.0:9443", "--tls-cert-file", "c", "--tls-key-file", "k"],
            "cannot authenticate callers",
            id="off loopback without the explicit opt-in",
        ),
        pytest.param(
            ["--extender-bind", "--auth-token-file", "t"],
            "extender.bind: the bind verb changes the cache",
            id="a bind verb without client certificates while tokens guard every other write",
        ),
    ],
)
def test_expander_settings_are_checked(argv: list[str], message: str) -> None:
    with pytest.raises(SettingsError) as raised:
        resolve(argv, {})
    assert message in str(raised.value)


def test_expander_off_loopback_serves_once_the_operator_opts_in() -> None:
    argv = ["--ca-expander-addr", "0.0.0.0:9443", "--tls-cert-file", "c", "--tls-key-file", "k"]
    settings = resolve([*argv, "--ca-expander-unauthenticated"], {})
    assert (settings.ca_expander_addr, settings.ca_expander_unauthenticated) == ("0.0.0.0:9443", True)


def test_expander_is_off_by_default() -> None:
    assert resolve([], {}).ca_expander_addr == "off"


async def test_the_worked_example_runs_as_written(expander: Expander, pki: dict[str, Path]) -> None:
    """deploy/examples/best_options.py, as the README runs it: three small nodes waste less than one large."""
    script = Path(__file__).resolve().parents[1] / "deploy" / "examples" / "best_options.py"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        "--target",
        f"localhost:{expander.running.ca_expander_port}",
        "--ca-file",
        str(pki["ca"]),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, err.decode()
    assert out.decode().splitlines() == ["small: 3 node(s) for 6 pods"]


def _listeners(settings: Any) -> set[tuple[str, str]]:
    """(host, port) of every listener a server would open; localhost counts as 127.0.0.1."""
    addrs = (settings.grpc_addr, settings.extender_addr, settings.metrics_addr, settings.ca_expander_addr)
    found = set()
    for addr in addrs:
        if addr in ("", "off"):
            continue
        host, _, port = addr.rpartition(":")
        found.add(("127.0.0.1" if host in ("localhost", "") else host, port))
    return found


def test_the_readme_expander_example_runs_beside_the_quick_start_server() -> None:
    """The README's expander example starts a second podfit-server: none of its listeners may be one the
    quick-start server (embedded defaults) already holds."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    command = re.search(r"\.venv/bin/podfit-server (--grpc-addr localhost:\d+ .*?)&\n", readme, re.S)
    assert command, "the README's expander example is gone"
    argv = command.group(1).replace("\\\n", " ").split()
    example = _listeners(resolve(argv, {}))
    quick_start = _listeners(resolve([], {}))
    assert example and not example & quick_start, example & quick_start
