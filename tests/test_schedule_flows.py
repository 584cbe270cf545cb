"""SchedulingService's per-RPC flows: schedule (decide, then assume or preempt on the same decision) and
schedule_batch (in order, optionally all or nothing), with pods given by value or by cache reference."""

from __future__ import annotations

from typing import Any

import pytest
from podfit.client.manifests import to_cluster_object
from podfit.server.cache.cluster_cache import Upsert
from podfit.server.config import default_profile
from podfit.server.engine import UnknownProfileError
from podfit.server.model import Kind, ValidationError
from podfit.server.model.decode import object_from_k8s
from podfit.server.service import CachedPod, GivenPod, NotFoundError, PodRejected, SchedulingService
from podfit.server.transport.stored_forms import PROTOBUF_FORMS
from podfit.v1 import cluster_cache_pb2 as cc

from tests.builders import make_node, make_pod


def given(builder: Any) -> GivenPod:
    manifest = builder.json()
    return GivenPod(builder.obj(), to_cluster_object(manifest).SerializeToString(deterministic=True))


def cluster(*, filler: bool = False) -> SchedulingService:
    """n1 has 500m cpu free, n2 has 4 cpu free (as in the end-to-end tests), or 1 with ``filler``."""
    svc = SchedulingService({"default-scheduler": default_profile()}, forms=PROTOBUF_FORMS)
    objects = [
        make_node("n1").capacity(cpu="2", memory="4Gi", pods="10"),
        make_node("n2").capacity(cpu="4", memory="8Gi", pods="10"),
        make_pod("busy").node("n1").req(cpu="1500m").priority(1).start_time("2024-01-01T00:00:00Z"),
    ]
    if filler:
        objects.append(make_pod("filler").node("n2").req(cpu="3").priority(50).start_time("2024-01-01T00:00:00Z"))
    svc.apply([Upsert(Kind.NODE if i < 2 else Kind.POD, b.obj(), to_cluster_object(b.json()).SerializeToString())
               for i, b in enumerate(objects)])  # fmt: skip
    return svc


def counting(svc: SchedulingService, method: str) -> list[int]:
    calls: list[int] = []
    original = getattr(svc.engine, method)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    setattr(svc.engine, method, counted)
    return calls


def contents(svc: SchedulingService) -> Any:
    """Everything a client can observe of the cache."""
    return (
        svc.generation,
        svc.stats(),
        {kind: sorted((e.obj.name, e.source) for e in svc.list(kind)) for kind in Kind},
    )


# -- schedule --------------------------------------------------------------------------------------


async def test_nothing_fits_preempts_on_the_decision_already_made() -> None:
    svc = cluster(filler=True)
    decides, preempts = counting(svc, "decide"), counting(svc, "preempt")
    result = await svc.schedule(make_pod("urgent").req(cpu="5").priority(100).obj())
    assert result.selected == "" and result.preemption is not None
    assert result.preemption.nominated_node == "" and "preemption" in result.preemption.message
    assert (len(decides), len(preempts)) == (1, 0)
    urgent = await svc.schedule(make_pod("urgent").req(cpu="3").priority(100).obj())
    assert urgent.preemption is not None and urgent.preemption.nominated_node == "n2"
    assert [v.name for v in urgent.preemption.victims] == ["filler"]
    assert (len(decides), len(preempts)) == (2, 0)


async def test_the_preemption_answer_equals_the_preempt_flow() -> None:
    svc = cluster(filler=True)
    pod = make_pod("urgent").req(cpu="3").priority(100).obj()
    scheduled = await svc.schedule(pod)
    preempted, generation = svc.preempt(pod)
    assert scheduled.preemption == preempted and generation == scheduled.generation


