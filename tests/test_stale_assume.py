"""An assume of a pod older than the cache's copy is refused before anything changes: the reservation
would be ignored as stale, and answering with an assumed_generation would say it was made."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from podfit.client import PodfitError

from tests.builders import make_node, make_pod
from tests.conftest import LiveServer


def pod(version: str, name: str = "web") -> dict[str, Any]:
    manifest = make_pod(name).req(cpu="1").json()
    if version:
        manifest["metadata"]["resourceVersion"] = version
    return manifest


async def load(live: LiveServer) -> int:
    answer = await live.client.apply([make_node("n1").capacity(cpu="4", memory="8Gi", pods="10").json(), pod("7")])
    return int(answer.generation)


@pytest.mark.parametrize(
    ("version", "refused"),
    [
        pytest.param("5", True, id="older than the cached 7: refused"),
        pytest.param("7", False, id="the cached version: assumed"),
        pytest.param("9", False, id="newer: assumed"),
        pytest.param("", False, id="no resourceVersion: assumed"),
    ],
)
async def test_schedule_with_assume(live: LiveServer, version: str, refused: bool) -> None:
    generation = await load(live)
    if not refused:
        answer = await live.client.schedule(pod(version), assume=True)
        assert answer.selected_node == "n1" and answer.assumed_generation == generation + 1
        return
    with pytest.raises(PodfitError) as raised:
        await live.client.schedule(pod(version), assume=True)
    assert (raised.value.code, raised.value.reason) == (grpc.StatusCode.ABORTED, "STALE_POD")
    assert "'5', older than the cached '7'" in raised.value.message
    stats = await live.client.stats()
    assert (stats.generation, stats.bound_pods) == (generation, 0)
    # Without assume nothing is written, so an old copy may still be asked about.
    assert (await live.client.schedule(pod(version))).selected_node == "n1"


async def test_a_stale_pod_in_a_batch_is_named_and_nothing_is_assumed(live: LiveServer) -> None:
    generation = await load(live)
    with pytest.raises(PodfitError) as raised:
        await live.client.schedule_batch([pod("", name="other"), pod("5")])
    assert (raised.value.code, raised.value.reason) == (grpc.StatusCode.ABORTED, "STALE_POD")
    assert raised.value.message.startswith("pods[1]: pod default/web")
    stats = await live.client.stats()
    assert (stats.generation, stats.bound_pods) == (generation, 0)
