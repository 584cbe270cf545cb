"""Runs of identical pods placed from one decision (``framework.replicas``) must answer exactly as deciding
each pod does: a ScheduleBatch without details (planned) against the same batch with details (every pod
decided), over generated clusters whose nodes differ in size, taints, images and room, and batches mixing
pods a plan can place with pods it must not (spread, anti-affinity) and pods that fill a node at once."""

from __future__ import annotations

import random
from typing import Any

import pytest
from podfit.client.manifests import to_cluster_object
from podfit.server.cache.cluster_cache import Upsert
from podfit.server.config import default_profile
from podfit.server.cycle import SchedulingCycle
from podfit.server.framework.versions import DEFAULT_VERSION, VERSIONS
from podfit.server.model import Kind
from podfit.server.service import GivenPod, SchedulingService
from podfit.server.transport.stored_forms import PROTOBUF_FORMS

from tests.builders import PodBuilder, make_node, make_pod
from tests.test_schedule_flows import contents, given

ZONE = "topology.kubernetes.io/zone"
IMAGE = "registry.example/app:1"


def _nodes(rng: random.Random, count: int) -> list[Any]:
    nodes = []
    for i in range(count):
        node = (
            make_node(f"n{i:03d}")
            .labels(**{ZONE: rng.choice("abc")})
            .capacity(
                cpu=rng.choice(["1", "2", "4", "8"]),
                memory=rng.choice(["2Gi", "8Gi", "32Gi"]),
                pods=str(rng.choice([3, 6, 12, 110])),
            )
        )
        if rng.random() < 0.3:
            node = node.labels(disk="ssd")
        if rng.random() < 0.25:
            node = node.taint("spot", "true", "PreferNoSchedule")
        if rng.random() < 0.1:
            node = node.taint("dedicated", "x")
        if rng.random() < 0.05:
            node = node.unschedulable()
        if rng.random() < 0.3:
            node = node.image(rng.choice([50, 300, 900]) * 1024 * 1024, IMAGE)
        nodes.append(node)
    return nodes


def _existing(rng: random.Random, nodes: list[Any], count: int) -> list[PodBuilder]:
    pods = []
    for i in range(count):
        pod = make_pod(f"old{i}").labels(app=rng.choice(["web", "db"])).node(rng.choice(nodes).obj().name)
        pods.append(pod.req(cpu=rng.choice(["100m", "500m", "1"]), memory=rng.choice(["128Mi", "1Gi"])))
    return pods


# Pods of one run are copies of one of these (named apart).
KINDS: dict[str, Any] = {
    "small": lambda name, rng: make_pod(name).labels(app="web").req(cpu=rng.choice(["100m", "250m"]), memory="256Mi"),
    "large": lambda name, rng: make_pod(name).labels(app="web").req(cpu=rng.choice(["1", "2"]), memory="2Gi"),
    "best-effort": lambda name, rng: make_pod(name).labels(app="web"),
    "host-port": lambda name, rng: make_pod(name).req(cpu="100m").host_port(8080),
    "tolerating": lambda name, rng: make_pod(name).req(cpu="250m").toleration("spot", "Exists"),
    "prefers-ssd": lambda name, rng: (
        make_pod(name)
        .req(cpu="250m")
        .affinity(
            "nodeAffinity",
            {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 5,
                        "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
                    }
                ]
            },
        )
    ),
    "image": lambda name, rng: make_pod(name).container({"cpu": "200m"}, image=IMAGE),
    "spread": lambda name, rng: (
        make_pod(name)
        .labels(app="web")
        .req(cpu="100m")
        .spread(1, ZONE, "ScheduleAnyway", selector={"matchLabels": {"app": "web"}})
    ),
    "anti-affinity": lambda name, rng: (
        make_pod(name)
        .labels(app="solo")
        .req(cpu="100m")
        .pod_term("podAntiAffinity", {"app": "solo"}, "kubernetes.io/hostname")
    ),
}


def _batch(rng: random.Random, size: int) -> list[PodBuilder]:
    pods: list[PodBuilder] = []
    while len(pods) < size:
        kind = rng.choice(list(KINDS))
        # One template per run: the run's pods differ only in name.
        template = rng.getstate()
        for _ in range(rng.randint(1, 30)):
            rng.setstate(template)
            pods.append(KINDS[kind](f"new{len(pods)}", rng))
        rng.random()
    return pods[:size]


def _service(version: str, objects: list[Any]) -> SchedulingService:
    svc = SchedulingService({"default-scheduler": default_profile(version=version)}, forms=PROTOBUF_FORMS)
    svc.apply(
        [
            Upsert(
                Kind.NODE if b.json()["kind"] == "Node" else Kind.POD,
                b.obj(),
                to_cluster_object(b.json()).SerializeToString(),
            )
            for b in objects
        ]
    )
    return svc


def _answers(placement: Any) -> list[tuple[Any, ...]]:
    return [
        (
            r.pod.name,
            r.selected,
            r.best_count,
            r.feasible_count,
            r.candidate_count,
            r.generation,
            r.assumed_generation,
            r.gated,
            r.message,
            r.unschedulable_message,
            r.preemption,
            r.kube_scheduler_version,
        )
        for r in placement.results
    ]


