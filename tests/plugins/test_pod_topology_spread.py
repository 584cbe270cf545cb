"""PodTopologySpread: DoNotSchedule constraints in Filter, ScheduleAnyway and cluster-default ones in Score."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from podfit.server.cache.cluster_cache import Upsert
from podfit.server.cache.overlay import Overlay
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.status import SKIP, unresolvable, unschedulable
from podfit.server.model import Kind, LabelSelector, LabelSelectorRequirement
from podfit.server.model.decode import object_from_k8s
from podfit.server.model.objects import pod_from_k8s
from podfit.server.plugins import pod_topology_spread
from podfit.server.plugins.pod_topology_spread import PodTopologySpread, default_selector

from tests.builders import NodeBuilder, PodBuilder, make_cache, make_node, make_pod
from tests.plugins import harness
from tests.plugins.harness import filter_snapshot

ZONE = "zone"
HOST = "kubernetes.io/hostname"
K8S_ZONE = "topology.kubernetes.io/zone"

SPREAD = unschedulable("node(s) didn't match pod topology spread constraints")
MISSING = unresolvable("node(s) didn't match pod topology spread constraints (missing required label)")

Obj = PodBuilder | NodeBuilder | tuple[Kind, Mapping[str, Any]]
FOO = {"matchLabels": {"foo": "bar"}}


def foo(name: str, node: str = "", namespace: str = "default") -> PodBuilder:
    """A pod labelled foo=bar, the label the docs' examples spread."""
    pod = make_pod(name, namespace).labels(foo="bar")
    return pod.node(node) if node else pod


def replica_set(name: str, match_labels: Mapping[str, str], namespace: str = "default") -> tuple[Kind, dict[str, Any]]:
    return Kind.REPLICA_SET, {
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": dict(match_labels)}},
    }


def service(name: str, selector: Mapping[str, str], namespace: str = "default") -> tuple[Kind, dict[str, Any]]:
    return Kind.SERVICE, {
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": dict(selector)},
    }


def run_filter(pod: PodBuilder, objects: Sequence[Obj], args: Mapping[str, Any] | None = None) -> Any:
    return harness.run_filter(pod_topology_spread.new, pod, objects, args)


def run_score(
    pod: PodBuilder, objects: Sequence[Obj], args: Mapping[str, Any] | None = None, feasible: Sequence[str] = ()
) -> Any:
    return harness.run_score(pod_topology_spread.new, pod, objects, args, feasible)


def four_nodes() -> list[Obj]:
    """The docs' cluster: node1, node2 in zoneA; node3, node4 in zoneB."""
    return [
        make_node("node1").label(ZONE, "zoneA"),
        make_node("node2").label(ZONE, "zoneA"),
        make_node("node3").label(ZONE, "zoneB"),
        make_node("node4").label(ZONE, "zoneB"),
    ]


def three_pods() -> list[Obj]:
    """foo=bar pods on node1, node2 and node3: zoneA holds 2, zoneB 1."""
    return [foo("p1", "node1"), foo("p2", "node2"), foo("p3", "node3")]


def five_zones_nodes() -> list[Obj]:
    """The docs' node-affinity example: zoneA (node1, node2), zoneB (node3, node4), zoneC (node5)."""
    return [
        *four_nodes(),
        make_node("node5").label(ZONE, "zoneC"),
        foo("p1", "node1"),
        foo("p3", "node3"),
    ]


# --------------------------------------------------------------------------------------------------
# Filter


