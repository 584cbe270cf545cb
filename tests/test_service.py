"""The decision memo: replicas and filter-then-prioritize pairs reuse an answer within a generation,
and nothing of an older generation is kept."""

from __future__ import annotations

from typing import Any

from podfit.server.cache.cluster_cache import Upsert
from podfit.server.config import default_profile
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