async def test_a_memoised_no_fit_still_gets_a_preemption_answer() -> None:
    svc = cluster(filler=True)
    first = await svc.schedule(make_pod("u-1").req(cpu="3").priority(100).obj())
    second = await svc.schedule(make_pod("u-2").req(cpu="3").priority(100).obj())
    assert first.preemption is not None and second.preemption == first.preemption
    no_preempt = await svc.schedule(make_pod("u-3").req(cpu="3").priority(100).obj(), preempt=False)
    assert no_preempt.preemption is None and no_preempt.selected == "" and no_preempt.best_count == 0


async def test_replicas_share_a_decision_until_one_is_assumed() -> None:
    svc = cluster()
    decides = counting(svc, "decide")
    for name in ("w-1", "w-2"):
        result = await svc.schedule(make_pod(name).req(cpu="1").obj())
        assert (result.selected, result.assumed_generation) == ("n2", 0)
    assert len(decides) == 1
    assumed = await svc.schedule(given(make_pod("w-3").req(cpu="1")), assume=True)
    assert (assumed.selected, assumed.assumed_generation) == ("n2", 2)
    again = await svc.schedule(make_pod("w-4").req(cpu="1").obj())
    assert len(decides) == 2 and again.generation == 2


@pytest.mark.parametrize(
    ("pod", "stored_node"),
    [
        pytest.param(lambda: given(make_pod("web").req(cpu="1")), "n2", id="given with its source"),
        pytest.param(lambda: CachedPod("", "pending"), "n2", id="cached, by reference"),
        pytest.param(lambda: CachedPod("default", "pending"), "n2", id="cached, explicit namespace"),
    ],
)
async def test_assume_stores_the_pod_bound_to_its_node(pod: Any, stored_node: str) -> None:
    svc = cluster()
    pending = make_pod("pending").req(cpu="1").nominated("n1")
    svc.apply([Upsert(Kind.POD, pending.obj(), to_cluster_object(pending.json()).SerializeToString())])
    reference = pod()
    result = await svc.schedule(reference, assume=True)
    entry = svc.get(Kind.POD, "default", result.pod.name)
    assert entry is not None and entry.obj.node_name == stored_node  # type: ignore[union-attr]
    stored = cc.ClusterObject()
    stored.ParseFromString(entry.source)
    assert (stored.pod.spec.node_name, stored.pod.status.nominated_node_name) == (stored_node, "")
    assert stored.pod.metadata.name == result.pod.name


async def test_an_unknown_cached_pod_is_not_found() -> None:
    with pytest.raises(NotFoundError, match="default/ghost"):
        await cluster().schedule(CachedPod("", "ghost"))


# -- schedule_batch --------------------------------------------------------------------------------


def replicas(count: int, cpu: str = "1", prefix: str = "r") -> list[GivenPod]:
    return [given(make_pod(f"{prefix}{i}").label("app", "web").req(cpu=cpu)) for i in range(count)]