@pytest.mark.parametrize(
    ("pod", "objects", "want"),
    [
        pytest.param(
            foo("new"),
            [*four_nodes(), *three_pods()],
            SKIP,
            id="a pod without constraints skips Filter",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, "ScheduleAnyway", FOO),
            [*four_nodes(), *three_pods()],
            SKIP,
            id="a pod with only ScheduleAnyway constraints skips Filter",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO),
            [*four_nodes(), *three_pods()],
            {"node1": SPREAD, "node2": SPREAD, "node3": None, "node4": None},
            id="one zone constraint sends the pod to zoneB whose count stays within maxSkew (docs)",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO).spread(1, HOST, selector=FOO),
            [*four_nodes(), *three_pods()],
            {"node1": SPREAD, "node2": SPREAD, "node3": SPREAD, "node4": None},
            id="zone and node constraints together leave only node4 (docs)",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO).spread(1, HOST, selector=FOO),
            [
                make_node("node1").label(ZONE, "zoneA"),
                make_node("node2").label(ZONE, "zoneA"),
                make_node("node3").label(ZONE, "zoneB"),
                *(foo(f"p{i}", "node1") for i in range(3)),
                foo("p3", "node3"),
            ],
            {"node1": SPREAD, "node2": SPREAD, "node3": SPREAD},
            id="conflicting constraints (the zone wants zoneB, the node constraint wants node2) leave the pod pending",
        ),
        pytest.param(
            foo("new").spread(2, ZONE, selector=FOO),
            [*four_nodes(), *three_pods()],
            {"node1": None, "node2": None, "node3": None, "node4": None},
            id="a larger maxSkew tolerates the bigger zone",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO),
            [
                make_node("node1"),
                make_node("node2").label(ZONE, "zoneA"),
                make_node("node3").label(ZONE, "zoneB"),
                *(foo(f"p{i}", "node1") for i in range(3)),
                foo("p3", "node3"),
            ],
            {"node1": MISSING, "node2": None, "node3": SPREAD},
            id="a node without the topology key is unresolvable and its pods are not counted",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO),
            [
                *four_nodes(),
                make_node("node5").label("zone-typo", "zoneC"),
                *three_pods(),
                foo("p5", "node5"),
            ],
            {"node1": SPREAD, "node2": SPREAD, "node3": None, "node4": None, "node5": MISSING},
            id="a node with a mistyped topology label is bypassed (docs)",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO),
            five_zones_nodes(),
            {"node1": SPREAD, "node2": SPREAD, "node3": SPREAD, "node4": SPREAD, "node5": None},
            id="without node affinity the empty zoneC is the global minimum (docs)",
        ),
        pytest.param(
            foo("new")
            .spread(1, ZONE, selector=FOO)
            .affinity(
                "nodeAffinity",
                {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": ZONE, "operator": "NotIn", "values": ["zoneC"]}]}
                        ]
                    }
                },
            ),
            five_zones_nodes(),
            {"node1": None, "node2": None, "node3": None, "node4": None, "node5": None},
            id="node affinity excluding zoneC removes it from the domains by default (nodeAffinityPolicy Honor, docs)",
        ),
        pytest.param(
            foo("new")
            .spread(1, ZONE, selector=FOO, nodeAffinityPolicy="Ignore")
            .affinity(
                "nodeAffinity",
                {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": ZONE, "operator": "NotIn", "values": ["zoneC"]}]}
                        ]
                    }
                },
            ),
            five_zones_nodes(),
            {"node1": SPREAD, "node2": SPREAD, "node3": SPREAD, "node4": SPREAD, "node5": None},
            id="nodeAffinityPolicy Ignore keeps the zone the pod cannot use as a domain",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO).node_selector(disk="ssd"),
            [
                make_node("node1").labels(**{ZONE: "zoneA", "disk": "ssd"}),
                make_node("node2").labels(**{ZONE: "zoneB", "disk": "ssd"}),
                make_node("node3").labels(**{ZONE: "zoneC"}),
                foo("p1", "node1"),
                foo("p2", "node2"),
            ],
            {"node1": None, "node2": None, "node3": None},
            id="nodeSelector also limits the domains under nodeAffinityPolicy Honor",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO, minDomains=3),
            [
                make_node("node1").label(ZONE, "zoneA"),
                make_node("node2").label(ZONE, "zoneB"),
                foo("p1", "node1"),
                foo("p2", "node2"),
            ],
            {"node1": SPREAD, "node2": SPREAD},
            id="with fewer eligible domains than minDomains the global minimum is 0 (docs)",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO, minDomains=2),
            [
                make_node("node1").label(ZONE, "zoneA"),
                make_node("node2").label(ZONE, "zoneB"),
                foo("p1", "node1"),
                foo("p2", "node2"),
            ],
            {"node1": None, "node2": None},
            id="with as many eligible domains as minDomains the real minimum applies",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO),
            [
                make_node("n1").label(ZONE, "zoneA"),
                make_node("n2").label(ZONE, "zoneB"),
                make_node("n3").label(ZONE, "zoneC").taint("dedicated", "x", "NoSchedule"),
                foo("p1", "n1"),
                foo("p2", "n2"),
            ],
            {"n1": SPREAD, "n2": SPREAD, "n3": None},
            id="a tainted node still counts as a domain under the default nodeTaintsPolicy Ignore (docs)",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO, nodeTaintsPolicy="Honor"),
            [
                make_node("n1").label(ZONE, "zoneA"),
                make_node("n2").label(ZONE, "zoneB"),
                make_node("n3").label(ZONE, "zoneC").taint("dedicated", "x", "NoSchedule"),
                foo("p1", "n1"),
                foo("p2", "n2"),
            ],
            {"n1": None, "n2": None, "n3": None},
            id="nodeTaintsPolicy Honor drops nodes with untolerated taints from the domains (docs)",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO, nodeTaintsPolicy="Honor").toleration("dedicated", "Exists"),
            [
                make_node("n1").label(ZONE, "zoneA"),
                make_node("n2").label(ZONE, "zoneB"),
                make_node("n3").label(ZONE, "zoneC").taint("dedicated", "x", "NoSchedule"),
                foo("p1", "n1"),
                foo("p2", "n2"),
            ],
            {"n1": SPREAD, "n2": SPREAD, "n3": None},
            id="nodeTaintsPolicy Honor keeps tainted nodes whose taints the pod tolerates",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO),
            [*four_nodes(), foo("p1", "node1", "other"), foo("p2", "node1", "other"), foo("p3", "node3")],
            {"node1": None, "node2": None, "node3": SPREAD, "node4": SPREAD},
            id="only pods of the incoming pod's namespace are counted",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO),
            [
                *four_nodes(),
                foo("p1", "node1").phase("Succeeded"),
                foo("p2", "node1").phase("Failed"),
                foo("p3", "node3"),
            ],
            {"node1": None, "node2": None, "node3": SPREAD, "node4": SPREAD},
            id="terminal pods are not counted",
        ),
        pytest.param(
            make_pod("new").spread(1, ZONE, selector=FOO),
            [*four_nodes(), foo("p1", "node1")],
            {"node1": None, "node2": None, "node3": None, "node4": None},
            id="a pod its selector does not match adds nothing to its own domain",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO),
            [*four_nodes(), foo("p1", "node1")],
            {"node1": SPREAD, "node2": SPREAD, "node3": None, "node4": None},
            id="a pod its selector matches adds itself to the domain it would join",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector={}),
            [*four_nodes(), *(make_pod(f"p{i}").node("node1") for i in range(4))],
            {"node1": None, "node2": None, "node3": None, "node4": None},
            id="an empty labelSelector counts no existing pod",
        ),
        pytest.param(
            foo("new").spread(1, ZONE),
            [*four_nodes(), *(foo(f"p{i}", "node1") for i in range(4))],
            {"node1": None, "node2": None, "node3": None, "node4": None},
            id="a constraint without labelSelector matches no pod",
        ),
        pytest.param(
            foo("new").label("hash", "new").spread(1, ZONE, selector=FOO, matchLabelKeys=["hash"]),
            [*four_nodes(), foo("p1", "node1").label("hash", "old"), foo("p2", "node2").label("hash", "old")],
            {"node1": None, "node2": None, "node3": None, "node4": None},
            id="matchLabelKeys counts only pods with the incoming pod's value for those keys",
        ),
        pytest.param(
            foo("new").label("hash", "new").spread(1, ZONE, selector=FOO, matchLabelKeys=["hash"]),
            [*four_nodes(), foo("p1", "node1").label("hash", "new"), foo("p2", "node3").label("hash", "old")],
            {"node1": SPREAD, "node2": SPREAD, "node3": None, "node4": None},
            id="matchLabelKeys still counts the pods sharing the value",
        ),
        pytest.param(
            foo("new")
            .label("hash", "new")
            .spread(1, ZONE, selector={"matchLabels": {"foo": "bar", "hash": "new"}}, matchLabelKeys=["hash"]),
            [*four_nodes(), foo("p1", "node1").label("hash", "new"), foo("p2", "node3").label("hash", "old")],
            {"node1": SPREAD, "node2": SPREAD, "node3": None, "node4": None},
            id="a selector that already holds the matchLabelKeys behaves the same",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO, matchLabelKeys=["hash"]),
            [*four_nodes(), foo("p1", "node1").label("hash", "old")],
            {"node1": SPREAD, "node2": SPREAD, "node3": None, "node4": None},
            id="matchLabelKeys the incoming pod does not carry are ignored",
        ),
    ],
)
def test_filter(pod: PodBuilder, objects: list[Obj], want: Any) -> None:
    assert run_filter(pod, objects) == want


