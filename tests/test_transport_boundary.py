"""The transports only convert: every RPC and extender verb works against a service whose cache is out
of their reach, so cached pods, assumed sources and cache reads are all resolved by SchedulingService."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from podfit.client import AsyncClient
from podfit.server.app import create_server
from podfit.server.config import default_profile
from podfit.server.service import SchedulingService
from podfit.server.settings import Settings
from podfit.server.transport.stored_forms import PROTOBUF_FORMS

from tests.builders import make_node, make_pod

cache_reads: list[str] = []


class SealedService:
    """Forwards to a real SchedulingService, but records any attempt from outside to reach its cache."""

    def __init__(self, real: SchedulingService) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        if name == "cache":
            cache_reads.append(name)
            raise AttributeError("transports must not read the cache")
        return getattr(self._real, name)


@pytest.fixture
async def sealed() -> AsyncIterator[tuple[AsyncClient, str]]:
    cache_reads.clear()
    service = SealedService(SchedulingService({"default-scheduler": default_profile()}, forms=PROTOBUF_FORMS))
    running = await create_server(
        Settings(extender_bind=True),
        addr="127.0.0.1:0",
        extender_addr="127.0.0.1:0",
        service=service,  # type: ignore[arg-type]
    )
    client = AsyncClient(f"127.0.0.1:{running.port}")
    yield client, f"http://127.0.0.1:{running.extender_port}/scheduler"
    await client.close()
    await running.stop(0)


async def test_every_rpc_works_without_reaching_the_cache(sealed: tuple[AsyncClient, str]) -> None:
    client, _ = sealed
    await client.apply(
        [
            make_node("n1").capacity(cpu="2", memory="4Gi", pods="10").json(),
            make_pod("low").node("n1").req(cpu="2").priority(1).json(),
            make_pod("pending").req(cpu="1").json(),
            make_pod("other").req(cpu="1").json(),
        ]
    )
    assert (await client.get("Pod", "low")).object.pod.spec.node_name == "n1"
    assert len((await client.list("Pod", pod_filter="pending")).objects) == 2
    assert (await client.stats()).bound_pods == 1
    assert (await client.filter("default/pending")).feasible_count == 0
    assert (await client.score("default/pending")).scores == []
    nothing = await client.schedule("default/pending", assume=True)
    assert nothing.selected_node == "" and nothing.HasField("preemption")
    assert (await client.preempt(make_pod("high").req(cpu="1").priority(9).json())).nominated_node == "n1"
    await client.delete("Pod", "low")
    assumed = await client.schedule("default/pending", assume=True)
    assert (assumed.selected_node, assumed.assumed_generation) == ("n1", 3)
    batch = await client.schedule_batch([make_pod("new").req(cpu="1").json()], all_or_nothing=True)
    assert batch.all_placed
    gang = await client.schedule_batch(["default/other", make_pod("x").req(cpu="1").json()], all_or_nothing=True)
    assert not gang.all_placed
    assert cache_reads == []


async def test_every_extender_verb_works_without_reaching_the_cache(sealed: tuple[AsyncClient, str]) -> None:
    client, url = sealed
    await client.apply(
        [
            make_node("n1").capacity(cpu="3", memory="4Gi", pods="10").json(),  # room for p: bind checks
            make_pod("low").node("n1").req(cpu="2").priority(1).json(),
            make_pod("p").req(cpu="1").json(),
        ]
    )
    pod = make_pod("p").req(cpu="1").priority(9).json()
    async with aiohttp.ClientSession() as session:
        for verb, args in (
            ("filter", {"Pod": pod, "NodeNames": ["n1", "gone"]}),
            ("prioritize", {"Pod": pod, "NodeNames": ["n1"]}),
            ("preempt", {"Pod": pod, "NodeNameToMetaVictims": {"n1": {"Pods": []}}}),
            ("bind", {"PodName": "p", "PodNamespace": "default", "PodUID": "uid-default-p", "Node": "n1"}),
        ):
            async with session.post(f"{url}/{verb}", data=json.dumps(args)) as response:
                assert response.status == 200, (verb, await response.text())
    assert (await client.get("Pod", "p")).object.pod.spec.node_name == "n1"
    assert cache_reads == []
