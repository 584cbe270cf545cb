"""The node-local plugins' Filter/Score over rows: each row answers alike with or without the others.

Every public conformance case is replayed through each plugin over all rows and row by row
(row_harness), then edge cases the cases barely reach, with their expected answers: many and distinct
taint lists, Gt/Lt over non-integer labels, matchFields, host-port clashes by address, and image rows
reused after node churn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

import numpy as np
import pytest
from podfit.server.cache.cluster_cache import ClusterCache, Delete, Upsert
from podfit.server.framework.cycle_state import CycleState
from podfit.server.model import Kind, Pod
from podfit.server.model.objects import pod_from_k8s
from podfit.server.plugins import (
    dynamic_resources,
    image_locality,
    node_affinity,
    node_name,
    node_ports,
    node_unschedulable,
    taint_toleration,
)

from tests.builders import NodeBuilder, PodBuilder, make_cache, make_node, make_pod
from tests.conformance_support import cache_from_case, load_cases
from tests.plugins.row_harness import assert_filter_equivalent, assert_score_equivalent

MB = 1024 * 1024
Factory = Callable[[Mapping[str, Any]], Any]


def _term(*expressions: tuple[str, str, list[str]], fields: tuple[tuple[str, str, list[str]], ...] = ()) -> Any:
    return {
        "matchExpressions": [{"key": k, "operator": op, "values": v} for k, op, v in expressions],
        "matchFields": [{"key": k, "operator": op, "values": v} for k, op, v in fields],
    }


ADDED_AFFINITY: dict[str, Mapping[str, Any]] = {
    "added required": {
        "addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    _term(("kubernetes.io/arch", "In", ["amd64"]), ("example.com/cpu-gen", "Gt", ["2"])),
                    _term(("disktype", "NotIn", ["hdd"]), ("example.com/spot", "DoesNotExist", [])),
                ]
            }
        }
    },
    "added preferred": {
        "addedAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 7, "preference": _term(("topology.kubernetes.io/zone", "In", ["us-east-1a", "us-west-2b"]))},
                {"weight": 3, "preference": _term(("example.com/cpu-gen", "Lt", ["5"]))},
                {"weight": 11, "preference": _term(("example.com/rack", "Exists", []))},
            ]
        }
    },
    "added selector matching nothing": {
        "addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
    },
}

FILTERS: dict[str, tuple[Factory, Mapping[str, Any]]] = {
    "NodeUnschedulable": (node_unschedulable.new, {}),
    "NodeName": (node_name.new, {}),
    "TaintToleration": (taint_toleration.new, {}),
    "NodeAffinity": (node_affinity.new, {}),
    "NodePorts": (node_ports.new, {}),
    **{f"NodeAffinity {label}": (node_affinity.new, args) for label, args in ADDED_AFFINITY.items()},
}
SCORES: dict[str, tuple[Factory, Mapping[str, Any]]] = {
    "TaintToleration": (taint_toleration.new, {}),
    "NodeAffinity": (node_affinity.new, {}),
    "ImageLocality": (image_locality.new, {}),
    "DynamicResources": (dynamic_resources.new, {}),
    **{f"NodeAffinity {label}": (node_affinity.new, args) for label, args in ADDED_AFFINITY.items()},
}


@cache
def conformance() -> list[tuple[str, Pod, ClusterCache]]:
    """Every public case's incoming pod and cache, built once for all the tests here."""
    return [(case["id"], pod_from_k8s(case["pod"]), cache_from_case(case)) for case in load_cases()]


@pytest.mark.parametrize("name", FILTERS)
def test_filter_rows_answer_each_row_alike_on_conformance_cases(name: str) -> None:
    factory, args = FILTERS[name]
    plugin = factory(args)
    compared = sum(assert_filter_equivalent(plugin, pod, c, case_id) for case_id, pod, c in conformance())
    # The plugin's PreFilter must not have skipped every case: some nodes were really compared.
    assert compared > 0


@pytest.mark.parametrize("name", SCORES)
def test_score_rows_answer_each_row_alike_on_conformance_cases(name: str) -> None:
    factory, args = SCORES[name]
    plugin = factory(args)
    compared = sum(assert_score_equivalent(plugin, pod, c, case_id) for case_id, pod, c in conformance())
    assert compared > 0


# -- edge cases --------------------------------------------------------------------------------------


