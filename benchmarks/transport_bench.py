"""Transport overhead: the same servicers behind grpc.aio and behind a threaded synchronous
grpc.server, and the extender's aiohttp server (not a test; run by hand).

    python -m benchmarks.transport_bench [--nodes 5000] [--pods 10000] [--seconds 5]
        [--mode aio --mode aio-bare --mode sync-loop --mode sync-locked] [--concurrency 1 --concurrency 8]
        [--http] [--profile DIR]

Every mode runs podfit's real servicers (``SchedulerServicer``, ``ClusterCacheServicer`` from
podfit.server.transport.grpc_services) over one SchedulingService preloaded with a SchedulingBasic
cluster (podfit bench's templates), in a server process of its own; the client is another process.

Modes:

* ``aio``: the production server, ``podfit.server.app.create_server`` (grpc.aio, the telemetry
  interceptor with telemetry off, health and reflection).
* ``aio-bare``: grpc.aio with the same servicers and the aio health servicer, no interceptor: what the
  interceptor costs.
* ``sync-loop``: ``grpc.server(ThreadPoolExecutor)``; each handler thread hands the servicer's coroutine
  to one event-loop thread (``run_coroutine_threadsafe``) and waits: the async servicers unchanged,
  decisions still on one thread.
* ``sync-locked``: ``grpc.server(ThreadPoolExecutor)``; each handler thread runs the servicer's coroutine
  itself on a private event loop under one lock (the cache and the engine are not thread-safe: they
  rely on decisions never interleaving). No thread hand-off.

Calls: ``Check`` (grpc.health.v1, the empty call) and ``Schedule`` (a distinct pod each call, ``assume``
and ``VIEW_BASIC``, as ``podfit bench``), with 1 and with 8 calls in flight from one grpc.aio client
channel. Each figure is the median of ``--repeat`` runs (all runs' rates are shown too). Reported:
calls/s and latency p50/p99 from the client, and the server process's CPU time per
call (from /proc; the client's too) - on 2 cores shared by client and server, CPU per call is the
figure that survives the other's load.

``--http`` measures the extender's aiohttp server the same way: ``GET /healthz`` (empty) and ``POST
/scheduler/filter`` with 500 node names (nodeCacheCapable, a pod never seen before each call so the
memo does not answer), from an aiohttp client process.
``--profile DIR`` then runs each call once more (most calls in flight) under ``py-spy record --gil
--native`` (if installed; it pauses the server to sample, so those runs are not timed) and prints how
much of the time the server held the GIL and where those samples fall.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

GRPC_MODES = ("aio", "aio-bare", "sync-loop", "sync-locked")
GRPC_CALLS = ("check", "schedule")
HTTP_CALLS = ("healthz", "filter-500")


# -- server process ------------------------------------------------------------------------------


def _service(nodes: int, pods: int) -> Any:
    """A SchedulingService holding podfit bench's SchedulingBasic cluster."""
    from podfit.client import bench
    from podfit.server.cache.cluster_cache import Upsert
    from podfit.server.config import profiles_from_configuration
    from podfit.server.model import Kind
    from podfit.server.model.objects import node_from_k8s, pod_from_k8s
    from podfit.server.service import SchedulingService
    from podfit.server.transport.stored_forms import PROTOBUF_FORMS

    service = SchedulingService(profiles_from_configuration(None), forms=PROTOBUF_FORMS)
    service.apply([Upsert(Kind.NODE, node_from_k8s(bench.node(i))) for i in range(nodes)])
    for start in range(0, pods, 5000):
        service.apply(
            [
                Upsert(Kind.POD, pod_from_k8s(bench.pod(f"init-{i}", {"color": "blue"}, None, f"node-{i % nodes:05d}")))
                for i in range(start, min(pods, start + 5000))
            ]
        )
    return service


class _AsyncContext:
    """A synchronous ServicerContext seen as grpc.aio's: the servicers await abort_with_status."""

    def __init__(self, context: Any) -> None:
        self._context = context

    async def abort_with_status(self, status: Any) -> None:
        self._context.abort_with_status(status)

    async def abort(self, code: Any, details: str = "") -> None:
        self._context.abort(code, details)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


class _LoopThread:
    """One event loop on a thread of its own; handler threads submit coroutines and wait."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="servicer-loop", daemon=True).start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()


class _Locked:
    """The handler thread runs the coroutine itself, one at a time, on a private loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        with self.lock:
            return self.loop.run_until_complete(coro)