def _planned(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records the pods placed from a plan."""
    placed: list[str] = []
    original = SchedulingCycle.place

    def place(self: SchedulingCycle, pod: Any, *args: Any, **kwargs: Any) -> Any:
        placed.append(pod.name)
        return original(self, pod, *args, **kwargs)

    monkeypatch.setattr(SchedulingCycle, "place", place)
    return placed


CASES = [pytest.param(seed, version, id=f"cluster-{seed}-{version}") for seed in range(24) for version in VERSIONS]


@pytest.mark.parametrize(("seed", "version"), CASES)
def test_a_planned_batch_answers_as_deciding_every_pod(
    seed: int, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    nodes = _nodes(rng, rng.randint(4, 40))
    objects = [*nodes, *_existing(rng, nodes, rng.randint(0, 60))]
    batch = _batch(rng, rng.randint(20, 90))
    names = sorted(n.obj().name for n in nodes)
    node_names = rng.sample(names, max(2, len(names) // 2)) if seed % 4 == 3 else []
    pods: list[GivenPod] = [given(p) for p in batch]

    decided = _service(version, objects)
    every = decided.schedule_batch(pods, node_names, details=True)
    planned_svc = _service(version, objects)
    placed = _planned(monkeypatch)
    planned = planned_svc.schedule_batch(pods, node_names, details=False)

    assert _answers(planned) == _answers(every)
    assert contents(planned_svc) == contents(decided)
    # Only pods of a run that follow a decided one are ever planned.
    assert len(placed) <= len(batch) - 1


def test_a_burst_of_replicas_is_placed_from_few_decisions(monkeypatch: pytest.MonkeyPatch) -> None:
    """The case the plan is for: identical replicas on uniform nodes (scheduler_perf's SchedulingBasic)."""
    nodes = [make_node(f"n{i:03d}").capacity(cpu="4", memory="32Gi", pods="110") for i in range(50)]
    objects = [*nodes, *(make_pod(f"old{i}").req(cpu="100m").node(f"n{i % 50:03d}") for i in range(100))]
    pods = [given(make_pod(f"new{i}").labels(app="web").req(cpu="100m", memory="500Mi")) for i in range(200)]
    every = _service(DEFAULT_VERSION, objects).schedule_batch(pods, details=True)
    placed = _planned(monkeypatch)
    planned = _service(DEFAULT_VERSION, objects).schedule_batch(pods, details=False)
    assert _answers(planned) == _answers(every)
    assert len(placed) >= 190, f"only {len(placed)} of 200 replicas were placed from a plan"


@pytest.mark.parametrize(
    "kind", ["spread", "anti-affinity"], ids=["spread-counts-replicas", "anti-affinity-counts-replicas"]
)
def test_pods_whose_answers_depend_on_their_replicas_are_each_decided(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(7)
    nodes = [
        make_node(f"n{i}").labels(**{ZONE: "abc"[i % 3]}).capacity(cpu="8", memory="8Gi", pods="20") for i in range(9)
    ]
    pods = [given(KINDS[kind](f"p{i}", rng)) for i in range(12)]
    placed = _planned(monkeypatch)
    _service(DEFAULT_VERSION, nodes).schedule_batch(pods, details=False)
    assert placed == []


def _schedule_answer(r: Any) -> tuple[Any, ...]:
    return (r.pod.name, r.selected, r.best_count, r.feasible_count, r.generation, r.assumed_generation, r.message)


@pytest.mark.parametrize("seed", range(16), ids=lambda seed: f"burst-{seed}")
async def test_a_burst_of_unary_schedules_answers_as_deciding_every_call(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Schedule with assume, one call after another: planned calls (no details) against decided ones, with
    other writes and other pods between some calls, which must end the plan."""
    rng = random.Random(1000 + seed)
    nodes = _nodes(rng, rng.randint(4, 30))
    objects = [*nodes, *_existing(rng, nodes, rng.randint(0, 40))]
    calls: list[tuple[str, Any]] = []
    for pod in _batch(rng, rng.randint(20, 60)):
        calls.append(("schedule", given(pod)))
        if rng.random() < 0.25:
            bound = make_pod(f"other{len(calls)}").req(cpu=rng.choice(["100m", "1"])).node(rng.choice(nodes).obj().name)
            calls.append(("apply", Upsert(Kind.POD, bound.obj(), to_cluster_object(bound.json()).SerializeToString())))
    decided, planned_svc = _service(DEFAULT_VERSION, objects), _service(DEFAULT_VERSION, objects)
    every = [
        await decided.schedule(arg, assume=True, details=True) if what == "schedule" else decided.apply([arg])
        for what, arg in calls
    ]
    placed = _planned(monkeypatch)
    planned = [
        await planned_svc.schedule(arg, assume=True, details=False) if what == "schedule" else planned_svc.apply([arg])
        for what, arg in calls
    ]
    assert [_schedule_answer(r) for r in planned if hasattr(r, "pod")] == [
        _schedule_answer(r) for r in every if hasattr(r, "pod")
    ]
    assert contents(planned_svc) == contents(decided)
    assert len(placed) < len([c for c in calls if c[0] == "schedule"])


async def test_a_burst_of_unary_replicas_is_placed_from_a_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = [make_node(f"n{i:03d}").capacity(cpu="4", memory="32Gi", pods="110") for i in range(50)]
    pods = [given(make_pod(f"new{i}").labels(app="web").req(cpu="100m", memory="500Mi")) for i in range(100)]
    placed = _planned(monkeypatch)
    svc = _service(DEFAULT_VERSION, nodes)
    for pod in pods:
        await svc.schedule(pod, assume=True, details=False)
    assert len(placed) >= 95, f"only {len(placed)} of 100 calls were placed from a plan"
