"""Security defaults: TLS, mTLS and bearer-token auth on a real server; graceful shutdown."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from podfit.client import AsyncClient, PodfitError
from podfit.server.app import create_server
from podfit.server.settings import Settings

from tests.builders import make_node


async def test_tls_serves_and_plaintext_clients_are_refused(pki: dict[str, Path]) -> None:
    settings = Settings(tls_cert_file=str(pki["server_cert"]), tls_key_file=str(pki["server_key"]))
    running = await create_server(settings, addr="localhost:0", extender_addr="off")
    try:
        async with AsyncClient(f"localhost:{running.port}", tls=True, root_certificates=pki["ca"].read_bytes()) as c:
            assert (await c.apply([make_node("n1").json()])).applied_count == 1
        async with AsyncClient(f"localhost:{running.port}") as plain:
            with pytest.raises(PodfitError) as info:
                await plain.stats(timeout=3)
            assert info.value.code is grpc.StatusCode.UNAVAILABLE
    finally:
        await running.stop(0)


async def test_mtls_requires_a_client_certificate(pki: dict[str, Path]) -> None:
    settings = Settings(
        tls_cert_file=str(pki["server_cert"]),
        tls_key_file=str(pki["server_key"]),
        tls_client_ca_file=str(pki["ca"]),
    )
    running = await create_server(settings, addr="localhost:0", extender_addr="off")
    target = f"localhost:{running.port}"
    ca = pki["ca"].read_bytes()
    try:
        async with AsyncClient(
            target,
            tls=True,
            root_certificates=ca,
            client_certificate=pki["client_cert"].read_bytes(),
            client_key=pki["client_key"].read_bytes(),
        ) as client:
            assert (await client.stats()).nodes == 0
        async with AsyncClient(target, tls=True, root_certificates=ca) as anonymous:
            with pytest.raises(PodfitError) as info:
                await anonymous.stats(timeout=3)
            assert info.value.code is grpc.StatusCode.UNAVAILABLE
    finally:
        await running.stop(0)


async def test_bearer_token_auth(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    running = await create_server(Settings(auth_token_file=str(token_file)), addr="127.0.0.1:0", extender_addr="off")
    target = f"127.0.0.1:{running.port}"
    try:
        async with AsyncClient(target, token="s3cret-token") as good:
            assert (await good.stats()).generation == 0
        for token in (None, "wrong"):
            async with AsyncClient(target, token=token) as bad:
                with pytest.raises(PodfitError) as info:
                    await bad.stats()
                assert info.value.code is grpc.StatusCode.UNAUTHENTICATED
                assert "s3cret" not in info.value.message
        async with grpc.aio.insecure_channel(target) as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        await running.stop(0)


async def test_graceful_shutdown_drains_in_flight_calls() -> None:
    running = await create_server(Settings(), addr="127.0.0.1:0", extender_addr="off")
    target = f"127.0.0.1:{running.port}"
    gate, entered = asyncio.Event(), []
    schedule = running.service.schedule

    async def held_schedule(*args: object, **kwargs: object) -> object:
        entered.append(1)
        await gate.wait()
        return await schedule(*args, **kwargs)  # type: ignore[arg-type]

    running.service.schedule = held_schedule  # type: ignore[method-assign]
    async with AsyncClient(target) as client, grpc.aio.insecure_channel(target) as channel:
        await client.apply([make_node(f"n{i}").json() for i in range(3)])
        calls = [asyncio.create_task(client.schedule({"kind": "Pod", "metadata": {"name": f"p{i}"}})) for i in range(5)]
        while len(entered) < 5:
            await asyncio.sleep(0.01)
        stopping = asyncio.create_task(running.stop(5))
        await asyncio.sleep(0.1)
        # Shutting down: health says so while the five calls are still being served.
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        assert reply.status == health_pb2.HealthCheckResponse.NOT_SERVING
        assert not stopping.done()
        gate.set()
        answers = await asyncio.gather(*calls)
        await stopping
    assert [a.selected_node for a in answers] == ["n0"] * 5
    async with grpc.aio.insecure_channel(target) as closed:
        with pytest.raises(grpc.aio.AioRpcError):
            await health_pb2_grpc.HealthStub(closed).Check(health_pb2.HealthCheckRequest(), timeout=1)
