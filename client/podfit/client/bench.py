"""``podfit bench``: decision throughput and latency on kube-scheduler's scheduler_perf workloads,
measured through the public gRPC API (like ``etcdctl check perf`` for podfit).

Templates follow scheduler_perf: nodes with 4 CPU / 32Gi / 110 pods over zones moon-1..3, pods
requesting 100m / 500Mi. A workload loads its nodes and bound "init" pods, then schedules measured
pods one after another with ``assume`` (so each sees the earlier placements, as a scheduler binding
them would) and ``VIEW_BASIC``. Figures are decision only: kube-scheduler's include binding through an
API server.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from podfit.client._requests import schedule_request
from podfit.client.aio import AsyncClient
from podfit.client.manifests import to_cluster_object
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import objects_pb2 as ob
from podfit.v1 import scheduler_pb2 as sc

ZONES = ("moon-1", "moon-2", "moon-3")
_NAME = re.compile(r"^(\w+)/(\d+)Nodes_(\d+)Pods$")


def node(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    return {
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": ZONES[i % 3]},
        },
        "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}},
    }


def pod(
    name: str, labels: dict[str, str], extra: dict[str, Any] | None = None, node_name: str = "", priority: int = 0
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
            }
        ],
        "priority": priority,
    }
    if node_name:
        spec["nodeName"] = node_name
    spec.update(extra or {})
    status = {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"} if node_name else {}
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels},
        "spec": spec,
        "status": status,
    }


def _spread(when: str) -> dict[str, Any]:
    return {
        "topologySpreadConstraints": [
            {
                "maxSkew": 5,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": when,
                "labelSelector": {"matchLabels": {"color": "blue"}},
            }
        ]
    }


def _pod_affinity(kind: str, key: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"color": "blue"}}, "topologyKey": key}
    return {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


_NODE_AFFINITY = {
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["moon-1", "moon-2"]}]}
    ]}}}
}  # fmt: skip


@dataclass(frozen=True)
class Workload:
    """init pods (bound before measuring) and the measured pods' shape."""

    init_extra: Callable[[int], dict[str, Any]]
    measured_extra: dict[str, Any]
    init_priority: int = 0
    measured_priority: int = 0
    churn: bool = False


WORKLOADS: dict[str, Workload] = {
    "SchedulingBasic": Workload(lambda i: {}, {}),
    "TopologySpreading": Workload(lambda i: _spread("DoNotSchedule"), _spread("DoNotSchedule")),
    "PreferredTopologySpreading": Workload(lambda i: _spread("ScheduleAnyway"), _spread("ScheduleAnyway")),
    "SchedulingPodAntiAffinity": Workload(
        lambda i: _pod_affinity("podAntiAffinity", "kubernetes.io/hostname"),
        _pod_affinity("podAntiAffinity", "kubernetes.io/hostname"),
    ),
    "SchedulingPodAffinity": Workload(
        lambda i: _pod_affinity("podAffinity", "topology.kubernetes.io/zone"),
        _pod_affinity("podAffinity", "topology.kubernetes.io/zone"),
    ),
    "SchedulingNodeAffinity": Workload(lambda i: _NODE_AFFINITY, _NODE_AFFINITY),
    # Every node full of low-priority pods; each measured high-priority pod must preempt.
    "PreemptionBasic": Workload(lambda i: {}, {}, init_priority=1, measured_priority=100),
    # Decisions interleaved with pod updates (a new bound pod and a deletion per decision).
    "MixedChurn": Workload(lambda i: {}, {}, churn=True),
}
DEFAULT_WORKLOADS = (
    "SchedulingBasic/5000Nodes_10000Pods",
    "SchedulingBasic/5000Nodes_50000Pods",
    # A large cluster (30 pods a node): cold load time and resident memory as much as decisions/s.
    "SchedulingBasic/15000Nodes_450000Pods",
    "TopologySpreading/5000Nodes_5000Pods",
    "PreferredTopologySpreading/5000Nodes_5000Pods",
    "SchedulingPodAntiAffinity/5000Nodes_2000Pods",
    "SchedulingPodAffinity/5000Nodes_5000Pods",
    "SchedulingNodeAffinity/5000Nodes_10000Pods",
    "PreemptionBasic/5000Nodes_20000Pods",
    "MixedChurn/5000Nodes_10000Pods",
)


def parse_name(name: str) -> tuple[str, int, int]:
    match = _NAME.match(name)
    if not match or match.group(1) not in WORKLOADS:
        known = ", ".join(WORKLOADS)
        raise ValueError(f"workload {name!r} must look like SchedulingBasic/5000Nodes_10000Pods with one of: {known}")
    return match.group(1), int(match.group(2)), int(match.group(3))


