"""In-process decision benchmark on scheduler_perf-shaped clusters (not a test; run by hand).

    python -m benchmarks.decision_bench [--nodes 5000] [--pods 10000] [--decisions 50] [WORKLOAD ...]
    python -m benchmarks.decision_bench --batch 100 [--decisions 2000] [--nodes 5000] [--pods 10000] [--mode distinct]

Workloads mirror kube-scheduler's scheduler_perf templates: nodes with 4 CPU / 32Gi / 110 pods over
zones moon-1..3, pods requesting 100m / 500Mi. Each decision is a full Filter + Score over every node
(Engine.decide), which is what Schedule and the extender's filter+prioritize pair cost.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from podfit.client import bench
from podfit.client.bench import node
from podfit.server.cache.cluster_cache import ClusterCache, Upsert
from podfit.server.config import default_profile
from podfit.server.engine import Engine
from podfit.server.framework.versions import DEFAULT_VERSION
from podfit.server.model import Kind
from podfit.server.model.objects import node_from_k8s, pod_from_k8s


def pod(
    i: int, labels: dict[str, str], spec_extra: dict[str, Any] | None = None, node_name: str = ""
) -> dict[str, Any]:
    """podfit bench's pod template, numbered."""
    return bench.pod(f"pod-{i}", labels, spec_extra, node_name)


def anti_affinity(app: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


def spread(app: str, when: str = "DoNotSchedule") -> dict[str, Any]:
    return {
        "topologySpreadConstraints": [
            {"maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": when,
             "labelSelector": {"matchLabels": {"app": app}}}
        ]
    }  # fmt: skip


def affinity(app: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "topology.kubernetes.io/zone"}
    return {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


def node_affinity() -> dict[str, Any]:
    term = {
        "matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["moon-1", "moon-2"]}]
    }
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    }


# name -> (existing pod spec extras, incoming pod spec extras)
WORKLOADS: dict[str, Callable[[str], tuple[dict[str, Any], dict[str, Any]]]] = {
    "SchedulingBasic": lambda app: ({}, {}),
    "TopologySpreading": lambda app: (spread(app), spread(app)),
    "PreferredTopologySpreading": lambda app: (spread(app, "ScheduleAnyway"), spread(app, "ScheduleAnyway")),
    "SchedulingPodAntiAffinity": lambda app: (anti_affinity(app), anti_affinity(app)),
    "SchedulingPodAffinity": lambda app: (affinity(app), affinity(app)),
    "SchedulingNodeAffinity": lambda app: (node_affinity(), node_affinity()),
}


def build(nodes: int, pods: int, workload: str) -> tuple[ClusterCache, float]:
    started = time.perf_counter()
    cache = ClusterCache()
    cache.apply([Upsert(Kind.NODE, node_from_k8s(node(i))) for i in range(nodes)])
    existing, _ = WORKLOADS[workload]("web")
    batch = []
    for i in range(pods):
        # Anti-affinity pods get one app per pod so every node can hold one of each.
        app = f"web-{i}" if workload == "SchedulingPodAntiAffinity" else "web"
        extra = WORKLOADS[workload](app)[0] if workload == "SchedulingPodAntiAffinity" else existing
        batch.append(Upsert(Kind.POD, pod_from_k8s(pod(i, {"app": app}, extra, f"node-{i % nodes:05d}"))))
    cache.apply(batch)
    return cache, time.perf_counter() - started


def run(
    workload: str, nodes: int, pods: int, decisions: int, mode: str = "replicas", version: str = DEFAULT_VERSION
) -> dict[str, Any]:
    """``replicas``: identical pods, each assumed on its selected node before the next decision (what a
    ReplicaSet's burst costs); ``distinct``: every pod requests a different cpu amount, so no decision
    can reuse another's answers."""
    cache, load_seconds = build(nodes, pods, workload)
    engine = Engine(cache, {"default-scheduler": default_profile(version=version)})
    _, incoming = WORKLOADS[workload]("web")
    engine.decide(pod_from_k8s(pod(9_999_999, {"app": "web"}, incoming)))  # warm-up: snapshot arrays, indexes
    latencies = []
    for i in range(decisions):
        manifest = pod(10_000_000 + i, {"app": "web"}, incoming)
        if mode == "distinct":
            manifest["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{100 + i}m"
        candidate = pod_from_k8s(manifest)
        started = time.perf_counter()
        decision, _, _ = engine.decide(candidate)
        latencies.append((time.perf_counter() - started) * 1000)
        assert decision.outcome is not None and len(decision.outcome), "no verdicts"
        if mode == "replicas" and decision.selected:
            manifest["spec"]["nodeName"] = decision.selected
            cache.apply([Upsert(Kind.POD, pod_from_k8s(manifest))])
    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))]

    return {
        "workload": f"{workload}/{nodes}Nodes_{pods}Pods",
        "load_s": round(load_seconds, 2),
        "decisions": decisions,
        "mode": mode,
        "version": version,
        "p50_ms": round(pct(0.5), 2),
        "p90_ms": round(pct(0.9), 2),
        "p99_ms": round(pct(0.99), 2),
        "mean_ms": round(statistics.fmean(latencies), 2),
    }


