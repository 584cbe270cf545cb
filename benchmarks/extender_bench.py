"""Extender round trip over HTTP on loopback: kube-scheduler's filter then prioritize for one pod
(not a test; run by hand).

    python -m benchmarks.extender_bench [--nodes 5000] [--pods 10000] [--rounds 200] [--shape SHAPE ...]

Starts podfit-server in its own process with the extender on a loopback port (kube-scheduler is
another process too), loads a scheduler_perf-shaped cluster through the gRPC API the way
``podfit bench`` does (typed pods, streamed), then POSTs ExtenderArgs as kube-scheduler v1.35 does
(payload shapes as captured in shared/conformance/extender-wire) and times each call.

Shapes (kube-scheduler on a 5,000-node cluster scores only the first feasible 10% of the nodes,
``percentageOfNodesToScore`` adaptive: 50 - 5000/125 = 10%, so an extender sees 500 nodes per call):

* ``names-500``: ``nodeCacheCapable: true``, 500 node names per call (a window that moves on each pod,
  as kube-scheduler's nextStartNodeIndex does); filter, then prioritize on the names it passed.
* ``nodes-500``: ``nodeCacheCapable: false``, 500 full v1 Node objects in ``Nodes`` (a NodeList, as
  kube-scheduler serializes its cached nodes); filter, then prioritize on the Nodes it passed.
* ``names-all``: every node's name in each call (what an extender sees when percentageOfNodesToScore
  is 100, and the shape measured before).

Each shape runs with distinct pods (a new CPU request each pod, so every decision is computed) and
with replicas of one pod (the decision memo answers while the cluster does not change).

Timed: from sending the (already encoded) request until its whole response is read, on one keep-alive
connection, like Go's http.Client. Encoding the request and decoding the response in this Python
client are left out: kube-scheduler does them in Go.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import math
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from podfit.client import AsyncClient, Client, bench
from podfit.client.conformance import stop_process

SHAPES = ("names-500", "nodes-500", "names-all")
PER_CALL = 500


def go_json(args: Any) -> bytes:
    """JSON as kube-scheduler's encoding/json writes it: compact, no spaces."""
    return json.dumps(args, separators=(",", ":")).encode()


def wire_node(i: int) -> dict[str, Any]:
    """podfit bench's node as kube-scheduler sends it to an extender without a node cache: a v1 Node
    with the fields of the captured payload (capacity, daemonEndpoints, nodeInfo, images, ...)."""
    base = bench.node(i)
    resources = base["status"]["allocatable"]
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": base["metadata"]["name"],
            "uid": f"uid-{base['metadata']['name']}",
            "resourceVersion": str(1000 + i),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {
                **base["metadata"]["labels"],
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"podCIDR": f"10.{i // 256 % 256}.{i % 256}.0/24", "podCIDRs": [f"10.{i // 256 % 256}.{i % 256}.0/24"]},
        "status": {
            "capacity": {**resources, "ephemeral-storage": "100Gi"},
            "allocatable": {**resources, "ephemeral-storage": "100Gi"},
            "conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                 "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "KubeletReady",
                 "message": "kubelet is posting ready status"},
            ],
            "addresses": [{"type": "InternalIP", "address": f"10.0.{i // 256 % 256}.{i % 256}"},
                          {"type": "Hostname", "address": base["metadata"]["name"]}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "6.8.0",
                         "osImage": "Ubuntu 24.04", "containerRuntimeVersion": "containerd://2.0.0",
                         "kubeletVersion": "v1.35.4", "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64"},
            "images": [
                {"names": ["registry.k8s.io/pause@sha256:0123456789abcdef", "registry.k8s.io/pause:3.10"],
                 "sizeBytes": 320368},
            ],
        },
    }  # fmt: skip


def wire_pod(i: int, distinct: bool) -> dict[str, Any]:
    """The pod kube-scheduler asks about (apiVersion, kind and status as it serializes them)."""
    manifest = bench.pod(f"measured-{i}", {"color": "blue"})
    manifest["apiVersion"] = "v1"
    manifest["status"] = {"phase": "Pending"}
    manifest["spec"]["schedulerName"] = "default-scheduler"
    if distinct:
        manifest["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{100 + i % 500}m"
    return manifest


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))] if ordered else 0.0


class Server:
    """podfit-server in its own process, gRPC and the extender on loopback ports."""

    def __init__(self) -> None:
        self.grpc_port, self.http_port = _free_port(), _free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "podfit.server.app", "--grpc-addr", f"127.0.0.1:{self.grpc_port}",
             "--extender-addr", f"127.0.0.1:{self.http_port}"],
            env={**os.environ, "PODFIT_LOG_LEVEL": "WARNING"},
        )  # fmt: skip

    def rss_mib(self) -> float | None:
        return bench.process_rss_mib(self.process.pid)

    def stop(self) -> None:
        stop_process(self.process)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(process: subprocess.Popen[bytes], target: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"podfit-server exited with status {process.returncode}")
        with Client(target) as client:
            try:
                client.wait_ready(timeout=1.0)
                return
            except Exception:
                continue
    raise RuntimeError("podfit-server did not become ready")


