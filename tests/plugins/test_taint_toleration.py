"""TaintToleration: Filter on NoSchedule/NoExecute taints, Score on PreferNoSchedule taints."""

from __future__ import annotations

import pytest
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.status import Status, unresolvable
from podfit.server.plugins import taint_toleration

from tests.builders import NodeBuilder, PodBuilder, make_cache, make_node, make_pod, node_info
from tests.plugins.harness import filter_one, score_snapshot

UNTOLERATED = unresolvable("node(s) had untolerated taint(s)")


@pytest.mark.parametrize(
    ("node", "pod", "want"),
    [
        pytest.param(make_node(), make_pod(), None, id="a node without taints accepts any pod"),
        pytest.param(
            make_node().taint("dedicated", "gpu", "NoSchedule"),
            make_pod(),
            UNTOLERATED,
            id="an untolerated NoSchedule taint rejects the pod as unresolvable",
        ),
        pytest.param(
            make_node().taint("evict", "", "NoExecute"),
            make_pod(),
            UNTOLERATED,
            id="an untolerated NoExecute taint rejects the pod",
        ),
        pytest.param(
            make_node().taint("soft", "", "PreferNoSchedule"),
            make_pod(),
            None,
            id="a PreferNoSchedule taint never rejects",
        ),
        pytest.param(
            make_node().taint("dedicated", "gpu", "NoSchedule"),
            make_pod().toleration("dedicated", "Equal", "gpu", "NoSchedule"),
            None,
            id="an Equal toleration with the same key value and effect tolerates the taint",
        ),
        pytest.param(
            make_node().taint("dedicated", "gpu", "NoSchedule"),
            make_pod().toleration("dedicated", "Equal", "cpu", "NoSchedule"),
            UNTOLERATED,
            id="an Equal toleration with another value does not tolerate the taint",
        ),
        pytest.param(
            make_node().taint("dedicated", "gpu", "NoSchedule"),
            make_pod().toleration("dedicated", "Exists"),
            None,
            id="an Exists toleration with the key and no effect tolerates any value and effect",
        ),
        pytest.param(
            make_node().taint("a", "1", "NoSchedule").taint("b", "2", "NoExecute"),
            make_pod().toleration(operator="Exists"),
            None,
            id="an Exists toleration with an empty key tolerates every taint",
        ),
        pytest.param(
            make_node().taint("dedicated", "gpu", "NoSchedule"),
            make_pod().toleration("dedicated", "Equal", "gpu", "NoExecute"),
            UNTOLERATED,
            id="a toleration for another effect does not tolerate the taint",
        ),
        pytest.param(
            make_node().taint("a", "1", "NoSchedule").taint("b", "2", "NoSchedule"),
            make_pod().toleration("a", "Equal", "1"),
            UNTOLERATED,
            id="every NoSchedule taint must be tolerated not just one of them",
        ),
        pytest.param(
            make_node().taint("a", "1", "NoSchedule").taint("soft", "", "PreferNoSchedule"),
            make_pod().toleration("a", "Equal", "1"),
            None,
            id="untolerated PreferNoSchedule taints beside tolerated NoSchedule ones do not reject",
        ),
        pytest.param(
            make_node().taint("level", "5", "NoSchedule"),
            make_pod().toleration("level", "Gt", "3"),
            UNTOLERATED,
            id="comparison operators tolerate nothing while their feature gate is off",
        ),
        pytest.param(
            make_node().taint("node.kubernetes.io/unschedulable", "", "NoSchedule").unschedulable(),
            make_pod(),
            UNTOLERATED,
            id="the unschedulable taint is checked like any other taint",
        ),
    ],
)
def test_filter(node: NodeBuilder, pod: PodBuilder, want: Status | None) -> None:
    plugin = taint_toleration.new({})
    assert filter_one(plugin, CycleState(), pod.obj(), node_info(node)) == want


def _scores(pod: PodBuilder, *nodes: NodeBuilder) -> list[int]:
    plugin = taint_toleration.new({})
    snapshot = make_cache(*nodes).snapshot()
    state = CycleState()
    assert plugin.pre_score(state, pod.obj(), snapshot, snapshot.rows) is None
    return list(score_snapshot(plugin, state, pod.obj(), snapshot).values())


@pytest.mark.parametrize(
    ("pod", "nodes", "want"),
    [
        pytest.param(
            make_pod(),
            [make_node("a"), make_node("b")],
            [100, 100],
            id="without PreferNoSchedule taints every node gets the maximum score",
        ),
        pytest.param(
            make_pod(),
            [
                make_node("a"),
                make_node("b").taint("x", "", "PreferNoSchedule"),
                make_node("c").taint("x", "", "PreferNoSchedule").taint("y", "", "PreferNoSchedule"),
            ],
            [100, 50, 0],
            id="scores fall linearly with the number of untolerated PreferNoSchedule taints",
        ),
        pytest.param(
            make_pod(),
            [
                make_node("a").taint("x", "", "PreferNoSchedule"),
                make_node("b")
                .taint("x", "", "PreferNoSchedule")
                .taint("y", "", "PreferNoSchedule")
                .taint("z", "", "PreferNoSchedule"),
            ],
            [67, 0],
            id="normalisation uses integer division before reversing",
        ),
        pytest.param(
            make_pod().toleration("x", "Exists", effect="PreferNoSchedule"),
            [make_node("a"), make_node("b").taint("x", "", "PreferNoSchedule")],
            [100, 100],
            id="a PreferNoSchedule toleration removes the penalty",
        ),
        pytest.param(
            make_pod().toleration("x", "Exists"),
            [make_node("a"), make_node("b").taint("x", "", "PreferNoSchedule")],
            [100, 100],
            id="a toleration without effect also tolerates PreferNoSchedule taints",
        ),
        pytest.param(
            make_pod().toleration("x", "Exists", effect="NoSchedule"),
            [make_node("a"), make_node("b").taint("x", "", "PreferNoSchedule")],
            [100, 0],
            id="a NoSchedule toleration does not tolerate a PreferNoSchedule taint when scoring",
        ),
        pytest.param(
            make_pod().toleration(operator="Exists"),
            [make_node("a").taint("x", "", "NoSchedule"), make_node("b")],
            [100, 100],
            id="NoSchedule and NoExecute taints do not count in the score",
        ),
    ],
)
def test_score(pod: PodBuilder, nodes: list[NodeBuilder], want: list[int]) -> None:
    assert _scores(pod, *nodes) == want
