"""InterPodAffinity: required (anti-)affinity in Filter, preferred terms and symmetry in Score."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.status import SKIP, unresolvable, unschedulable
from podfit.server.model import Kind, PodAffinityTerm
from podfit.server.model.objects import LabelSelector, LabelSelectorRequirement
from podfit.server.plugins import inter_pod_affinity
from podfit.server.plugins.inter_pod_affinity import InterPodAffinity, merged_selector

from tests.builders import NodeBuilder, PodBuilder, make_cache, make_node, make_pod
from tests.plugins import harness
from tests.plugins.harness import filter_snapshot

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"

AFFINITY = unresolvable("node(s) didn't match pod affinity rules")
ANTI = unschedulable("node(s) didn't match pod anti-affinity rules")
EXISTING = unschedulable("node(s) didn't satisfy existing pods anti-affinity rules")

Obj = PodBuilder | NodeBuilder | tuple[Kind, Mapping[str, Any]]


def term(key: str, labels: Mapping[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """A PodAffinityTerm; ``labels`` becomes matchLabels (None: no labelSelector at all)."""
    t: dict[str, Any] = {"topologyKey": key}
    if labels is not None:
        t["labelSelector"] = {"matchLabels": dict(labels)}
    t.update(extra)
    return t


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}


def preferred(*weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": w, "podAffinityTerm": t} for w, t in weighted]
    }


def namespace(name: str, **labels: str) -> tuple[Kind, dict[str, Any]]:
    return Kind.NAMESPACE, {"metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **labels}}}


def zones() -> list[Obj]:
    """a1, a2 in zone a; b1 in zone b; bare without a zone label (every node has its hostname label)."""
    return [
        make_node("a1").label(ZONE, "a"),
        make_node("a2").label(ZONE, "a"),
        make_node("b1").label(ZONE, "b"),
        make_node("bare"),
    ]


def run_filter(pod: PodBuilder, objects: Sequence[Obj], args: Mapping[str, Any] | None = None) -> Any:
    return harness.run_filter(inter_pod_affinity.new, pod, objects, args)


def run_score(
    pod: PodBuilder, objects: Sequence[Obj], args: Mapping[str, Any] | None = None, feasible: Sequence[str] = ()
) -> Any:
    return harness.run_score(inter_pod_affinity.new, pod, objects, args, feasible)


def web() -> PodBuilder:
    return make_pod("web").labels(app="web")


# --------------------------------------------------------------------------------------------------
# Filter


@pytest.mark.parametrize(
    ("pod", "objects", "want"),
    [
        pytest.param(
            web(),
            [*zones(), make_pod("db").labels(app="db").node("a1")],
            SKIP,
            id="a pod without required terms skips Filter when no existing pod has required anti-affinity",
        ),
        pytest.param(
            web().affinity("podAffinity", required(term(ZONE, {"app": "db"}))),
            [*zones(), make_pod("db").labels(app="db").node("a2")],
            {"a1": None, "a2": None, "b1": AFFINITY, "bare": AFFINITY},
            id="required affinity admits every node in the zone of a matching pod and nothing else",
        ),
        pytest.param(
            web().affinity("podAffinity", required(term(ZONE, {"app": "db"}))),
            zones(),
            {"a1": AFFINITY, "a2": AFFINITY, "b1": AFFINITY, "bare": AFFINITY},
            id="required affinity that no pod (not even the pod itself) matches rejects every node as unresolvable",
        ),
        pytest.param(
            web().affinity("podAffinity", required(term(ZONE, {"app": "web"}))),
            zones(),
            {"a1": None, "a2": None, "b1": None, "bare": AFFINITY},
            id="the first pod of a self-affine group may go to any node that has the topology key",
        ),
        pytest.param(
            web().affinity("podAffinity", required(term(ZONE, {"app": "web"}))),
            [*zones(), make_pod("web-0").labels(app="web").node("b1")],
            {"a1": AFFINITY, "a2": AFFINITY, "b1": None, "bare": AFFINITY},
            id="once a pod of the self-affine group exists the group must join its zone",
        ),
        pytest.param(
            web().affinity("podAffinity", required(term(ZONE, {"app": "db"}), term(HOST, {"tier": "cache"}))),
            [
                *zones(),
                make_pod("db").labels(app="db").node("a1"),
                make_pod("cache").labels(tier="cache").node("b1"),
            ],
            {"a1": AFFINITY, "a2": AFFINITY, "b1": AFFINITY, "bare": AFFINITY},
            id="existing pods count only when they match all the required affinity terms",
        ),
        pytest.param(
            web().affinity("podAffinity", required(term(ZONE, {"app": "db"}), term(HOST, {"tier": "cache"}))),
            [*zones(), make_pod("db").labels(app="db", tier="cache").node("a1")],
            {"a1": None, "a2": AFFINITY, "b1": AFFINITY, "bare": AFFINITY},
            id="every required affinity term must find the matching pod in the node's own domain",
        ),
        pytest.param(
            web().affinity("podAntiAffinity", required(term(ZONE, {"app": "db"}))),
            [*zones(), make_pod("db").labels(app="db").node("a1")],
            {"a1": ANTI, "a2": ANTI, "b1": None, "bare": None},
            id="required anti-affinity rejects the zone of a matching pod and accepts nodes without the key",
        ),
        pytest.param(
            web().affinity("podAntiAffinity", required(term(ZONE, {"app": "db"}))),
            [*zones(), make_pod("db", "other").labels(app="db").node("a1")],
            {"a1": None, "a2": None, "b1": None, "bare": None},
            id="a term without namespaces or namespaceSelector only selects pods of the pod's own namespace",
        ),
        pytest.param(
            web().affinity("podAntiAffinity", required(term(ZONE, {"app": "db"}, namespaces=["other"]))),
            [
                *zones(),
                make_pod("db", "other").labels(app="db").node("a1"),
                make_pod("db").labels(app="db").node("b1"),
            ],
            {"a1": ANTI, "a2": ANTI, "b1": None, "bare": None},
            id="a namespaces list selects pods of exactly those namespaces",
        ),
        pytest.param(
            web().affinity("podAntiAffinity", required(term(ZONE, {"app": "db"}, namespaceSelector={}))),
            [
                *zones(),
                make_pod("db", "other").labels(app="db").node("a1"),
                make_pod("db", "third").labels(app="db").node("b1"),
            ],
            {"a1": ANTI, "a2": ANTI, "b1": ANTI, "bare": None},
            id="an empty namespaceSelector selects pods of every namespace",
        ),
        pytest.param(
            web().affinity(
                "podAntiAffinity",
                required(term(ZONE, {"app": "db"}, namespaceSelector={"matchLabels": {"team": "x"}})),
            ),
            [
                *zones(),
                namespace("other", team="x"),
                namespace("third", team="y"),
                make_pod("db", "other").labels(app="db").node("a1"),
                make_pod("db", "third").labels(app="db").node("b1"),
            ],
            {"a1": ANTI, "a2": ANTI, "b1": None, "bare": None},
            id="a namespaceSelector selects the pods of namespaces whose labels match",
        ),
        pytest.param(
            web().affinity(
                "podAntiAffinity",
                required(
                    term(ZONE, {"app": "db"}, namespaces=["third"], namespaceSelector={"matchLabels": {"team": "x"}})
                ),
            ),
            [
                *zones(),
                namespace("other", team="x"),
                make_pod("db", "other").labels(app="db").node("a1"),
                make_pod("db", "third").labels(app="db").node("b1"),
            ],
            {"a1": ANTI, "a2": ANTI, "b1": ANTI, "bare": None},
            id="namespaces and namespaceSelector together select the union of their namespaces",
        ),
        pytest.param(
            web().affinity(
                "podAntiAffinity",
                required(term(ZONE, {"app": "db"}, namespaceSelector={"matchLabels": {"team": "nobody"}})),
            ),
            [*zones(), make_pod("db").labels(app="db").node("a1")],
            {"a1": None, "a2": None, "b1": None, "bare": None},
            id="a namespaceSelector matching no namespace selects no pod, not even of the pod's own namespace",
        ),
        pytest.param(
            web().affinity("podAntiAffinity", required(term(ZONE))),
            [*zones(), make_pod("db").labels(app="db").node("a1")],
            {"a1": None, "a2": None, "b1": None, "bare": None},
            id="a term without labelSelector matches no pod",
        ),
        pytest.param(
            web(),
            [
                *zones(),
                make_pod("db")
                .labels(app="db")
                .node("a1")
                .affinity("podAntiAffinity", required(term(ZONE, {"app": "web"}))),
            ],
            {"a1": EXISTING, "a2": EXISTING, "b1": None, "bare": None},
            id="an existing pod's required anti-affinity repels the incoming pod from its zone (symmetry)",
        ),
        pytest.param(
            web(),
            [
                *zones(),
                make_pod("db", "other")
                .labels(app="db")
                .node("a1")
                .affinity(
                    "podAntiAffinity",
                    required(term(ZONE, {"app": "web"}, namespaceSelector={"matchLabels": {"team": "x"}})),
                ),
                namespace("default", team="x"),
            ],
            {"a1": EXISTING, "a2": EXISTING, "b1": None, "bare": None},
            id="an existing pod's namespaceSelector is matched against the incoming pod's namespace labels",
        ),
        pytest.param(
            web(),
            [
                *zones(),
                make_pod("db", "other")
                .labels(app="db")
                .node("a1")
                .affinity(
                    "podAntiAffinity",
                    required(term(ZONE, {"app": "web"}, namespaceSelector={"matchLabels": {"team": "x"}})),
                ),
                namespace("default", team="y"),
            ],
            SKIP,
            id="an existing pod's namespaceSelector not matching the incoming pod's namespace leaves nothing to check",
        ),
        pytest.param(
            web()
            .affinity("podAffinity", required(term(ZONE, {"app": "db"})))
            .affinity("podAntiAffinity", required(term(ZONE, {"app": "cache"}))),
            [
                *zones(),
                make_pod("db").labels(app="db").node("b1"),
                make_pod("cache").labels(app="cache").node("a1"),
            ],
            {"a1": AFFINITY, "a2": AFFINITY, "b1": None, "bare": AFFINITY},
            id="a node failing both affinity and anti-affinity reports only the affinity failure",
        ),
        pytest.param(
            web().affinity("podAntiAffinity", required(term(ZONE, {"app": "db"}))),
            [
                *zones(),
                make_pod("db")
                .labels(app="db")
                .node("a1")
                .affinity("podAntiAffinity", required(term(HOST, {"app": "web"}))),
            ],
            {"a1": ANTI, "a2": ANTI, "b1": None, "bare": None},
            id="the pod's own anti-affinity is reported before existing pods' anti-affinity",
        ),
    ],
)
def test_filter(pod: PodBuilder, objects: list[Obj], want: Any) -> None:
    assert run_filter(pod, objects) == want


# The redis-cache / web-store example of the Kubernetes docs (assign-pod-node), on three nodes.
def store_nodes() -> list[Obj]:
    return [make_node("node-1"), make_node("node-2"), make_node("node-3")]


def redis(name: str, node: str = "") -> PodBuilder:
    pod = make_pod(name).labels(app="store").affinity("podAntiAffinity", required(term(HOST, {"app": "store"})))
    return pod.node(node) if node else pod


def web_store(name: str, node: str = "") -> PodBuilder:
    pod = (
        make_pod(name)
        .labels(app="web-store")
        .affinity("podAntiAffinity", required(term(HOST, {"app": "web-store"})))
        .affinity("podAffinity", required(term(HOST, {"app": "store"})))
    )
    return pod.node(node) if node else pod


@pytest.mark.parametrize(
    ("pod", "objects", "want"),
    [
        pytest.param(
            redis("redis-3"),
            [*store_nodes(), redis("redis-1", "node-1"), redis("redis-2", "node-2")],
            {"node-1": ANTI, "node-2": ANTI, "node-3": None},
            id="the third redis-cache replica avoids the nodes of the first two",
        ),
        pytest.param(
            web_store("web-3"),
            [
                *store_nodes(),
                *(redis(f"redis-{i}", f"node-{i}") for i in (1, 2, 3)),
                web_store("web-1", "node-1"),
                web_store("web-2", "node-2"),
            ],
            {"node-1": ANTI, "node-2": ANTI, "node-3": None},
            id="the third web-store replica joins the only redis-cache replica without a web-store",
        ),
        pytest.param(
            web_store("web-4"),
            [
                *store_nodes(),
                *(redis(f"redis-{i}", f"node-{i}") for i in (1, 2, 3)),
                *(web_store(f"web-{i}", f"node-{i}") for i in (1, 2, 3)),
            ],
            {"node-1": ANTI, "node-2": ANTI, "node-3": ANTI},
            id="a fourth web-store replica finds no node",
        ),
        pytest.param(
            web_store("web-1"),
            [*store_nodes(), redis("redis-2", "node-2")],
            {"node-1": AFFINITY, "node-2": None, "node-3": AFFINITY},
            id="a web-store replica must share a node with a redis-cache replica",
        ),
        pytest.param(
            make_pod("plain").labels(app="store"),
            [*store_nodes(), redis("redis-1", "node-1"), redis("redis-2", "node-2")],
            {"node-1": EXISTING, "node-2": EXISTING, "node-3": None},
            id="redis-cache replicas repel any app=store pod even without affinity of its own",
        ),
    ],
)
def test_filter_docs_store_example(pod: PodBuilder, objects: list[Obj], want: Any) -> None:
    assert run_filter(pod, objects) == want


# The tenant example of the docs: matchLabelKeys / mismatchLabelKeys keep tenants on their own node pools.
POOL = "node-pool"


def pools() -> list[Obj]:
    return [
        make_node("p1a").label(POOL, "1"),
        make_node("p1b").label(POOL, "1"),
        make_node("p2a").label(POOL, "2"),
        make_node("p3a").label(POOL, "3"),
    ]


def tenant_pod(name: str, tenant: str, merged: bool = False) -> PodBuilder:
    """Affinity to its tenant's pool, anti-affinity to other tenants' pools. ``merged``: as kube-apiserver stores
    it, with the keys already merged into the selectors (the keys themselves stay)."""
    affinity_selector: dict[str, Any] = {}
    anti_expressions: list[dict[str, Any]] = [{"key": "tenant", "operator": "Exists"}]
    if merged:
        affinity_selector = {"matchExpressions": [{"key": "tenant", "operator": "In", "values": [tenant]}]}
        anti_expressions.append({"key": "tenant", "operator": "NotIn", "values": [tenant]})
    return (
        make_pod(name)
        .labels(tenant=tenant)
        .affinity(
            "podAffinity",
            required({"topologyKey": POOL, "labelSelector": affinity_selector, "matchLabelKeys": ["tenant"]}),
        )
        .affinity(
            "podAntiAffinity",
            required(
                {
                    "topologyKey": POOL,
                    "labelSelector": {"matchExpressions": anti_expressions},
                    "mismatchLabelKeys": ["tenant"],
                }
            ),
        )
    )


def tenant_cluster() -> list[Obj]:
    return [
        *pools(),
        make_pod("a-0").labels(tenant="a").node("p1a"),
        make_pod("b-0").labels(tenant="b").node("p2a"),
        make_pod("daemon").labels(app="agent").node("p3a"),
    ]


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        pytest.param(
            tenant_pod("a-1", "a"),
            {"p1a": None, "p1b": None, "p2a": AFFINITY, "p3a": AFFINITY},
            id="matchLabelKeys keeps a tenant's pod in the pool of its tenant",
        ),
        pytest.param(
            tenant_pod("a-1", "a", merged=True),
            {"p1a": None, "p1b": None, "p2a": AFFINITY, "p3a": AFFINITY},
            id="a term whose label keys the API server already merged behaves the same",
        ),
        pytest.param(
            tenant_pod("c-0", "c"),
            {"p1a": ANTI, "p1b": ANTI, "p2a": ANTI, "p3a": None},
            id="mismatchLabelKeys keeps a new tenant out of pools used by other tenants",
        ),
        pytest.param(
            tenant_pod("c-0", "c", merged=True),
            {"p1a": ANTI, "p1b": ANTI, "p2a": ANTI, "p3a": None},
            id="a merged mismatchLabelKeys term behaves the same as an unmerged one",
        ),
    ],
)
def test_filter_docs_tenant_example(pod: PodBuilder, want: Any) -> None:
    assert run_filter(pod, tenant_cluster()) == want


def test_merging_label_keys_twice_changes_nothing() -> None:
    """kube-apiserver appends ``key In [value]``; merging an already merged term must not add it again."""
    term_ = PodAffinityTerm(
        label_selector=LabelSelector(match_labels=(("app", "web"),)),
        topology_key=ZONE,
        match_label_keys=("tenant",),
        mismatch_label_keys=("version",),
    )
    labels = {"app": "web", "tenant": "a", "version": "2"}
    merged = merged_selector(term_, labels)
    assert merged == LabelSelector(
        match_labels=(("app", "web"),),
        match_expressions=(
            LabelSelectorRequirement("tenant", "In", ("a",)),
            LabelSelectorRequirement("version", "NotIn", ("2",)),
        ),
    )
    again = PodAffinityTerm(merged, ZONE, match_label_keys=("tenant",), mismatch_label_keys=("version",))
    assert merged_selector(again, labels) is merged


# --------------------------------------------------------------------------------------------------
# PreFilterExtensions (preemption and nominated pods)


@pytest.mark.parametrize(
    ("pod", "objects", "change", "node", "want"),
    [
        pytest.param(
            web().affinity("podAntiAffinity", required(term(ZONE, {"app": "db"}))),
            [*zones(), make_pod("x").labels(app="x").node("a1")],
            ("add", make_pod("db").labels(app="db")),
            "b1",
            {"a1": None, "a2": None, "b1": ANTI, "bare": None},
            id="adding a pod that the anti-affinity selects closes its zone",
        ),
        pytest.param(
            web().affinity("podAntiAffinity", required(term(ZONE, {"app": "db"}))),
            [*zones(), make_pod("db").labels(app="db").node("a1")],
            ("remove", make_pod("db").labels(app="db")),
            "a1",
            {"a1": None, "a2": None, "b1": None, "bare": None},
            id="removing the only pod that the anti-affinity selects reopens its zone",
        ),
        pytest.param(
            web(),
            [
                *zones(),
                make_pod("db")
                .labels(app="db")
                .node("a1")
                .affinity("podAntiAffinity", required(term(HOST, {"app": "web"}))),
            ],
            ("add", make_pod("db2").labels(app="db").affinity("podAntiAffinity", required(term(ZONE, {"app": "web"})))),
            "b1",
            {"a1": EXISTING, "a2": None, "b1": EXISTING, "bare": None},
            id="adding a pod whose anti-affinity selects the incoming pod repels it from that zone",
        ),
        pytest.param(
            web().affinity("podAffinity", required(term(ZONE, {"app": "web"}))),
            [*zones(), make_pod("web-0").labels(app="web").node("b1")],
            ("remove", make_pod("web-0").labels(app="web")),
            "b1",
            {"a1": None, "a2": None, "b1": None, "bare": AFFINITY},
            id="removing the only pod of a self-affine group makes the incoming pod the first again",
        ),
        pytest.param(
            web().affinity("podAffinity", required(term(ZONE, {"app": "db"}))),
            [*zones(), make_pod("db").labels(app="db").node("b1")],
            ("add", make_pod("db", "other").labels(app="db")),
            "a1",
            {"a1": AFFINITY, "a2": AFFINITY, "b1": None, "bare": AFFINITY},
            id="adding a pod of another namespace changes nothing",
        ),
    ],
)
def test_pre_filter_extensions(
    pod: PodBuilder, objects: list[Obj], change: tuple[str, PodBuilder], node: str, want: Any
) -> None:
    plugin = inter_pod_affinity.new({})
    snapshot = make_cache(*objects).snapshot()
    state, incoming = CycleState(), pod.obj()
    _, status = plugin.pre_filter(state, incoming, snapshot)
    assert status is None
    before = filter_snapshot(plugin, state, incoming, snapshot)
    changed = state.clone()
    action, other = change
    other_pod = other.node(node).obj()
    if action == "add":
        plugin.add_pod(changed, incoming, other_pod, snapshot.node_info_map[node], snapshot)
    else:
        plugin.remove_pod(changed, incoming, other_pod, snapshot.node_info_map[node], snapshot)
    assert filter_snapshot(plugin, changed, incoming, snapshot) == want
    # The state PreFilter wrote is untouched: preemption works on clones.
    assert filter_snapshot(plugin, state, incoming, snapshot) == before


# --------------------------------------------------------------------------------------------------
# Score


@pytest.mark.parametrize(
    ("pod", "objects", "args", "want"),
    [
        pytest.param(
            web(),
            [*zones(), make_pod("db").labels(app="db").node("a1")],
            {},
            SKIP,
            id="PreScore skips a pod without preferred terms when no existing pod has affinity",
        ),
        pytest.param(
            web().affinity("podAffinity", preferred((50, term(ZONE, {"app": "nothing"})))),
            [*zones(), make_pod("db").labels(app="db").node("a1")],
            {},
            SKIP,
            id="PreScore skips when no preferred term matches any pod",
        ),
        pytest.param(
            web().affinity("podAffinity", preferred((50, term(ZONE, {"app": "db"})))),
            [*zones(), make_pod("db").labels(app="db").node("a1")],
            {},
            {"a1": 100, "a2": 100, "b1": 0, "bare": 0},
            id="preferred affinity favours every node in the zone of a matching pod",
        ),
        pytest.param(
            web().affinity("podAntiAffinity", preferred((50, term(ZONE, {"app": "db"})))),
            [*zones(), make_pod("db").labels(app="db").node("a1")],
            {},
            {"a1": 0, "a2": 0, "b1": 100, "bare": 100},
            id="preferred anti-affinity disfavours the zone of a matching pod",
        ),
        pytest.param(
            # Raw: a1 = a2 = 80, b1 = 20, bare = 0.
            web().affinity(
                "podAffinity", preferred((80, term(ZONE, {"app": "db"})), (20, term(HOST, {"app": "cache"})))
            ),
            [*zones(), make_pod("db").labels(app="db").node("a1"), make_pod("cache").labels(app="cache").node("b1")],
            {},
            {"a1": 100, "a2": 100, "b1": 25, "bare": 0},
            id="term weights add up per node and are scaled between the lowest and highest node",
        ),
        pytest.param(
            # Raw: a1 = 80 - 30 = 50, a2 = 80, b1 = bare = 0; min-max scaling truncates 62.5.
            web()
            .affinity("podAffinity", preferred((80, term(ZONE, {"app": "db"}))))
            .affinity("podAntiAffinity", preferred((30, term(HOST, {"app": "db"})))),
            [*zones(), make_pod("db").labels(app="db").node("a1")],
            {},
            {"a1": 62, "a2": 100, "b1": 0, "bare": 0},
            id="anti-affinity weights subtract from affinity weights and scaling truncates",
        ),
        pytest.param(
            web().affinity("podAffinity", preferred((50, term(ZONE, {"app": "db"})))),
            [
                make_node("a1").label(ZONE, "a"),
                make_node("b1").label(ZONE, "b"),
                make_pod("db").labels(app="db").node("a1"),
                make_pod("db2").labels(app="db").node("b1"),
            ],
            {},
            {"a1": 0, "b1": 0},
            id="equal raw scores on all scored nodes all normalise to 0",
        ),
        pytest.param(
            web(),
            [
                *zones(),
                make_pod("db")
                .labels(app="db")
                .node("b1")
                .affinity("podAffinity", required(term(ZONE, {"app": "web"}))),
            ],
            {},
            {"a1": 0, "a2": 0, "b1": 100, "bare": 0},
            id="an existing pod's required affinity to the incoming pod attracts it with hardPodAffinityWeight",
        ),
        pytest.param(
            web(),
            [
                *zones(),
                make_pod("db")
                .labels(app="db")
                .node("b1")
                .affinity("podAffinity", required(term(ZONE, {"app": "web"}))),
            ],
            {"hardPodAffinityWeight": 0},
            SKIP,
            id="hardPodAffinityWeight 0 ignores existing pods' required affinity",
        ),
        pytest.param(
            web(),
            [
                *zones(),
                make_pod("db")
                .labels(app="db")
                .node("a1")
                .affinity("podAffinity", required(term(ZONE, {"app": "web"}))),
                make_pod("x")
                .labels(app="x")
                .node("b1")
                .affinity("podAntiAffinity", preferred((20, term(ZONE, {"app": "web"})))),
            ],
            {"hardPodAffinityWeight": 3},
            # Raw: a1 = a2 = 3, b1 = -20, bare = 0 -> (s + 20) / 23.
            {"a1": 100, "a2": 100, "b1": 0, "bare": 86},
            id="existing pods' preferred anti-affinity to the incoming pod repels it and negative sums scale too",
        ),
        pytest.param(
            web(),
            [
                *zones(),
                make_pod("db")
                .labels(app="db")
                .node("b1")
                .affinity("podAffinity", preferred((40, term(HOST, {"app": "web"})))),
            ],
            {},
            {"a1": 0, "a2": 0, "b1": 100, "bare": 0},
            id="an existing pod's preferred affinity to the incoming pod attracts it to that pod's node",
        ),
        pytest.param(
            web(),
            [
                *zones(),
                make_pod("db")
                .labels(app="db")
                .node("b1")
                .affinity("podAffinity", preferred((40, term(HOST, {"app": "web"})))),
            ],
            {"ignorePreferredTermsOfExistingPods": True},
            SKIP,
            id="ignorePreferredTermsOfExistingPods skips a pod without preferred terms of its own",
        ),
        pytest.param(
            # Raw: a1 = a2 = 10 (own term), b1 = 40 (the existing pod's term), bare = 0.
            web().affinity("podAffinity", preferred((10, term(ZONE, {"app": "x"})))),
            [
                *zones(),
                make_pod("x").labels(app="x").node("a1"),
                make_pod("db")
                .labels(app="db")
                .node("b1")
                .affinity("podAffinity", preferred((40, term(HOST, {"app": "web"})))),
            ],
            {"ignorePreferredTermsOfExistingPods": True},
            {"a1": 25, "a2": 25, "b1": 100, "bare": 0},
            id="with preferred terms of its own existing pods' preferred terms still count despite the ignore flag",
        ),
        pytest.param(
            web().affinity("podAffinity", preferred((50, term(ZONE, {"app": "db"})))),
            [*zones(), make_pod("db", "other").labels(app="db").node("a1")],
            {},
            SKIP,
            id="preferred terms select pods of the pod's own namespace by default",
        ),
    ],
)
def test_score(pod: PodBuilder, objects: list[Obj], args: dict[str, Any], want: Any) -> None:
    assert run_score(pod, objects, args) == want


def test_docs_security_example() -> None:
    """Required affinity to S1 pods by zone, preferred anti-affinity to S2 pods by host: zone V only, and there
    the node without the S2 pod scores higher."""
    pod = (
        make_pod("sec")
        .affinity("podAffinity", required(term(ZONE, {"security": "S1"})))
        .affinity("podAntiAffinity", preferred((100, term(HOST, {"security": "S2"}))))
    )
    objects: list[Obj] = [
        make_node("v1").label(ZONE, "V"),
        make_node("v2").label(ZONE, "V"),
        make_node("w1").label(ZONE, "W"),
        make_pod("s1").labels(security="S1").node("v2"),
        make_pod("s2").labels(security="S2").node("v1"),
    ]
    assert run_filter(pod, objects) == {"v1": None, "v2": None, "w1": AFFINITY}
    assert run_score(pod, objects, feasible=("v1", "v2")) == {"v1": 0, "v2": 100}


def test_score_counts_pods_on_infeasible_nodes() -> None:
    """Domains are counted over the whole cluster; only the scored nodes are the feasible ones."""
    pod = web().affinity("podAffinity", preferred((50, term(ZONE, {"app": "db"}))))
    objects = [*zones(), make_pod("db").labels(app="db").node("a1")]
    assert run_score(pod, objects, {}, feasible=("a2", "b1")) == {"a2": 100, "b1": 0}


# --------------------------------------------------------------------------------------------------
# Arguments


@pytest.mark.parametrize(
    ("args", "field"),
    [
        pytest.param({"hardPodAffinityWeight": 101}, "hardPodAffinityWeight", id="a hard weight above 100 is invalid"),
        pytest.param({"hardPodAffinityWeight": -1}, "hardPodAffinityWeight", id="a negative hard weight is invalid"),
        pytest.param({"hardPodAffinityWeight": "5"}, "hardPodAffinityWeight", id="a hard weight must be an integer"),
        pytest.param(
            {"ignorePreferredTermsOfExistingPods": "yes"},
            "ignorePreferredTermsOfExistingPods",
            id="the ignore flag must be a boolean",
        ),
        pytest.param({"hardPodAffinityWieght": 2}, "hardPodAffinityWieght", id="unknown fields are rejected"),
    ],
)
def test_invalid_args(args: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        inter_pod_affinity.new(args)


def test_default_args() -> None:
    plugin = inter_pod_affinity.new({})
    assert isinstance(plugin, InterPodAffinity)
    assert (plugin.hard_pod_affinity_weight, plugin.ignore_preferred_terms_of_existing_pods) == (1, False)
    assert plugin.name == "InterPodAffinity"


# --------------------------------------------------------------------------------------------------
# Terminating pods: unlike PodTopologySpread, upstream's InterPodAffinity never looks at deletionTimestamp,
# so a terminating pod matches, and its own terms apply, until it is gone.


@pytest.mark.parametrize(
    ("pod", "objects", "want"),
    [
        pytest.param(
            web().affinity("podAntiAffinity", required(term(ZONE, {"app": "db"}))),
            [*zones(), make_pod("db").labels(app="db").node("a1").terminating()],
            {"a1": ANTI, "a2": ANTI, "b1": None, "bare": None},
            id="a terminating pod still repels required anti-affinity",
        ),
        pytest.param(
            web().affinity("podAffinity", required(term(ZONE, {"app": "db"}))),
            [*zones(), make_pod("db").labels(app="db").node("a2").terminating()],
            {"a1": None, "a2": None, "b1": AFFINITY, "bare": AFFINITY},
            id="a terminating pod still satisfies required affinity",
        ),
        pytest.param(
            web(),
            [
                *zones(),
                make_pod("db")
                .labels(app="db")
                .node("b1")
                .terminating()
                .affinity("podAntiAffinity", required(term(ZONE, {"app": "web"}))),
            ],
            {"a1": None, "a2": None, "b1": EXISTING, "bare": None},
            id="a terminating pod's own required anti-affinity still applies",
        ),
    ],
)
def test_filter_counts_terminating_pods(pod: PodBuilder, objects: list[Obj], want: Any) -> None:
    assert run_filter(pod, objects) == want


@pytest.mark.parametrize(
    ("pod", "objects", "want"),
    [
        pytest.param(
            web().affinity("podAffinity", preferred((50, term(ZONE, {"app": "db"})))),
            [*zones(), make_pod("db").labels(app="db").node("a1").terminating()],
            {"a1": 100, "a2": 100, "b1": 0, "bare": 0},
            id="a terminating pod still attracts preferred affinity",
        ),
        pytest.param(
            web(),
            [
                *zones(),
                make_pod("db")
                .labels(app="db")
                .node("b1")
                .terminating()
                .affinity("podAffinity", preferred((50, term(ZONE, {"app": "web"})))),
            ],
            {"a1": 0, "a2": 0, "b1": 100, "bare": 0},
            id="a terminating pod's own preferred affinity still scores",
        ),
    ],
)
def test_score_counts_terminating_pods(pod: PodBuilder, objects: list[Obj], want: Any) -> None:
    assert run_score(pod, objects) == want
