"""Template nodes with devices, tested differentially: a template that carries the ResourceSlices of one
of its nodes must answer exactly as the same node Applied for real with the same slices.

Each case is a generated cluster (existing nodes with devices of their own, a pool every node reaches,
DeviceClasses, allocated and pending claims), a template node with slices (one or two drivers, pools of
one or two slices, tainted devices, several models) and pods claiming devices (counts, selectors, "All",
prioritized lists, matchAttribute constraints, a claim shared by several pods). For every case and
version, three questions are asked both ways:

- **decision**: each pod's Filter verdicts, per-plugin scores, selected node and the claims Reserve would
  write, on an overlay with template copies added (``NodeTemplate.add_copy``) and on a cache where the
  copies and their slices (named as a driver on the copy would publish them, spelled out here) are Applied;
- **sequence**: the pods placed one after another by Simulate (template copies in the scenario) and, on
  the cache with the nodes Applied, by the real assume path (decide, Reserve, write the pod and claims);
- **estimate**: cluster-autoscaler's binpacking estimate with a template carrying its slices, and with a
  bare template on a cache where the slices its new nodes would publish are Applied.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any

import pytest
from podfit.server.cache.cluster_cache import ClusterCache, Upsert
from podfit.server.cache.overlay import Overlay
from podfit.server.cache.snapshot import Snapshot
from podfit.server.config import default_profile
from podfit.server.engine import Decision, Engine
from podfit.server.model import Kind, Node, Pod
from podfit.server.model.decode import object_from_k8s
from podfit.server.model.dra import ResourceClaim, resource_slice_from_k8s
from podfit.server.simulation.estimator import estimate
from podfit.server.simulation.scenario import Scenario, simulate
from podfit.server.simulation.templates import NodeTemplate

from tests.builders import make_node, make_pod

GPU = "gpu.example.com"
NIC = "nic.example.com"
VERSIONS = ("v1.35", "v1.36", "v1.37")
SEEDS = range(120)
HOSTNAME = "kubernetes.io/hostname"


# -- the generated cases -----------------------------------------------------------------------------


@dataclass
class Case:
    seed: int
    objects: list[tuple[Kind, dict[str, Any]]] = field(default_factory=list)
    template: dict[str, Any] = field(default_factory=dict)
    template_slices: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    copies: int = 1


def _device(rng: random.Random, name: str, driver: str) -> dict[str, Any]:
    model = rng.choice(("a100", "a100", "h100", "l4"))
    memory = {"a100": "40Gi", "h100": "80Gi", "l4": "24Gi"}[model]
    device: dict[str, Any] = {
        "name": name,
        "attributes": {
            "model": {"string": model},
            f"{driver}/numa": {"int": rng.randint(0, 1)},
            "driverVersion": {"version": rng.choice(("1.2.0", "2.0.1"))},
        },
        "capacity": {"memory": {"value": memory}},
    }
    if rng.random() < 0.15:
        device["taints"] = [{"key": "maintenance", "value": "soon", "effect": rng.choice(("NoSchedule", "NoExecute"))}]
    return device


def _slice(name: str, driver: str, pool: str, devices: list[dict[str, Any]], count: int = 1, **where: Any) -> Any:
    spec = {"driver": driver, "pool": {"name": pool, "generation": 1, "resourceSliceCount": count}, "devices": devices}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": spec | where,
    }


def _node_slices(rng: random.Random, node: str) -> list[dict[str, Any]]:
    """What drivers publish on one node: GPUs (sometimes split over two slices of one pool), sometimes NICs."""
    slices = []
    gpus = [_device(rng, f"gpu-{i}", GPU) for i in range(rng.randint(1, 6))]
    if len(gpus) > 2 and rng.random() < 0.3:
        half = len(gpus) // 2
        slices.append(_slice(f"{node}-gpu-a", GPU, f"{node}-gpus", gpus[:half], 2, nodeName=node))
        slices.append(_slice(f"{node}-gpu-b", GPU, f"{node}-gpus", gpus[half:], 2, nodeName=node))
    else:
        slices.append(_slice(f"{node}-gpu", GPU, f"{node}-gpus", gpus, nodeName=node))
    if rng.random() < 0.4:
        nics = [_device(rng, f"nic-{i}", NIC) for i in range(rng.randint(1, 2))]
        slices.append(_slice(f"{node}-nic", NIC, f"{node}-nics", nics, nodeName=node))
    return slices


def _node(rng: random.Random, name: str, tainted: float = 0.2) -> dict[str, Any]:
    builder = make_node(name).capacity(cpu=str(rng.choice((4, 8, 16))), memory="32Gi", pods="110")
    builder.labels(zone=rng.choice(("a", "b")), pool=rng.choice(("gpu", "general")))
    if rng.random() < tainted:
        builder.taint("dedicated", "gpu")
    return builder.json()


def _request(rng: random.Random, name: str) -> dict[str, Any]:
    cls = rng.choice((GPU, GPU, "a100", NIC))
    exactly: dict[str, Any] = {"deviceClassName": cls}
    roll = rng.random()
    if roll < 0.1:
        exactly["allocationMode"] = "All"
    else:
        exactly["count"] = rng.choice((1, 1, 1, 2, 3))
    if rng.random() < 0.3:
        domain = NIC if cls == NIC else GPU
        memory = f'device.capacity["{domain}"].memory.compareTo(quantity("40Gi")) >= 0'
        # Now and then a selector that fails at run time (a framework error, answered as upstream does).
        exactly["selectors"] = [
            {"cel": {"expression": memory if rng.random() < 0.9 else 'device.attributes["model"] == 1'}}
        ]
    if rng.random() < 0.3:
        exactly["tolerations"] = [{"key": "maintenance", "operator": "Exists"}]
    if rng.random() < 0.25:
        alternatives = [
            {
                "name": "big",
                "deviceClassName": GPU,
                "count": 1,
                "selectors": [{"cel": {"expression": f'device.attributes["{GPU}"].model == "h100"'}}],
            },
            {"name": "any", "deviceClassName": GPU, "count": rng.choice((1, 2))},
        ]
        return {"name": name, "firstAvailable": alternatives}
    return {"name": name, "exactly": exactly}


def _claim(rng: random.Random, name: str, allocated: list[tuple[str, str, str]] | None = None) -> Any:
    requests = [_request(rng, f"r{i}") for i in range(rng.choice((1, 1, 2)))]
    devices: dict[str, Any] = {"requests": requests}
    if len(requests) > 1 and rng.random() < 0.4:
        devices["constraints"] = [{"matchAttribute": f"{GPU}/numa"}]
    data: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"devices": devices},
    }
    if allocated is not None:
        results = [{"request": "r0", "driver": d, "pool": p, "device": n} for d, p, n in allocated]
        data["spec"] = {
            "devices": {"requests": [{"name": "r0", "exactly": {"deviceClassName": GPU, "count": len(results)}}]}
        }
        data["status"] = {"allocation": {"devices": {"results": results}}}
    return data


def generate(seed: int) -> Case:
    rng = random.Random(seed)
    case = Case(seed, copies=rng.choice((1, 1, 2)))
    classes = [
        (GPU, [f'device.driver == "{GPU}"']),
        ("a100", [f'device.driver == "{GPU}"', f'device.attributes["{GPU}"].model == "a100"']),
        (NIC, [f'device.driver == "{NIC}"']),
    ]
    for name, selectors in classes:
        spec = {"selectors": [{"cel": {"expression": e}} for e in selectors]}
        case.objects.append((Kind.DEVICE_CLASS, {"metadata": {"name": name}, "spec": spec}))
    existing = [f"node-{i}" for i in range(rng.randint(1, 3))]
    published: list[dict[str, Any]] = []
    for name in existing:
        case.objects.append((Kind.NODE, _node(rng, name)))
        if rng.random() < 0.7:
            published.extend(_node_slices(rng, name))
    if rng.random() < 0.3:
        shared = [_device(rng, f"fabric-{i}", NIC) for i in range(2)]
        published.append(_slice("fabric", NIC, "fabric", shared, allNodes=True))
    case.objects.extend((Kind.RESOURCE_SLICE, s) for s in published)
    # Claims already allocated: devices in use, on existing nodes or in the shared pool.
    devices = [
        (s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"]) for s in published for d in s["spec"]["devices"]
    ]
    for i, device in enumerate(rng.sample(devices, k=min(len(devices), rng.randint(0, 3)))):
        case.objects.append((Kind.RESOURCE_CLAIM, _claim(rng, f"held-{i}", [device])))
    # The template: a node of the group and what its drivers publish there.
    template = _node(rng, "tmpl", tainted=0.1)
    template["metadata"]["labels"].update(pool="gpu")
    case.template = template
    case.template_slices = _node_slices(rng, "tmpl")
    if rng.random() < 0.25:
        # Taken from a node whose driver has since republished: its pools at generation 3, and an obsolete
        # slice of generation 2 still listed (a new node's driver publishes only the newest).
        for data in case.template_slices:
            data["spec"]["pool"]["generation"] = 3
        stale = [_device(rng, f"stale-{i}", GPU) for i in range(4)]
        obsolete = _slice("tmpl-gpu-old", GPU, "tmpl-gpus", stale, nodeName="tmpl")
        obsolete["spec"]["pool"]["generation"] = 2
        case.template_slices.append(obsolete)
    # Pending pods: their own claims, and sometimes one claim shared by two of them.
    shared_claim = rng.random() < 0.3
    if shared_claim:
        case.objects.append((Kind.RESOURCE_CLAIM, _claim(rng, "shared")))
    for i in range(rng.randint(1, 5)):
        pod = make_pod(f"p{i}").uid(f"uid-p{i}").req(cpu=rng.choice(("100m", "1", "3")))
        if rng.random() < 0.3:
            pod.toleration("dedicated", "Exists")
        claims = []
        if rng.random() < 0.85:
            case.objects.append((Kind.RESOURCE_CLAIM, _claim(rng, f"own-{i}")))
            claims.append(f"own-{i}")
        if shared_claim and rng.random() < 0.6:
            claims.append("shared")
        pod.spec["resourceClaims"] = [{"name": f"c{j}", "resourceClaimName": c} for j, c in enumerate(claims)]
        case.pods.append(pod.json())
    return case


# -- the two ways -------------------------------------------------------------------------------------


def _cache(objects: list[tuple[Kind, dict[str, Any]]]) -> ClusterCache:
    cache = ClusterCache()
    cache.apply([Upsert(kind, object_from_k8s(kind, data, kind.value)) for kind, data in objects])
    return cache


def _copy_as_published(case: Case, suffix: str) -> list[tuple[Kind, dict[str, Any]]]:
    """The template's node and slices as they would exist for real on the node ``tmpl-<suffix>``: the
    node renamed (its hostname label too), each slice of a pool's newest generation named and pooled per
    node by its driver, the pool at generation 1."""
    name = f"tmpl-{suffix}"
    node = {**case.template, "metadata": {**case.template["metadata"], "name": name}}
    node["metadata"]["labels"] = {**case.template["metadata"]["labels"], HOSTNAME: name}
    objects: list[tuple[Kind, dict[str, Any]]] = [(Kind.NODE, node)]
    newest: dict[tuple[str, str], int] = {}
    for data in case.template_slices:
        key = (data["spec"]["driver"], data["spec"]["pool"]["name"])
        newest[key] = max(newest.get(key, 0), data["spec"]["pool"]["generation"])
    for data in case.template_slices:
        spec = data["spec"]
        if spec["pool"]["generation"] < newest[(spec["driver"], spec["pool"]["name"])]:
            continue  # the driver deletes the slices of older generations
        # A driver starts the pool of a node that has none at generation 1.
        pool = {**spec["pool"], "name": f"{spec['pool']['name']}-{suffix}", "generation": 1}
        copy = {
            **data,
            "metadata": {"name": f"{data['metadata']['name']}-{suffix}"},
            "spec": {**spec, "pool": pool, "nodeName": name},
        }
        objects.append((Kind.RESOURCE_SLICE, copy))
    return objects


def _slices_only(objects: list[tuple[Kind, dict[str, Any]]]) -> list[tuple[Kind, dict[str, Any]]]:
    return [(kind, data) for kind, data in objects if kind is Kind.RESOURCE_SLICE]


def _template(case: Case) -> NodeTemplate:
    node = object_from_k8s(Kind.NODE, case.template, "template")
    assert isinstance(node, Node)
    slices = tuple(resource_slice_from_k8s(s) for s in case.template_slices)
    return NodeTemplate(node, slices)


def _pods(case: Case) -> list[Pod]:
    pods = []
    for data in case.pods:
        pod = object_from_k8s(Kind.POD, data, "pod")
        assert isinstance(pod, Pod)
        pods.append(pod)
    return pods


def _engine(cache: ClusterCache, version: str) -> Engine:
    return Engine(cache, {"default-scheduler": default_profile(version=version)})


def _answer(engine: Engine, pod: Pod, snapshot: Snapshot) -> dict[str, Any]:
    """Everything a decision says, and the claims Reserve writes on the selected node."""
    decision, state, _ = engine.decide(pod, snapshot=snapshot)
    held: list[object] = []
    if decision.selected:
        held = engine.framework_for(pod).run_reserve(state, pod, decision.selected, snapshot)
    return {
        "verdicts": _verdicts(decision),
        "scores": {s.node_name: (s.total, s.plugins) for s in decision.scores},
        "selected": decision.selected,
        "failed": (decision.failed, decision.message, decision.gated),
        "claims": [_allocation(c) for c in held if isinstance(c, ResourceClaim)],
    }


def _verdicts(decision: Decision) -> dict[str, Any]:
    return {name: (s.plugin, s.reasons, s.code.value) for name, s in decision.rejections().items()}


def _allocation(claim: ResourceClaim) -> Any:
    return (claim.key, claim.allocation, claim.allocation_node_selector, claim.reserved_for)


def _assumed(engine: Engine, cache: ClusterCache, pods: list[Pod]) -> list[tuple[str, str, Any]]:
    """The pods placed in order by the real assume path: decide on the cache, Reserve, write the bound pod
    and the claims Reserve holds into the cache."""
    placed = []
    for pod in pods:
        decision, state, _ = engine.decide(pod, snapshot=cache.snapshot())
        node = decision.selected
        if node:
            held = engine.framework_for(pod).run_reserve(state, pod, node, cache.snapshot())
            bound = dataclasses.replace(pod, node_name=node, nominated_node_name="")
            cache.apply(
                [
                    Upsert(Kind.POD, bound),
                    *(Upsert(Kind.RESOURCE_CLAIM, c) for c in held if isinstance(c, ResourceClaim)),
                ]
            )
        placed.append((pod.key, node, _verdicts(decision) if not node else {}))
    return placed


def _simulated(engine: Engine, snapshot: Snapshot, scenario: Scenario, pods: list[Pod]) -> list[tuple[str, str, Any]]:
    result = simulate(engine, snapshot, scenario, pods)
    return [
        (p.pod.key, p.node_name, _verdicts(p.decision) if p.decision is not None else {}) for p in result.placements
    ]


# -- the tests ----------------------------------------------------------------------------------------


CASES = [pytest.param(seed, version, id=f"cluster {seed} at {version}") for seed in SEEDS for version in VERSIONS]


@pytest.mark.parametrize(("seed", "version"), CASES)
def test_template_with_slices_answers_as_the_node_applied_for_real(seed: int, version: str) -> None:
    case = generate(seed)
    template, pods = _template(case), _pods(case)
    suffixes = [f"sim-{i}" for i in range(case.copies)]

    # One decision per pod: template copies on an overlay against the copies Applied.
    hypothetical = _cache(case.objects)
    overlay = Overlay(hypothetical.snapshot())
    for suffix in suffixes:
        template.add_copy(overlay, suffix)
    real = _cache([*case.objects, *(o for s in suffixes for o in _copy_as_published(case, s))])
    engine_a, engine_b = _engine(hypothetical, version), _engine(real, version)
    for pod in pods:
        assert _answer(engine_a, pod, overlay.snapshot()) == _answer(engine_b, pod, real.snapshot()), pod.key

    # The pods one after another: Simulate's scenario against the real assume path.
    want = _assumed(engine_b, real, pods)
    got = _simulated(engine_a, hypothetical.snapshot(), Scenario(add_nodes=[(template, case.copies)]), pods)
    assert got == want

    # cluster-autoscaler's estimate: the template's slices against the same slices published for real.
    fresh = _cache(case.objects)
    published = _cache(
        [*case.objects, *(o for n in range(6) for o in _slices_only(_copy_as_published(case, f"e-{n}")))]
    )
    groups = [[pod] for pod in pods]
    with_slices = estimate(_engine(fresh, version), fresh.snapshot(), template, groups, 6)
    applied = estimate(_engine(published, version), published.snapshot(), template.node, groups, 6)
    for field_name in ("node_count", "group_order", "scheduled_per_group", "nodes"):
        assert getattr(with_slices, field_name) == getattr(applied, field_name), field_name
    assert [p.key for p in with_slices.scheduled] == [p.key for p in applied.scheduled]
    assert [p.key for p in with_slices.unscheduled] == [p.key for p in applied.unscheduled]


def test_the_cases_turn_on_the_template_devices() -> None:
    """The suite compares answers that depend on the devices: most cases place some pod on a template copy
    only because of its slices (without them, every claim-using pod stays off the copies), and some
    reject one there."""
    placed_by_devices = rejected = 0
    for seed in SEEDS:
        case = generate(seed)
        template, pods = _template(case), _pods(case)
        cache = _cache(case.objects)
        engine = _engine(cache, "v1.37")
        groups = [[pod] for pod in pods]
        with_slices = estimate(engine, cache.snapshot(), template, groups, 6)
        bare = estimate(engine, cache.snapshot(), template.node, groups, 6)
        placed_by_devices += len(with_slices.scheduled) > len(bare.scheduled)
        rejected += bool(with_slices.unscheduled)
    assert placed_by_devices >= len(SEEDS) // 2
    assert rejected >= len(SEEDS) // 10
