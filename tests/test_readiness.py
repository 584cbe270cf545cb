"""Pod scheduling readiness: gates only removed; a gated pod's directives only tightened."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from podfit.client import PodfitError
from podfit.server.cache.cluster_cache import ClusterCache, UpdateRejected, Upsert
from podfit.server.model import Kind, ValidationError
from podfit.server.model.readiness import validate_pod_update

from tests.builders import PodBuilder, make_pod
from tests.conftest import LiveServer

TERMS = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"


def required(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": list(exprs)} for exprs in terms]
        }
    }


def zone_in(*zones: str) -> dict[str, Any]:
    return {"key": "zone", "operator": "In", "values": list(zones)}


DISK_SSD = {"key": "disk", "operator": "In", "values": ["ssd"]}


def gated() -> PodBuilder:
    return make_pod("p").gates("a", "b")


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        pytest.param(gated(), make_pod("p").gates("a"), None, id="removing a gate is allowed"),
        pytest.param(gated(), make_pod("p"), None, id="removing every gate is allowed"),
        pytest.param(gated(), make_pod("p").gates("a", "b", "c"), "spec.schedulingGates[2].name",
                     id="adding a gate to a gated pod is refused"),
        pytest.param(make_pod("p"), make_pod("p").gates("a"), "spec.schedulingGates[0].name",
                     id="gating an ungated pod after creation is refused"),
        pytest.param(gated().node_selector(disk="ssd"), gated().node_selector(disk="ssd", zone="a"), None,
                     id="adding a nodeSelector entry to a gated pod is allowed"),
        pytest.param(gated().node_selector(disk="ssd"), gated().node_selector(disk="hdd"), "spec.nodeSelector",
                     id="changing a nodeSelector entry is refused"),
        pytest.param(gated().node_selector(disk="ssd"), gated(), "spec.nodeSelector",
                     id="removing a nodeSelector entry is refused"),
        pytest.param(gated(), gated().affinity("nodeAffinity", required([zone_in("a")])), None,
                     id="setting required node affinity where there was none is allowed"),
        pytest.param(gated().affinity("nodeAffinity", required([zone_in("a")])),
                     gated().affinity("nodeAffinity", required([zone_in("a"), DISK_SSD])), None,
                     id="adding a requirement to an existing term is allowed"),
        pytest.param(gated().affinity("nodeAffinity", required([zone_in("a")])),
                     gated().affinity("nodeAffinity", required([zone_in("a", "b")])), f"{TERMS}[0]",
                     id="widening an existing requirement is refused"),
        pytest.param(gated().affinity("nodeAffinity", required([zone_in("a")])),
                     gated().affinity("nodeAffinity", required([zone_in("a")], [DISK_SSD])), TERMS,
                     id="adding an ORed term is refused"),
        pytest.param(gated().affinity("nodeAffinity", required([zone_in("a")])), gated(), TERMS,
                     id="dropping required node affinity is refused"),
        pytest.param(
            gated().affinity("nodeAffinity", {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [zone_in("a")]}}]}),
            gated(), None, id="preferred node affinity may change freely"),
        pytest.param(make_pod("p").node_selector(disk="ssd"), make_pod("p").node_selector(disk="hdd"), None,
                     id="an ungated pod's directives are not readiness-checked"),
    ],
)  # fmt: skip
def test_update_rules(old: PodBuilder, new: PodBuilder, field: str | None) -> None:
    if field is None:
        validate_pod_update(old.obj(), new.obj())
        return
    with pytest.raises(ValidationError) as info:
        validate_pod_update(old.obj(), new.obj())
    assert info.value.field == field


def test_a_refused_update_leaves_the_whole_batch_unapplied() -> None:
    cache = ClusterCache()
    cache.apply([Upsert(Kind.POD, gated().obj())])
    with pytest.raises(UpdateRejected) as info:
        cache.apply([Upsert(Kind.POD, make_pod("other").obj()), Upsert(Kind.POD, make_pod("p").gates("z").obj())])
    assert info.value.index == 1
    assert cache.count(Kind.POD) == 1 and cache.generation == 1


def test_a_recreated_pod_with_a_new_uid_may_carry_new_gates() -> None:
    cache = ClusterCache()
    cache.apply([Upsert(Kind.POD, make_pod("p").obj())])
    cache.apply([Upsert(Kind.POD, make_pod("p").uid("another").gates("x").obj())])
    assert cache.pending_pods[0].scheduling_gates == ("x",)


async def test_the_api_names_the_rule(live: LiveServer) -> None:
    await live.client.apply([gated().node_selector(disk="ssd").json()])
    with pytest.raises(PodfitError) as info:
        await live.client.apply([gated().node_selector(disk="hdd").json()])
    assert info.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.field_violations[0][0] == "updates[0].upsert.pod.spec.nodeSelector"
    assert "only additions" in info.value.message
    stats = await live.client.stats()
    assert (stats.gated_pods, stats.pending_pods) == (1, 1)
    await live.client.apply([make_pod("p").node_selector(disk="ssd").json()])
    assert (await live.client.stats()).gated_pods == 0
