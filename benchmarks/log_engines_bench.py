"""JetStream and etcd side by side (issue 39: "choose by measurement"): a fenced append, as podfit's owner
makes one, p50/p99 over sequential appends, three loopback nodes of each engine, in one run.

    .venv/bin/python -m benchmarks.log_engines_bench [--appends 300] [--size 600]

- **JetStream** (nats-server from tests/engine/build.sh): podfit's own ``Engine.append`` — a publish to the
  R3 stream carrying ``Nats-Expected-Last-Sequence`` and a message id, answered once the stream's Raft
  group holds it. By default nats-server does not fsync each write (it syncs every two minutes and relies
  on the replicas); measured that way and with ``sync_interval: always``.
- **etcd** (its server from benchmarks/etcd/build.sh, benchmark only): a transaction that puts the entry
  at ``log/<sequence>`` if that key was never created (``create_revision == 0``: the log ends where this
  owner believes it does, the same fence), answered once etcd's Raft has committed it. etcd fsyncs its
  write-ahead log on every commit; measured that way and with ``--unsafe-no-fsync``. The client is etcd's
  gRPC gateway (JSON over HTTP/1.1 keep-alive, aiohttp): no maintained asyncio etcd client is among
  podfit's dependencies, and the gateway is served by etcd itself, in process, beside its gRPC API.

Each client talks to the node leading (the stream's leader, etcd's leader): no forwarding hop on either.
The payload is a log entry's size (``--size``, a sealed one-Namespace frame is about 600 bytes).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
from podfit.client.conformance import free_port
from podfit.server.transport.replicated import STREAM, Engine, ReplicationSettings

from benchmarks.replicated_bench import percentile
from tests.engine_cluster import EngineCluster, stop

ROOT = Path(__file__).resolve().parent.parent
ETCD_BUILD = ROOT / "benchmarks" / "etcd" / "build.sh"
WARM_UP = 20


def etcd_binary() -> Path:
    done = subprocess.run([str(ETCD_BUILD)], check=True, stdout=subprocess.PIPE, text=True)
    return Path(done.stdout.strip().splitlines()[-1]) / "etcd"


class EtcdCluster:
    """``size`` etcd members on loopback, each started and stopped by its own PID."""

    def __init__(self, folder: Path, size: int = 3, fsync: bool = True) -> None:
        self.binary = etcd_binary()
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.clients = [free_port() for _ in range(size)]
        peers = [free_port() for _ in range(size)]
        self.names = [f"e{i + 1}" for i in range(size)]
        initial = ",".join(f"{name}=http://127.0.0.1:{port}" for name, port in zip(self.names, peers, strict=True))
        self.argv = [
            [
                *(str(self.binary), "--name", name, "--data-dir", str(folder / name)),
                *("--listen-client-urls", f"http://127.0.0.1:{client}"),
                *("--advertise-client-urls", f"http://127.0.0.1:{client}"),
                *("--listen-peer-urls", f"http://127.0.0.1:{peer}"),
                *("--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}"),
                *("--initial-cluster", initial, "--initial-cluster-state", "new"),
                *("--initial-cluster-token", "podfit-bench", "--log-level", "warn"),
                *([] if fsync else ["--unsafe-no-fsync"]),
            ]
            for name, client, peer in zip(self.names, self.clients, peers, strict=True)
        ]
        self.popens: list[subprocess.Popen[bytes]] = []

    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}" for port in self.clients]

    async def start(self, session: aiohttp.ClientSession, timeout: float = 30.0) -> EtcdCluster:
        for name, argv in zip(self.names, self.argv, strict=True):
            with (self.folder / f"{name}.log").open("ab") as log:
                self.popens.append(subprocess.Popen(argv, stdout=log, stderr=log))
        deadline = time.monotonic() + timeout
        while True:
            try:
                await self.leader(session)
                return self
            except (aiohttp.ClientError, KeyError, ValueError):
                if time.monotonic() > deadline or any(p.poll() is not None for p in self.popens):
                    self.stop()
                    raise AssertionError(f"etcd did not start: see {self.folder}") from None
                await asyncio.sleep(0.2)

    async def leader(self, session: aiohttp.ClientSession) -> str:
        """The client URL of the member leading etcd's Raft."""
        for url in self.urls():
            async with session.post(f"{url}/v3/maintenance/status", json={}) as reply:
                status = await reply.json()
            if status.get("leader") and status["leader"] == status["header"]["member_id"]:
                return url
        raise ValueError("no leader yet")

    def stop(self) -> None:
        for popen in self.popens:
            stop(popen)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def timed(append: Callable[[int], Awaitable[None]], count: int) -> tuple[float, float]:
    """p50, p99 in ms of ``count`` sequential appends (after WARM_UP unmeasured ones)."""
    times = []
    for i in range(WARM_UP + count):
        started = time.perf_counter()
        await append(i)
        if i >= WARM_UP:
            times.append((time.perf_counter() - started) * 1000)
    return percentile(times, 0.5), percentile(times, 0.99)