LIST_ZONE_HARD = {
    "defaultingType": "List",
    "defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}],
}


@pytest.mark.parametrize(
    ("pod", "objects", "want"),
    [
        pytest.param(
            make_pod("new").labels(app="web").owner("ReplicaSet", "web-rs"),
            [*four_nodes(), replica_set("web-rs", {"app": "web"}), make_pod("w1").labels(app="web").node("node1")],
            {"node1": SPREAD, "node2": SPREAD, "node3": None, "node4": None},
            id="List default constraints apply with the selector of the pod's ReplicaSet",
        ),
        pytest.param(
            make_pod("new").labels(app="web"),
            [*four_nodes(), make_pod("w1").labels(app="web").node("node1")],
            SKIP,
            id="default constraints do not apply to a pod no workload selects",
        ),
        pytest.param(
            make_pod("new").labels(app="web").owner("ReplicaSet", "web-rs").spread(3, HOST, selector={}),
            [*four_nodes(), replica_set("web-rs", {"app": "web"}), make_pod("w1").labels(app="web").node("node1")],
            {"node1": None, "node2": None, "node3": None, "node4": None},
            id="default constraints do not apply to a pod with constraints of its own",
        ),
    ],
)
def test_filter_list_defaults(pod: PodBuilder, objects: list[Obj], want: Any) -> None:
    assert run_filter(pod, objects, LIST_ZONE_HARD) == want


