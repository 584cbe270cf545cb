"""Replicas on a replicated log (issue 39): what the log adds to a write, read throughput with 1, 2 and 3
replicas, and failover times — on loopback, with nats-server built by tests/engine/build.sh.

    .venv/bin/python -m benchmarks.replicated_bench [--writes 500] [--seconds 5] [--lease 5]
    .venv/bin/python -m benchmarks.replicated_bench --catch-up 20000

Writes: one Apply of one Namespace at a time, sequentially, against (a) podfit-server alone, (b) the
owner of a 3-replica group on a 3-node JetStream cluster, (c) another replica (forwarded to the owner,
answered once the replica applied the entry). Reads: Filter of one pod against 50 nodes from 16
concurrent callers spread evenly over the replicas answering. Failover: the owner SIGKILLed, the time
until a write sent after it is acknowledged; and the log's leader node SIGKILLed, the same.

Catch-up (``--catch-up N``, on its own): N log entries (each one Namespace upserted, sealed as an owner
seals them) appended straight to the stream of a 3-node engine, then one replica started: the rate at
which it applies the log before it first answers, as it logs it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import grpc
from podfit.client import AsyncClient
from podfit.client import _requests as rq
from podfit.client.conformance import free_port
from podfit.client.errors import PodfitError
from podfit.server.transport.convert import changes_from_updates
from podfit.server.transport.replicated import STREAM, SUBJECT, Engine, ReplicationSettings, seal

from tests.builders import make_node
from tests.engine_cluster import EngineCluster, PodfitReplica


def namespace(name: str) -> dict[str, Any]:
    return {"kind": "Namespace", "metadata": {"name": name}}


POD = {
    "kind": "Pod",
    "metadata": {"name": "probe", "namespace": "default", "uid": "uid-probe"},
    "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]},
}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def write_latency(address: str, count: int, prefix: str) -> tuple[float, float]:
    to = AsyncClient(address)
    try:
        for i in range(20):
            await to.apply([namespace(f"{prefix}-warm-{i}")])
        times = []
        for i in range(count):
            started = time.perf_counter()
            await to.apply([namespace(f"{prefix}-{i}")])
            times.append((time.perf_counter() - started) * 1000)
    finally:
        await to.close()
    return percentile(times, 0.5), percentile(times, 0.99)


async def read_throughput(addresses: list[str], seconds: float, callers: int = 16) -> float:
    clients = [AsyncClient(addresses[i % len(addresses)]) for i in range(callers)]
    done = 0
    stop = time.monotonic() + seconds

    async def caller(to: AsyncClient) -> None:
        nonlocal done
        while time.monotonic() < stop:
            await to.filter(POD)
            done += 1

    try:
        for to in clients:
            await to.filter(POD)
        started = time.monotonic()
        await asyncio.gather(*(caller(to) for to in clients))
        return done / (time.monotonic() - started)
    finally:
        for to in clients:
            await to.close()


async def until_written(replicas: list[PodfitReplica], name: str, within: float) -> float:
    """Seconds until a write sent now or later is acknowledged by any live replica."""
    started = time.monotonic()
    while time.monotonic() - started < within:
        for replica in replicas:
            if not replica.alive():
                continue
            to = AsyncClient(replica.address)
            try:
                await to.apply([namespace(name)], timeout=2)
                return time.monotonic() - started
            except PodfitError as exc:
                if exc.code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
            finally:
                await to.close()
        await asyncio.sleep(0.05)
    raise AssertionError(f"no write acknowledged within {within} s")


async def log_leader(urls: str) -> str:
    """The engine node leading the log's stream."""
    import nats

    connection = await nats.connect(urls.split(","))
    try:
        info = await connection.jetstream().stream_info(STREAM)
        assert info.cluster is not None and info.cluster.leader
        return str(info.cluster.leader)
    finally:
        await connection.close()