async def jetstream(folder: Path, count: int, payload: bytes, sync_always: bool) -> tuple[float, float]:
    cluster = EngineCluster(folder, 3, sync_always=sync_always).start()
    try:
        settings = ReplicationSettings(urls=cluster.urls.split(","), key=b"k" * 16, address="127.0.0.1:1")
        for _ in range(50):  # the client picks a node at random: again until it is the stream's leader's
            engine = Engine(settings)
            await engine.connect()
            assert engine.js is not None and engine.nc is not None
            info = await engine.js.stream_info(STREAM)
            assert info.cluster is not None
            leader = next(node for node in cluster.nodes if node.name == info.cluster.leader)
            if engine.nc.connected_url is not None and engine.nc.connected_url.port == leader.port:
                break
            await engine.close()
        else:
            raise AssertionError("never connected to the stream's leader")
        last = await engine.last_sequence()

        async def append(i: int) -> None:
            nonlocal last
            last = await engine.append(payload, last, f"bench-{i}", 5.0)

        try:
            return await timed(append, count)
        finally:
            await engine.close()
    finally:
        cluster.stop()


async def etcd_gateway(folder: Path, count: int, payload: bytes, fsync: bool) -> tuple[float, float]:
    """What the gateway itself costs: a serializable read on the leader (HTTP, JSON, no Raft round)."""
    cluster = EtcdCluster(folder, 3, fsync=fsync)
    async with aiohttp.ClientSession() as session:
        await cluster.start(session)
        try:
            url = f"{await cluster.leader(session)}/v3/kv/range"
            read = {"key": _b64(b"podfit/log/00000000000000000001"), "serializable": True}

            async def get(i: int) -> None:
                async with session.post(url, json=read) as reply:
                    await reply.json()

            return await timed(get, count)
        finally:
            cluster.stop()


async def etcd(folder: Path, count: int, payload: bytes, fsync: bool) -> tuple[float, float]:
    cluster = EtcdCluster(folder, 3, fsync=fsync)
    async with aiohttp.ClientSession() as session:
        await cluster.start(session)
        try:
            url = f"{await cluster.leader(session)}/v3/kv/txn"
            value = _b64(payload)

            async def append(i: int) -> None:
                key = _b64(f"podfit/log/{i + 1:020d}".encode())
                txn = {
                    "compare": [{"target": "CREATE", "result": "EQUAL", "key": key, "create_revision": "0"}],
                    "success": [{"request_put": {"key": key, "value": value}}],
                }
                async with session.post(url, json=txn) as reply:
                    answer = await reply.json()
                if not answer.get("succeeded"):
                    raise AssertionError(f"etcd refused append {i + 1}: {answer}")

            return await timed(append, count)
        finally:
            cluster.stop()


async def main(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="podfit-log-engines-bench-"))
    payload = os.urandom(args.size)
    print(f"# {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; {args.appends} fenced appends of {args.size} B")
    print("| engine (3 loopback nodes) | p50 | p99 |")
    print("|---|---|---|")
    runs = [
        ("JetStream R3, expected-last-sequence (default: no fsync per write)", jetstream, False),
        ("JetStream R3, expected-last-sequence, sync_interval: always", jetstream, True),
        ("etcd txn create_revision == 0 then put (default: WAL fsync per commit)", etcd, True),
        ("etcd txn create_revision == 0 then put, --unsafe-no-fsync", etcd, False),
        ("(etcd's gateway alone: a serializable read on the leader, no Raft)", etcd_gateway, True),
    ]
    for i, (label, run, flag) in enumerate(runs):
        p50, p99 = await run(folder / f"run{i}", args.appends, payload, flag)
        print(f"| {label} | {p50:.2f} ms | {p99:.2f} ms |", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--size", type=int, default=600)
    asyncio.run(main(parser.parse_args()))
