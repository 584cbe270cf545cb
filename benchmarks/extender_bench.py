"""Extender round trip over HTTP on loopback: kube-scheduler's filter then prioritize for one pod
(not a test; run by hand).

    python -m benchmarks.extender_bench [--nodes 5000] [--pods 10000] [--rounds 20]

Starts podfit in-process with the extender on a loopback port, loads a scheduler_perf-shaped cluster
through the gRPC API, then POSTs ExtenderArgs with nodeCacheCapable (node names only) the way
kube-scheduler does and times each filter and prioritize call from the client's side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import aiohttp
from podfit.client import AsyncClient
from podfit.server.app import create_server
from podfit.server.settings import Settings

from benchmarks.decision_bench import node, pod


async def main_async(nodes: int, pods: int, rounds: int) -> None:
    running = await create_server(Settings(), addr="127.0.0.1:0", extender_addr="127.0.0.1:0")
    try:
        async with AsyncClient(f"127.0.0.1:{running.port}") as client:
            await client.replace("Node", [node(i) for i in range(nodes)])
            for start in range(0, pods, 5000):
                batch = [
                    pod(i, {"app": "web"}, None, f"node-{i % nodes:05d}") for i in range(start, min(pods, start + 5000))
                ]
                await client.apply(batch)
        url = f"http://127.0.0.1:{running.extender_port}/scheduler"
        names = [f"node-{i:05d}" for i in range(nodes)]
        for replicas in (False, True):
            await _rounds(url, names, nodes, pods, rounds, replicas)
    finally:
        await running.stop(0)


async def _rounds(url: str, names: list[str], nodes: int, pods: int, rounds: int, replicas: bool) -> None:
    """Distinct pods (every decision computed) or replicas of one pod (answered from the memo)."""
    filter_ms: list[float] = []
    prioritize_ms: list[float] = []
    total_ms: list[float] = []
    async with aiohttp.ClientSession() as session:
        for r in range(rounds):
            candidate = pod(10_000_000 + r, {"app": "web"})
            if not replicas:
                candidate["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{100 + r}m"
            body = {"Pod": candidate, "Nodes": None, "NodeNames": names}
            started = time.perf_counter()
            async with session.post(f"{url}/filter", data=json.dumps(body)) as response:
                result = json.loads(await response.text())
            middle = time.perf_counter()
            body["NodeNames"] = result["NodeNames"]
            async with session.post(f"{url}/prioritize", data=json.dumps(body)) as response:
                await response.read()
            done = time.perf_counter()
            filter_ms.append((middle - started) * 1000)
            prioritize_ms.append((done - middle) * 1000)
            total_ms.append((done - started) * 1000)
    kind = "replicas, memo" if replicas else "distinct pods"
    for label, values in (("filter", filter_ms), ("prioritize", prioritize_ms), ("filter+prioritize", total_ms)):
        values.sort()
        p50 = values[len(values) // 2]
        p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
        print(f"| {label} ({kind}; {nodes} nodes, {pods} pods) | {p50:.1f} | {p90:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    print("| extender call | p50 (ms) | p90 (ms) |\n|---|---:|---:|")
    asyncio.run(main_async(args.nodes, args.pods, args.rounds))


if __name__ == "__main__":
    main()
