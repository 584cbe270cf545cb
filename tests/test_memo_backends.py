"""A remote decision memo (redis) under concurrency: assume never reserves the same room twice, and a
memo that fails costs a recomputation, never a decision.

The redis memo awaits the network between reading a decision and reserving it, so other calls run in
between; these tests start Debian's ``redis-server`` on a free loopback port (installed by
sdk/install.sh) and fail, rather than skip, when it is missing.
"""

from __future__ import annotations

import asyncio
import collections
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from podfit.client import AsyncClient
from podfit.client.conformance import free_port
from podfit.client.manifests import to_cluster_object
from podfit.server.app import create_server
from podfit.server.cache.cluster_cache import Upsert
from podfit.server.config import default_profile
from podfit.server.model import Kind, Pod
from podfit.server.service import GivenPod, SchedulingService
from podfit.server.settings import Settings, SettingsError, resolve
from podfit.server.transport.stored_forms import PROTOBUF_FORMS

from tests.builders import make_node, make_pod
from tests.server_process import ServerProcess


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed: run sdk/install.sh (or apt-get install redis-server)")
    try:
        import redis  # noqa: F401  (aiocache's redis backend)
    except ImportError:
        pytest.fail("the 'redis' package is missing: pip install -e '.[dev]'")
    port = free_port()
    workdir = tmp_path_factory.mktemp("redis")
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            assert process.poll() is None, "redis-server exited at start"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "redis-server did not answer PING"
            time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


def _given(builder: Any) -> GivenPod:
    return GivenPod(builder.obj(), to_cluster_object(builder.json()).SerializeToString(deterministic=True))


def _service(port: int, nodes: int, cpu: str) -> SchedulingService:
    svc = SchedulingService(
        {"default-scheduler": default_profile()},
        forms=PROTOBUF_FORMS,
        memo_backend="redis",
        memo_options={"endpoint": "127.0.0.1", "port": port},
    )
    svc.apply(
        [Upsert(Kind.NODE, make_node(f"n{i}").capacity(cpu=cpu, memory="64Gi", pods="110").obj()) for i in range(nodes)]
    )
    return svc


def _bound(svc: SchedulingService) -> dict[str, int]:
    """Pods bound per node."""
    per_node: dict[str, int] = {}
    for entry in svc.cache.entries(Kind.POD):
        pod = entry.obj
        assert isinstance(pod, Pod)
        if pod.node_name:
            per_node[pod.node_name] = per_node.get(pod.node_name, 0) + 1
    return per_node