@pytest.mark.parametrize(
    ("pods", "all_or_nothing", "selected", "assumed"),
    [
        pytest.param(replicas(4), False, ["n2"] * 4, [2, 3, 4, 5], id="four fit one after another"),
        pytest.param(replicas(4), True, ["n2"] * 4, [2, 3, 4, 5], id="four fit, all or nothing"),
        pytest.param(replicas(5), False, ["n2"] * 4 + [""], [2, 3, 4, 5, 0], id="the fifth does not fit"),
        pytest.param(
            [*replicas(2, "3"), *replicas(1, "500m", "s")],
            False,
            ["n2", "", "n2"],
            [2, 0, 3],
            id="a pod that does not fit does not stop the next",
        ),
    ],
)
def test_a_batch_places_pods_in_order_each_seeing_the_earlier_ones(
    pods: list[GivenPod], all_or_nothing: bool, selected: list[str], assumed: list[int]
) -> None:
    svc = cluster()
    placement = svc.schedule_batch(pods, all_or_nothing=all_or_nothing)
    assert [r.selected for r in placement.results] == selected
    assert [r.assumed_generation for r in placement.results] == assumed
    assert placement.generation == 1 and placement.assumed_generation == svc.generation == max(assumed)
    assert placement.all_placed == all(assumed)
    for pod, node in zip(pods, selected, strict=True):
        entry = svc.get(Kind.POD, "default", pod.pod.name)
        assert (entry.obj.node_name if entry else None) == (node or None)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "pods",
    [
        pytest.param(replicas(5), id="the last of five replicas does not fit"),
        pytest.param(
            [*replicas(1, "3"), *replicas(1, "5", "huge"), *replicas(1, "1", "s")], id="the middle pod fits nowhere"
        ),
        pytest.param([given(make_pod("g").gates("example.com/wait")), *replicas(1)], id="a gated pod"),
    ],
)
def test_all_or_nothing_leaves_the_cache_exactly_as_it_was(pods: list[GivenPod]) -> None:
    svc = cluster()
    before = contents(svc)
    placement = svc.schedule_batch(pods, all_or_nothing=True)
    assert contents(svc) == before
    assert not placement.all_placed and placement.assumed_generation == 0
    assert all(r.assumed_generation == 0 for r in placement.results)
    assert {r.generation for r in placement.results} == {before[0]}
    # Every pod is still answered, as decided with the earlier ones placed.
    assert len(placement.results) == len(pods)
    # And the cache decides as before: the first pod goes where it would have gone alone.
    alone = svc.schedule_batch(pods[:1])
    assert alone.results[0].selected == placement.results[0].selected


@pytest.mark.parametrize(
    ("pods", "scheduler_name", "index", "error"),
    [
        pytest.param([*replicas(1), CachedPod("", "ghost")], "", 1, NotFoundError, id="an unknown cached pod"),
        pytest.param([*replicas(2), replicas(1)[0]], "", 2, ValidationError, id="the same pod twice"),
        pytest.param(
            [*replicas(1), given(make_pod("x").scheduler("nobody"))], "", 1, UnknownProfileError, id="unknown profile"
        ),
    ],
)
def test_a_bad_pod_rejects_the_batch_before_anything_is_assumed(
    pods: list[Any], scheduler_name: str, index: int, error: type[Exception]
) -> None:
    svc = cluster()
    before = contents(svc)
    with pytest.raises(PodRejected) as info:
        svc.schedule_batch(pods, scheduler_name=scheduler_name)
    assert info.value.index == index and isinstance(info.value.error, error)
    assert contents(svc) == before


def test_an_error_midway_undoes_what_the_batch_assumed() -> None:
    svc = cluster()
    before = contents(svc)
    with pytest.raises(ValidationError, match="node_names"):
        svc.schedule_batch(replicas(2), node_names=["n2", "nowhere"])
    assert contents(svc) == before
    original = svc.engine.decide
    seen: list[int] = []

    def failing_second(*args: Any, **kwargs: Any) -> Any:
        seen.append(1)
        if len(seen) == 2:
            raise RuntimeError("boom")
        return original(*args, **kwargs)

    svc.engine.decide = failing_second  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        svc.schedule_batch(replicas(3))
    assert contents(svc) == before


@pytest.mark.parametrize("details", [True, False], ids=["with details", "outcome only"])
def test_a_batch_without_details_keeps_only_the_outcome(details: bool) -> None:
    svc = cluster()
    placement = svc.schedule_batch(replicas(2), details=details)
    for result in placement.results:
        assert (result.selected, result.best_count, result.feasible_count, result.candidate_count) == ("n2", 1, 1, 2)
        assert (result.decision is not None) is details
        if result.decision is not None:
            assert result.decision.best == ["n2"] and len(result.decision.verdicts) == 2


# -- devices ---------------------------------------------------------------------------------------