# --------------------------------------------------------------------------------------------------
# PreFilterExtensions


@pytest.mark.parametrize(
    ("action", "other", "node", "want"),
    [
        pytest.param(
            "add",
            foo("added"),
            "node3",
            {"node1": None, "node2": None, "node3": None, "node4": None},
            id="adding a matching pod to the smaller zone evens the zones and raises the global minimum",
        ),
        pytest.param(
            "add",
            foo("added", namespace="other"),
            "node3",
            {"node1": SPREAD, "node2": SPREAD, "node3": None, "node4": None},
            id="adding a pod of another namespace changes nothing",
        ),
        pytest.param(
            "add",
            make_pod("added").labels(foo="baz"),
            "node3",
            {"node1": SPREAD, "node2": SPREAD, "node3": None, "node4": None},
            id="adding a pod the selector does not match changes nothing",
        ),
        pytest.param(
            "remove",
            foo("p1"),
            "node1",
            {"node1": None, "node2": None, "node3": None, "node4": None},
            id="removing a matching pod from zoneA brings it back within maxSkew",
        ),
    ],
)
def test_pre_filter_extensions(action: str, other: PodBuilder, node: str, want: Any) -> None:
    plugin = pod_topology_spread.new({})
    snapshot = make_cache(
        *four_nodes(),
        foo("p1", "node1"),
        foo("p2", "node2"),
        foo("p3", "node3"),
        foo("p4", "node4"),
        foo("p5", "node1"),
    ).snapshot()
    # zoneA holds 3, zoneB 2.
    state, incoming = CycleState(), foo("new").spread(1, ZONE, selector=FOO).obj()
    _, status = plugin.pre_filter(state, incoming, snapshot)
    assert status is None
    before = filter_snapshot(plugin, state, incoming, snapshot)
    changed = state.clone()
    pod = other.node(node).obj()
    if action == "add":
        plugin.add_pod(changed, incoming, pod, snapshot.node_info_map[node], snapshot)
    else:
        plugin.remove_pod(changed, incoming, pod, snapshot.node_info_map[node], snapshot)
    assert filter_snapshot(plugin, changed, incoming, snapshot) == want
    assert filter_snapshot(plugin, state, incoming, snapshot) == before


# --------------------------------------------------------------------------------------------------
# Score


def zones_with_bare() -> list[Obj]:
    """a1, a2 in zone a; b1 in zone b; bare without a zone (standard keys, for the system defaults)."""
    return [
        make_node("a1").label(K8S_ZONE, "a"),
        make_node("a2").label(K8S_ZONE, "a"),
        make_node("b1").label(K8S_ZONE, "b"),
        make_node("bare"),
    ]


def web(name: str, node: str = "") -> PodBuilder:
    pod = make_pod(name).labels(app="web")
    return pod.node(node) if node else pod


WEB = {"matchLabels": {"app": "web"}}