@dataclass
class Result:
    name: str
    mode: str
    decisions: int
    seconds: float
    latencies_ms: list[float] = field(default_factory=list)
    completions: list[float] = field(default_factory=list)
    load_seconds: float = 0.0
    # Resident memory of a local server process after the run, when known.
    server_rss_mib: float | None = None
    # Resident memory of a local server process right after the load, when known.
    server_rss_after_load_mib: float | None = None
    # The server's own estimate of its cached objects (Stats), after the load: known for any server.
    cache_estimate_mib: float | None = None

    def as_dict(self) -> dict[str, Any]:
        per_second = _per_second(self.completions)
        return {
            "mode": self.mode,
            "decisions": self.decisions,
            "throughput": {
                "avg": round(self.decisions / self.seconds, 1) if self.seconds else 0.0,
                "p50": _percentile(per_second, 50),
                "p90": _percentile(per_second, 90),
                "p99": _percentile(per_second, 99),
            },
            "latency_ms": {
                p: round(_percentile(self.latencies_ms, q), 3) for p, q in (("p50", 50), ("p90", 90), ("p99", 99))
            },
            "load_seconds": round(self.load_seconds, 2),
            **({"server_rss_mib": round(self.server_rss_mib, 1)} if self.server_rss_mib is not None else {}),
            **(
                {"server_rss_after_load_mib": round(self.server_rss_after_load_mib, 1)}
                if self.server_rss_after_load_mib is not None
                else {}
            ),
            **(
                {"cache_estimate_mib": round(self.cache_estimate_mib, 1)} if self.cache_estimate_mib is not None else {}
            ),
        }


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))])


def _per_second(completions: Sequence[float]) -> list[float]:
    """Decisions completed in each whole second of the run (the last, partial second is left out)."""
    if not completions:
        return []
    start = completions[0]
    buckets: dict[int, int] = {}
    for t in completions:
        buckets[int(t - start)] = buckets.get(int(t - start), 0) + 1
    seconds = sorted(buckets)
    full = seconds[:-1] if len(seconds) > 1 else seconds
    return [float(buckets[s]) for s in full]


BATCH = 2000


def _nodes(count: int) -> list[cc.ClusterObject]:
    """``count`` nodes stamped from one typed template (15,000 manifest conversions would cost the
    client half a second of the load figure)."""
    template = to_cluster_object(node(0))
    stamped = []
    for i in range(count):
        obj = cc.ClusterObject()
        obj.CopyFrom(template)
        n = obj.node
        n.metadata.name = n.metadata.labels["kubernetes.io/hostname"] = f"node-{i:05d}"
        n.metadata.labels["topology.kubernetes.io/zone"] = ZONES[i % 3]
        stamped.append(obj)
    return stamped


