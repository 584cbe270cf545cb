"""A GPU scale-up estimate through the gRPC API: N pending pods, each claiming one GPU, against node groups
whose template carries the ResourceSlice of one node (8 or 4 GPUs), on a cluster whose existing GPU nodes
are full. ``python -m benchmarks.gpu_estimate [--pods 100 1000] [--existing 500] [--target HOST:PORT]``
starts a podfit-server (its defaults: the what-if process beside the listeners) unless given a target,
loads the cluster, and prints, per pod count, each group's new nodes and the call's wall time (best and
median of ``--repeat`` calls).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from podfit.client import Client
from podfit.client.conformance import LocalServer

GPU = "gpu.example.com"


def _slice(node: str, gpus: int, model: str) -> dict[str, Any]:
    devices = [
        {"name": f"gpu-{i}", "attributes": {"model": {"string": model}}, "capacity": {"memory": {"value": "80Gi"}}}
        for i in range(gpus)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "nodeName": node,
            "driver": GPU,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {"allocatable": {"cpu": "96", "memory": "768Gi", "pods": "110"}},
    }


def _claim(name: str, allocated: tuple[str, str] | None = None) -> dict[str, Any]:
    claim: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU}}]}},
    }
    if allocated is not None:
        pool, device = allocated
        result = {"request": "gpu", "driver": GPU, "pool": pool, "device": device}
        claim["status"] = {"allocation": {"devices": {"results": [result]}}}
    return claim


def _pod(name: str, claim: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "containers": [
                {"name": "train", "image": "train:1", "resources": {"requests": {"cpu": "4", "memory": "32Gi"}}}
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
        },
    }


def load(client: Client, existing: int, pods: int) -> None:
    """The DeviceClass, ``existing`` 8-GPU nodes with every GPU held by an allocated claim, and one
    pending claim per pod to estimate."""
    selector = {"cel": {"expression": f'device.driver == "{GPU}"'}}
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}},
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": GPU},
            "spec": {"selectors": [selector]},
        },
    ]
    for n in range(existing):
        name = f"gpu-{n:04d}"
        objects += [_node(name), _slice(name, 8, "h100")]
        objects += [_claim(f"held-{n}-{i}", (name, f"gpu-{i}")) for i in range(8)]
    objects += [_claim(f"train-{i}") for i in range(pods)]
    client.apply(objects)


def measure(client: Client, pods: int, repeat: int) -> dict[str, Any]:
    groups = [[_pod(f"train-{i}", f"train-{i}")] for i in range(pods)]
    node_groups = [
        ("h100x8", _node("h100x8"), 0, 1000, [_slice("h100x8", 8, "h100")]),
        ("l4x4", _node("l4x4"), 0, 1000, [_slice("l4x4", 4, "l4")]),
    ]
    times, answer = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        answer = client.estimate_scale_up(groups, node_groups, timeout=600)
        times.append(time.perf_counter() - started)
    assert answer is not None
    return {
        "pods": pods,
        "estimates": {e.node_group_id: (e.node_count, len(e.scheduled)) for e in answer.estimates},
        "best_s": min(times),
        "median_s": statistics.median(times),
    }


@contextmanager
def _target(target: str) -> Iterator[str]:
    if target:
        yield target
        return
    with LocalServer() as server:
        yield server.target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--existing", type=int, default=500, help="full 8-GPU nodes already in the cluster")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--target", default="")
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores")
    with _target(args.target) as target:
        client = Client(target)
        load(client, args.existing, max(args.pods))
        for pods in args.pods:
            row = measure(client, pods, args.repeat)
            print(
                f"{row['pods']} pods: {row['estimates']} (new nodes, pods placed); "
                f"{row['best_s']:.3f} s best, {row['median_s']:.3f} s median of {args.repeat}"
            )
        client.close()


if __name__ == "__main__":
    main()
