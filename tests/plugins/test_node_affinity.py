"""NodeAffinity: nodeSelector, required and preferred node affinity, and the addedAffinity argument."""

from __future__ import annotations

import re
from typing import Any

import pytest
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import PreFilterResult
from podfit.server.framework.status import SKIP, Status, unresolvable
from podfit.server.plugins import node_affinity

from tests.builders import NodeBuilder, PodBuilder, make_cache, make_node, make_pod, node_info
from tests.plugins.harness import filter_one, score_snapshot

MISMATCH = unresolvable("node(s) didn't match Pod's node affinity/selector")
ENFORCED = unresolvable("node(s) didn't match scheduler-enforced node affinity")


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    req: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        req["values"] = list(values)
    return req


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}


def preferred(*weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": w, "preference": t} for w, t in weighted]}


def labels(*exprs: dict[str, Any]) -> dict[str, Any]:
    return {"matchExpressions": list(exprs)}


def fields(*exprs: dict[str, Any]) -> dict[str, Any]:
    return {"matchFields": list(exprs)}


def with_affinity(value: dict[str, Any]) -> PodBuilder:
    return make_pod().affinity("nodeAffinity", value)


@pytest.mark.parametrize(
    ("args", "pod", "node", "want"),
    [
        pytest.param({}, make_pod(), make_node(), None, id="a pod without selector or affinity fits every node"),
        pytest.param(
            {},
            make_pod().node_selector(disk="ssd"),
            make_node().labels(disk="ssd"),
            None,
            id="a nodeSelector matching the node labels fits",
        ),
        pytest.param(
            {},
            make_pod().node_selector(disk="ssd"),
            make_node().labels(disk="hdd"),
            MISMATCH,
            id="a nodeSelector with another value rejects the node as unresolvable",
        ),
        pytest.param(
            {},
            make_pod().node_selector(disk=""),
            make_node(),
            MISMATCH,
            id="a nodeSelector on an empty value needs the label to exist",
        ),
        pytest.param(
            {},
            make_pod().node_selector(disk=""),
            make_node().labels(disk=""),
            None,
            id="a nodeSelector on an empty value matches an empty-valued label",
        ),
        pytest.param(
            {},
            with_affinity(required(labels(expr("zone", "In", "a", "b")))),
            make_node().labels(zone="b"),
            None,
            id="In matches a label whose value is listed",
        ),
        pytest.param(
            {},
            with_affinity(required(labels(expr("zone", "NotIn", "a")))),
            make_node(),
            None,
            id="NotIn matches a node without the label",
        ),
        pytest.param(
            {},
            with_affinity(required(labels(expr("zone", "Exists")))),
            make_node(),
            MISMATCH,
            id="Exists rejects a node without the label",
        ),
        pytest.param(
            {},
            with_affinity(required(labels(expr("zone", "DoesNotExist")))),
            make_node().labels(zone="a"),
            MISMATCH,
            id="DoesNotExist rejects a node with the label",
        ),
        pytest.param(
            {},
            with_affinity(required(labels(expr("cores", "Gt", "8")))),
            make_node().labels(cores="16"),
            None,
            id="Gt compares the label as an integer",
        ),
        pytest.param(
            {},
            with_affinity(required(labels(expr("cores", "Lt", "8")))),
            make_node().labels(cores="x"),
            MISMATCH,
            id="Lt rejects a label that is not an integer",
        ),
        pytest.param(
            {},
            with_affinity(required(labels(expr("zone", "In", "a")), labels(expr("zone", "In", "b")))),
            make_node().labels(zone="b"),
            None,
            id="nodeSelectorTerms are ORed",
        ),
        pytest.param(
            {},
            with_affinity(required(labels(expr("zone", "In", "a"), expr("disk", "In", "ssd")))),
            make_node().labels(zone="a"),
            MISMATCH,
            id="matchExpressions within a term are ANDed",
        ),
        pytest.param(
            {},
            with_affinity(required(labels(expr("zone", "In", "a")))).node_selector(disk="ssd"),
            make_node().labels(zone="a"),
            MISMATCH,
            id="nodeSelector and required affinity must both match",
        ),
        pytest.param(
            {},
            with_affinity(required()),
            make_node(),
            MISMATCH,
            id="required affinity without terms matches no node",
        ),
        pytest.param(
            {},
            with_affinity(required({})),
            make_node(),
            MISMATCH,
            id="an empty nodeSelectorTerm matches no node",
        ),
        pytest.param(
            {},
            with_affinity(required(fields(expr("metadata.name", "In", "node")))),
            make_node("node"),
            None,
            id="matchFields metadata.name In matches the named node",
        ),
        pytest.param(
            {},
            with_affinity(required(fields(expr("metadata.name", "NotIn", "node")))),
            make_node("node"),
            MISMATCH,
            id="matchFields metadata.name NotIn rejects the named node",
        ),
        pytest.param(
            {"addedAffinity": required(labels(expr("pool", "In", "batch")))},
            make_pod(),
            make_node(),
            ENFORCED,
            id="addedAffinity rejects nodes with its own reason",
        ),
        pytest.param(
            {"addedAffinity": required(labels(expr("pool", "In", "batch")))},
            make_pod().node_selector(disk="ssd"),
            make_node().labels(pool="batch"),
            MISMATCH,
            id="a node matching addedAffinity must still match the pod's own selector",
        ),
    ],
)
def test_filter(args: dict[str, Any], pod: PodBuilder, node: NodeBuilder, want: Status | None) -> None:
    plugin = node_affinity.new(args)
    state = CycleState()
    _, status = plugin.pre_filter(state, pod.obj(), make_cache(node).snapshot())
    # A skipped PreFilter means the runtime never calls Filter; Filter must agree it has nothing to reject.
    assert status in (None, SKIP)
    assert filter_one(plugin, state, pod.obj(), node_info(node)) == want


@pytest.mark.parametrize(
    ("args", "pod", "want"),
    [
        pytest.param({}, make_pod(), (None, SKIP), id="PreFilter skips a pod without selector or required affinity"),
        pytest.param(
            {},
            with_affinity(preferred((5, labels(expr("a", "Exists"))))),
            (None, SKIP),
            id="preferred terms alone leave nothing to filter",
        ),
        pytest.param(
            {"addedAffinity": required(labels(expr("pool", "Exists")))},
            make_pod(),
            (None, None),
            id="addedAffinity makes PreFilter run for every pod",
        ),
        pytest.param(
            {}, make_pod().node_selector(a="b"), (None, None), id="a nodeSelector does not restrict the nodes"
        ),
        pytest.param(
            {},
            with_affinity(required(fields(expr("metadata.name", "In", "n1", "n2")))),
            (PreFilterResult(frozenset({"n1", "n2"})), None),
            id="matchFields metadata.name In restricts the candidate nodes",
        ),
        pytest.param(
            {},
            with_affinity(
                required(fields(expr("metadata.name", "In", "n1")), fields(expr("metadata.name", "In", "n2")))
            ),
            (PreFilterResult(frozenset({"n1", "n2"})), None),
            id="node names of ORed terms are united",
        ),
        pytest.param(
            {},
            with_affinity(
                required(fields(expr("metadata.name", "In", "n1", "n2"), expr("metadata.name", "In", "n2", "n3")))
            ),
            (PreFilterResult(frozenset({"n2"})), None),
            id="node names of ANDed requirements are intersected",
        ),
        pytest.param(
            {},
            with_affinity(required(fields(expr("metadata.name", "In", "n1")), labels(expr("zone", "Exists")))),
            (None, None),
            id="a term without a node name leaves every node possible",
        ),
        pytest.param(
            {},
            with_affinity(required(fields(expr("metadata.name", "NotIn", "n1")))),
            (None, None),
            id="metadata.name NotIn does not restrict the nodes",
        ),
        pytest.param(
            {},
            with_affinity(required(fields(expr("metadata.name", "In", "n1"), expr("metadata.name", "In", "n2")))),
            (None, unresolvable("pod affinity terms conflict")),
            id="conflicting node names reject the pod in PreFilter",
        ),
    ],
)
def test_pre_filter(args: dict[str, Any], pod: PodBuilder, want: tuple[PreFilterResult | None, Status | None]) -> None:
    plugin = node_affinity.new(args)
    snapshot = make_cache(make_node("n1"), make_node("n2")).snapshot()
    assert plugin.pre_filter(CycleState(), pod.obj(), snapshot) == want


def _scores(args: dict[str, Any], pod: PodBuilder, nodes: list[NodeBuilder]) -> list[int] | Status:
    plugin = node_affinity.new(args)
    snapshot = make_cache(*nodes).snapshot()
    state = CycleState()
    status = plugin.pre_score(state, pod.obj(), snapshot, snapshot.rows)
    if status is not None:
        return status
    return list(score_snapshot(plugin, state, pod.obj(), snapshot).values())


ZONE_A = labels(expr("zone", "In", "a"))
SSD = labels(expr("disk", "In", "ssd"))


@pytest.mark.parametrize(
    ("args", "pod", "nodes", "want"),
    [
        pytest.param({}, make_pod(), [make_node("x")], SKIP, id="PreScore skips a pod without preferred terms"),
        pytest.param(
            {},
            with_affinity(preferred((1, ZONE_A), (50, SSD))),
            [make_node("x").labels(zone="a"), make_node("y").labels(disk="ssd"), make_node("z")],
            [2, 100, 0],
            id="scores are the summed weights of matching terms normalised to the maximum",
        ),
        pytest.param(
            {},
            with_affinity(preferred((30, ZONE_A), (10, SSD))),
            [make_node("x").labels(zone="a", disk="ssd"), make_node("y").labels(zone="a")],
            [100, 75],
            id="weights of several matching terms add up",
        ),
        pytest.param(
            {},
            with_affinity(preferred((5, ZONE_A))),
            [make_node("x"), make_node("y")],
            [0, 0],
            id="when no node matches every score stays zero",
        ),
        pytest.param(
            {},
            with_affinity(preferred((0, ZONE_A), (5, SSD))),
            [make_node("x").labels(zone="a"), make_node("y").labels(disk="ssd")],
            [0, 100],
            id="a zero-weight term is ignored",
        ),
        pytest.param(
            {},
            with_affinity(preferred((5, {}))),
            [make_node("x")],
            [0],
            id="an empty preference matches nothing",
        ),
        pytest.param(
            {"addedAffinity": preferred((10, ZONE_A))},
            make_pod(),
            [make_node("x").labels(zone="a"), make_node("y")],
            [100, 0],
            id="addedAffinity preferred terms score pods without their own terms",
        ),
        pytest.param(
            {"addedAffinity": preferred((10, ZONE_A))},
            with_affinity(preferred((30, SSD))),
            [make_node("x").labels(zone="a"), make_node("y").labels(disk="ssd")],
            [33, 100],
            id="addedAffinity weights add to the pod's own",
        ),
    ],
)
def test_score(args: dict[str, Any], pod: PodBuilder, nodes: list[NodeBuilder], want: list[int] | Status) -> None:
    assert _scores(args, pod, nodes) == want


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            {"addedAffinity": required(labels(expr("a", "Like", "b")))},
            "NodeAffinityArgs.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
            ".matchExpressions[0].operator",
            id="an unknown operator in addedAffinity is rejected naming the field",
        ),
        pytest.param(
            {"addedAffinity": required(labels(expr("a", "In")))},
            "NodeAffinityArgs.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]",
            id="In without values is rejected",
        ),
        pytest.param(
            {"addedAffinity": required(fields(expr("metadata.name", "Exists")))},
            "matchFields[0].operator",
            id="matchFields only accept In and NotIn",
        ),
        pytest.param(
            {"addedAffinity": preferred((1, labels(expr("n", "Gt", "x"))))},
            "NodeAffinityArgs.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference",
            id="a preferred term with a non-integer Gt value is rejected",
        ),
    ],
)
def test_invalid_args(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        node_affinity.new(args)
