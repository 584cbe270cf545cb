"""The extender's names path without a Python object per node: names cut from the request's JSON, found by
binary search (NameIndex), and the prioritize answer spliced from them. Each case is checked against the
general way (decode every name, look each up, encode a list of dicts); shapes the splice cannot answer
exactly must fall back, never answer differently."""

from __future__ import annotations

import json
import random

import msgspec
import numpy as np
import pytest
from podfit.server.cache.snapshot import NameIndex
from podfit.server.model.errors import ValidationError
from podfit.server.model.objects import SPEC_FIELDS, pod_from_k8s
from podfit.server.transport.extender import MAX_EXTENDER_PRIORITY, _Sent

NODES = sorted([f"node-{i:03d}" for i in range(40)] + ["nœud-ü", "zone.a-1", "a"])
FOUND = ("node-003", "a", "zone.a-1")


def _args(raw: bytes) -> dict[str, msgspec.Raw]:
    return {"NodeNames": msgspec.Raw(raw)}


def _general(order: list[str], names: list[str], scaled: list[int]) -> bytes:
    by_name = dict(zip(names, scaled, strict=True))
    return msgspec.json.encode([{"Host": n, "Score": by_name[n]} for n in order])


def _window(seed: int, size: int, shuffled: bool) -> list[str]:
    rng = random.Random(seed)
    start = rng.randrange(len(NODES))
    window = [NODES[(start + k) % len(NODES)] for k in range(size)]  # wraps, as kube-scheduler's does
    if shuffled:
        rng.shuffle(window)
    return window


@pytest.mark.parametrize(
    ("seed", "size", "shuffled"),
    [
        pytest.param(1, 1, False, id="one name"),
        pytest.param(2, 10, False, id="a window in name order"),
        pytest.param(3, 30, False, id="a window that wraps around"),
        pytest.param(4, len(NODES), False, id="every node"),
        pytest.param(5, 25, True, id="zone-interleaved order"),
        pytest.param(6, len(NODES), True, id="every node, shuffled"),
    ],
)
def test_spliced_answer_is_the_general_one(seed: int, size: int, shuffled: bool) -> None:
    order = _window(seed, size, shuffled)
    sent = _Sent.of(_args(json.dumps(order, separators=(",", ":"), ensure_ascii=False).encode()))
    assert sent is not None and [n.decode() for n in sent.names] == order
    table_names = sorted(order)  # the score table: the same nodes, in name order
    rng = random.Random(seed)
    scaled = [rng.randint(0, MAX_EXTENDER_PRIORITY) for _ in table_names]
    got = sent.scored(np.array(scaled, dtype=np.int64))
    assert got == _general(order, table_names, scaled)
    assert json.loads(got) == [{"Host": n, "Score": dict(zip(table_names, scaled, strict=True))[n]} for n in order]
    index = NameIndex(np.array(NODES, dtype=object))
    found = index.find(sent.encoded)
    assert found is not None and found.tolist() == [NODES.index(n) for n in order]


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b'["node-001", "node-002"]', id="spaced (not Go's encoding)"),
        pytest.param(b'["node-001" ,"node-002","node-003"]', id="spaced before a comma"),
        pytest.param(b'["node-001",\n"node-002"]', id="a newline between names"),
        pytest.param(b'["node-001","no\\u0064e-002"]', id="escaped"),
        pytest.param(b"[]", id="empty"),
        pytest.param(b"null", id="null"),
    ],
)
def test_names_not_cut_where_the_bytes_are_not_the_names(raw: bytes) -> None:
    """Not cut at all: the caller then decodes the names the general way."""
    msgspec.json.decode(raw)  # valid JSON, all of them
    assert _Sent.of(_args(raw)) is None


@pytest.mark.parametrize(
    ("order", "scaled"),
    [
        pytest.param(["node-001", "node-001"], [3, 3], id="a name sent twice"),
        pytest.param(["node-001", "node-002"], [3, MAX_EXTENDER_PRIORITY + 1], id="score above the maximum"),
        pytest.param(["node-001", "node-002"], [-1, 2], id="negative score"),
        pytest.param(["node-001", "node-002"], [3], id="not the table's nodes"),
    ],
)
def test_splice_refuses_what_it_cannot_answer_exactly(order: list[str], scaled: list[int]) -> None:
    sent = _Sent.of(_args(msgspec.json.encode(order)))
    assert sent is not None
    assert sent.scored(np.array(scaled, dtype=np.int64)) is None


@pytest.mark.parametrize(
    ("cached", "asked", "found"),
    [
        pytest.param(
            NODES, ["node-003", "a", "zone.a-1"], [NODES.index(n) for n in ("node-003", "a", "zone.a-1")], id="found"
        ),
        pytest.param(NODES, ["node-003", "node-999"], None, id="one unknown"),
        pytest.param(NODES, ["zzz"], None, id="past the last name"),
        pytest.param([], ["a"], None, id="no nodes"),
        pytest.param(["a\x00", "b"], ["a"], None, id="a cached name ending in NUL is never searched"),
        pytest.param(["a", "b\ud800"], ["a"], None, id="a cached name that is no UTF-8 is never searched"),
    ],
)
def test_name_index(cached: list[str], asked: list[str], found: list[int] | None) -> None:
    index = NameIndex(np.array(cached, dtype=object))
    got = index.find(np.array([n.encode() for n in asked], dtype=np.bytes_))
    assert (got.tolist() if got is not None else None) == found


def test_replicas_share_their_spec_fields_but_not_their_names() -> None:
    spec = {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "250m"}}}]}
    key = msgspec.json.encode(spec)
    first = pod_from_k8s({"metadata": {"name": "a", "uid": "1"}, "spec": spec}, "Pod", key)
    second = pod_from_k8s({"metadata": {"name": "b", "uid": "2"}, "spec": spec}, "Pod", key)
    assert (first.name, first.uid, second.name, second.uid) == ("a", "1", "b", "2")
    assert first.requests == second.requests and first.requests is second.requests
    # A spec that fails validation is refused each time, never remembered.
    bad = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}
    for _ in range(2):
        with pytest.raises(ValidationError, match=r"Pod\.spec\.containers\[0\]\.resources\.requests"):
            pod_from_k8s({"metadata": {"name": "c"}, "spec": bad}, "Pod", msgspec.json.encode(bad))
    assert SPEC_FIELDS.fields(msgspec.json.encode(bad), lambda: {"remembered": False}) == {"remembered": False}
