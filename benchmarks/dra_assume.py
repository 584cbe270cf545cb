"""What an assume costs with many ResourceClaims in the cache, in process (no gRPC): ``--claims`` claims
(every node's 8 GPUs but one held by allocated claims, the rest pending, one per measured pod), then
``--pods`` pods each claiming one GPU decided, reserved and written into the cache one after another,
as ``Schedule`` with ``assume`` does (decide, Reserve, the pod and its claims applied). Prints the mean
and median time per assume. ``python -m benchmarks.dra_assume [--claims 10000] [--pods 300]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time
from typing import Any

from podfit.server.cache.cluster_cache import ClusterCache, Upsert
from podfit.server.config import default_profile
from podfit.server.engine import Engine
from podfit.server.model import Kind, Pod
from podfit.server.model.decode import object_from_k8s
from podfit.server.model.dra import ResourceClaim

GPU = "gpu.example.com"
GPUS_PER_NODE = 8


def _objects(claims: int, pods: int) -> list[tuple[Kind, dict[str, Any]]]:
    held = claims - pods
    nodes = held // (GPUS_PER_NODE - 1) + 1
    selector = {"cel": {"expression": f'device.driver == "{GPU}"'}}
    objects: list[tuple[Kind, dict[str, Any]]] = [
        (Kind.DEVICE_CLASS, {"metadata": {"name": GPU}, "spec": {"selectors": [selector]}})
    ]
    request = {"name": "gpu", "exactly": {"deviceClassName": GPU}}
    for n in range(nodes):
        name = f"node-{n:05d}"
        node = {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "96", "memory": "768Gi", "pods": "110"}},
        }
        devices = [{"name": f"gpu-{d}"} for d in range(GPUS_PER_NODE)]
        pool = {"name": name, "generation": 1, "resourceSliceCount": 1}
        spec = {"driver": GPU, "nodeName": name, "pool": pool, "devices": devices}
        objects += [(Kind.NODE, node), (Kind.RESOURCE_SLICE, {"metadata": {"name": name}, "spec": spec})]
    for i in range(held):
        node, device = f"node-{i // (GPUS_PER_NODE - 1):05d}", f"gpu-{i % (GPUS_PER_NODE - 1)}"
        result = {"request": "gpu", "driver": GPU, "pool": node, "device": device}
        claim = {
            "metadata": {"name": f"held-{i}", "namespace": "default", "uid": f"uid-held-{i}"},
            "spec": {"devices": {"requests": [request]}},
            "status": {"allocation": {"devices": {"results": [result]}}},
        }
        objects.append((Kind.RESOURCE_CLAIM, claim))
    for i in range(pods):
        claim = {
            "metadata": {"name": f"train-{i}", "namespace": "default", "uid": f"uid-train-{i}"},
            "spec": {"devices": {"requests": [request]}},
        }
        objects.append((Kind.RESOURCE_CLAIM, claim))
    return objects


def _pod(i: int) -> Pod:
    data = {
        "metadata": {"name": f"train-{i}", "namespace": "default", "uid": f"uid-pod-{i}"},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": f"train-{i}"}],
        },
    }
    pod = object_from_k8s(Kind.POD, data, "pod")
    assert isinstance(pod, Pod)
    return pod


def assume(engine: Engine, cache: ClusterCache, pod: Pod) -> str:
    """Schedule with assume, as the service runs it: decide on the cache's snapshot, Reserve on the
    chosen node, then the bound pod and the claims Reserve holds written into the cache."""
    snapshot = cache.snapshot()
    decision, state, _ = engine.decide(pod, snapshot=snapshot)
    node = decision.selected
    assert node, decision.message
    held = engine.framework_for(pod).run_reserve(state, pod, node, snapshot)
    bound = dataclasses.replace(pod, node_name=node, nominated_node_name="")
    claims = [Upsert(Kind.RESOURCE_CLAIM, c) for c in held if isinstance(c, ResourceClaim)]
    cache.apply([Upsert(Kind.POD, bound), *claims])
    return node


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=300)
    args = parser.parse_args()
    cache = ClusterCache()
    cache.apply(
        [Upsert(kind, object_from_k8s(kind, data, kind.value)) for kind, data in _objects(args.claims, args.pods)]
    )
    engine = Engine(cache, {"default-scheduler": default_profile()})
    pods = [_pod(i) for i in range(args.pods)]
    assume(engine, cache, pods[0])  # the first decision builds the slice index and the selector answers
    times = []
    for pod in pods[1:]:
        started = time.perf_counter()
        assume(engine, cache, pod)
        times.append(time.perf_counter() - started)
    print(
        f"load {os.getloadavg()[0]:.2f}; {args.claims} claims, {len(times)} assumes: "
        f"mean {statistics.mean(times) * 1000:.2f} ms, median {statistics.median(times) * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main()
