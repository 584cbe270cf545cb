"""NodeName per version: v1.35 rejects other nodes in Filter; v1.37 restricts the candidates at
PreFilter, with the framework's texts (VERSIONS.md, change 3), intersected with NodeAffinity's restriction."""

from __future__ import annotations

from typing import Any

import pytest
from podfit.server.config import default_profile
from podfit.server.engine import Engine

from tests.builders import PodBuilder, make_cache, make_node, make_pod

NODES = [make_node(n).capacity(cpu="2", memory="4Gi", pods="10") for n in ("n1", "n2", "n3")]
ABSENT = "node(s) didn't satisfy plugin(s) [NodeName]"
BOTH = "node(s) didn't satisfy plugin(s) [NodeAffinity NodeName]"
UNRESOLVABLE = "UnschedulableAndUnresolvable"


def fields_in(*names: str) -> dict[str, Any]:
    """A required node affinity naming nodes: one term per name (a field selector takes one value)."""
    terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]} for name in names]
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}


def answer(version: str, pod: PodBuilder) -> tuple[dict[str, tuple[str, tuple[str, ...], str]], str]:
    """(rejected node -> (plugin, reasons, code), PostFilter "<code>: <message>")."""
    engine = Engine(make_cache(*NODES), {"default-scheduler": default_profile(version=version)})
    decision, _, _ = engine.decide(pod.obj(), score=False)
    rejected = {n: (s.plugin, s.reasons, s.code.value) for n, s in decision.rejections().items()}
    post = engine.preempt(pod.obj()).postfilter if not decision.feasible_count else ""
    return rejected, post


@pytest.mark.parametrize(
    ("version", "pod", "rejected", "post"),
    [
        pytest.param(
            "v1.35", make_pod().node("n2"),
            {n: ("NodeName", ("node(s) didn't match the requested node name",), UNRESOLVABLE) for n in ("n1", "n3")},
            "", id="v1.35: the NodeName filter rejects the other nodes",
        ),
        pytest.param(
            "v1.37", make_pod().node("n2"), {n: ("NodeName", (ABSENT,), UNRESOLVABLE) for n in ("n1", "n3")},
            "", id="v1.37: the other nodes are absent from the PreFilter result",
        ),
        pytest.param(
            "v1.37", make_pod().node("gone"), {n: ("NodeName", (ABSENT,), UNRESOLVABLE) for n in ("n1", "n2", "n3")},
            "Unschedulable: preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
            id="v1.37: a node name that names no node leaves every node absent",
        ),
        pytest.param(
            "v1.37", make_pod().node("n2").affinity("nodeAffinity", fields_in("n1", "n2")),
            {n: ("NodeAffinity,NodeName", (BOTH,), UNRESOLVABLE) for n in ("n1", "n3")},
            "", id="v1.37: both restrictions intersect, the plugins named sorted",
        ),
        pytest.param(
            "v1.37", make_pod().node("n3").affinity("nodeAffinity", fields_in("n1", "n2")),
            {n: ("NodeAffinity,NodeName", (f"{BOTH} simultaneously",), UNRESOLVABLE) for n in ("n1", "n2", "n3")},
            "Error: not found", id="v1.37: an empty intersection rejects the pod at PreFilter, PostFilter fails",
        ),
    ],
)  # fmt: skip
def test_node_name_per_version(
    version: str, pod: PodBuilder, rejected: dict[str, tuple[str, tuple[str, ...], str]], post: str
) -> None:
    assert answer(version, pod) == (rejected, post)