def single(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    log = (folder / "single.log").open("wb")
    argv = [sys.executable, "-m", "podfit.server.app", "--grpc-addr", f"127.0.0.1:{port}", "--extender-addr", "off"]
    popen = subprocess.Popen([*argv, "--metrics-addr", "off", "--no-what-if-process"], stdout=log, stderr=log)
    return popen, f"127.0.0.1:{port}"


async def wait_serving(address: str) -> None:
    for _ in range(200):
        to = AsyncClient(address)
        try:
            await to.stats(timeout=1)
            return
        except PodfitError:
            await asyncio.sleep(0.1)
        finally:
            await to.close()
    raise AssertionError(f"{address} never answered")


def log_entry(key: bytes, name: str) -> bytes:
    """One log entry as an owner appends it: a frame upserting one Namespace, sealed with the key."""
    frame = pickle.dumps([("apply", changes_from_updates(rq.upserts([namespace(name)])))], pickle.HIGHEST_PROTOCOL)
    return seal(key, pickle.dumps(("frames", [frame]), pickle.HIGHEST_PROTOCOL))


CAUGHT_UP = re.compile(r"caught up with (\d+) log entries in ([\d.]+) s \((\d+) entries/s\)")


async def catch_up(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="podfit-catch-up-bench-"))
    print(f"# {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; {folder}")
    engine = EngineCluster(folder / "engine", 3).start()
    key = folder / "key"
    key.write_bytes(os.urandom(32).hex().encode())
    secret = key.read_bytes().strip()
    replica = PodfitReplica("podfit-0", folder, engine.urls, key, lease_seconds=args.lease, snapshot_entries=10**9)
    try:
        writer = Engine(ReplicationSettings(urls=engine.urls.split(","), key=secret, address="127.0.0.1:1"))
        await writer.connect()
        assert writer.js is not None
        owner = seal(secret, pickle.dumps(("owner", ("127.0.0.1:1", uuid.uuid4().hex))))
        await writer.js.publish(SUBJECT, owner)
        started = time.monotonic()
        for first in range(0, args.catch_up, 500):
            await asyncio.gather(
                *(
                    writer.js.publish(SUBJECT, log_entry(secret, f"ns-{i}"))
                    for i in range(first, min(first + 500, args.catch_up))
                )
            )
        print(f"appended {args.catch_up} entries in {time.monotonic() - started:.1f} s")
        await writer.close()
        replica.start()
        await wait_serving(replica.address)
        found = None
        while found is None:
            found = CAUGHT_UP.search(replica.log())
            await asyncio.sleep(0.1)
        entries, seconds, rate = found.groups()
        print(f"catch-up: {entries} log entries applied in {seconds} s: {rate} entries/s")
    finally:
        replica.stop()
        engine.stop()


async def main(args: argparse.Namespace) -> None:
    if args.catch_up:
        await catch_up(args)
        return
    folder = Path(tempfile.mkdtemp(prefix="podfit-replicated-bench-"))
    print(f"# {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; {folder}")
    popen, address = single(folder)
    try:
        await wait_serving(address)
        p50, p99 = await write_latency(address, args.writes, "single")
        print(f"write, one process:             p50 {p50:.2f} ms  p99 {p99:.2f} ms")
        await AsyncClient(address).apply(
            [make_node(f"n{i}").capacity(cpu="8", memory="32Gi").json() for i in range(50)]
        )
        print(f"reads, one process:             {await read_throughput([address], args.seconds):.0f} Filter/s")
    finally:
        popen.terminate()
        popen.wait()
    engine = EngineCluster(folder / "engine", 3).start()
    key = folder / "key"
    key.write_bytes(os.urandom(32).hex().encode())
    replicas = [
        PodfitReplica(f"podfit-{i}", folder, engine.urls, key, lease_seconds=args.lease, snapshot_entries=100_000)
        for i in range(3)
    ]
    try:
        for replica in replicas:
            replica.start()
        for replica in replicas:
            await wait_serving(replica.address)
        while not any(r.owner() for r in replicas):
            await asyncio.sleep(0.1)
        owner = next(r for r in replicas if r.owner())
        other = next(r for r in replicas if r is not owner)
        p50, p99 = await write_latency(owner.address, args.writes, "owner")
        print(f"write, the owner (3-node log):  p50 {p50:.2f} ms  p99 {p99:.2f} ms")
        p50, p99 = await write_latency(other.address, args.writes, "replica")
        print(f"write, another replica:         p50 {p50:.2f} ms  p99 {p99:.2f} ms")
        to = AsyncClient(owner.address)
        await to.apply([make_node(f"n{i}").capacity(cpu="8", memory="32Gi").json() for i in range(50)])
        await to.close()
        for count in (1, 2, 3):
            rate = await read_throughput([r.address for r in replicas[:count]], args.seconds)
            print(f"reads, {count} replica(s):             {rate:.0f} Filter/s")
        owner.kill()
        took = await until_written(replicas, "after-owner-kill", 60)
        print(f"failover, owner SIGKILLed:      {took:.2f} s to the next acknowledged write (lease {args.lease} s)")
        leader = await log_leader(engine.urls)  # the log's, not the lease bucket's: appends stop for its election
        next(n for n in engine.nodes if n.name == leader).kill()
        took = await until_written(replicas, "after-leader-kill", 60)
        print(f"engine leader node SIGKILLed:   {took:.2f} s to the next acknowledged write")
    finally:
        for replica in replicas:
            replica.stop()
        engine.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writes", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--lease", type=float, default=5.0)
    parser.add_argument("--catch-up", type=int, default=0, metavar="N", help="only: a replica catching up N entries")
    asyncio.run(main(parser.parse_args()))
