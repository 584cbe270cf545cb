"""``podfit bench``: decision throughput and latency on kube-scheduler's scheduler_perf workloads,
measured through the public gRPC API (like ``etcdctl check perf`` for podfit).

Templates follow scheduler_perf: nodes with 4 CPU / 32Gi / 110 pods over zones moon-1..3, pods
requesting 100m / 500Mi. A workload loads its nodes and bound "init" pods, then schedules measured
pods one after another with ``assume`` (so each sees the earlier placements, as a scheduler binding
them would) and ``VIEW_BASIC``. Figures are decision only: kube-scheduler's include binding through an
API server.

Simulation-service workloads (``SIMULATIONS``; cluster-autoscaler's questions) use the same name
scheme, ``Kind/XNodes_YPods``, and the same Result/table/JSON shape, with "decisions" meaning calls:

- ``EstimateScaleUp``: 1,000 pending pods (5 equivalence groups of 200, one pending ReplicaSet each,
  100m/500Mi up to 1 CPU/2Gi) estimated over 5 node groups (2 to 16 CPU templates);
- ``SimulateDrain1Node``: the removal of node-00000, which holds 110 pods (its allocatable pods) with
  10m/64Mi requests;
- ``SimulateDrain100Nodes``: the removal of 100 nodes spread over the cluster (~10 pods each);
- ``SimulateAddNodes``: ``Simulate`` adding 1,000 copies of a template node, then placing 10 pods
  whose nodeSelector only the copies match.

Each loads its cluster once: the nodes, ReplicaSets with ``spec.replicas`` for every pod (so
cluster-autoscaler's drain rules let the pods move), and the bound pods: node-00000 holds the first
110 pods, the others share the rest round robin (10 a node at 5,000 nodes / 50,000 pods, leaving
room for moved pods). Then one prebuilt request (typed pods: no conversion on the client's clock) is
sent ``--decisions`` times, one call after another; every answer is checked to be a real one (drain:
every node removable and every pod given a destination off the drained nodes; estimate: every pending
pod placed by every node group; simulate: every copy added and every pod placed on one), and a wrong
answer raises ``BenchError``, so a run never measures an error path. The what-if sizes are the issue's
targets for 5,000 nodes; a smaller cluster gets them scaled down in proportion (never up: at least 2
drained nodes, 10 added nodes and 5 pending pods), so tests run them on 50 nodes.

The simulation workloads are opt-in, not in ``DEFAULT_WORKLOADS`` (an estimate takes seconds): name
them, or ``simulation`` for all four at the issue's size (``SIMULATION_WORKLOADS``). Without
``--decisions`` each runs its own number of calls (``Simulation.calls``, 5 to 100), scheduling
workloads 1,000 decisions. Their latency is per call (``latency_ms.max`` included, the first call
often being the slowest) and throughput avg is calls/s; for calls of a second or more the per-second
throughput percentiles say little.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from podfit.client._requests import drain_request, estimate_request, schedule_request, simulate_request
from podfit.client.aio import AsyncClient
from podfit.client.errors import PodfitError
from podfit.client.manifests import to_cluster_object
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import objects_pb2 as ob
from podfit.v1 import scheduler_pb2 as sc
from podfit.v1 import simulation_pb2 as sim

ZONES = ("moon-1", "moon-2", "moon-3")
_NAME = re.compile(r"^(\w+)/(\d+)Nodes_(\d+)Pods$")


def node(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    return {
        "kind": "Node",
        "metadata": {
            "name": name,
            # As an API server's Node has them (kube-scheduler-loop's nodes carry the same).
            "uid": f"uid-{name}",
            "resourceVersion": "1",
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
    # Each measured pod mounts a WaitForFirstConsumer claim of its own (a StatefulSet's replicas):
    # provisioned by a CSI driver whose capacity is published per zone.
    volumes: bool = False
    # Every node publishes DEVICES_PER_NODE GPUs; each measured pod has a claim of its own for 1-4 of them.
    devices: bool = False


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
    # StatefulSet replicas, each with a WaitForFirstConsumer claim, across the 3 zones.
    "VolumeBinding": Workload(lambda i: {}, {}, volumes=True),
    # Pods claiming 1-4 GPUs of the 8 each node publishes (DynamicResources, structured parameters).
    "DynamicResources": Workload(lambda i: {}, {}, devices=True),
}
DEVICE_DRIVER = "gpu.bench.podfit.io"
DEVICES_PER_NODE = 8


def device_objects(nodes: int, claims: int) -> list[dict[str, Any]]:
    """A GPU DeviceClass, one ResourceSlice of DEVICES_PER_NODE GPUs per node, and ``claims`` pending
    claims named gpu-measured-<i> for 1-4 GPUs."""
    objects: list[dict[str, Any]] = [
        {
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DEVICE_DRIVER}"'}}]},
        }
    ]
    for n in range(nodes):
        name = f"node-{n:05d}"
        devices = [
            {"name": f"gpu-{d}", "attributes": {"model": {"string": "a100"}}, "capacity": {"memory": {"value": "40Gi"}}}
            for d in range(DEVICES_PER_NODE)
        ]
        objects.append(
            {
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-gpu"},
                "spec": {
                    "driver": DEVICE_DRIVER,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            }
        )
    for i in range(claims):
        request = {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": i % 4 + 1}}
        objects.append(
            {
                "kind": "ResourceClaim",
                "metadata": {"name": f"gpu-measured-{i}", "namespace": "default"},
                "spec": {"devices": {"requests": [request]}},
            }
        )
    return objects


STORAGE_DRIVER = "csi.bench.podfit.io"


def storage_objects(claims: int) -> list[dict[str, Any]]:
    """A WaitForFirstConsumer class provisioned by a capacity-tracking CSI driver, one capacity per zone,
    and ``claims`` pending claims named data-measured-<i>."""
    objects: list[dict[str, Any]] = [
        {"kind": "StorageClass", "metadata": {"name": "zonal"}, "provisioner": STORAGE_DRIVER,
         "volumeBindingMode": "WaitForFirstConsumer"},
        {"kind": "CSIDriver", "metadata": {"name": STORAGE_DRIVER}, "spec": {"storageCapacity": True}},
    ]  # fmt: skip
    for zone in ZONES:
        objects.append(
            {
                "kind": "CSIStorageCapacity",
                "metadata": {"name": f"capacity-{zone}", "namespace": "kube-system"},
                "storageClassName": "zonal",
                "capacity": "100Ti",
                "nodeTopology": {"matchLabels": {"topology.kubernetes.io/zone": zone}},
            }
        )
    for i in range(claims):
        objects.append(
            {
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": f"data-measured-{i}", "namespace": "default"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "10Gi"}},
                    "storageClassName": "zonal",
                },
            }
        )
    return objects


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


# Measured decisions per scheduling workload when --decisions is not given.
DEFAULT_DECISIONS = 1000


def parse_name(name: str) -> tuple[str, int, int]:
    match = _NAME.match(name)
    if not match or (match.group(1) not in WORKLOADS and match.group(1) not in SIMULATIONS):
        known = ", ".join([*WORKLOADS, *SIMULATIONS])
        raise ValueError(f"workload {name!r} must look like SchedulingBasic/5000Nodes_10000Pods with one of: {known}")
    kind, nodes, pods = match.group(1), int(match.group(2)), int(match.group(3))
    if kind in SIMULATIONS and nodes < 3:
        raise ValueError(f"workload {name!r}: a simulation workload needs at least 3 nodes")
    return kind, nodes, pods


def expand(names: Sequence[str]) -> list[str]:
    """The workloads to run: ``DEFAULT_WORKLOADS`` when none are named; ``simulation`` stands for
    ``SIMULATION_WORKLOADS``. Every name is validated (``parse_name``)."""
    expanded: list[str] = []
    for name in names or DEFAULT_WORKLOADS:
        expanded.extend(SIMULATION_WORKLOADS if name == "simulation" else [name])
    for name in expanded:
        parse_name(name)
    return expanded


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
    # Simulation workloads: what was checked in every answer ("decisions" are then calls).
    checked: str = ""

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
                **{p: round(_percentile(self.latencies_ms, q), 3) for p, q in (("p50", 50), ("p90", 90), ("p99", 99))},
                "max": round(max(self.latencies_ms, default=0.0), 3),
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
            **({"checked": self.checked} if self.checked else {}),
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
        n.metadata.uid = f"uid-node-{i:05d}"
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

    return await _stream(client, batches(), started)


async def _stream(client: AsyncClient, batches: AsyncIterator[cc.StreamRequest], started: float) -> float:
    """Feeds the batches over one Stream; the seconds since ``started`` once every one is acknowledged."""
    async for ack in client.stream(batches):
        if ack.error:
            raise RuntimeError(f"loading the workload failed: {ack.error}")
    return time.perf_counter() - started


def _measured_template(workload: Workload) -> ob.Pod:
    manifest = pod("measured", {"color": "blue"}, workload.measured_extra, priority=workload.measured_priority)
    if workload.volumes:
        manifest["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data-measured-0"}}]
    if workload.devices:
        manifest["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-measured-0"}]
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
    for volume in stamped.spec.volumes:
        if volume.HasField("persistent_volume_claim"):
            volume.persistent_volume_claim.claim_name = f"data-{stamped.metadata.name}"
    for claim in stamped.spec.resource_claims:
        claim.resource_claim_name = f"gpu-{stamped.metadata.name}"
    return stamped


async def run_workload(
    client: AsyncClient,
    name: str,
    decisions: int,
    stream: bool = False,
    server_pid: int | None = None,
    batch: int = 0,
    view: str = "basic",
    clients: int = 1,
) -> Result:
    """Loads the workload's nodes and its pods (bound), then times ``decisions`` measured pods: one
    unary call each (from ``clients`` concurrent callers), one ScheduleStream, or ScheduleBatch calls of
    ``batch`` pods (each pod's latency is then its batch's round trip)."""
    kind, nodes, pods = parse_name(name)
    workload = WORKLOADS[kind]
    load_seconds = await load(client, workload, nodes, pods)
    if workload.volumes:
        # The claims exist before the clock starts, as a StatefulSet controller creates them first.
        for kind in ("StorageClass", "CSIDriver", "CSIStorageCapacity", "PersistentVolumeClaim"):
            await client.replace(kind, [o for o in storage_objects(decisions) if o["kind"] == kind])
    if workload.devices:
        objects = device_objects(nodes, decisions)
        for kind in ("DeviceClass", "ResourceSlice", "ResourceClaim"):
            await client.replace(kind, [o for o in objects if o["kind"] == kind])
    preempting = workload.measured_priority > workload.init_priority
    template = _measured_template(workload)
    mode = f"grpc-batch{batch}" if batch else "grpc-stream" if stream else "grpc"
    if clients > 1 and not (batch or stream):
        mode += f" x{clients} clients"
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

        async def decide(via: AsyncClient, i: int) -> None:
            manifest = _measured(template, i)
            t0 = time.perf_counter()
            if preempting:
                await via.preempt(manifest)
            else:
                await via.schedule(manifest, assume=True, view=view)
            now = time.perf_counter()
            result.latencies_ms.append((now - t0) * 1000)
            result.completions.append(now)
            if workload.churn:
                await via.apply([pod(f"churn-{i}", {"color": "red"}, None, f"node-{(i * 7) % nodes:05d}")])
                if i:
                    await via.delete("Pod", f"churn-{i - 1}", "default")

        if clients == 1:
            for i in range(decisions):
                await decide(client, i)
        else:
            # Concurrent callers, each on a connection of its own (a server with decision workers spreads
            # connections over its processes), taking the pods in turn.
            config = dataclasses.replace(client.config, own_connection=True)
            connections = [AsyncClient(config=config) for _ in range(clients)]
            try:
                for via in connections:
                    await via.stats()  # connected before the clock starts
                started = time.perf_counter()

                async def caller(k: int) -> None:
                    for i in range(k, decisions, clients):
                        await decide(connections[k], i)

                await asyncio.gather(*(caller(k) for k in range(clients)))
            finally:
                for via in connections:
                    await via.close()
    result.seconds = time.perf_counter() - started
    return result


# Simulation-service workloads (see the module docstring).

# The what-if sizes, for a cluster of REFERENCE_NODES nodes (scaled down for smaller ones).
REFERENCE_NODES = 5000
PACKED_PODS = 110
PENDING_PODS = 1000
DRAINED_NODES = 100
ADDED_NODES = 1000
PLACED_ON_ADDED = 10
WEB_REPLICA_SETS = 5
NODE_GROUP_LABEL = "bench.podfit.io/node-group"
# The pending pods' equivalence groups (cpu, memory), one pending ReplicaSet "pending-<i>" each.
PENDING_SHAPES = (("100m", "500Mi"), ("250m", "512Mi"), ("250m", "1Gi"), ("500m", "1Gi"), ("1", "2Gi"))
# The node groups of EstimateScaleUp: (id, cpu, memory) of each template.
NODE_GROUPS = (
    ("ng-2cpu", "2", "8Gi"),
    ("ng-4cpu", "4", "16Gi"),
    ("ng-8cpu", "8", "32Gi"),
    ("ng-16cpu", "16", "64Gi"),
    ("ng-4cpu-highmem", "4", "64Gi"),
)
ADDED_GROUP = "added"


class BenchError(RuntimeError):
    """An answer that is not the one the workload asks for: the run would measure an error path."""


@dataclass(frozen=True)
class SimCluster:
    """The cluster of a simulation workload: node-00000 holds the first ``packed`` pods (10m/64Mi,
    ReplicaSet "packed"), the other nodes share the rest round robin (100m/500Mi, ReplicaSets web-0..4)."""

    nodes: int
    pods: int

    @property
    def scale(self) -> float:
        return min(1.0, self.nodes / REFERENCE_NODES)

    def sized(self, full: int, least: int) -> int:
        return max(least, round(full * self.scale))

    @property
    def packed(self) -> int:
        return min(PACKED_PODS, self.pods)

    def node_of(self, i: int) -> int:
        return 0 if i < self.packed else 1 + (i - self.packed) % (self.nodes - 1)

    def owner_of(self, i: int) -> str:
        return "packed" if i < self.packed else f"web-{(i - self.packed) % WEB_REPLICA_SETS}"

    def pods_on(self, n: int) -> int:
        if n == 0:
            return self.packed
        rest, others = self.pods - self.packed, self.nodes - 1
        return rest // others + (1 if n - 1 < rest % others else 0)

    def replica_sets(self) -> list[dict[str, Any]]:
        """Every bound and pending pod's ReplicaSet, with spec.replicas (the drain rules read it)."""
        rest = self.pods - self.packed
        counts = {"packed": self.packed}
        counts.update(
            {f"web-{k}": rest // WEB_REPLICA_SETS + (k < rest % WEB_REPLICA_SETS) for k in range(WEB_REPLICA_SETS)}
        )
        pending = self.sized(PENDING_PODS, len(PENDING_SHAPES))
        counts.update({f"pending-{g}": _share_of(pending, g, len(PENDING_SHAPES)) for g in range(len(PENDING_SHAPES))})
        counts[ADDED_GROUP] = PLACED_ON_ADDED
        return [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": name, "namespace": "default", "uid": f"uid-rs-{name}"},
                "spec": {"replicas": count, "selector": {"matchLabels": {"app": name}}},
            }
            for name, count in counts.items()
        ]


