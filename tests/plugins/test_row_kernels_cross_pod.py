"""PodTopologySpread and InterPodAffinity: row independence, and the incrementally synced pod index.

Two things are checked: filter_rows / score_rows over all rows against each row alone (row_harness),
and every answer — PreFilter and PreScore state, Filter, Score, normalisation, and the state preemption
edits with add_pod/remove_pod — on a cache that churned (its pod index synced row by row) against the same
objects loaded into a fresh cache (its index built from scratch).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from podfit.server.cache.cluster_cache import ClusterCache, Delete, Upsert
from podfit.server.cache.overlay import Overlay
from podfit.server.cache.pod_index import FILTER_TERMS, SCORE_TERMS, OverlayPodIndex, PodQuery
from podfit.server.cache.snapshot import Snapshot
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.status import Code, Status
from podfit.server.model import Kind, Pod
from podfit.server.model.decode import object_from_k8s
from podfit.server.model.objects import LabelSelector, LabelSelectorRequirement, pod_from_k8s
from podfit.server.plugins import inter_pod_affinity, pod_topology_spread
from podfit.server.plugins.pod_topology_spread import _CriticalPaths, _round_half_away, _round_half_away_rows

from tests.conformance_support import cache_from_case, load_cases
from tests.plugins.row_harness import assert_filter_equivalent, assert_score_equivalent

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
RACK = "rack"

LIST_DEFAULTS = {
    "defaultingType": "List",
    "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 2, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Honor"},
        {"maxSkew": 1, "topologyKey": RACK, "whenUnsatisfiable": "DoNotSchedule", "minDomains": 3},
    ],
}
CONFIGS: dict[str, Any] = {
    "PodTopologySpread": lambda: pod_topology_spread.new({}),
    "PodTopologySpread-List": lambda: pod_topology_spread.new(LIST_DEFAULTS),
    "InterPodAffinity": lambda: inter_pod_affinity.new({}),
    "InterPodAffinity-hard5": lambda: inter_pod_affinity.new({"hardPodAffinityWeight": 5}),
}


# --------------------------------------------------------------------------------------------------
# Comparing a churned cache with the same objects loaded afresh


def _rebuilt(cache: ClusterCache) -> ClusterCache:
    """The cache's objects in a new cache, whose pod index will be built from scratch."""
    fresh = ClusterCache()
    fresh.apply([Upsert(kind, e.obj, e.source) for kind in Kind for e in cache.entries(kind)])
    return fresh


def _filter_rows(plugin: Any, state: CycleState, pod: Pod, snapshot: Snapshot) -> list[Status | None]:
    codes, statuses = plugin.filter_rows(state, pod, snapshot.table, snapshot.rows)
    assert len(statuses) <= 3
    return [None if c == 0 else statuses[c - 1] for c in codes.tolist()]


def _pre_filter_internals(plugin: Any, state: CycleState) -> Any:
    if plugin.name == pod_topology_spread.POD_TOPOLOGY_SPREAD:
        s = state.read(pod_topology_spread._PRE_FILTER_KEY, pod_topology_spread._PreFilterState)
        # Domain order matters: it decides which domains the critical paths keep.
        return [list(c.items()) for c in s.counts], [(p.values, p.nums) for p in s.paths], s.sizes, s.self_match
    s = state.read(inter_pod_affinity._PRE_FILTER_KEY, inter_pod_affinity._PreFilterState)
    return [
        s.counts(which)
        for which in (inter_pod_affinity.AFFINITY, inter_pod_affinity.ANTI_AFFINITY, inter_pod_affinity.EXISTING)
    ]


def _pre_score_internals(plugin: Any, state: CycleState) -> Any:
    if plugin.name == pod_topology_spread.POD_TOPOLOGY_SPREAD:
        s = state.read(pod_topology_spread._PRE_SCORE_KEY, pod_topology_spread._PreScoreState)
        return [list(c.items()) for c in s.counts], s.weights, s.ignored_nodes
    return state.read(inter_pod_affinity._PRE_SCORE_KEY, inter_pod_affinity._PreScoreState).topology_score


