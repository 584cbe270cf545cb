"""The cache's DRA view is kept as claims come, change and go (not rebuilt from every claim on each
change): after every batch of a random churn it equals the view built from scratch, and a view a
snapshot already holds never changes afterwards."""

from __future__ import annotations

import random
from typing import Any

import pytest
from podfit.server.cache.cluster_cache import ClusterCache, Delete, Upsert
from podfit.server.dra.allocator import by_pool
from podfit.server.model import Kind
from podfit.server.model.decode import object_from_k8s
from podfit.server.model.dra import ResourceClaim, held_devices

GPU = "gpu.example.com"


def _claim(rng: random.Random, name: str) -> ResourceClaim:
    data: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": GPU}}]}},
    }
    if rng.random() < 0.7:
        # Few devices, so that claims often share one (a device two claims hold stays in use until both go).
        results = [
            {
                "request": "r",
                "driver": GPU,
                "pool": f"pool-{rng.randint(0, 2)}",
                "device": f"gpu-{rng.randint(0, 3)}",
                "adminAccess": rng.random() < 0.2,
            }
            for _ in range(rng.randint(1, 2))
        ]
        data["status"] = {"allocation": {"devices": {"results": results}}}
    claim = object_from_k8s(Kind.RESOURCE_CLAIM, data, "claim")
    assert isinstance(claim, ResourceClaim)
    return claim


def _from_scratch(cache: ClusterCache) -> tuple[dict[str, ResourceClaim], set[tuple[str, str, str]]]:
    claims = {e.obj.key: e.obj for e in cache.entries(Kind.RESOURCE_CLAIM) if isinstance(e.obj, ResourceClaim)}
    held = {device for claim in claims.values() for device in held_devices(claim)}
    return claims, held


def _seen(cache: ClusterCache) -> tuple[dict[str, ResourceClaim], set[tuple[str, str, str]], dict[Any, set[str]]]:
    view = cache.snapshot().dra
    in_use = {pool: set(names) for pool, names in view.memo["in_use"].items()}
    return dict(view.claims), set(view.memo["allocated"]), in_use


@pytest.mark.parametrize("seed", range(20), ids=lambda seed: f"churn {seed}")
def test_the_dra_view_follows_claims_exactly_and_held_views_never_change(seed: int) -> None:
    rng = random.Random(seed)
    cache = ClusterCache()
    device_class = {"metadata": {"name": GPU}, "spec": {"selectors": [{"cel": {"expression": "true"}}]}}
    cache.apply([Upsert(Kind.DEVICE_CLASS, object_from_k8s(Kind.DEVICE_CLASS, device_class, "class"))])
    held_views: list[tuple[Any, tuple[Any, ...]]] = []
    for _ in range(30):
        changes: list[Any] = []
        for _ in range(rng.randint(1, 4)):
            name = f"c{rng.randint(0, 11)}"
            if rng.random() < 0.3:
                changes.append(Delete(Kind.RESOURCE_CLAIM, "default", name))
            else:
                changes.append(Upsert(Kind.RESOURCE_CLAIM, _claim(rng, name)))
        cache.apply(changes)
        claims, held = _from_scratch(cache)
        seen = _seen(cache)
        assert seen == (claims, held, {pool: set(names) for pool, names in by_pool(frozenset(held)).items()})
        held_views.append((cache.snapshot().dra, seen))
    for view, seen in held_views:
        in_use = {pool: set(names) for pool, names in view.memo["in_use"].items()}
        assert (dict(view.claims), set(view.memo["allocated"]), in_use) == seen