def run_batch(nodes: int, pods: int, decisions: int, size: int, mode: str = "replicas") -> float:
    """SchedulingBasic's pods placed by ``SchedulingService.schedule_batch`` (without details, as
    ``podfit bench --batch`` asks them) in batches of ``size``: microseconds per pod, best of 3 runs.
    Everything a ScheduleBatch costs but the transport: the cycle, Reserve and the bookkeeping around it.
    ``replicas``: identical pods (a run is placed from one decision where it can be); ``distinct``: every
    pod requests its own cpu amount, so every pod is decided."""
    from podfit.client.manifests import to_cluster_object
    from podfit.server.service import GivenPod, SchedulingService
    from podfit.server.transport.stored_forms import PROTOBUF_FORMS

    service = SchedulingService({"default-scheduler": default_profile()}, forms=PROTOBUF_FORMS)
    service.apply([Upsert(Kind.NODE, node_from_k8s(m), to_cluster_object(m).SerializeToString())
                   for m in map(node, range(nodes))])  # fmt: skip
    service.apply([Upsert(Kind.POD, pod_from_k8s(m), to_cluster_object(m).SerializeToString())
                   for m in (pod(i, {"app": "web"}, None, f"node-{i % nodes:05d}") for i in range(pods))])  # fmt: skip
    asyncio.run(service.mark_synced())

    def given(i: int) -> GivenPod:
        manifest = pod(10_000_000 + i, {"app": "web"})
        if mode == "distinct":
            manifest["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{100 + i % 997}m"
        return GivenPod(pod_from_k8s(manifest), to_cluster_object(manifest).SerializeToString())

    service.schedule_batch([given(-1 - i) for i in range(size)], details=False)  # warm-up
    best = float("inf")
    for run in range(3):
        batches = [[given(run * decisions + first + k) for k in range(size)] for first in range(0, decisions, size)]
        started = time.perf_counter()
        for batch in batches:
            service.schedule_batch(batch, details=False)
        best = min(best, (time.perf_counter() - started) / (len(batches) * size) * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workloads", nargs="*", help=f"default: all of {', '.join(WORKLOADS)}")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--decisions", type=int, default=30)
    parser.add_argument("--mode", choices=("replicas", "distinct"), default="replicas")
    parser.add_argument(
        "--kube-scheduler-version", default=DEFAULT_VERSION, help=f"the profile's version (default {DEFAULT_VERSION})"
    )
    parser.add_argument(
        "--batch", type=int, default=0, help="time SchedulingBasic through schedule_batch in batches of N instead"
    )
    args = parser.parse_args()
    if args.batch:
        per_pod = run_batch(args.nodes, args.pods, args.decisions, args.batch, args.mode)
        print(
            f"SchedulingBasic/{args.nodes}Nodes_{args.pods}Pods, batches of {args.batch}, {args.mode}: "
            f"{per_pod:.0f} us per pod"
        )
        return
    print("| workload | mode | version | cache load (s) | decisions | p50 (ms) | p90 (ms) | p99 (ms) |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for workload in args.workloads or list(WORKLOADS):
        if workload not in WORKLOADS:
            parser.error(f"unknown workload {workload!r}")
        r = run(workload, args.nodes, args.pods, args.decisions, args.mode, args.kube_scheduler_version)
        print(
            f"| {r['workload']} | {r['mode']} | {r['version']} | {r['load_s']} | {r['decisions']} | {r['p50_ms']} "
            f"| {r['p90_ms']} | {r['p99_ms']} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