def _device_cluster(gpus: int) -> SchedulingService:
    """One node publishing ``gpus`` GPUs, a GPU class, and claims c0..c2 for one GPU each."""
    svc = SchedulingService({"default-scheduler": default_profile()}, forms=PROTOBUF_FORMS)
    driver = "gpu.example.com"
    manifests: list[dict[str, Any]] = [
        {
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        },
        {
            "kind": "ResourceSlice",
            "metadata": {"name": "n1-gpu"},
            "spec": {
                "driver": driver,
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": f"gpu-{i}"} for i in range(gpus)],
            },
        },
    ]
    manifests += [
        {
            "kind": "ResourceClaim",
            "metadata": {"name": f"c{i}", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}},
        }
        for i in range(3)
    ]
    node = make_node("n1").capacity(cpu="8", memory="8Gi", pods="10")
    changes = [Upsert(Kind.NODE, node.obj(), to_cluster_object(node.json()).SerializeToString())]
    for manifest in manifests:
        kind = Kind(manifest["kind"])
        changes.append(
            Upsert(kind, object_from_k8s(kind, manifest, kind.value), to_cluster_object(manifest).SerializeToString())
        )
    svc.apply(changes)
    return svc


def _claiming(name: str, claim: str) -> Any:
    pod = make_pod(name).uid(f"uid-{name}")
    pod.spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    return given(pod)


@pytest.mark.parametrize(
    ("gpus", "selected", "devices"),
    [
        pytest.param(2, ["n1", "n1", ""], ["gpu-0", "gpu-1", None], id="each pod takes the next free GPU"),
        pytest.param(1, ["n1", "", ""], ["gpu-0", None, None], id="a held GPU is not given twice"),
    ],
)
def test_assume_allocates_and_reserves_claims(gpus: int, selected: list[str], devices: list[str | None]) -> None:
    svc = _device_cluster(gpus)
    placement = svc.schedule_batch([_claiming(f"p{i}", f"c{i}") for i in range(3)])
    assert [r.selected for r in placement.results] == selected
    for i, device in enumerate(devices):
        entry = svc.get(Kind.RESOURCE_CLAIM, "default", f"c{i}")
        assert entry is not None
        claim = entry.obj
        typed = cc.ClusterObject.FromString(entry.source).resource_claim
        if device is None:
            assert claim.allocation is None and not claim.reserved_for  # type: ignore[union-attr]
            assert not typed.status.HasField("allocation")
            continue
        assert [d.device for d in claim.allocation] == [device]  # type: ignore[union-attr]
        assert claim.reserved_for == (("pods", f"p{i}", f"uid-p{i}"),)  # type: ignore[union-attr]
        assert [r.device for r in typed.status.allocation.devices.results] == [device]
        assert typed.status.allocation.node_selector.node_selector_terms[0].match_fields[0].values == ["n1"]
        assert [r.uid for r in typed.status.reserved_for] == [f"uid-p{i}"]


def test_an_undone_batch_releases_the_devices() -> None:
    svc = _device_cluster(1)
    before = contents(svc)
    placement = svc.schedule_batch([_claiming("p0", "c0"), _claiming("p1", "c1")], all_or_nothing=True)
    assert not placement.all_placed
    assert contents(svc) == before


def test_a_dry_run_batch_answers_as_the_batch_and_changes_nothing() -> None:
    svc = cluster()
    before = contents(svc)
    # n2 has 4 CPUs free: two pods of 2 fit, the third only if the earlier two were forgotten.
    pods = [given(make_pod(f"d{i}").req(cpu="2")) for i in range(3)]
    dry = svc.schedule_batch(pods, dry_run=True)
    assert contents(svc) == before
    assert [r.assumed_generation for r in dry.results] == [0, 0, 0]
    assert [r.selected for r in dry.results] == ["n2", "n2", ""]
    real = svc.schedule_batch(pods)
    assert [r.selected for r in real.results] == ["n2", "n2", ""]
    assert [bool(r.assumed_generation) for r in real.results] == [True, True, False]