async def load(client: AsyncClient, workload: Workload, nodes: int, init_pods: int) -> float:
    """Replaces the cluster with the workload's nodes, then streams its bound pods in batches.

    Pods are stamped from one typed template message per workload (a feeder holding typed objects
    pays no YAML/JSON conversion), so the figure is the server's ingestion."""
    started = time.perf_counter()
    await client.replace("Pod", [])
    await client.replace("Node", _nodes(nodes))
    unique_labels = workload is WORKLOADS["SchedulingPodAntiAffinity"]
    template = to_cluster_object(
        pod("template", {"color": "blue"}, workload.init_extra(0), "x", workload.init_priority)
    )

    async def batches() -> AsyncIterator[cc.StreamRequest]:
        for start in range(0, init_pods, BATCH):
            request = cc.StreamRequest(sequence=start // BATCH + 1)
            for i in range(start, min(init_pods, start + BATCH)):
                update = request.updates.add()
                update.upsert.CopyFrom(template)
                p = update.upsert.pod
                p.metadata.name = f"init-{i}"
                p.metadata.uid = f"uid-init-{i}"
                if unique_labels:
                    p.metadata.labels["color"] = f"init-{i}"
                p.spec.node_name = f"node-{i % nodes:05d}"
            yield request

    async for ack in client.stream(batches()):
        if ack.error:
            raise RuntimeError(f"loading the workload failed: {ack.error}")
    return time.perf_counter() - started


def _measured_template(workload: Workload) -> ob.Pod:
    manifest = pod("measured", {"color": "blue"}, workload.measured_extra, priority=workload.measured_priority)
    if workload.measured_priority > workload.init_priority:
        # A preemptor that fits on no node without evicting: 3.9 of the node's 4 CPUs.
        manifest["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3900m"
    return to_cluster_object(manifest).pod


def _measured(template: ob.Pod, i: int) -> ob.Pod:
    """The i-th measured pod, stamped from a typed template (no manifest conversion on the clock)."""
    stamped = ob.Pod()
    stamped.CopyFrom(template)
    stamped.metadata.name = f"measured-{i}"
    stamped.metadata.uid = f"uid-measured-{i}"
    return stamped


async def run_workload(
    client: AsyncClient,
    name: str,
    decisions: int,
    stream: bool = False,
    server_pid: int | None = None,
    batch: int = 0,
    view: str = "basic",
) -> Result:
    """Loads the workload's nodes and its pods (bound), then times ``decisions`` measured pods: one
    unary call each, one ScheduleStream, or ScheduleBatch calls of ``batch`` pods (each pod's latency
    is then its batch's round trip)."""
    kind, nodes, pods = parse_name(name)
    workload = WORKLOADS[kind]
    load_seconds = await load(client, workload, nodes, pods)
    preempting = workload.measured_priority > workload.init_priority
    template = _measured_template(workload)
    mode = f"grpc-batch{batch}" if batch else "grpc-stream" if stream else "grpc"
    if view != "basic":
        mode += f" ({view} view)"
    result = Result(name, mode, decisions, 0.0, load_seconds=load_seconds)
    result.cache_estimate_mib = (await client.stats()).memory_bytes_estimate / 2**20
    if server_pid is not None:
        result.server_rss_after_load_mib = process_rss_mib(server_pid)
    started = time.perf_counter()
    if batch:
        for first in range(0, decisions, batch):
            pods_of_call = [_measured(template, i) for i in range(first, min(decisions, first + batch))]
            t0 = time.perf_counter()
            await client.schedule_batch(pods_of_call, view=view)
            now = time.perf_counter()
            result.latencies_ms.extend([(now - t0) * 1000] * len(pods_of_call))
            result.completions.extend([now] * len(pods_of_call))
    elif stream:
        sent: list[float] = []

        async def requests() -> AsyncIterator[sc.ScheduleRequest]:
            for i in range(decisions):
                sent.append(time.perf_counter())
                yield schedule_request(_measured(template, i), assume=True, view=view)

        async for _ in client.schedule_stream(requests()):
            now = time.perf_counter()
            result.latencies_ms.append((now - sent[len(result.completions)]) * 1000)
            result.completions.append(now)
    else:
        for i in range(decisions):
            manifest = _measured(template, i)
            t0 = time.perf_counter()
            if preempting:
                await client.preempt(manifest)
            else:
                await client.schedule(manifest, assume=True, view=view)
            now = time.perf_counter()
            result.latencies_ms.append((now - t0) * 1000)
            result.completions.append(now)
            if workload.churn:
                await client.apply([pod(f"churn-{i}", {"color": "red"}, None, f"node-{(i * 7) % nodes:05d}")])
                if i:
                    await client.delete("Pod", f"churn-{i - 1}", "default")
    result.seconds = time.perf_counter() - started
    return result


def process_rss_mib(pid: int) -> float | None:
    """VmRSS of a local process (Linux), for the memory figure."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


async def run(
    names: Sequence[str],
    target: str,
    decisions: int,
    stream: bool,
    server_pid: int | None = None,
    batch: int = 0,
    view: str = "basic",
    **options: Any,
) -> list[Result]:
    """Each workload unary, then (for placements, not preemption or churn) streamed and batched if asked."""
    results = []
    async with AsyncClient(target, **options) as client:
        for name in names:
            extra = not name.startswith(("PreemptionBasic", "MixedChurn"))
            modes = [
                (False, 0),
                *([(True, 0)] if stream and extra else []),
                *([(False, batch)] if batch and extra else []),
            ]
            for streamed, size in modes:
                results.append(await run_workload(client, name, decisions, streamed, server_pid, size, view))
                if server_pid is not None:
                    results[-1].server_rss_mib = process_rss_mib(server_pid)
    return results


def table(results: Sequence[Result]) -> str:
    lines = [
        "| workload | mode | decisions | load (s) | throughput avg/s | p50/s | p90/s | p99/s "
        "| latency p50 ms | p90 ms | p99 ms | RSS after load MiB | RSS after run MiB | cache estimate MiB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        d = r.as_dict()
        t, lat = d["throughput"], d["latency_ms"]
        lines.append(
            f"| {r.name} | {r.mode} | {r.decisions} | {d['load_seconds']} | {t['avg']} | {t['p50']} | {t['p90']} | "
            f"{t['p99']} | {lat['p50']} | {lat['p90']} | {lat['p99']} | {d.get('server_rss_after_load_mib', '-')} | "
            f"{d.get('server_rss_mib', '-')} | {d.get('cache_estimate_mib', '-')} |"
        )
    return "\n".join(lines)