@pytest.mark.parametrize(
    ("nodes", "cpu", "room"),
    [
        pytest.param(1, "4", 4, id="one node with room for exactly 4 one-cpu pods"),
        pytest.param(3, "3", 3, id="three nodes with room for exactly 3 each"),
    ],
)
async def test_concurrent_assumes_with_a_redis_memo_never_reserve_more_than_the_room(
    redis_port: int, nodes: int, cpu: str, room: int
) -> None:
    svc = _service(redis_port, nodes, cpu)
    calls: list[Any] = []
    for i in range(60):
        # Replicas of one workload (one signature, so one memo entry per generation): assumers, and
        # deciders that keep filling the memo in between, as kube-scheduler's filter/prioritize do.
        calls.append(svc.schedule(_given(make_pod(f"web-{i}").req(cpu="1")), assume=True))
        calls.append(svc.decide(make_pod(f"probe-{i}").req(cpu="1").obj()))
        calls.append(svc.schedule(make_pod(f"look-{i}").req(cpu="1").obj(), preempt=False))
    results = await asyncio.gather(*calls, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors[:3]
    placed = [r for r in results[0::3] if r.assumed_generation]
    per_node = _bound(svc)
    assert len(placed) == nodes * room
    assert per_node == {f"n{i}": room for i in range(nodes)}
    await svc.close()


async def test_a_new_generation_leaves_other_users_keys_in_a_shared_redis(redis_port: int) -> None:
    """A remote memo is shared: moving on to a new generation must not flush the database."""
    import redis.asyncio as aioredis

    other = aioredis.Redis(host="127.0.0.1", port=redis_port)
    await other.set("another-tenant:key", b"precious")
    svc = _service(redis_port, 2, "4")
    try:
        for i in range(3):
            await svc.decide(make_pod(f"web-{i}").req(cpu="1").obj())
            svc.apply([Upsert(Kind.NODE, make_node(f"extra-{i}").obj())])  # a new generation
        await svc.decide(make_pod("last").req(cpu="1").obj())
        assert await other.get("another-tenant:key") == b"precious"
    finally:
        await svc.close()
        await other.aclose()


async def test_assume_through_grpc_with_a_redis_memo_fills_the_node_exactly(redis_port: int) -> None:
    svc = _service(redis_port, 1, "5")
    running = await create_server(Settings(), addr="127.0.0.1:0", extender_addr="off", service=svc)
    try:
        async with AsyncClient(f"127.0.0.1:{running.port}") as client:
            answers = await asyncio.gather(
                *(client.schedule(make_pod(f"web-{i}").req(cpu="1").json(), assume=i % 2 == 0) for i in range(40))
            )
        assert sum(1 for a in answers if a.assumed_generation) == 5
        assert _bound(svc) == {"n0": 5}
    finally:
        await running.stop(0)


async def test_podfit_server_with_a_redis_memo_never_overbooks(redis_port: int) -> None:
    """The deployed path: ``memo.backend: redis`` at ``memo.address``, many clients at once."""
    server = ServerProcess(env={"PODFIT_MEMO_BACKEND": "redis", "PODFIT_MEMO_ADDRESS": f"127.0.0.1:{redis_port}"})
    try:
        async with AsyncClient(server.target) as client:
            await server.ready(client)
            nodes = [make_node(f"n{i}").capacity(cpu="3", memory="64Gi", pods="110").json() for i in range(4)]
            await client.apply(nodes)
            answers = await asyncio.gather(
                *(
                    client.schedule(make_pod(f"web-{i}").req(cpu="1").json(), assume=i % 3 == 0, view="basic")
                    if i % 3 != 2
                    else client.filter(make_pod(f"probe-{i}").req(cpu="1").json())
                    for i in range(150)
                )
            )
            placed = [a for a in answers[0::3] if a.assumed_generation]
            bound = [o.pod.spec.node_name for o in (await client.list("Pod")).objects if o.pod.spec.node_name]
        assert len(placed) == len(bound) == 12
        assert sorted(collections.Counter(bound).values()) == [3, 3, 3, 3]
    finally:
        server.process.terminate()
        server.process.wait(timeout=20)
    assert "decision memo unavailable" not in server.log()


async def test_a_memo_that_cannot_be_reached_costs_a_recomputation_not_a_decision(caplog: Any) -> None:
    svc = SchedulingService(
        {"default-scheduler": default_profile()},
        forms=PROTOBUF_FORMS,
        memo_backend="redis",
        memo_options={"endpoint": "127.0.0.1", "port": free_port(), "timeout": 2},
    )
    svc.apply([Upsert(Kind.NODE, make_node("n0").capacity(cpu="2", memory="8Gi", pods="110").obj())])
    first = await svc.decide(make_pod("a").req(cpu="1").obj())
    second = await svc.decide(make_pod("b").req(cpu="1").obj())
    placed = await svc.schedule(_given(make_pod("c").req(cpu="1")), assume=True)
    assert first.best == second.best == ["n0"] and placed.assumed_generation
    assert sum("decision memo unavailable" in r.getMessage() for r in caplog.records) == 1
    await svc.close()


def test_sdk_install_provides_redis_server() -> None:
    """The suite needs redis-server; the README's install command (sdk/install.sh) installs it."""
    sdk = Path(__file__).resolve().parents[1] / "sdk"
    assert "install-redis.sh" in (sdk / "install.sh").read_text()
    script = (sdk / "install-redis.sh").read_text()
    assert "command -v redis-server" in script and "apt-get install" in script


@pytest.mark.parametrize(
    ("environ", "error"),
    [
        pytest.param(
            {"PODFIT_MEMO_BACKEND": "redis", "PODFIT_MEMO_ADDRESS": "redis"}, "must be HOST:PORT", id="no port"
        ),
        pytest.param({"PODFIT_MEMO_ADDRESS": "127.0.0.1:6379"}, "only for memo.backend", id="an in-process memo"),
    ],
)
def test_a_bad_memo_address_is_refused_at_start(environ: dict[str, str], error: str) -> None:
    with pytest.raises(SettingsError, match=f"^memo.address: .*{error}"):
        resolve([], environ)


def test_the_memo_address_becomes_the_backends_endpoint() -> None:
    settings = resolve([], {"PODFIT_MEMO_BACKEND": "redis", "PODFIT_MEMO_ADDRESS": "[::1]:7000"})
    assert settings.memo_options == {"endpoint": "::1", "port": 7000}
