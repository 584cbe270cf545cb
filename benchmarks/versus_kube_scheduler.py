"""podfit against kube-scheduler's own scheduling loop, in the same run (not a test; run by hand).

    python -m benchmarks.versus_kube_scheduler [--release v1.37.2] [--rounds 2] [--decisions 2000] [ROW ...]

These machines are noisy, so the yardstick is a ratio measured back to back: each round runs
kube-scheduler's loop (``kube-scheduler-loop``, built from the module proxy by
``tests/controlplane/build.sh`` and cached) and then podfit on the same workload, and reports
podfit / kube-scheduler per round and their median. kube-scheduler runs with its adaptive
percentageOfNodesToScore (10% of 5,000 nodes); podfit evaluates every node.

Rows (5,000 nodes): ``basic`` (SchedulingBasic, unary Schedule), ``basic-batch`` (ScheduleBatch of 100),
``spread`` (TopologySpreading, unary), ``anti`` (SchedulingPodAntiAffinity, unary), ``preemption``
(PreemptionBasic: podfit's Preempt p50 against kube-scheduler's time per preempting pod; lower is better),
``extender`` and ``extender-nodes`` (kube-scheduler's loop with podfit as its extender, node names or
whole Node objects, against the loop alone), and ``null-extender`` / ``null-extender-nodes`` (the same
with an extender that decides nothing: the bound on any extender on this machine). ``podfit bench``
starts its own server for each row.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "tests" / "controlplane" / "build.sh"


@dataclass(frozen=True)
class Row:
    workload: str
    nodes: int
    init_pods: int
    mode: str  # unary | batch | preempt | extender | extender-nodes
    goal: str


ROWS = {
    "basic": Row("SchedulingBasic", 5000, 10000, "unary", ">= 1.3"),
    "basic-batch": Row("SchedulingBasic", 5000, 10000, "batch", ">= 4"),
    "spread": Row("TopologySpreading", 5000, 5000, "unary", ">= 1.3"),
    "anti": Row("SchedulingPodAntiAffinity", 5000, 2000, "unary", ">= 1.3"),
    "preemption": Row("PreemptionBasic", 5000, 20000, "preempt", "<= 20 ms"),
    "extender": Row("SchedulingBasic", 5000, 10000, "extender", ">= 0.5"),
    "extender-nodes": Row("SchedulingBasic", 5000, 10000, "extender-nodes", ">= 0.25"),
    # The bound on any extender here: one that decides nothing (benchmarks/null_extender.py, raw asyncio).
    "null-extender": Row("SchedulingBasic", 5000, 10000, "null-extender", "(bound)"),
    "null-extender-nodes": Row("SchedulingBasic", 5000, 10000, "null-extender-nodes", "(bound)"),
}


def loop_binary(release: str) -> Path:
    done = subprocess.run([str(BUILD), release, "kube-scheduler-loop"], check=True, stdout=subprocess.PIPE, text=True)
    return Path(done.stdout.strip().splitlines()[-1]) / "kube-scheduler-loop"


def run_loop(
    binary: Path, row: Row, pods: int, extender: str = "", node_cache_capable: bool = True, timeout: str = "10m"
) -> dict[str, Any]:
    command = [
        str(binary),
        f"--workload={row.workload}",
        f"--nodes={row.nodes}",
        f"--init-pods={row.init_pods}",
        f"--pods={pods}",
        f"--timeout={timeout}",
        "--json",
    ]
    if extender:
        command += [f"--extender={extender}", f"--extender-node-cache-capable={str(node_cache_capable).lower()}"]
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    return dict(json.loads(done.stdout))


# podfit-server's --workers (0: the server's default, one process on two cores or fewer, else one per
# core) and podfit bench's --clients, set by main().
OPTIONS = {"workers": 0, "clients": 1}


class Round(NamedTuple):
    """One round of a row: kube-scheduler's figure, podfit's, their ratio, and for the extender rows the
    same loop's throughput with the no-op extender, run right after podfit (the bound, paired)."""

    kube_scheduler: float
    podfit: float
    ratio: float
    bound: float | None = None


def run_podfit_bench(row: Row, decisions: int) -> dict[str, Any]:
    name = f"{row.workload}/{row.nodes}Nodes_{row.init_pods}Pods"
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "bench.json"
        command = [
            str(Path(sys.executable).parent / "podfit"),
            "bench",
            name,
            f"--decisions={decisions}",
            f"--json={out}",
            f"--workers={OPTIONS['workers']}",
            f"--clients={OPTIONS['clients']}",
        ]
        if row.mode == "batch":
            command.append("--batch=100")
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        results = json.loads(out.read_text())["workloads"]
    return dict(next(iter(r for r in results.values() if ("batch" in r["mode"]) == (row.mode == "batch"))))


def run_with_null_extender(binary: Path, row: Row, pods: int) -> dict[str, Any]:
    from podfit.client.conformance import free_port

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "benchmarks.null_extender", f"--port={port}"], cwd=ROOT)
    try:
        for _ in range(100):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                time.sleep(0.05)
        return run_loop(
            binary,
            row,
            pods,
            extender=f"http://127.0.0.1:{port}/scheduler",
            node_cache_capable=row.mode == "null-extender",
        )
    finally:
        server.terminate()
        server.wait(30)