def filter_codes(plugin: Any, pod: PodBuilder, cache: ClusterCache) -> dict[str, int]:
    """Asserts row independence, then returns the codes per node (0 = fits) for checking the outcome."""
    incoming = pod.obj()
    assert assert_filter_equivalent(plugin, incoming, cache) == len(cache.snapshot().node_infos)
    snapshot = cache.snapshot()
    state = CycleState()
    if hasattr(plugin, "pre_filter"):
        plugin.pre_filter(state, incoming, snapshot)
    assert snapshot.table is not None and snapshot.rows is not None
    codes, _ = plugin.filter_rows(state, incoming, snapshot.table, snapshot.rows)
    return {info.name: code for info, code in zip(snapshot.node_infos, codes.tolist(), strict=True)}


def raw_scores(plugin: Any, pod: PodBuilder, cache: ClusterCache) -> list[int]:
    """Asserts row independence, then returns the raw scores in node order."""
    incoming = pod.obj()
    assert assert_score_equivalent(plugin, incoming, cache) == len(cache.snapshot().node_infos)
    snapshot = cache.snapshot()
    state = CycleState()
    if hasattr(plugin, "pre_score"):
        plugin.pre_score(state, incoming, snapshot, snapshot.rows)
    assert snapshot.table is not None and snapshot.rows is not None
    result: list[int] = plugin.score_rows(state, incoming, snapshot.table, snapshot.rows).tolist()
    return result


def tainted(name: str, *taints: tuple[str, str, str]) -> NodeBuilder:
    node = make_node(name)
    for key, value, effect in taints:
        node.taint(key, value, effect)
    return node


MANY_TAINTS = [
    tainted("plain"),
    tainted("heavy", *[(f"k{i}", f"v{i}", ("NoSchedule", "PreferNoSchedule", "NoExecute")[i % 3]) for i in range(12)]),
    tainted("soft", ("k1", "v1", "PreferNoSchedule"), ("k4", "other", "PreferNoSchedule")),
    tainted("hard", ("k0", "v0", "NoSchedule")),
    # More distinct taint lists than the plugin evaluates exhaustively, so it finds the distinct ones.
    *[tainted(f"distinct-{i:02d}", (f"d{i}", "", ("NoExecute", "PreferNoSchedule")[i % 2])) for i in range(40)],
]


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod(), id="no tolerations"),
        pytest.param(make_pod().toleration("k0", "Equal", "v0").toleration("k1", "Exists"), id="some tolerated"),
        pytest.param(make_pod().toleration(operator="Exists"), id="tolerates everything"),
        pytest.param(make_pod().toleration(operator="Exists", effect="PreferNoSchedule"), id="tolerates soft only"),
        pytest.param(
            make_pod().toleration("d3", "Exists", effect="NoExecute").toleration("k4", "Equal", "other"),
            id="one distinct list tolerated",
        ),
    ],
)
def test_taint_toleration_with_many_and_distinct_taint_lists(pod: PodBuilder) -> None:
    cache = make_cache(*MANY_TAINTS)
    assert len(cache.table.taint_sets) > taint_toleration._EVALUATE_ALL_TAINT_SETS
    plugin = taint_toleration.new({})
    codes = filter_codes(plugin, pod, cache)
    assert codes["plain"] == 0
    scores = raw_scores(plugin, pod, cache)
    normalized = plugin.normalize_rows(CycleState(), pod.obj(), np.array(scores, dtype=np.int64))
    assert normalized.dtype == np.int64 and normalized.min() >= 0 and normalized.max() == 100


def test_taint_toleration_counts_untolerated_soft_taints_per_list() -> None:
    cache = make_cache(*MANY_TAINTS)
    names = [info.name for info in cache.snapshot().node_infos]
    pod = make_pod().toleration("k1", "Exists")
    scores = dict(zip(names, raw_scores(taint_toleration.new({}), pod, cache), strict=True))
    assert (scores["heavy"], scores["soft"], scores["hard"], scores["plain"]) == (3, 1, 0, 0)
    assert scores["distinct-01"] == 1 and scores["distinct-00"] == 0


GENERATIONS = ["3", "+4", "-2", "abc", "", "1.5", "99999999999999999999", "\u0663", "007", " 5"]


def labelled(values: list[str]) -> list[NodeBuilder]:
    nodes = [make_node(f"gen-{i:02d}").label("gen", v) for i, v in enumerate(values)]
    return [*nodes, make_node("no-gen")]