@pytest.mark.parametrize(
    ("pod", "objects", "args", "want"),
    [
        pytest.param(
            web("new").spread(1, K8S_ZONE, selector=WEB),
            [*zones_with_bare(), web("w1", "a1")],
            {},
            SKIP,
            id="PreScore skips a pod with only DoNotSchedule constraints",
        ),
        pytest.param(
            web("new"),
            [*zones_with_bare(), web("w1", "a1")],
            {},
            SKIP,
            id="PreScore skips a pod without constraints that no workload selects",
        ),
        pytest.param(
            # Two zones among the feasible nodes: weight ln(4); a: round(2 x 1.386) = 3, b: 0.
            web("new").spread(1, K8S_ZONE, "ScheduleAnyway", WEB),
            [*zones_with_bare(), web("w1", "a1"), web("w2", "a2")],
            {},
            {"a1": 0, "a2": 0, "b1": 100, "bare": 0},
            id="a ScheduleAnyway zone constraint favours the emptier zone and gives nodes without the key 0",
        ),
        pytest.param(
            # Four nodes: weight ln(6) = 1.79; raw a1 round(3.58) = 4, a2 0, b1 round(1.79) = 2, bare 0.
            web("new").spread(1, HOST, "ScheduleAnyway", WEB),
            [*zones_with_bare(), web("w1", "a1"), web("w2", "a1"), web("w3", "b1")],
            {},
            {"a1": 0, "a2": 100, "b1": 50, "bare": 100},
            id="a hostname constraint counts the pods on each node itself",
        ),
        pytest.param(
            # As above plus maxSkew - 1 = 2 on every raw score: a1 6, a2 2, b1 4, bare 2 -> 100 x (8 - s) / 6.
            web("new").spread(3, HOST, "ScheduleAnyway", WEB),
            [*zones_with_bare(), web("w1", "a1"), web("w2", "a1"), web("w3", "b1")],
            {},
            {"a1": 33, "a2": 100, "b1": 66, "bare": 100},
            id="maxSkew adds maxSkew - 1 to every raw score, softening the differences",
        ),
        pytest.param(
            # Zone weight ln(4), host weight ln(5) over the three nodes with both keys; bare is ignored.
            # a1: 2 x 1.386 + 1 x 1.609 = 4.38 -> 4; a2: 2.77 + 1.61 = 4.38 -> 4; b1: 0.
            web("new").spread(1, K8S_ZONE, "ScheduleAnyway", WEB).spread(1, HOST, "ScheduleAnyway", WEB),
            [*zones_with_bare(), web("w1", "a1"), web("w2", "a2")],
            {},
            {"a1": 0, "a2": 0, "b1": 100, "bare": 0},
            id="with constraints of its own a node must carry every topology key to be scored",
        ),
        pytest.param(
            web("new").spread(1, K8S_ZONE, "ScheduleAnyway", WEB),
            [*zones_with_bare(), web("w1", "a1").namespace("other"), web("w2", "b1")],
            {},
            {"a1": 100, "a2": 100, "b1": 0, "bare": 0},
            id="scores only count pods of the incoming pod's namespace",
        ),
        pytest.param(
            # Zone b's only node is tainted: its pods do not count under nodeTaintsPolicy Honor.
            web("new").spread(1, K8S_ZONE, "ScheduleAnyway", WEB, nodeTaintsPolicy="Honor"),
            [
                make_node("a1").label(K8S_ZONE, "a"),
                make_node("b1").label(K8S_ZONE, "b").taint("dedicated", "x", "NoSchedule"),
                make_node("b2").label(K8S_ZONE, "b"),
                web("w1", "a1"),
                web("w2", "b1"),
                web("w3", "b1"),
            ],
            {},
            {"a1": 0, "b2": 100},
            id="pods on nodes excluded by nodeTaintsPolicy Honor do not count",
        ),
    ],
)
def test_score(pod: PodBuilder, objects: list[Obj], args: dict[str, Any], want: Any) -> None:
    feasible = tuple(want) if isinstance(want, dict) else ()
    assert run_score(pod, objects, args, feasible) == want


def test_score_system_defaults_spread_by_hostname_even_without_zone() -> None:
    """System defaults: hostname maxSkew 3 and zone maxSkew 5 with the Service's selector.

    Feasible zones a, b and "" (bare): zone weight ln(5) = 1.609; four nodes: host weight ln(6) = 1.792.
    a1: 1 x 1.792 + 2 + 1 x 1.609 + 4 = 9.40 -> 9; a2: 2 + 5.61 = 7.61 -> 8;
    b1: 2 x 1.792 + 2 + 2 x 1.609 + 4 = 12.80 -> 13; bare (hostname only): 1.792 + 2 = 3.79 -> 4.
    Normalised as 100 x (13 + 4 - s) // 13.
    """
    objects: list[Obj] = [
        *zones_with_bare(),
        service("web", {"app": "web"}),
        web("w1", "a1"),
        web("w2", "b1"),
        web("w3", "b1"),
        web("w4", "bare"),
        make_pod("other").labels(app="db").node("a2"),
    ]
    assert run_score(web("new"), objects) == {"a1": 61, "a2": 69, "b1": 30, "bare": 100}


def test_score_list_defaults_require_every_topology_key() -> None:
    """The same defaults given as a List are not "system defaulted": a node lacking the zone is ignored."""
    args = {
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 3, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway"},
            {"maxSkew": 5, "topologyKey": K8S_ZONE, "whenUnsatisfiable": "ScheduleAnyway"},
        ],
    }
    objects: list[Obj] = [*zones_with_bare(), service("web", {"app": "web"}), web("w1", "a1"), web("w4", "bare")]
    # Three scored nodes: host weight ln(5), zones a and b: ln(4). a1: 1.609 + 2 + 1.386 + 4 = 9.0 -> 9;
    # a2: 2 + 5.386 = 7.39 -> 7; b1: 2 + 4 = 6; bare ignored -> 0. 100 x (9 + 6 - s) // 9.
    assert run_score(web("new"), objects, args) == {"a1": 66, "a2": 88, "b1": 100, "bare": 0}


def test_score_counts_pods_of_infeasible_nodes_in_feasible_domains() -> None:
    """Zone counts come from every node, but only zones with a feasible node are domains."""
    pod = web("new").spread(1, K8S_ZONE, "ScheduleAnyway", WEB)
    objects = [*zones_with_bare(), web("w1", "a1"), web("w2", "a1")]
    # Feasible a2 and b1: zone weight ln(4); a2: round(2 x 1.386) = 3, b1: 0.
    assert run_score(pod, objects, feasible=("a2", "b1")) == {"a2": 0, "b1": 100}