def run_with_extender(binary: Path, row: Row, pods: int, timeout: str = "10m") -> dict[str, Any]:
    """kube-scheduler's loop calling a podfit-server that holds the same cluster (loaded as podfit bench
    loads it; the loop's own bindings are not fed back, as no feeder runs here)."""
    from podfit.client import AsyncClient, bench
    from podfit.client.conformance import LocalServer, free_port

    extender_port = free_port()
    with LocalServer(f"--extender-addr=127.0.0.1:{extender_port}", f"--workers={OPTIONS['workers']}") as server:

        async def load() -> None:
            async with AsyncClient(server.target) as client:
                await bench.load(client, bench.WORKLOADS[row.workload], row.nodes, row.init_pods)

        asyncio.run(load())
        before = process_cpu_seconds(server.process.pid)
        result = run_loop(
            binary,
            row,
            pods,
            extender=f"http://127.0.0.1:{extender_port}/scheduler",
            node_cache_capable=row.mode == "extender",
            timeout=timeout,
        )
        # podfit-server's CPU per measured pod (the loop reports its own for the same pods).
        result["podfit_cpu_ms_per_pod"] = round((process_cpu_seconds(server.process.pid) - before) * 1000 / pods, 3)
        return result


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of a process and its children (a server's decision workers), from
    /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return own + sum(process_cpu_seconds(int(child)) for child in children)


def measure(binary: Path, row: Row, decisions: int) -> Round:
    """One round: throughput in pods/s, or ms per preempting pod for the preemption row (where the ratio is
    podfit's time over kube-scheduler's)."""
    pods = max(100, decisions // 5) if row.mode == "preempt" else decisions
    alone = run_loop(binary, row, pods)
    if row.mode in ("null-extender", "null-extender-nodes"):
        bound = run_with_null_extender(binary, row, max(200, decisions // 4))
        return Round(
            alone["throughput"]["avg"],
            bound["throughput"]["avg"],
            bound["throughput"]["avg"] / alone["throughput"]["avg"],
        )
    if row.mode in ("extender", "extender-nodes"):
        podfit = run_with_extender(binary, row, max(200, decisions // 4))["throughput"]["avg"]
        # The same loop with the no-op extender, right after: the "share of the bound", paired
        # within the round (the two ratios' medians also give it, with the noise of two "alone" runs).
        null = run_with_null_extender(binary, ROWS["null-" + row.mode], max(200, decisions // 4))
        return Round(alone["throughput"]["avg"], podfit, podfit / alone["throughput"]["avg"], null["throughput"]["avg"])
    result = run_podfit_bench(row, max(100, decisions // 10) if row.mode == "preempt" else decisions)
    if row.mode == "preempt":
        return Round(
            alone["ms_per_pod"], result["latency_ms"]["p50"], result["latency_ms"]["p50"] / alone["ms_per_pod"]
        )
    return Round(
        alone["throughput"]["avg"],
        result["throughput"]["avg"],
        result["throughput"]["avg"] / alone["throughput"]["avg"],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows", nargs="*", choices=[[], *ROWS], default=[])
    parser.add_argument("--release", default="v1.37.2", help="kube-scheduler release to compare with")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--decisions", type=int, default=2000, help="measured pods per unary row")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--workers", type=int, default=0, help="podfit-server --workers (default 0: the server's own)")
    parser.add_argument("--clients", type=int, default=1, help="podfit bench --clients for the unary rows")
    args = parser.parse_args(argv)
    OPTIONS.update(workers=args.workers, clients=args.clients)
    names = args.rows or list(ROWS)
    from podfit.client.bench import machine

    binary = loop_binary(args.release)
    print(
        f"machine: {machine()}; podfit-server --workers {args.workers} (0: the server's default), "
        f"podfit bench --clients {args.clients}; "
        f"kube-scheduler {args.release} loop, GOMAXPROCS {os.cpu_count()}"
    )
    print()
    print("| row | workload | kube-scheduler loop | podfit | ratio per round | median ratio | goal |")
    print("|---|---|---|---|---|---:|---|")
    figures: dict[str, Any] = {"machine": machine(), "release": args.release, "rows": {}, **OPTIONS}
    for name in names:
        row = ROWS[name]
        rounds = [measure(binary, row, args.decisions) for _ in range(args.rounds)]
        unit = " ms" if row.mode == "preempt" else "/s"
        ratios = [r.ratio for r in rounds]
        print(
            f"| {name} | {row.workload} {row.nodes} nodes / {row.init_pods} pods "
            f"| {', '.join(f'{r.kube_scheduler:,.1f}{unit}' for r in rounds)} "
            f"| {', '.join(f'{r.podfit:,.1f}{unit}' for r in rounds)} "
            f"| {', '.join(f'{r:.2f}' for r in ratios)} | {statistics.median(ratios):.2f} | {row.goal} |",
            flush=True,
        )
        figures["rows"][name] = {"rounds": rounds, "median_ratio": statistics.median(ratios), "goal": row.goal}
        paired = [r for r in rounds if r.bound is not None]
        if paired:
            shares = [r.podfit / r.bound for r in paired if r.bound]
            print(
                f"| {name}, share of the no-op bound | the same loop, no-op extender, same round "
                f"| {', '.join(f'{r.bound:,.1f}/s' for r in paired)} "
                f"| {', '.join(f'{r.podfit:,.1f}/s' for r in paired)} "
                f"| {', '.join(f'{x:.2f}' for x in shares)} | {statistics.median(shares):.2f} | >= 0.9 |",
                flush=True,
            )
            figures["rows"][name]["bound_shares"] = shares
        time.sleep(1)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