class SyncServicer:
    """Presents an async servicer's unary methods as synchronous ones for grpc.server.

    Streaming methods are not bridged here (the benchmark does not call them); the sync-loop way
    would bridge the request iterator with run_in_executor and the responses with __anext__."""

    def __init__(self, servicer: Any, runner: _LoopThread | _Locked) -> None:
        self._servicer = servicer
        self._runner = runner

    def __getattr__(self, name: str) -> Callable[[Any, Any], Any]:
        method = getattr(self._servicer, name)
        runner = self._runner

        def call(request: Any, context: Any) -> Any:
            return runner.run(method(request, _AsyncContext(context)))

        return call


def _grpc_options() -> list[tuple[str, Any]]:
    from podfit.server.settings import DEFAULT_MAX_MESSAGE_BYTES

    return [
        ("grpc.max_receive_message_length", DEFAULT_MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", DEFAULT_MAX_MESSAGE_BYTES),
        ("grpc.so_reuseport", 0),
    ]


async def _serve_aio(mode: str, port: int, http_port: int, service: Any) -> None:
    import grpc
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc
    from podfit.server.app import create_server
    from podfit.server.settings import Settings
    from podfit.server.transport.grpc_services import ClusterCacheServicer, SchedulerServicer
    from podfit.v1 import cluster_cache_pb2_grpc, scheduler_pb2_grpc

    extender = f"127.0.0.1:{http_port}" if http_port else "off"
    if mode == "aio":
        running = await create_server(Settings(), addr=f"127.0.0.1:{port}", extender_addr=extender, service=service)
        server = running.server
    else:
        server = grpc.aio.server(options=_grpc_options())
        cluster_cache_pb2_grpc.add_ClusterCacheServicer_to_server(ClusterCacheServicer(service), server)
        scheduler_pb2_grpc.add_SchedulerServicer_to_server(SchedulerServicer(service), server)
        health_servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    print("ready", flush=True)
    await server.wait_for_termination()


def _serve_sync(mode: str, port: int, service: Any, workers: int) -> None:
    import grpc
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc
    from podfit.server.transport.grpc_services import ClusterCacheServicer, SchedulerServicer
    from podfit.v1 import cluster_cache_pb2_grpc, scheduler_pb2_grpc

    runner: _LoopThread | _Locked = _LoopThread() if mode == "sync-loop" else _Locked()
    server = grpc.server(ThreadPoolExecutor(max_workers=workers), options=_grpc_options())
    # The generated add_*_to_server functions only look the methods up by name.
    cluster_cache_pb2_grpc.add_ClusterCacheServicer_to_server(
        cast(Any, SyncServicer(ClusterCacheServicer(service), runner)), server
    )
    scheduler_pb2_grpc.add_SchedulerServicer_to_server(
        cast(Any, SyncServicer(SchedulerServicer(service), runner)), server
    )
    health_servicer = health.HealthServicer()
    health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


def serve(mode: str, port: int, http_port: int, nodes: int, pods: int, workers: int) -> None:
    service = _service(nodes, pods)
    if mode.startswith("aio"):
        asyncio.run(_serve_aio(mode, port, http_port, service))
    else:
        _serve_sync(mode, port, service, workers)


# -- client process ------------------------------------------------------------------------------


def _requests(call: str, count: int) -> list[Any]:
    if call == "check":
        from grpc_health.v1 import health_pb2

        return [health_pb2.HealthCheckRequest()]
    from podfit.client import bench
    from podfit.client._requests import schedule_request

    template = bench._measured_template(bench.WORKLOADS["SchedulingBasic"])
    return [schedule_request(bench._measured(template, i), assume=True, view="basic") for i in range(count)]


async def _drive(
    send: Callable[[Any], Coroutine[Any, Any, Any]], requests: list[Any], concurrency: int, seconds: float
) -> dict[str, Any]:
    """``concurrency`` workers call back to back; 0.5 s of warm-up, then ``seconds`` timed."""
    latencies: list[float] = []
    counter = 0
    measuring = False
    stop = False

    async def worker() -> None:
        nonlocal counter
        while not stop:
            request = requests[counter % len(requests)]
            counter += 1
            started = time.perf_counter()
            await send(request)
            if measuring:
                latencies.append(time.perf_counter() - started)

    tasks = [asyncio.create_task(worker()) for _ in range(concurrency)]
    await asyncio.sleep(0.5)
    measuring = True
    cpu0, t0 = time.process_time(), time.perf_counter()
    print("measuring", flush=True)
    await asyncio.sleep(seconds)
    measuring = False
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    print("done", flush=True)
    stop = True
    await asyncio.gather(*tasks)
    latencies.sort()
    n = len(latencies)
    return {
        "calls": n,
        "rate": n / elapsed,
        "p50_ms": latencies[n // 2] * 1000 if n else 0.0,
        "p99_ms": latencies[min(n - 1, int(n * 0.99))] * 1000 if n else 0.0,
        "client_cpu_us_per_call": cpu / n * 1e6 if n else 0.0,
    }


async def _grpc_client(target: str, call: str, concurrency: int, seconds: float) -> dict[str, Any]:
    import grpc
    from grpc_health.v1 import health_pb2_grpc
    from podfit.v1 import scheduler_pb2_grpc

    requests = _requests(call, 40_000)
    async with grpc.aio.insecure_channel(target, options=_grpc_options()) as channel:
        await channel.channel_ready()
        method = (
            health_pb2_grpc.HealthStub(channel).Check
            if call == "check"
            else scheduler_pb2_grpc.SchedulerStub(channel).Schedule
        )
        return await _drive(method, requests, concurrency, seconds)


async def _http_client(port: int, call: str, concurrency: int, seconds: float) -> dict[str, Any]:
    import aiohttp

    from benchmarks.extender_bench import wire_pod

    base = f"http://127.0.0.1:{port}"
    names = [f"node-{i:05d}" for i in range(5000)]
    windows = [json.dumps(names[start : start + 500]).encode() for start in range(0, 5000, 500)]
    sent = 0

    def body() -> bytes:
        """A pod no earlier call asked about (its memory request in bytes is new), so the memo never
        answers; 500 names from a moving window."""
        nonlocal sent
        sent += 1
        pod = wire_pod(sent, True)
        pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = str(500 * 2**20 + sent)
        return b'{"Pod": ' + json.dumps(pod).encode() + b', "Nodes": null, "NodeNames": ' + windows[sent % 10] + b"}"

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def healthz(_: Any) -> None:
            async with session.get(f"{base}/healthz") as response:
                await response.read()

        async def filter_500(_: Any) -> None:
            async with session.post(f"{base}/scheduler/filter", data=body()) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}")

        return await _drive(healthz if call == "healthz" else filter_500, [None], concurrency, seconds)


def client(target: str, call: str, concurrency: int, seconds: float) -> None:
    if call in HTTP_CALLS:
        result = asyncio.run(_http_client(int(target.rpartition(":")[2]), call, concurrency, seconds))
    else:
        result = asyncio.run(_grpc_client(target, call, concurrency, seconds))
    print(json.dumps(result), flush=True)


# -- orchestration -------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process and its threads."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class ServerProcess:
    def __init__(self, mode: str, nodes: int, pods: int, workers: int, http: bool) -> None:
        self.port = _free_port()
        self.http_port = _free_port() if http and mode == "aio" else 0
        command = [sys.executable, "-m", "benchmarks.transport_bench", "_serve", mode, str(self.port)]
        command += [str(self.http_port), str(nodes), str(pods), str(workers)]
        env = {**os.environ, "PODFIT_LOG_LEVEL": "WARNING"}
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{mode} server did not start")

    def stop(self) -> None:
        from podfit.client.conformance import stop_process

        stop_process(self.process)


def measure(server: ServerProcess, target: str, call: str, concurrency: int, seconds: float) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.transport_bench", "_client", target, call, str(concurrency)]
    process = subprocess.Popen([*command, str(seconds)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    if process.stdout.readline().strip() != "measuring":
        raise RuntimeError("the client failed")
    cpu0 = _cpu_seconds(server.process.pid)
    if process.stdout.readline().strip() != "done":
        raise RuntimeError("the client failed")
    cpu = _cpu_seconds(server.process.pid) - cpu0
    result: dict[str, Any] = json.loads(process.stdout.readline())
    process.wait()
    result["server_cpu_us_per_call"] = cpu / result["calls"] * 1e6 if result["calls"] else 0.0
    result["load"] = _loadavg()
    return result


# Where the server's GIL-holding samples fall: the first rule with a frame in the stack wins.
_BUCKETS = (
    ("decision (Engine.decide)", ("Engine.decide",)),
    ("memo (pod signature + aiocache)", ("pod_signature", "aiocache")),
    ("assume (cache apply + source bytes)", ("SchedulingService.assume", "assumed_source")),
    ("request pod -> model", ("pod_from_reference", "pod_from_k8s")),
    ("JSON encode/decode", ("json/",)),
    ("servicer rest (response, errors, health)", ("Servicer.", "unary_errors", "extender.py")),
    ("telemetry interceptor", ("telemetry.py",)),
    ("hand-off to the loop thread / the lock", ("_LoopThread.run", "_Locked.run", "run_coroutine_threadsafe")),
    ("aiohttp", ("aiohttp/",)),
    (
        "grpc + asyncio + thread-pool machinery",
        ("cygrpc", "grpc/", "asyncio/", "_asynciomodule", "threading.py", "concurrent/futures"),
    ),
)


def summarize_profile(path: str, seconds: float, rate: int) -> tuple[float, list[tuple[str, float]]]:
    """(share of the time the GIL was held, share of those samples per bucket) from py-spy's raw
    (collapsed) output recorded with --gil."""
    counts: Counter[str] = Counter()
    total = 0
    with open(path) as raw:
        for line in raw:
            stack, _, n = line.rstrip().rpartition(" ")
            if not n.isdigit():
                continue
            total += int(n)
            bucket = next((name for name, keys in _BUCKETS if any(k in stack for k in keys)), "other")
            counts[bucket] += int(n)
    if not total:
        return 0.0, []
    return 100 * total / (seconds * rate), [(name, 100 * n / total) for name, n in counts.most_common()]


def profile(server: ServerProcess, target: str, call: str, concurrency: int, seconds: float, out: str) -> str:
    """A separate run under py-spy (--gil --native pauses the server while sampling, so its rate
    is not reported): where the server's Python time goes."""
    rate, duration = 200, max(1, int(seconds) - 1)
    spy = ["py-spy", "record", "--gil", "--native", "--format", "raw", "--rate", str(rate), "-o", out]
    command = [sys.executable, "-m", "benchmarks.transport_bench", "_client", target, call, str(concurrency)]
    process = subprocess.Popen([*command, str(seconds)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    process.stdout.readline()
    subprocess.run(
        [*spy, "-d", str(duration), "-p", str(server.process.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    process.communicate()
    held, buckets = summarize_profile(out, duration, rate)
    return f"GIL held {held:.0f}% of the time; of that: " + ", ".join(f"{name} {share:.0f}%" for name, share in buckets)


def main(argv: Sequence[str] | None = None) -> None:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["_serve"]:
        mode, port, http_port, nodes, pods, workers = args_list[1:7]
        serve(mode, int(port), int(http_port), int(nodes), int(pods), int(workers))
        return
    if args_list[:1] == ["_client"]:
        target, call, concurrency, seconds = args_list[1:5]
        client(target, call, int(concurrency), float(seconds))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--seconds", type=float, default=5.0, help="timed seconds per measurement")
    parser.add_argument("--mode", action="append", choices=GRPC_MODES, help="default: all")
    parser.add_argument("--concurrency", action="append", type=int, help="calls in flight (default: 1 and 8)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the median run is shown")
    parser.add_argument("--workers", type=int, default=16, help="ThreadPoolExecutor size of the sync modes")
    parser.add_argument("--http", action="store_true", help="also measure the extender's aiohttp server")
    parser.add_argument("--profile", help="also profile each call with py-spy (most in flight), raw output here")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(args_list)
    if args.profile and not shutil.which("py-spy"):
        parser.error("--profile needs py-spy on PATH (pip install py-spy)")
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
    concurrencies = args.concurrency or [1, 8]
    rows: list[dict[str, Any]] = []
    print(
        "| server | call | in flight | calls/s | p50 ms | p99 ms | server CPU µs/call | client CPU µs/call "
        "| calls/s of each run | load 1/5/15 |\n|---|---|---:|---:|---:|---:|---:|---:|---|---|",
        flush=True,
    )
    for mode in args.mode or GRPC_MODES:
        server = ServerProcess(mode, args.nodes, args.pods, args.workers, args.http)
        try:
            calls = [(f"127.0.0.1:{server.port}", c) for c in GRPC_CALLS]
            if server.http_port:
                calls += [(f"127.0.0.1:{server.http_port}", c) for c in HTTP_CALLS]
            for target, call in calls:
                for concurrency in concurrencies:
                    runs = sorted(
                        (measure(server, target, call, concurrency, args.seconds) for _ in range(args.repeat)),
                        key=lambda r: float(r["rate"]),
                    )
                    row = runs[len(runs) // 2]
                    row["rates"] = [round(r["rate"]) for r in runs]
                    row.update(mode=mode if call in GRPC_CALLS else "aiohttp", call=call, concurrency=concurrency)
                    rows.append(row)
                    print(
                        f"| {row['mode']} | {call} | {concurrency} | {row['rate']:.0f} | {row['p50_ms']:.2f} "
                        f"| {row['p99_ms']:.2f} | {row['server_cpu_us_per_call']:.0f} "
                        f"| {row['client_cpu_us_per_call']:.0f} | {'/'.join(map(str, row['rates']))} | {row['load']} |",
                        flush=True,
                    )
            if args.profile:
                for target, call in calls:
                    raw_path = os.path.join(args.profile, f"{mode}-{call}.txt")
                    summary = profile(server, target, call, max(concurrencies), args.seconds, raw_path)
                    print(f"    profile {mode if call in GRPC_CALLS else 'aiohttp'} {call}: {summary}", flush=True)
        finally:
            server.stop()
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=2)


if __name__ == "__main__":
    main()