def test_normalize_gives_every_node_100_when_all_raw_scores_are_zero() -> None:
    pod = web("new").spread(1, K8S_ZONE, "ScheduleAnyway", WEB)
    assert run_score(pod, [*zones_with_bare()], feasible=("a1", "b1")) == {"a1": 100, "b1": 100}


# --------------------------------------------------------------------------------------------------
# Default selector (helper.DefaultSelector)


def _workloads(*objects: tuple[Kind, dict[str, Any]]) -> list[Any]:
    return [object_from_k8s(kind, data, kind.value) for kind, data in objects]


def _rc(name: str, selector: Mapping[str, str]) -> tuple[Kind, dict[str, Any]]:
    return Kind.REPLICATION_CONTROLLER, {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": dict(selector)},
    }


def _stateful_set(name: str, expressions: list[dict[str, Any]]) -> tuple[Kind, dict[str, Any]]:
    return Kind.STATEFUL_SET, {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchExpressions": expressions}},
    }


@pytest.mark.parametrize(
    ("pod", "workloads", "want"),
    [
        pytest.param(make_pod("p").labels(app="web"), [], None, id="a pod nothing selects gets no selector"),
        pytest.param(
            make_pod("p").labels(app="web", tier="fe"),
            [service("web", {"app": "web"}), service("fe", {"tier": "fe"}), service("db", {"app": "db"})],
            LabelSelector(match_labels=(("app", "web"), ("tier", "fe"))),
            id="the selectors of all Services selecting the pod are merged",
        ),
        pytest.param(
            make_pod("p").labels(app="web"),
            [service("web", {"app": "web"}, namespace="other")],
            None,
            id="Services of other namespaces are ignored",
        ),
        pytest.param(
            make_pod("p").labels(app="web", hash="1").owner("ReplicaSet", "rs"),
            [replica_set("rs", {"app": "web", "hash": "1"}), service("web", {"app": "web"})],
            LabelSelector(match_labels=(("app", "web"), ("hash", "1"))),
            id="the owning ReplicaSet's selector is added to the Services' selectors",
        ),
        pytest.param(
            make_pod("p").labels(app="web").owner("ReplicaSet", "rs"),
            [replica_set("other-rs", {"app": "web"})],
            None,
            id="a ReplicaSet is found by the owner reference's name",
        ),
        pytest.param(
            make_pod("p").labels(app="db").owner("StatefulSet", "db"),
            [_stateful_set("db", [{"key": "app", "operator": "In", "values": ["db"]}])],
            LabelSelector(match_expressions=(LabelSelectorRequirement("app", "In", ("db",)),)),
            id="the owning StatefulSet's selector requirements are used",
        ),
        pytest.param(
            make_pod("p").labels(app="old"),
            [_rc("old", {"app": "old"})],
            None,
            id="a ReplicationController counts only as the pod's controller, not by selector",
        ),
    ],
)
def test_default_selector(pod: PodBuilder, workloads: list[tuple[Kind, dict[str, Any]]], want: Any) -> None:
    assert default_selector(pod.obj(), _workloads(*workloads)) == want


def test_default_selector_owner_api_version_and_controller_flag() -> None:
    rc = _workloads(_rc("old", {"app": "old"}))
    pod = make_pod("p").labels(app="old").json()
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ReplicationController", "name": "old", "uid": "u", "controller": True}
    ]
    obj = pod_from_k8s(pod)
    assert default_selector(obj, rc) == LabelSelector(match_labels=(("app", "old"),))
    pod["metadata"]["ownerReferences"][0]["controller"] = False
    obj = pod_from_k8s(pod)
    assert default_selector(obj, rc) is None
    pod["metadata"]["ownerReferences"][0].update(controller=True, apiVersion="apps/v1")
    obj = pod_from_k8s(pod)
    assert default_selector(obj, rc) is None


# --------------------------------------------------------------------------------------------------
# Arguments