def assert_paths_agree(plugin: Any, pod: Pod, cache: ClusterCache, rng: random.Random | None = None) -> int:
    """Every answer over the cache's (incrementally synced) pod index equals the answer over a fresh
    cache of the same objects, including after the edits preemption makes (add_pod / remove_pod on
    clones). Returns how many nodes Filter compared."""
    snapshot, fresh = cache.snapshot(), _rebuilt(cache).snapshot()
    assert snapshot.names.tolist() == fresh.names.tolist()
    synced, built = CycleState(), CycleState()
    got = plugin.pre_filter(synced, pod, snapshot)
    assert got == plugin.pre_filter(built, pod, fresh)
    compared = 0
    if got[1] is None:
        assert _pre_filter_internals(plugin, synced) == _pre_filter_internals(plugin, built)
        want = _filter_rows(plugin, built, pod, fresh)
        assert _filter_rows(plugin, synced, pod, snapshot) == want
        compared = len(want)
        if rng is not None:
            _check_pre_filter_edits(plugin, pod, (snapshot, synced), (fresh, built), rng)
    positions = list(range(len(snapshot.names)))
    if rng is not None and len(positions) > 2:
        positions = sorted(rng.sample(positions, len(positions) * 2 // 3))
    synced, built = CycleState(), CycleState()
    status = plugin.pre_score(synced, pod, snapshot, snapshot.rows[positions])
    assert status == plugin.pre_score(built, pod, fresh, fresh.rows[positions])
    if status is None:
        assert _pre_score_internals(plugin, synced) == _pre_score_internals(plugin, built)
        want_scores = plugin.score_rows(built, pod, fresh.table, fresh.rows[positions])
        raw = plugin.score_rows(synced, pod, snapshot.table, snapshot.rows[positions])
        assert raw.tolist() == want_scores.tolist()
        assert (
            plugin.normalize_rows(synced, pod, raw).tolist() == plugin.normalize_rows(built, pod, want_scores).tolist()
        )
    return compared


def _check_pre_filter_edits(
    plugin: Any,
    pod: Pod,
    one: tuple[Snapshot, CycleState],
    other: tuple[Snapshot, CycleState],
    rng: random.Random,
) -> None:
    """Preemption's dry run: remove some pods, add one back, on cloned states; both caches agree."""
    (snapshot, synced), (fresh, built) = one, other
    synced, built = synced.clone(), built.clone()
    candidates = [(info.name, p) for info in snapshot.node_infos for p in info.pods.values()]
    for name, victim in rng.sample(candidates, min(6, len(candidates))):
        plugin.remove_pod(synced, pod, victim, snapshot.node_info_map[name], snapshot)
        plugin.remove_pod(built, pod, victim, fresh.node_info_map[name], fresh)
    if candidates:
        name, back = rng.choice(candidates)
        plugin.add_pod(synced, pod, back, snapshot.node_info_map[name], snapshot)
        plugin.add_pod(built, pod, back, fresh.node_info_map[name], fresh)
    assert _pre_filter_internals(plugin, synced) == _pre_filter_internals(plugin, built)
    assert _filter_rows(plugin, synced, pod, snapshot) == _filter_rows(plugin, built, pod, fresh)


# --------------------------------------------------------------------------------------------------
# Public conformance cases


@pytest.fixture(scope="module")
def cases() -> list[tuple[str, ClusterCache, Pod]]:
    return [(case["id"], cache_from_case(case), pod_from_k8s(case["pod"])) for case in load_cases()]


@pytest.mark.parametrize("config", list(CONFIGS))
def test_conformance_cases(config: str, cases: list[tuple[str, ClusterCache, Pod]]) -> None:
    plugin = CONFIGS[config]()
    filtered = scored = 0
    for case_id, cache, pod in cases:
        filtered += assert_filter_equivalent(plugin, pod, cache, case_id)
        scored += assert_score_equivalent(plugin, pod, cache, case_id)
        assert_paths_agree(plugin, pod, cache)
    # The cases exercise both extension points of every configuration.
    assert filtered > 100 and scored > 100


# --------------------------------------------------------------------------------------------------
# Random clusters

NAMESPACES = ("default", "ns1", "ns2")
APPS = ("a", "b", "c", "d")


def _selector(rng: random.Random) -> dict[str, Any] | None:
    roll = rng.random()
    if roll < 0.05:
        return None
    if roll < 0.1:
        return {}
    if roll < 0.6:
        return {"matchLabels": {"app": rng.choice(APPS)}}
    operator = rng.choice(["In", "NotIn", "Exists", "DoesNotExist"])
    values = rng.sample(APPS, rng.randint(1, 2)) if operator in ("In", "NotIn") else []
    expression = {"key": rng.choice(["app", "tier"]), "operator": operator, "values": values}
    selector: dict[str, Any] = {"matchExpressions": [expression]}
    if rng.random() < 0.3:
        selector["matchLabels"] = {"tier": rng.choice("xy")}
    return selector


def _affinity_term(rng: random.Random) -> dict[str, Any]:
    term: dict[str, Any] = {"topologyKey": rng.choice([ZONE, HOST, RACK])}
    selector = _selector(rng)
    if selector is not None:
        term["labelSelector"] = selector
    roll = rng.random()
    if roll < 0.15:
        term["namespaces"] = rng.sample(NAMESPACES, rng.randint(1, 2))
    elif roll < 0.25:
        term["namespaceSelector"] = rng.choice([{}, {"matchLabels": {"team": "a"}}])
    if rng.random() < 0.15:
        term["matchLabelKeys" if rng.random() < 0.5 else "mismatchLabelKeys"] = ["tier"]
    return term


def _affinity(rng: random.Random, chance: float) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        spec: dict[str, Any] = {}
        if rng.random() < chance:
            spec["requiredDuringSchedulingIgnoredDuringExecution"] = [
                _affinity_term(rng) for _ in range(rng.randint(1, 2))
            ]
        if rng.random() < chance:
            spec["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rng.randint(1, 100), "podAffinityTerm": _affinity_term(rng)}
                for _ in range(rng.randint(1, 2))
            ]
        if spec:
            affinity[kind] = spec
    return affinity


def _pod_labels(rng: random.Random) -> dict[str, str]:
    labels = {}
    if rng.random() < 0.9:
        labels["app"] = rng.choice(APPS)
    if rng.random() < 0.5:
        labels["tier"] = rng.choice("xy")
    return labels


def _existing_pod(rng: random.Random, i: int, nodes: Sequence[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}], "nodeName": rng.choice(nodes)}
    affinity = _affinity(rng, 0.15)
    if affinity:
        spec["affinity"] = affinity
    metadata = {"name": f"p{i}", "namespace": rng.choice(NAMESPACES), "uid": f"u{i}", "labels": _pod_labels(rng)}
    return {"kind": "Pod", "metadata": metadata, "spec": spec}


def _spread_constraint(rng: random.Random) -> dict[str, Any]:
    constraint: dict[str, Any] = {
        "maxSkew": rng.randint(1, 3),
        "topologyKey": rng.choice([ZONE, ZONE, HOST, RACK]),
        "whenUnsatisfiable": rng.choice(["DoNotSchedule", "ScheduleAnyway"]),
    }
    selector = _selector(rng)
    if selector is not None:
        constraint["labelSelector"] = selector
    if rng.random() < 0.3:
        constraint["minDomains"] = rng.randint(1, 5)
    if rng.random() < 0.3:
        constraint["nodeAffinityPolicy"] = rng.choice(["Honor", "Ignore"])
    if rng.random() < 0.3:
        constraint["nodeTaintsPolicy"] = rng.choice(["Honor", "Ignore"])
    if rng.random() < 0.2:
        constraint["matchLabelKeys"] = ["tier"]
    return constraint


def _incoming_pod(rng: random.Random, i: int, nodes: Sequence[str]) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if rng.random() < 0.7:
        spec["topologySpreadConstraints"] = [_spread_constraint(rng) for _ in range(rng.randint(1, 3))]
    affinity = _affinity(rng, 0.5)
    roll = rng.random()
    if roll < 0.15:
        spec["nodeSelector"] = {"disk": "ssd"}
    elif roll < 0.45:
        requirement = {"key": ZONE, "operator": rng.choice(["In", "NotIn"]), "values": ["z1", "z2"]}
        term: dict[str, Any] = {"matchExpressions": [requirement]}
        if rng.random() < 0.5:
            term["matchFields"] = [{"key": "metadata.name", "operator": "NotIn", "values": [rng.choice(nodes)]}]
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.3:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    metadata = {"name": f"in{i}", "namespace": rng.choice(NAMESPACES), "labels": _pod_labels(rng)}
    return pod_from_k8s({"kind": "Pod", "metadata": metadata, "spec": spec})


def _node(rng: random.Random, name: str) -> dict[str, Any]:
    labels = {}
    if rng.random() < 0.95:
        labels[HOST] = name
    roll = rng.random()
    if roll < 0.85:
        labels[ZONE] = rng.choice(["z1", "z2", "z3"])
    elif roll < 0.92:
        labels[ZONE] = ""  # an empty value is a domain of its own, next to nodes lacking the key
    if rng.random() < 0.6:
        labels[RACK] = rng.choice(["r1", "r2", "r3", "r4"])
    if rng.random() < 0.5:
        labels["disk"] = rng.choice(["ssd", "hdd"])
    spec: dict[str, Any] = {}
    if rng.random() < 0.15:
        spec["taints"] = [{"key": "dedicated", "value": "x", "effect": rng.choice(["NoSchedule", "PreferNoSchedule"])}]
    return {"kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": spec}


def _upsert(kind: Kind, data: Mapping[str, Any]) -> Upsert:
    return Upsert(kind, object_from_k8s(kind, data, kind.value))


def _random_cluster(rng: random.Random, nodes: int, pods: int) -> tuple[ClusterCache, list[str]]:
    names = [f"n{i:02d}" for i in range(nodes)]
    cache = ClusterCache()
    changes = [_upsert(Kind.NODE, _node(rng, name)) for name in names]
    for i, ns in enumerate(NAMESPACES):
        labels = {"team": "a" if i % 2 == 0 else "b"}
        changes.append(_upsert(Kind.NAMESPACE, {"metadata": {"name": ns, "labels": labels}}))
    service = {"metadata": {"name": "svc", "namespace": "default"}, "spec": {"selector": {"app": "a"}}}
    changes.append(_upsert(Kind.SERVICE, service))
    changes.extend(_upsert(Kind.POD, _existing_pod(rng, i, names)) for i in range(pods))
    cache.apply(changes)
    return cache, names


def _churn(rng: random.Random, cache: ClusterCache, names: list[str], step: int) -> None:
    """Binds and deletes pods, replaces a node's labels, removes one node and adds another: few enough rows
    change for the index to update them one by one rather than rebuild."""
    changes: list[Upsert | Delete] = [
        _upsert(Kind.POD, _existing_pod(rng, 10_000 * (step + 1) + i, names)) for i in range(rng.randint(1, 5))
    ]
    existing = [e.obj for e in cache.entries(Kind.POD)]
    for victim in rng.sample(existing, min(len(existing), rng.randint(1, 5))):
        assert isinstance(victim, Pod)
        changes.append(Delete(Kind.POD, victim.namespace, victim.name))
    changes.append(_upsert(Kind.NODE, _node(rng, rng.choice(names))))
    gone = rng.choice(names)
    names.remove(gone)
    changes.append(Delete(Kind.NODE, "", gone))
    names.append(f"m{step}")
    changes.append(_upsert(Kind.NODE, _node(rng, f"m{step}")))
    cache.apply(changes)


def test_random_clusters_with_churn() -> None:
    rng = random.Random(20240611)
    plugins = [factory() for factory in CONFIGS.values()]
    compared = 0
    for _ in range(2):
        cache, names = _random_cluster(rng, 60, 400)
        for step in range(6):
            for i in range(6):
                pod = _incoming_pod(rng, i, names)
                for plugin in plugins:
                    compared += assert_filter_equivalent(plugin, pod, cache, f"step {step}")
                    assert_score_equivalent(plugin, pod, cache, f"step {step}")
                    compared += assert_paths_agree(plugin, pod, cache, rng)
            _churn(rng, cache, names, step)
    assert compared > 5_000


# --------------------------------------------------------------------------------------------------
# The pod index itself


def _brute_counts(cache: ClusterCache, query: PodQuery) -> dict[str, int]:
    snapshot = cache.snapshot()
    return {
        info.name: sum(1 for p in info.pods.values() if query.matches(p.namespace, p.labels))
        for info in snapshot.node_infos
    }


def _indexed_counts(cache: ClusterCache, query: PodQuery) -> dict[str, int]:
    snapshot = cache.snapshot()
    counts = snapshot.cache_index().pod_counts(query)[snapshot.rows].tolist()
    return {info.name: n for info, n in zip(snapshot.node_infos, counts, strict=True)}


def _queries() -> Iterator[PodQuery]:
    a = LabelSelector((("app", "a"),))
    not_b = LabelSelector((), (LabelSelectorRequirement("app", "NotIn", ("b",)),))
    tier = LabelSelector((), (LabelSelectorRequirement("tier", "In", ("x", "y")),))
    yield PodQuery(((frozenset({"default"}), a),))
    yield PodQuery(((None, not_b),))
    yield PodQuery(((frozenset({"ns1", "ns2"}), tier), (None, a)))
    yield PodQuery(((None, LabelSelector()),))
    yield PodQuery(((None, None),))
    yield PodQuery(())


def test_pod_counts_follow_cache_changes() -> None:
    """Memoised per-row counts are kept right through binds, deletions, node relabels, removals and adds
    (asked before the changes, so they are updated incrementally, not recomputed)."""
    rng = random.Random(7)
    cache, names = _random_cluster(rng, 40, 300)
    queries = list(_queries())
    for step in range(8):
        for query in queries:
            assert _indexed_counts(cache, query) == _brute_counts(cache, query), (step, query)
        _churn(rng, cache, names, step)
    assert sum(_brute_counts(cache, queries[1]).values()) > 0


def test_existing_terms_cover_every_selecting_term() -> None:
    """existing_terms may return extra candidates, never miss a term that selects the pod."""
    rng = random.Random(11)
    cache, names = _random_cluster(rng, 30, 300)
    cache.snapshot().cache_index()
    _churn(rng, cache, names, 0)
    cache.snapshot().cache_index()
    # And a node holding pods with affinity terms leaves (its row is not reused).
    leaving = next(info.name for info in cache.snapshot().node_infos if info.pods_with_affinity)
    cache.apply([Delete(Kind.NODE, "", leaving)])
    names.remove(leaving)
    snapshot = cache.snapshot()
    index = snapshot.cache_index()
    # The rows of a node that left hold nothing any more.
    live = set(snapshot.rows.tolist())
    held = set()
    for family in (0, 1):
        for app in APPS:
            for tier in "xy":
                for _, rows in index.existing_terms(family, {"app": app, "tier": tier}):
                    held |= set(rows.counts)
    assert held and held <= live
    found_any = False
    for i in range(40):
        pod = _incoming_pod(rng, i, names)
        ns_labels = snapshot.namespaces[pod.namespace].labels
        for family, kinds in ((0, ("required_anti_affinity",)), (1, ("required_affinity",))):
            want = sum(
                1
                for info in snapshot.node_infos
                for existing in info.pods_with_affinity.values()
                for kind in kinds
                for term in getattr(existing, kind)
                if inter_pod_affinity.existing_term_matches(term, existing, pod, ns_labels)
            )
            got = sum(
                int(rows.arrays()[1].sum())
                for term, rows in index.existing_terms(family, pod.labels)
                if term.kind in (0, 1) and term.selects(pod.namespace, pod.labels, ns_labels)
            )
            assert got == want
            found_any = found_any or want > 0
    assert found_any


def test_node_info_clones_do_not_reach_the_index() -> None:
    """Preemption's dry run edits a clone held in a one-row scratch table, and the plugins' cloned state;
    the cache's pod index, following only the cache, must not see those edits."""
    rng = random.Random(3)
    cache, names = _random_cluster(rng, 10, 80)
    queries = list(_queries())
    before = [_indexed_counts(cache, query) for query in queries]
    snapshot = cache.snapshot()
    generation = snapshot.generation
    original = max(snapshot.node_infos, key=lambda info: len(info.pods))
    pods_before = dict(original.pods)
    requested_before = snapshot.table.requested[snapshot.table.row_of[original.name]].copy()
    assert pods_before and any(counts[original.name] for counts in before)
    plugins = [factory() for factory in CONFIGS.values()]
    incoming = [_incoming_pod(rng, i, names) for i in range(4)]
    clone = original.clone()
    table = snapshot.table.scratch()
    row = table.add(clone)
    states = []
    for plugin in plugins:
        for pod in incoming:
            state = CycleState()
            if plugin.pre_filter(state, pod, snapshot)[1] is None:
                states.append((plugin, pod, state.clone()))
    assert states
    victims = list(clone.pods.values())
    for victim in victims:
        clone.remove_pod(victim)
        for plugin, pod, state in states:
            plugin.remove_pod(state, pod, victim, clone, snapshot)
    table.refresh(clone)
    assert table.pod_count[row] == 0
    for plugin, pod, state in states:
        plugin.filter_rows(state, pod, table, np.array([row], dtype=np.intp))
    clone.add_pod(victims[0])
    table.refresh(clone)
    for plugin, pod, state in states:
        plugin.add_pod(state, pod, victims[0], clone, snapshot)
    # The cache, its snapshot's node and row, and the index all still hold every pod.
    assert cache.snapshot().generation == generation
    assert dict(original.pods) == pods_before
    assert (snapshot.table.requested[snapshot.table.row_of[original.name]] == requested_before).all()
    for query, counts in zip(queries, before, strict=True):
        assert _indexed_counts(cache, query) == counts == _brute_counts(cache, query), query
        assert _indexed_counts(_rebuilt(cache), query) == counts, query


def test_critical_paths_without_visiting_every_domain() -> None:
    """_CriticalPaths.of equals updating domain by domain, ties and a domain named "" included."""
    rng = random.Random(5)
    for _ in range(2_000):
        size = rng.randint(0, 6)
        values = rng.sample(["", "a", "b", "c", "d", "e", "f"], size)
        nums = [rng.choice([0, 1, 1, 2, 5, 2**31 - 1, 2**31]) for _ in values]
        walked = _CriticalPaths()
        for value, num in zip(values, nums, strict=True):
            walked.update(value, num)
        got = _CriticalPaths.of(values, nums)
        assert (got.values, got.nums) == (walked.values, walked.nums), (values, nums)


def test_rounding_over_rows_rounds_halves_away_from_zero() -> None:
    values = [0.0, 0.4999999999999999, 0.5, 1.5, 2.5, 2.4999999999999996, 3.7, 1e6 + 0.5]
    want = [_round_half_away(v) for v in values]
    assert _round_half_away_rows(np.array(values, dtype=np.float64)).tolist() == want == [0, 0, 1, 2, 3, 2, 4, 1000001]


def test_filter_rows_answers_with_few_statuses() -> None:
    """Statuses come as a small table, not one per node, and codes index into it."""
    rng = random.Random(13)
    cache, names = _random_cluster(rng, 60, 300)
    snapshot = cache.snapshot()
    assert snapshot.table is not None and snapshot.rows is not None
    rejected = 0
    for i in range(20):
        pod = _incoming_pod(rng, i, names)
        for factory in CONFIGS.values():
            plugin = factory()
            state = CycleState()
            _, status = plugin.pre_filter(state, pod, snapshot)
            if status is not None:
                continue
            codes, statuses = plugin.filter_rows(state, pod, snapshot.table, snapshot.rows)
            assert codes.dtype == np.int32 and len(statuses) <= 3
            assert all(s.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE) for s in statuses)
            assert int(codes.max(initial=0)) <= len(statuses)
            rejected += int((codes > 0).sum())
    assert rejected > 0


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_an_overlay_index_kept_up_to_date_equals_one_read_afresh(seed: int) -> None:
    """A simulation binds and removes pods one after another on one overlay, reading the index between
    changes: the view it updates row by row must answer exactly as a view built from all changed rows."""
    rng = random.Random(seed)
    cache, names = _random_cluster(rng, 12, 60)
    overlay = Overlay(cache.snapshot())
    queries = list(_queries())
    labels = [{"app": app, "tier": tier} for app in ("a", "b") for tier in ("x", "y")]
    for step in range(25):
        if step % 3 == 2:
            bound = [p for name in names if (info := overlay.node(name)) for p in info.pods.values()]
            overlay.remove_pod(rng.choice(bound))
        else:
            overlay.bind_pod(pod_from_k8s(_existing_pod(rng, 50_000 + step, names)))
        kept = overlay.snapshot().index()
        for query in queries:
            kept.pod_counts(query)  # asked before the next change, so the next update must keep it current
        afresh = OverlayPodIndex(cache.snapshot().cache_index(), overlay.table.capacity, dict(overlay._dirty))
        for query in queries:
            assert kept.pod_counts(query).tolist() == afresh.pod_counts(query).tolist(), (step, query)
        for family in (FILTER_TERMS, SCORE_TERMS):
            for pod_labels in labels:
                got = sorted((repr(t), sorted(r.counts.items())) for t, r in kept.existing_terms(family, pod_labels))
                want = sorted((repr(t), sorted(r.counts.items())) for t, r in afresh.existing_terms(family, pod_labels))
                assert got == want, (step, family, pod_labels)


