"""The decision memo: replicas and filter-then-prioritize pairs reuse an answer within a generation,
and nothing of an older generation is kept."""

from __future__ import annotations

from typing import Any

import pytest
from podfit.server.cache.cluster_cache import Upsert
from podfit.server.config import default_profile
from podfit.server.engine import Decision
from podfit.server.model import Kind
from podfit.server.service import SchedulingService
from podfit.server.transport.stored_forms import PROTOBUF_FORMS

from tests.builders import make_node, make_pod


def service(**options: Any) -> tuple[SchedulingService, list[int]]:
    svc = SchedulingService({"default-scheduler": default_profile()}, forms=PROTOBUF_FORMS, **options)
    svc.apply([Upsert(Kind.NODE, make_node(f"n{i}").obj()) for i in range(3)])
    calls: list[int] = []
    decide = svc.engine.decide

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return decide(*args, **kwargs)

    svc.engine.decide = counting  # type: ignore[method-assign]
    return svc, calls


async def test_replicas_share_one_decision_per_generation() -> None:
    svc, calls = service()
    first = await svc.decide(make_pod("web-1").req(cpu="1").obj())
    second = await svc.decide(make_pod("web-2").req(cpu="1").obj())
    assert len(calls) == 1 and second.best == first.best
    svc.apply([Upsert(Kind.POD, make_pod("other").node("n0").req(cpu="3").obj())])
    third = await svc.decide(make_pod("web-3").req(cpu="1").obj())
    assert len(calls) == 2 and third.best == ["n1", "n2"]


async def test_different_pods_are_not_confused() -> None:
    svc, calls = service()
    await svc.decide(make_pod("a").req(cpu="1").obj())
    await svc.decide(make_pod("b").req(cpu="2").obj())
    await svc.decide(make_pod("c").req(cpu="1").obj(), node_names=["n1"])
    assert len(calls) == 3


async def test_the_memo_is_bounded_and_emptied_when_the_generation_moves() -> None:
    svc, _ = service(memo_max_entries=3)
    for i in range(5):
        await svc.decide(make_pod(f"p{i}").req(cpu=f"{i + 1}00m").obj())
    assert svc.memo is not None and svc.memo._entries == 3
    svc.apply([Upsert(Kind.POD, make_pod("bound").node("n0").obj())])
    await svc.decide(make_pod("q").obj())
    assert svc.memo._entries == 1
    await svc.close()


def _answer(decision: Decision) -> tuple[Any, ...]:
    """What a decision tells a caller: each rejection, and each feasible node's scores."""
    table = decision.score_table
    scores = None if table is None else [(s.node_name, s.total, s.plugins) for s in table.node_scores()]
    rejections = {name: (status.code, status.message) for name, status in decision.rejections().items()}
    return decision.gated, decision.failed, rejections, scores


@pytest.mark.parametrize(
    ("pod", "names"),
    [
        pytest.param(make_pod("small").req(cpu="1"), [], id="every node fits"),
        pytest.param(make_pod("large").req(cpu="3"), [], id="the busy node is rejected"),
        pytest.param(make_pod("named").req(cpu="1"), ["n2", "n0"], id="two nodes named"),
        pytest.param(make_pod("huge").req(cpu="64"), [], id="no node fits"),
        pytest.param(make_pod("gated").gates("example.com/wait"), [], id="gated"),
    ],
)
async def test_filter_first_then_scores_is_the_one_step_decision(pod: Any, names: list[str]) -> None:
    """The extender answers the filter before scoring: the two steps give what decide gives in one."""
    answers = []
    for staged in (True, False):
        svc, _ = service()
        svc.apply([Upsert(Kind.POD, make_pod("busy").node("n0").req(cpu="2").obj())])
        if staged:
            filtered, scoring = await svc.decide_filter_first(pod.obj(), names)
            assert filtered.score_table is None
            scored = await scoring()
            assert scored is not None and _answer(filtered)[:3] == _answer(scored)[:3]
            decision = scored
        else:
            decision = await svc.decide(pod.obj(), names)
        answers.append(_answer(decision))
        await svc.close()
    assert answers[0] == answers[1]


async def test_filter_first_scores_are_remembered_for_the_next_replica() -> None:
    svc, calls = service()
    filtered, scoring = await svc.decide_filter_first(make_pod("web-1").req(cpu="1").obj())
    scored = await scoring()
    again, _ = await svc.decide_filter_first(make_pod("web-2").req(cpu="1").obj())
    assert len(calls) == 1 and again.score_table is not None
    assert _answer(again) == _answer(scored) and filtered.score_table is None
    assert await svc.decide(make_pod("web-3").req(cpu="1").obj()) is not None and len(calls) == 1
    await svc.close()


async def test_filter_first_scores_nothing_once_the_cache_moved_on() -> None:
    """A decision never reads across a write: the caller decides again instead."""
    svc, _ = service()
    filtered, scoring = await svc.decide_filter_first(make_pod("p").req(cpu="1").obj())
    svc.apply([Upsert(Kind.POD, make_pod("bound").node("n0").req(cpu="1").obj())])
    assert filtered.feasible_count == 3 and await scoring() is None
    await svc.close()