@pytest.mark.parametrize(
    ("args", "field"),
    [
        pytest.param({"defaultingType": "Cluster"}, "defaultingType", id="an unknown defaultingType is invalid"),
        pytest.param(
            {"defaultConstraints": [{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule"}]},
            "defaultingType",
            id="System defaulting rejects explicit default constraints",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [{"maxSkew": 0, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule"}],
            },
            r"defaultConstraints\[0\].maxSkew",
            id="a default constraint needs a positive maxSkew",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]},
            r"defaultConstraints\[0\].topologyKey",
            id="a default constraint needs a topologyKey",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [{"maxSkew": 1, "topologyKey": "a/b/c", "whenUnsatisfiable": "DoNotSchedule"}],
            },
            r"defaultConstraints\[0\].topologyKey",
            id="a default constraint's topologyKey must be a valid label name",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "Sometimes"}],
            },
            r"defaultConstraints\[0\].whenUnsatisfiable",
            id="a default constraint's whenUnsatisfiable must be supported",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}
                ],
            },
            r"defaultConstraints\[0\].labelSelector",
            id="a default constraint must not define a selector",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 2, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule"},
                ],
            },
            r"defaultConstraints\[1\]",
            id="default constraints must not repeat a topologyKey and whenUnsatisfiable pair",
        ),
        pytest.param({"defaultConstraint": []}, "defaultConstraint", id="unknown fields are rejected"),
    ],
)
def test_invalid_args(args: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        pod_topology_spread.new(args)


def test_default_args_are_the_system_defaults() -> None:
    plugin = pod_topology_spread.new({})
    assert isinstance(plugin, PodTopologySpread)
    assert plugin.system_defaulted
    assert [(c.topology_key, c.max_skew, c.when_unsatisfiable) for c in plugin.default_constraints] == [
        (HOST, 3, "ScheduleAnyway"),
        (K8S_ZONE, 5, "ScheduleAnyway"),
    ]
    assert plugin.name == "PodTopologySpread"


# --------------------------------------------------------------------------------------------------
# Terminating pods: countPodsMatchSelector bypasses pods with a deletionTimestamp (PreFilter, PreScore and
# Score); preemption's AddPod/RemovePod (updateWithPod) count whatever pod they are given.

NODE = "node"
FOO_EXISTS = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}


def by_node_label() -> list[Obj]:
    """node-a and node-b, each its own domain of the "node" key (upstream's filtering_test fixture)."""
    return [make_node("node-a").label(NODE, "node-a"), make_node("node-b").label(NODE, "node-b")]


@pytest.mark.parametrize(
    ("pod", "objects", "want"),
    [
        pytest.param(
            foo("p").spread(1, NODE, selector=FOO_EXISTS),
            [*by_node_label(), foo("p-a", "node-a").terminating(), foo("p-b", "node-b")],
            {"node-a": None, "node-b": SPREAD},
            id="terminating pods should be excluded (upstream)",
        ),
        pytest.param(
            foo("p").spread(1, NODE, selector=FOO_EXISTS),
            [*by_node_label(), foo("p-a", "node-a"), foo("p-b", "node-b")],
            {"node-a": None, "node-b": None},
            id="the same pod not terminating counts and evens the domains",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO),
            [*four_nodes(), *three_pods(), foo("t3", "node3").terminating(), foo("t4", "node4").terminating()],
            {"node1": SPREAD, "node2": SPREAD, "node3": None, "node4": None},
            id="terminating pods add nothing to their zone's count (docs example unchanged)",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO),
            [*four_nodes(), foo("p1", "node1").terminating(), foo("p2", "node2").terminating(), foo("p3", "node3")],
            {"node1": None, "node2": None, "node3": SPREAD, "node4": SPREAD},
            id="a zone whose matching pods all terminate counts 0 and becomes the global minimum",
        ),
        pytest.param(
            foo("new").spread(1, ZONE, selector=FOO, minDomains=3),
            [*four_nodes(), foo("p1", "node1"), foo("t3", "node3").terminating()],
            {"node1": SPREAD, "node2": SPREAD, "node3": None, "node4": None},
            id="with too few domains for minDomains the global minimum is 0 and terminating pods still do not count",
        ),
        pytest.param(
            make_pod("new").labels(app="web").owner("ReplicaSet", "web-rs"),
            [
                *four_nodes(),
                replica_set("web-rs", {"app": "web"}),
                make_pod("w1").labels(app="web").node("node1"),
                make_pod("w2").labels(app="web").node("node3").terminating(),
            ],
            {"node1": SPREAD, "node2": SPREAD, "node3": None, "node4": None},
            id="List default constraints do not count terminating pods of the workload either",
        ),
    ],
)
def test_filter_skips_terminating_pods(pod: PodBuilder, objects: list[Obj], want: Any) -> None:
    args = LIST_ZONE_HARD if not pod.spec.get("topologySpreadConstraints") else None
    assert run_filter(pod, objects, args) == want