def test_pod_counts_bypass_terminating_pods_only_for_queries_that_ask() -> None:
    """Pods that start or stop terminating move between the index's groups, incrementally: queries that
    skip terminating pods (PodTopologySpread's) stop counting them, the others (InterPodAffinity's) keep
    counting them; an overlay's view agrees."""
    rng = random.Random(13)
    cache, _ = _random_cluster(rng, 30, 300)
    queries = [q for base in _queries() for q in (base, PodQuery(base.clauses, skip_terminating=True))]

    def brute(snapshot: Snapshot, query: PodQuery) -> dict[str, int]:
        return {
            info.name: sum(
                1 for p in info.pods.values() if query.matches(p.namespace, p.labels, p.deletion_timestamp is not None)
            )
            for info in snapshot.node_infos
        }

    def indexed(snapshot: Snapshot, query: PodQuery) -> dict[str, int]:
        counts = snapshot.index().pod_counts(query)[snapshot.rows].tolist()
        return {info.name: n for info, n in zip(snapshot.node_infos, counts, strict=True)}

    skipped = 0
    for step in range(5):
        snapshot = cache.snapshot()
        for query in queries:
            assert indexed(snapshot, query) == brute(snapshot, query), (step, query)
        bound = [e.obj for e in cache.entries(Kind.POD) if isinstance(e.obj, Pod) and e.obj.node_name]
        flips = rng.sample(bound, 15)
        cache.apply(
            [
                Upsert(Kind.POD, dataclasses.replace(p, deletion_timestamp=None if p.deletion_timestamp else 1.0e9))
                for p in flips
            ]
        )
        overlay = Overlay(cache.snapshot())
        for p in rng.sample(bound, 5):
            overlay.bind_pod(dataclasses.replace(p, name=f"{p.name}-t", deletion_timestamp=1.0e9))
        view = overlay.snapshot()
        for query in queries:
            assert indexed(view, query) == brute(view, query), (step, "overlay", query)
        skipped += sum(brute(view, queries[2]).values()) - sum(brute(view, queries[3]).values())
    assert skipped > 0
