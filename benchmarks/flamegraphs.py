"""Flame graphs of podfit-server answering SchedulingBasic, and where each call's CPU goes (not a test).

    python -m benchmarks.flamegraphs [--nodes 5000] [--pods 10000] [--decisions 2000] [--batch 100]

Starts podfit-server (one process, as it runs on two cores), loads SchedulingBasic's cluster through the
API, then samples the server with py-spy (a dev dependency) while a client asks, first unary Schedule
with assume one pod at a time, then ScheduleBatch calls of ``--batch`` pods. It writes
``benchmarks/flame-unary.svg`` and ``benchmarks/flame-batch.svg`` (py-spy's flame graphs), then samples
each phase again as collapsed stacks and prints the server's CPU per pod by what it was doing: the gRPC
runtime and event loop, decoding the request, building model records, the decision itself, reserving,
and encoding the answer. Only the server is sampled; the client runs in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from podfit.client import AsyncClient, bench
from podfit.client.conformance import LocalServer

from benchmarks.versus_kube_scheduler import process_cpu_seconds

HERE = Path(__file__).resolve().parent
RATE = 250  # samples per second

# What a sample was doing: the innermost frame that matches decides (file fragment, function fragment).
CATEGORIES: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("encode the answer", (("transport/convert.py", "response"), ("transport/convert.py", "add_"), ("", "Serialize"))),
    ("reserve (assume, journal)", (("reserver.py", ""), ("cache/cluster_cache.py", "apply"), ("cache/journal", ""))),
    (
        "decide (cycle, framework, plugins)",
        (("server/cycle.py", ""), ("server/engine.py", ""), ("server/framework/", ""), ("server/plugins/", "")),
    ),
    ("model records", (("server/model/", ""), ("k8s/", ""))),
    ("decode the request", (("transport/convert.py", ""), ("transport/decoding.py", ""), ("", "FromString"))),
    ("service (resolve, memo, views)", (("server/service.py", ""), ("server/memo.py", ""))),
)
# Frames of the cache (snapshots, the pod index) count for whatever called them: a decision, a reservation.
OTHER = "gRPC runtime, event loop, interceptors"
# Innermost frames of a thread that waits (py-spy does not always see such a thread as idle): the event
# loop in epoll, a thread-pool worker waiting for work. Their samples are not CPU and are left out.
WAITS = ("EpollSelector.select (", "_worker (concurrent/futures/thread.py")


def classify(stack: str) -> str:
    """The category of one collapsed stack ("frame;frame;...", root first)."""
    for frame in reversed(stack.split(";")):
        function, _, where = frame.partition(" (")
        for category, rules in CATEGORIES:
            if any(path in where and name in function for path, name in rules):
                return category
    return OTHER


async def _unary(client: AsyncClient, decisions: int, offset: int) -> None:
    template = bench._measured_template(bench.WORKLOADS["SchedulingBasic"])
    for i in range(offset, offset + decisions):
        await client.schedule(bench._measured(template, i), assume=True, view="basic")


async def _batch(client: AsyncClient, decisions: int, offset: int, size: int) -> None:
    template = bench._measured_template(bench.WORKLOADS["SchedulingBasic"])
    for first in range(offset, offset + decisions, size):
        await client.schedule_batch([bench._measured(template, i) for i in range(first, first + size)], view="basic")


def _record(pid: int, output: Path, fmt: str) -> subprocess.Popen[bytes]:
    spy = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or shutil.which("py-spy")
    if spy is None:
        raise SystemExit("py-spy is not installed: pip install -e '.[dev]'")
    command = [spy, "record", "--pid", str(pid), "--rate", str(RATE), "--format", fmt, "-o", str(output)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


async def _sampled(pid: int, output: Path, fmt: str, work: Awaitable[None]) -> tuple[float, float]:
    """Awaits ``work`` while py-spy samples the server into ``output``; (the seconds it took, the server's
    CPU seconds meanwhile)."""
    spy = _record(pid, output, fmt)
    await asyncio.sleep(1.0)  # py-spy attaches
    started, cpu = time.perf_counter(), process_cpu_seconds(pid)
    await work
    elapsed, cpu = time.perf_counter() - started, process_cpu_seconds(pid) - cpu
    spy.send_signal(signal.SIGINT)
    _, err = spy.communicate(timeout=60)
    if not output.exists():
        raise SystemExit(f"py-spy wrote nothing: {err.decode().strip()}")
    return elapsed, cpu


def breakdown(collapsed: Path, pods: int, cpu_seconds: float | None = None) -> list[tuple[str, float, float]]:
    """(category, share of the server's working samples, CPU microseconds per pod) from py-spy's raw
    output. Samples of waiting threads are dropped; with ``cpu_seconds`` (the server's CPU over the phase,
    from /proc) the shares divide that, otherwise each sample counts 1/RATE s."""
    counts: collections.Counter[str] = collections.Counter()
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit() or stack.rpartition(";")[2].startswith(WAITS):
            continue
        counts[classify(stack)] += int(count)
    total = sum(counts.values()) or 1
    spent = cpu_seconds if cpu_seconds is not None else total / RATE
    order = [*(name for name, _ in CATEGORIES), OTHER]
    return [(name, counts[name] / total, counts[name] / total * spent / pods * 1e6) for name in order if counts[name]]


async def main_async(args: argparse.Namespace) -> None:
    with LocalServer() as server:
        pid = server.process.pid
        async with AsyncClient(server.target) as client:
            await bench.load(client, bench.WORKLOADS["SchedulingBasic"], args.nodes, args.pods)
            phases: list[tuple[str, Callable[[int], Awaitable[None]]]] = [
                ("unary", lambda offset: _unary(client, args.decisions, offset)),
                ("batch", lambda offset: _batch(client, args.decisions, offset, args.batch)),
            ]
            offset = 0
            for name, work in phases:
                svg = HERE / f"flame-{name}.svg"
                await _sampled(pid, svg, "flamegraph", work(offset))
                offset += args.decisions
                raw = Path(args.raw_dir) / f"flame-{name}.txt"
                elapsed, cpu = await _sampled(pid, raw, "raw", work(offset))
                offset += args.decisions
                print(
                    f"{name}: {args.decisions} pods in {elapsed:.2f} s ({args.decisions / elapsed:,.0f}/s), "
                    f"server CPU {cpu / args.decisions * 1e6:,.0f} us/pod; {svg}"
                )
                for category, share, micros in breakdown(raw, args.decisions, cpu):
                    print(f"  {category:<40} {share:6.1%}  {micros:8.0f} us/pod")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000, help="bound pods loaded first")
    parser.add_argument("--decisions", type=int, default=2000, help="pods placed per phase and sampling")
    parser.add_argument("--batch", type=int, default=100, help="pods per ScheduleBatch call")
    parser.add_argument("--raw-dir", default="/tmp", help="where the collapsed stacks go")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
