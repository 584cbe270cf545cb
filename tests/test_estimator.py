"""cluster-autoscaler's binpacking estimator, replayed on every public case it answered itself
(``tests/conformance/estimate``, vendored from ``../shared/conformance/estimate``): node count, placed
and unplaced pods, group order and counts."""

from __future__ import annotations

from typing import Any

import pytest
from podfit.client.conformance import load_cases
from podfit.server.cache.cluster_cache import ClusterCache, Upsert
from podfit.server.config import default_profile
from podfit.server.engine import Engine
from podfit.server.model import Kind
from podfit.server.model.objects import node_from_k8s, pod_from_k8s
from podfit.server.simulation.estimator import estimate

from tests.corpora import corpus

CASES = corpus("estimate/cases-public.jsonl")


def _cases() -> list[dict[str, Any]]:
    return load_cases(CASES)


@pytest.mark.parametrize("case", _cases(), ids=lambda case: case["id"])
def test_estimate_matches_cluster_autoscaler(case: dict[str, Any]) -> None:
    cache = ClusterCache()
    cache.apply([Upsert(Kind.NODE, node_from_k8s(n)) for n in case["nodes"]])
    cache.apply([Upsert(Kind.POD, pod_from_k8s(p)) for p in case["pods"]])
    pending = {p["metadata"]["name"]: pod_from_k8s(p) for p in case["pending"]}
    groups = [[pending[name] for name in group] for group in case["groups"]]
    engine = Engine(cache, {"default-scheduler": default_profile()})
    result = estimate(
        engine, cache.snapshot(), node_from_k8s(case["template"]), groups, case["node_group"]["max_new_nodes"]
    )
    expect = case["expect"]
    got = {
        "node_count": result.node_count,
        "scheduled": sorted(p.name for p in result.scheduled),
        "unscheduled": sorted(p.name for p in result.unscheduled),
        "group_order": result.group_order,
        "scheduled_per_group": result.scheduled_per_group,
    }
    want = {
        "node_count": expect["node_count"],
        "scheduled": sorted(expect["scheduled"]),
        "unscheduled": sorted(expect["unscheduled"]),
        "group_order": expect["group_order"],
        "scheduled_per_group": expect["scheduled_per_group"],
    }
    assert got == want