def required(*terms: Any) -> PodBuilder:
    return make_pod().affinity(
        "nodeAffinity", {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    )


@pytest.mark.parametrize(
    ("pod", "fits"),
    [
        pytest.param(required(_term(("gen", "Gt", ["2"]))), {"gen-00", "gen-01", "gen-08"}, id="Gt"),
        pytest.param(required(_term(("gen", "Lt", ["0"]))), {"gen-02"}, id="Lt"),
        pytest.param(required(_term(("gen", "Gt", ["-3"]), ("gen", "Lt", ["4"]))), {"gen-00", "gen-02"}, id="Gt&Lt"),
        pytest.param(required(_term(("gen", "Gt", ["x"]))), set(), id="invalid Gt value matches nothing"),
        pytest.param(required(_term(("gen", "In", ["abc", "", "nope"]))), {"gen-03", "gen-04"}, id="In"),
        pytest.param(
            required(_term(("gen", "NotIn", ["abc", "3"]))),
            {"gen-01", "gen-02", "gen-04", "gen-05", "gen-06", "gen-07", "gen-08", "gen-09", "no-gen"},
            id="NotIn keeps nodes without the key",
        ),
        pytest.param(required(_term(("gen", "DoesNotExist", []))), {"no-gen"}, id="DoesNotExist"),
        pytest.param(required(_term(("absent-key", "NotIn", ["a"]))), "all", id="NotIn on a key no node has"),
        pytest.param(required(_term(("absent-key", "Exists", []))), set(), id="Exists on a key no node has"),
        pytest.param(required(_term(("gen", "Exists", ["x"]))), set(), id="Exists with values is invalid"),
        pytest.param(required(), set(), id="no terms match nothing"),
        pytest.param(required(_term()), set(), id="an empty term matches nothing"),
        pytest.param(
            required(_term(("gen", "In", ["3"])), _term(fields=(("metadata.name", "In", ["no-gen"]),))),
            {"gen-00", "no-gen"},
            id="terms are ORed",
        ),
        pytest.param(
            required(_term(("gen", "Exists", []), fields=(("metadata.name", "NotIn", ["gen-00"]),))),
            {f"gen-{i:02d}" for i in range(1, 10)},
            id="matchFields NotIn",
        ),
        pytest.param(
            required(_term(fields=(("metadata.name", "In", ["missing"]),))), set(), id="matchFields unknown node"
        ),
        pytest.param(required(_term(fields=(("spec.other", "In", [""]),))), "all", id="other field reads empty"),
        pytest.param(required(_term(fields=(("spec.other", "NotIn", [""]),))), set(), id="other field NotIn empty"),
        pytest.param(
            required(_term(fields=(("metadata.name", "In", ["gen-00", "gen-01"]),))),
            set(),
            id="matchFields with two values is invalid",
        ),
        pytest.param(make_pod().node_selector(gen="abc"), {"gen-03"}, id="nodeSelector"),
        pytest.param(make_pod().node_selector(gen="abc", other="x"), set(), id="nodeSelector unknown key"),
        pytest.param(make_pod().node_selector(gen="zzz"), set(), id="nodeSelector unknown value"),
    ],
)
def test_node_affinity_requirements(pod: PodBuilder, fits: set[str] | str) -> None:
    cache = make_cache(*labelled(GENERATIONS))
    codes = filter_codes(node_affinity.new({}), pod, cache)
    want = set(codes) if fits == "all" else fits
    assert {name for name, code in codes.items() if code == 0} == want


def test_node_affinity_added_selector_is_reported_before_the_pods() -> None:
    args = {"addedAffinity": ADDED_AFFINITY["added required"]["addedAffinity"]}
    nodes = [
        make_node("both").labels(**{"kubernetes.io/arch": "amd64", "example.com/cpu-gen": "3", "gen": "1"}),
        make_node("added-only").labels(**{"kubernetes.io/arch": "amd64", "example.com/cpu-gen": "3"}),
        make_node("pod-only").labels(**{"kubernetes.io/arch": "arm64", "example.com/spot": "", "gen": "1"}),
        make_node("neither").labels(**{"example.com/spot": "true"}),
    ]
    codes = filter_codes(node_affinity.new(args), make_pod().node_selector(gen="1"), make_cache(*nodes))
    assert codes == {"both": 0, "added-only": 2, "pod-only": 1, "neither": 1}


def test_node_affinity_preferred_weights_sum_over_matching_terms() -> None:
    pod = make_pod().affinity(
        "nodeAffinity",
        {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "preference": _term(("gen", "Gt", ["2"]))},
                {"weight": 9, "preference": _term(fields=(("metadata.name", "In", ["gen-03"]),))},
                {"weight": 0, "preference": _term(("gen", "Exists", []))},
                {"weight": 2, "preference": _term(("gen", "Exists", []))},
            ]
        },
    )
    added = [{"weight": 3, "preference": _term(("gen", "Lt", ["5"]))}]
    args = {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": added}}
    cache = make_cache(*labelled(GENERATIONS))
    names = [info.name for info in cache.snapshot().node_infos]
    scores = dict(zip(names, raw_scores(node_affinity.new(args), pod, cache), strict=True))
    assert (scores["gen-00"], scores["gen-03"], scores["gen-02"], scores["no-gen"]) == (7 + 3, 11, 2 + 3, 0)


def bound(name: str, node: str, port: int, protocol: str = "TCP", host_ip: str = "") -> PodBuilder:
    return make_pod(name).node(node).host_port(port, protocol, host_ip)


PORT_CLUSTER: list[PodBuilder | NodeBuilder] = [
    make_node("free"),
    make_node("other-port"),
    bound("a", "other-port", 8080),
    make_node("ip-1"),
    bound("b", "ip-1", 80, host_ip="10.0.0.1"),
    make_node("wildcard"),
    bound("c", "wildcard", 80, host_ip="0.0.0.0"),
    make_node("udp"),
    bound("d", "udp", 80, "UDP"),
]


@pytest.mark.parametrize(
    ("pod", "rejected"),
    [
        pytest.param(make_pod().host_port(80), {"ip-1", "wildcard"}, id="any address"),
        pytest.param(make_pod().host_port(80, host_ip="10.0.0.1"), {"ip-1", "wildcard"}, id="same address"),
        pytest.param(make_pod().host_port(80, host_ip="10.0.0.2"), {"wildcard"}, id="another address"),
        pytest.param(make_pod().host_port(80, "UDP", "10.0.0.1"), {"udp"}, id="UDP"),
        pytest.param(make_pod().host_port(8080).host_port(9090), {"other-port"}, id="second container"),
        pytest.param(make_pod().host_port(443), set(), id="no clash"),
    ],
)
def test_node_ports_host_ip_conflicts(pod: PodBuilder, rejected: set[str]) -> None:
    codes = filter_codes(node_ports.new({}), pod, make_cache(*PORT_CLUSTER))
    assert {name for name, code in codes.items() if code} == rejected


@pytest.mark.parametrize(
    ("pod", "fits"),
    [
        pytest.param(make_pod().node("b"), {"b"}, id="named node"),
        pytest.param(make_pod().node("missing"), set(), id="unknown node"),
        pytest.param(make_pod(), {"a", "b", "c"}, id="no name"),
    ],
)
def test_node_name(pod: PodBuilder, fits: set[str]) -> None:
    cache = make_cache(make_node("a"), make_node("b"), make_node("c"))
    codes = filter_codes(node_name.new({}), pod, cache)
    assert {name for name, code in codes.items() if code == 0} == fits


@pytest.mark.parametrize(
    ("pod", "fits"),
    [
        pytest.param(make_pod(), {"open"}, id="cordoned nodes reject"),
        pytest.param(
            make_pod().toleration("node.kubernetes.io/unschedulable", "Exists", effect="NoSchedule"),
            {"open", "cordoned"},
            id="tolerated",
        ),
        pytest.param(make_pod().toleration(effect="NoExecute", operator="Exists"), {"open"}, id="wrong effect"),
    ],
)
def test_node_unschedulable(pod: PodBuilder, fits: set[str]) -> None:
    cache = make_cache(make_node("open"), make_node("cordoned").unschedulable())
    codes = filter_codes(node_unschedulable.new({}), pod, cache)
    assert {name for name, code in codes.items() if code == 0} == fits


def image_pod(*images: str) -> PodBuilder:
    pod = make_pod()
    for image in images:
        pod.container(image=image)
    return pod


def test_image_locality_after_nodes_leave_and_rows_are_reused() -> None:
    nodes = [
        make_node(f"n{i}").image(300 * MB, "big:1", "big@sha256:abc").image(40 * MB, f"small:{i % 2}") for i in range(6)
    ]
    cache = make_cache(*nodes, make_node("bare"))
    pod = image_pod("big:1", "small:0", "small:0", "none")
    before = raw_scores(image_locality.new({}), pod, cache)
    cache.apply([Delete(Kind.NODE, "", "n0"), Delete(Kind.NODE, "", "n2")])
    cache.apply([Upsert(Kind.NODE, make_node("fresh").image(900 * MB, "small:0").obj())])
    after = raw_scores(image_locality.new({}), pod, cache)
    assert before != after and len(after) == 6
    assert cache.table.image_rows["small:0"] == {cache.table.row_of[n] for n in ("n4", "fresh")}
    assert "big@sha256:abc" in cache.table.image_rows


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(image_pod(), id="no images"),
        pytest.param(image_pod("missing:1"), id="nowhere"),
        pytest.param(image_pod("huge", "huge:latest", "tiny"), id="clamped to the maximum"),
    ],
)
def test_image_locality_clamps(pod: PodBuilder) -> None:
    cache = make_cache(make_node("a").image(5000 * MB, "huge:latest").image(1 * MB, "tiny:latest"), make_node("b"))
    scores = raw_scores(image_locality.new({}), pod, cache)
    assert all(0 <= s <= 100 for s in scores)