async def load(grpc_port: int, nodes: int, pods: int) -> float:
    """podfit bench's SchedulingBasic cluster, its nodes then replaced by the v1 Nodes kube-scheduler sends:
    a feeder watching the same API server holds the very objects (uid, resourceVersion) the scheduler has."""
    async with AsyncClient(f"127.0.0.1:{grpc_port}") as client:
        seconds = await bench.load(client, bench.WORKLOADS["SchedulingBasic"], nodes, pods)
        await client.replace("Node", [wire_node(i) for i in range(nodes)])
        return seconds


class Caller:
    """One keep-alive HTTP/1.1 connection; POSTs pre-encoded bodies and times the round trip."""

    def __init__(self, port: int, prefix: str = "/scheduler") -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port)
        self.prefix = prefix

    def post(self, verb: str, body: bytes) -> tuple[float, bytes]:
        started = time.perf_counter()
        self.connection.request("POST", f"{self.prefix}/{verb}", body, {"Content-Type": "application/json"})
        response = self.connection.getresponse()
        data = response.read()
        elapsed = (time.perf_counter() - started) * 1000
        if response.status != 200:
            raise RuntimeError(f"{verb}: HTTP {response.status}: {data[:300]!r}")
        return elapsed, data


def run_shape(caller: Caller, shape: str, nodes: int, rounds: int, distinct: bool) -> dict[str, Any]:
    names = [f"node-{i:05d}" for i in range(nodes)]
    full = [wire_node(i) for i in range(nodes)] if shape == "nodes-500" else []
    per_call = min(PER_CALL, nodes)
    filter_ms: list[float] = []
    prioritize_ms: list[float] = []
    total_ms: list[float] = []
    request_bytes: list[int] = []
    passed = 0
    for r in range(rounds):
        start = (r * per_call) % nodes
        window = [(start + k) % nodes for k in range(per_call)]
        pod = wire_pod(r, distinct)
        if shape == "names-all":
            args: dict[str, Any] = {"Pod": pod, "Nodes": None, "NodeNames": names}
        elif shape == "names-500":
            args = {"Pod": pod, "Nodes": None, "NodeNames": [names[k] for k in window]}
        else:
            args = {"Pod": pod, "Nodes": {"metadata": {}, "items": [full[k] for k in window]}, "NodeNames": None}
        body = go_json(args)
        request_bytes.append(len(body))
        f_ms, raw = caller.post("filter", body)
        result = json.loads(raw)
        if result.get("Error"):
            raise RuntimeError(f"filter: {result['Error']}")
        # kube-scheduler sends prioritize the nodes that passed (its filters and the extender's).
        if result["NodeNames"] is not None:
            args["NodeNames"] = result["NodeNames"]
            passed += len(result["NodeNames"])
        else:
            args["Nodes"] = result["Nodes"]
            passed += len(result["Nodes"]["items"])
        body = go_json(args)
        p_ms, raw = caller.post("prioritize", body)
        sent = args["NodeNames"] if args["NodeNames"] is not None else args["Nodes"]["items"]
        if len(json.loads(raw)) != len(sent):
            raise RuntimeError("prioritize: one HostPriority per node expected")
        filter_ms.append(f_ms)
        prioritize_ms.append(p_ms)
        total_ms.append(f_ms + p_ms)
    return {
        "shape": shape,
        "pods": "distinct" if distinct else "replicas (memo)",
        "nodes_per_call": nodes if shape == "names-all" else per_call,
        "passed_per_call": passed / rounds,
        "filter_request_kib": sum(request_bytes) / len(request_bytes) / 1024,
        **{
            f"{label}_{q}": percentile(values, float(q[1:]))
            for label, values in (("filter", filter_ms), ("prioritize", prioritize_ms), ("pod", total_ms))
            for q in ("p50", "p99")
        },
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000, help="bound pods loaded before measuring")
    parser.add_argument("--rounds", type=int, default=200, help="pods per shape and pod kind")
    parser.add_argument("--shape", action="append", choices=SHAPES, help=f"default: all of {', '.join(SHAPES)}")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    server = Server()
    rows = []
    try:
        wait_ready(server.process, f"127.0.0.1:{server.grpc_port}")
        load_seconds = asyncio.run(load(server.grpc_port, args.nodes, args.pods))
        print(f"loaded {args.nodes} nodes, {args.pods} pods in {load_seconds:.1f} s; server RSS {server.rss_mib()} MiB")
        caller = Caller(server.http_port)
        for shape in args.shape or SHAPES:
            for distinct in (True, False):
                rows.append(run_shape(caller, shape, args.nodes, args.rounds, distinct))
    finally:
        server.stop()
    print(
        "| shape | pods | nodes/call | passed | filter req KiB | filter p50 ms | p99 | prioritize p50 ms | p99 "
        "| filter+prioritize p50 ms | p99 |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    for row in rows:
        print(
            f"| {row['shape']} | {row['pods']} | {row['nodes_per_call']} | {row['passed_per_call']:.0f} "
            f"| {row['filter_request_kib']:.0f} | {row['filter_p50']:.2f} | {row['filter_p99']:.2f} "
            f"| {row['prioritize_p50']:.2f} | {row['prioritize_p99']:.2f} "
            f"| {row['pod_p50']:.2f} | {row['pod_p99']:.2f} |"
        )
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=2)


if __name__ == "__main__":
    main()