@pytest.mark.parametrize(
    ("pod", "objects", "feasible", "want"),
    [
        pytest.param(
            foo("p").spread(1, HOST, "ScheduleAnyway", FOO_EXISTS),
            [make_node("node-a"), make_node("node-b"), foo("p-a", "node-a").terminating(), foo("p-b", "node-b")],
            (),
            {"node-a": 100, "node-b": 0},
            id="terminating pods should be excluded from hostname counts in Score (upstream)",
        ),
        pytest.param(
            # Zone weight ln(4): a counts w1 only (w2 terminates): round(1.386) = 1; b: 2 x 1.386 -> 3.
            # Normalised 100 x (3 + 1 - s) // 3; counting w2 would tie every node at 3 (all 100).
            web("new").spread(1, K8S_ZONE, "ScheduleAnyway", WEB),
            [*zones_with_bare(), web("w1", "a1"), web("w2", "a2").terminating(), web("w3", "b1"), web("w4", "b1")],
            ("a1", "a2", "b1"),
            {"a1": 100, "a2": 100, "b1": 33},
            id="PreScore's zone counts bypass terminating pods, on feasible and infeasible nodes alike",
        ),
        pytest.param(
            # Only w1 counts: host weight ln(6) = 1.792 (maxSkew 3), zone weight ln(5) = 1.609 (maxSkew 5).
            # a1: 1.792 + 2 + 1.609 + 4 = 9.40 -> 9; a2: 2 + 5.61 -> 8; b1: 2 + 4 = 6; bare (hostname
            # only): 2. Normalised 100 x (9 + 2 - s) // 9. Counting the terminating pods would give 13, 9, 9, 4.
            web("new"),
            [
                *zones_with_bare(),
                service("web", {"app": "web"}),
                web("w1", "a1"),
                web("w2", "a1").terminating(),
                web("w3", "b1").terminating(),
                web("w4", "bare").terminating(),
            ],
            (),
            {"a1": 22, "a2": 33, "b1": 55, "bare": 100},
            id="the System default constraints bypass terminating pods of the pod's Service",
        ),
    ],
)
def test_score_skips_terminating_pods(
    pod: PodBuilder, objects: list[Obj], feasible: tuple[str, ...], want: dict[str, int]
) -> None:
    assert run_score(pod, objects, feasible=feasible) == want


@pytest.mark.parametrize(
    ("action", "other", "node", "want"),
    [
        pytest.param(
            "",
            None,
            "",
            {"node-a": None, "node-b": SPREAD},
            id="PreFilter counts node-a 1 and node-b 2 leaving the terminating pod out",
        ),
        pytest.param(
            "remove",
            foo("t").terminating(),
            "node-b",
            {"node-a": None, "node-b": None},
            id="RemovePod of a terminating pod still takes one off its domain as upstream's updateWithPod does",
        ),
        pytest.param(
            "add",
            foo("t2").terminating(),
            "node-a",
            {"node-a": None, "node-b": None},
            id="AddPod counts a terminating pod as upstream's updateWithPod does",
        ),
    ],
)
def test_pre_filter_extensions_with_terminating_pods(
    action: str, other: PodBuilder | None, node: str, want: Any
) -> None:
    plugin = pod_topology_spread.new({})
    snapshot = make_cache(
        *by_node_label(),
        foo("a1", "node-a"),
        foo("b1", "node-b"),
        foo("b2", "node-b"),
        foo("t", "node-b").terminating(),
    ).snapshot()
    state, incoming = CycleState(), foo("p").spread(1, NODE, selector=FOO_EXISTS).obj()
    _, status = plugin.pre_filter(state, incoming, snapshot)
    assert status is None
    if other is not None:
        pod = other.node(node).obj()
        if action == "add":
            plugin.add_pod(state, incoming, pod, snapshot.node_info_map[node], snapshot)
        else:
            plugin.remove_pod(state, incoming, pod, snapshot.node_info_map[node], snapshot)
    assert filter_snapshot(plugin, state, incoming, snapshot) == want


def test_a_pod_that_starts_terminating_leaves_the_counts_of_the_cached_index_and_of_overlays() -> None:
    """The pod index follows the cache: a bound pod updated with a deletionTimestamp stops counting at the
    next generation; an overlay binding a terminating pod does not count it either."""
    plugin = pod_topology_spread.new({})
    incoming = foo("p").spread(1, NODE, selector=FOO_EXISTS).obj()
    cache = make_cache(*by_node_label(), foo("p-a", "node-a"), foo("p-b", "node-b"))

    def verdicts(snapshot: Any) -> Any:
        state = CycleState()
        plugin.pre_filter(state, incoming, snapshot)
        return filter_snapshot(plugin, state, incoming, snapshot)

    assert verdicts(cache.snapshot()) == {"node-a": None, "node-b": None}
    cache.apply([Upsert(Kind.POD, foo("p-a", "node-a").terminating().obj())])
    assert verdicts(cache.snapshot()) == {"node-a": None, "node-b": SPREAD}
    overlay = Overlay(cache.snapshot())
    overlay.bind_pod(foo("p-c", "node-b").terminating().obj())
    assert verdicts(overlay.snapshot()) == {"node-a": None, "node-b": SPREAD}
    overlay.bind_pod(foo("p-d", "node-a").obj())
    assert verdicts(overlay.snapshot()) == {"node-a": None, "node-b": None}
    cache.apply([Upsert(Kind.POD, foo("p-a", "node-a").obj())])
    assert verdicts(cache.snapshot()) == {"node-a": None, "node-b": None}