def _share_of(total: int, index: int, parts: int) -> int:
    return total // parts + (1 if index < total % parts else 0)


def owned_pod(
    name: str, owner: str, cpu: str, memory: str, node_name: str = "", extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A pod of ReplicaSet ``owner`` (label app=<owner>, a controller reference) with these requests."""
    manifest = pod(name, {"app": owner}, extra, node_name)
    manifest["spec"]["containers"][0]["resources"]["requests"] = {"cpu": cpu, "memory": memory}
    manifest["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": f"uid-rs-{owner}", "controller": True}
    ]
    return manifest


def group_node(name: str, cpu: str, memory: str) -> dict[str, Any]:
    """A node group's template node."""
    manifest = node(0)
    manifest["metadata"] = {
        "name": name,
        "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": ZONES[0], NODE_GROUP_LABEL: name},
    }
    manifest["status"]["allocatable"] = {"cpu": cpu, "memory": memory, "pods": "110"}
    return manifest


def _stamped(template: ob.Pod, name: str) -> ob.Pod:
    stamped = ob.Pod()
    stamped.CopyFrom(template)
    stamped.metadata.name = name
    stamped.metadata.uid = f"uid-{name}"
    return stamped


async def load_simulation_cluster(client: AsyncClient, cluster: SimCluster) -> float:
    """Replaces the pods, nodes and ReplicaSets with the simulation cluster's; its bound pods are streamed
    in batches, stamped from two typed templates."""
    started = time.perf_counter()
    await client.replace("Pod", [])
    await client.replace("Node", _nodes(cluster.nodes))
    await client.replace("ReplicaSet", cluster.replica_sets())
    packed = to_cluster_object(owned_pod("template", "packed", "10m", "64Mi", node_name="x"))
    web = to_cluster_object(owned_pod("template", "web-0", "100m", "500Mi", node_name="x"))

    async def batches() -> AsyncIterator[cc.StreamRequest]:
        for start in range(0, cluster.pods, BATCH):
            request = cc.StreamRequest(sequence=start // BATCH + 1)
            for i in range(start, min(cluster.pods, start + BATCH)):
                update = request.updates.add()
                update.upsert.CopyFrom(packed if i < cluster.packed else web)
                p = update.upsert.pod
                p.metadata.name = f"init-{i}"
                p.metadata.uid = f"uid-init-{i}"
                owner = cluster.owner_of(i)
                p.metadata.labels["app"] = owner
                p.metadata.owner_references[0].name = owner
                p.metadata.owner_references[0].uid = f"uid-rs-{owner}"
                p.spec.node_name = f"node-{cluster.node_of(i):05d}"
            yield request

    return await _stream(client, batches(), started)


@dataclass(frozen=True)
class Prepared:
    """One Simulation call, built once and sent repeatedly: the RPC, its request, the answer's check
    (raises BenchError), and what the check asserts."""

    rpc: str
    request: Any
    check: Callable[[Any], None]
    checked: str


def _estimate(cluster: SimCluster) -> Prepared:
    total = cluster.sized(PENDING_PODS, len(PENDING_SHAPES))
    groups = []
    for g, (cpu, memory) in enumerate(PENDING_SHAPES):
        template = to_cluster_object(owned_pod("template", f"pending-{g}", cpu, memory)).pod
        count = _share_of(total, g, len(PENDING_SHAPES))
        groups.append([_stamped(template, f"pending-{g}-{j}") for j in range(count)])
    node_groups = [(gid, group_node(gid, cpu, memory), 0, total) for gid, cpu, memory in NODE_GROUPS]

    def check(answer: sim.EstimateScaleUpResponse) -> None:
        if [e.node_group_id for e in answer.estimates] != [gid for gid, _, _ in NODE_GROUPS]:
            raise BenchError(f"estimates for {[e.node_group_id for e in answer.estimates]}, not every node group")
        for e in answer.estimates:
            placed = len(e.scheduled)
            if e.unscheduled or placed != total or sum(e.scheduled_per_group) != total or e.node_count < 1:
                raise BenchError(
                    f"node group {e.node_group_id}: {placed} of {total} pods placed on {e.node_count} new nodes, "
                    f"{len(e.unscheduled)} unscheduled (first: {list(e.unscheduled[:3])})"
                )

    checked = f"each of {len(NODE_GROUPS)} node groups places all {total} pending pods on new nodes"
    return Prepared("EstimateScaleUp", estimate_request(groups, node_groups), check, checked)


def _drain(cluster: SimCluster, drained: list[int]) -> Prepared:
    names = [f"node-{n:05d}" for n in drained]
    expected = {f"node-{n:05d}": cluster.pods_on(n) for n in drained}
    if not all(expected.values()):
        raise ValueError(f"the cluster {cluster} leaves a drained node without pods")
    leaving = set(names)
    destinations = {f"node-{n:05d}" for n in range(cluster.nodes)} - leaving

    def check(answer: sim.SimulateDrainResponse) -> None:
        if [n.node_name for n in answer.nodes] != names:
            raise BenchError(f"answers for {len(answer.nodes)} nodes, not the {len(names)} drained")
        for n in answer.nodes:
            if not n.removable:
                why = n.blocking_pod.reason if n.HasField("blocking_pod") else f"unplaced {n.unplaced_pod}"
                raise BenchError(f"{n.node_name} is not removable: {n.unremovable_reason} ({why})")
            stray = [m.name for m in n.pods_to_move if m.node_name not in destinations]
            if len(n.pods_to_move) != expected[n.node_name] or stray:
                raise BenchError(
                    f"{n.node_name}: {len(n.pods_to_move)} pods to move, expected {expected[n.node_name]}; "
                    f"without a destination off the drained nodes: {stray[:3]}"
                )

    moved = sum(expected.values())
    checked = f"{len(names)} node(s) removable, each of their {moved} pods given a destination off the drained nodes"
    return Prepared("SimulateDrain", drain_request(names), check, checked)


def _drain_one(cluster: SimCluster) -> Prepared:
    return _drain(cluster, [0])


def _drain_many(cluster: SimCluster) -> Prepared:
    count = min(cluster.sized(DRAINED_NODES, 2), (cluster.nodes - 1) // 2)
    step = (cluster.nodes - 1) // count
    return _drain(cluster, [1 + k * step for k in range(count)])


def _drain_six(cluster: SimCluster) -> Prepared:
    """A scale-down plan of six candidates, spread over the cluster (issue 29's yardstick: within 2x of
    six single-node drains)."""
    count = min(6, (cluster.nodes - 1) // 2)
    step = (cluster.nodes - 1) // count
    return _drain(cluster, [1 + k * step for k in range(count)])


def _add_nodes(cluster: SimCluster) -> Prepared:
    count = cluster.sized(ADDED_NODES, 10)
    template = to_cluster_object(group_node(ADDED_GROUP, "4", "32Gi"))
    scenario = sim.Scenario(add_nodes=[sim.HypotheticalNodes(template=template, count=count)])
    selector = {"nodeSelector": {NODE_GROUP_LABEL: ADDED_GROUP}}
    pod_template = to_cluster_object(owned_pod("template", ADDED_GROUP, "100m", "500Mi", extra=selector)).pod
    pods = [_stamped(pod_template, f"{ADDED_GROUP}-{j}") for j in range(PLACED_ON_ADDED)]
    added = {f"{ADDED_GROUP}-sim-{i}" for i in range(count)}

    def check(answer: sim.SimulateResponse) -> None:
        hypothetical = {h.node_name for h in answer.hypothetical_nodes}
        if hypothetical != added:
            raise BenchError(f"{len(hypothetical)} hypothetical nodes in the answer, {count} added")
        unplaced = [
            f"{p.name}: {p.node_name or p.message or 'no node'}" for p in answer.placements if p.node_name not in added
        ]
        on_added = sum(len(h.pods) for h in answer.hypothetical_nodes)
        if len(answer.placements) != len(pods) or unplaced or on_added != len(pods):
            raise BenchError(
                f"{len(answer.placements)} placements, {on_added} on added nodes; elsewhere: {unplaced[:3]}"
            )

    checked = f"{count} nodes added and all {len(pods)} pods placed on them"
    return Prepared("Simulate", simulate_request(pods, scenario), check, checked)


@dataclass(frozen=True)
class Simulation:
    """A Simulation-service workload: how its call is built for a cluster, and the calls run by default."""

    prepare: Callable[[SimCluster], Prepared]
    calls: int


SIMULATIONS: dict[str, Simulation] = {
    # Calls by default: each run under ~70 s at the speeds first measured (7.5 s, 0.3 s, 14 s, 0.17 s a call).
    "EstimateScaleUp": Simulation(_estimate, calls=5),
    "SimulateDrain1Node": Simulation(_drain_one, calls=100),
    "SimulateDrain100Nodes": Simulation(_drain_many, calls=5),
    "SimulateDrain6Nodes": Simulation(_drain_six, calls=20),
    "SimulateAddNodes": Simulation(_add_nodes, calls=100),
}
SIMULATION_WORKLOADS = tuple(f"{kind}/5000Nodes_50000Pods" for kind in SIMULATIONS)


async def run_simulation(client: AsyncClient, name: str, calls: int, server_pid: int | None = None) -> Result:
    """Loads the simulation cluster, then sends the workload's prebuilt request ``calls`` times, one after
    another, checking every answer (off the clock)."""
    kind, nodes, pods = parse_name(name)
    cluster = SimCluster(nodes, pods)
    load_seconds = await load_simulation_cluster(client, cluster)
    prepared = SIMULATIONS[kind].prepare(cluster)
    method: Callable[..., Awaitable[Any]] = getattr(client.simulation, prepared.rpc)
    metadata = client.config.metadata()
    result = Result(name, "grpc", calls, 0.0, load_seconds=load_seconds, checked=prepared.checked)
    result.cache_estimate_mib = (await client.stats()).memory_bytes_estimate / 2**20
    if server_pid is not None:
        result.server_rss_after_load_mib = process_rss_mib(server_pid)
    started = time.perf_counter()
    for i in range(calls):
        t0 = time.perf_counter()
        try:
            answer = await method(prepared.request, metadata=metadata)
        except grpc.RpcError as exc:
            raise PodfitError.from_rpc_error(exc) from None
        now = time.perf_counter()
        try:
            prepared.check(answer)
        except BenchError as exc:
            raise BenchError(f"{name}, call {i + 1}: {exc}") from None
        result.latencies_ms.append((now - t0) * 1000)
        result.completions.append(now)
    result.seconds = time.perf_counter() - started
    return result


def process_rss_mib(pid: int) -> float | None:
    """VmRSS of a local server (Linux), for the memory figure: its process and its decision workers
    (its children), each of which holds a copy of the cache."""
    try:
        with open(f"/proc/{pid}/status") as status:
            rss = next((int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS:")), None)
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            workers = [int(child) for child in children.read().split()]
    except OSError:
        return None
    if rss is None:
        return None
    return rss + sum(process_rss_mib(child) or 0.0 for child in workers)


async def run(
    names: Sequence[str],
    target: str,
    decisions: int | None,
    stream: bool,
    server_pid: int | None = None,
    batch: int = 0,
    view: str = "basic",
    progress: Callable[[], object] | None = None,
    clients: int = 1,
    **options: Any,
) -> list[Result]:
    """Each workload unary (from ``clients`` concurrent callers), then (for placements, not preemption or
    churn) streamed and batched if asked. A simulation workload runs ``decisions`` calls (None: its own
    default), never streamed or batched. ``progress`` is called once per workload done."""
    results = []
    async with AsyncClient(target, **options) as client:
        for name in names:
            kind = parse_name(name)[0]
            if kind in SIMULATIONS:
                calls = decisions if decisions is not None else SIMULATIONS[kind].calls
                results.append(await run_simulation(client, name, calls, server_pid))
                if server_pid is not None:
                    results[-1].server_rss_mib = process_rss_mib(server_pid)
                if progress is not None:
                    progress()
                continue
            count = DEFAULT_DECISIONS if decisions is None else decisions
            extra = not name.startswith(("PreemptionBasic", "MixedChurn"))
            modes = [
                (False, 0),
                *([(True, 0)] if stream and extra else []),
                *([(False, batch)] if batch and extra else []),
            ]
            for streamed, size in modes:
                callers = clients if not (streamed or size) else 1
                results.append(await run_workload(client, name, count, streamed, server_pid, size, view, callers))
                if server_pid is not None:
                    results[-1].server_rss_mib = process_rss_mib(server_pid)
            if progress is not None:
                progress()
    return results


async def server_processes(target: str, **options: Any) -> tuple[int, bool]:
    """How many processes answer at ``target`` (the owner and its decision workers), and whether a what-if
    process answers its what-if questions."""
    async with AsyncClient(target, **options) as client:
        stats = await client.stats()
        return max(1, stats.workers), stats.what_if_process


def machine() -> str:
    """The machine a figure was measured on, as the README states it: CPU model, cores, Python, the load
    average at the start (these machines are shared and noisy) and the time."""
    import datetime
    import os
    import platform

    model = ""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "")
    except OSError:
        pass
    return (
        f"{model or platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, load {os.getloadavg()[0]:.2f}, "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"
    )


def table(results: Sequence[Result]) -> str:
    lines = [
        "| workload | mode | decisions | load (s) | throughput avg/s | p50/s | p90/s | p99/s "
        "| latency p50 ms | p90 ms | p99 ms | max ms | RSS after load MiB | RSS after run MiB | cache estimate MiB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        d = r.as_dict()
        t, lat = d["throughput"], d["latency_ms"]
        lines.append(
            f"| {r.name} | {r.mode} | {r.decisions} | {d['load_seconds']} | {t['avg']} | {t['p50']} | {t['p90']} | "
            f"{t['p99']} | {lat['p50']} | {lat['p90']} | {lat['p99']} | {lat['max']} | "
            f"{d.get('server_rss_after_load_mib', '-')} | "
            f"{d.get('server_rss_mib', '-')} | {d.get('cache_estimate_mib', '-')} |"
        )
    return "\n".join(lines)
