"""``podfit bench mixed``: every caller podfit serves, at once, as a cluster sees them.

A cluster of ``nodes`` nodes and ``pods`` bound pods is loaded through Apply; then, for ``duration``
seconds each, two phases:

- **idle**: a decider asks Schedule (no assume) every 20 ms, kube-scheduler's extender filter
  (nodeCacheCapable, every node's name) is called every 50 ms, and a feeder Applies one pod every 100 ms;
- **busy**: the same, while a what-if caller runs cluster-autoscaler-sized questions back to back (a
  100-node SimulateDrain, an EstimateScaleUp of 500 pods over 3 node groups, 1,000 pods placed on 200
  template nodes).

Each caller has its own connection, as each of those clients would. The report gives p50/p99 latency,
answers and errors per caller and phase, and how many what-if calls were answered.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from podfit.client import _requests as rq
from podfit.client.aio import AsyncClient
from podfit.client.bench import _percentile, node, pod
from podfit.client.manifests import to_cluster_object
from podfit.v1 import simulation_pb2 as sim

INTERVALS = {"schedule": 0.020, "extender filter": 0.050, "apply": 0.100}
TEMPLATE_CPUS = ("4", "8", "16")
ONE_CALL = aiohttp.ClientTimeout(total=10)


@dataclasses.dataclass
class Kind:
    """One caller's figures in one phase."""

    latencies: list[float] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)

    def percentile(self, q: float) -> float:
        """``q`` in [0, 1], as ``podfit bench`` computes its percentiles."""
        return _percentile(self.latencies, q * 100)

    def as_dict(self) -> dict[str, Any]:
        return {
            "answers": len(self.latencies),
            "errors": len(self.errors),
            "p50_ms": round(self.percentile(0.50) * 1000, 1),
            "p99_ms": round(self.percentile(0.99) * 1000, 1),
            "first_errors": self.errors[:3],
        }


@dataclasses.dataclass
class Report:
    nodes: int
    pods: int
    duration: float
    phases: dict[str, dict[str, Kind]]

    @property
    def ok(self) -> bool:
        return not any(kind.errors for phase in self.phases.values() for kind in phase.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "pods": self.pods,
            "seconds_per_phase": self.duration,
            "phases": {name: {k: v.as_dict() for k, v in kinds.items()} for name, kinds in self.phases.items()},
        }

    def table(self) -> str:
        rows = [f"{'PHASE':<6} {'CALLER':<16} {'ANSWERS':>8} {'ERRORS':>7} {'P50 ms':>8} {'P99 ms':>8}"]
        for phase, kinds in self.phases.items():
            for name, kind in kinds.items():
                rows.append(
                    f"{phase:<6} {name:<16} {len(kind.latencies):>8} {len(kind.errors):>7} "
                    f"{kind.percentile(0.5) * 1000:>8.1f} {kind.percentile(0.99) * 1000:>8.1f}"
                )
        return "\n".join(rows)


def _template(cpu: str) -> dict[str, Any]:
    template = node(0)
    template["metadata"]["name"] = f"template-{cpu}"
    template["metadata"]["labels"] = {"topology.kubernetes.io/zone": "moon-1"}
    template["status"]["allocatable"] = {"cpu": cpu, "memory": "64Gi", "pods": "110"}
    return template


def _pending(name: str) -> dict[str, Any]:
    return pod(name, {"app": "mixed"})


async def load(client: AsyncClient, nodes: int, pods: int) -> None:
    objects: list[dict[str, Any]] = [node(i) for i in range(nodes)]
    objects += [pod(f"bound-{i}", {"app": f"a{i % 50}"}, node_name=f"node-{i % nodes:05d}") for i in range(pods)]
    for start in range(0, len(objects), 2000):
        await client.apply(objects[start : start + 2000])


def _what_ifs(nodes: int) -> list[Callable[[AsyncClient], Awaitable[Any]]]:
    """The three questions, built once: converting 1,000 pods per call would stall the caller itself."""
    drained = [f"node-{i:05d}" for i in range(min(100, nodes))]
    estimate_pods = [_pending(f"estimate-{i}") for i in range(500)]
    groups = [(f"group-{cpu}", _template(cpu), 0, 1000) for cpu in TEMPLATE_CPUS]
    placed = [_pending(f"simulated-{i}") for i in range(1000)]
    scenario = sim.Scenario(add_nodes=[sim.HypotheticalNodes(template=to_cluster_object(_template("4")), count=200)])
    drain = rq.drain_request(drained)
    estimate = rq.estimate_request([estimate_pods], groups, "")
    simulate = rq.simulate_request(placed, scenario, "")
    return [
        lambda c: c._call(c.simulation.SimulateDrain, drain, 60),
        lambda c: c._call(c.simulation.EstimateScaleUp, estimate, 60),
        lambda c: c._call(c.simulation.Simulate, simulate, 60),
    ]


async def what_if_caller(target: str, seconds: float, nodes: int, **options: Any) -> Kind:
    """cluster-autoscaler's side: the three questions back to back for ``seconds``."""
    kind = Kind()
    questions = _what_ifs(nodes)
    until = time.monotonic() + seconds
    async with AsyncClient(target, **options) as autoscaler:
        for i in itertools.count():
            if time.monotonic() >= until:
                return kind
            started = time.monotonic()
            try:
                await questions[i % len(questions)](autoscaler)
                kind.latencies.append(time.monotonic() - started)
            except Exception as exc:  # counted and reported
                kind.errors.append(f"{type(exc).__name__}: {exc}"[:200])
    return kind


async def _what_if_process(target: str, seconds: float, nodes: int) -> Kind:
    """The what-if caller in a process of its own, as an autoscaler is: building and reading its large
    messages must not stall the other callers' measurements (they share no interpreter with it)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "podfit.client.mixed", target, str(seconds), str(nodes), stdout=subprocess.PIPE
    )
    out, _ = await process.communicate()
    if process.returncode != 0:
        return Kind(errors=[f"the what-if caller exited with {process.returncode}"])
    found = json.loads(out)
    return Kind(latencies=found["latencies"], errors=found["errors"])


async def _every(interval: float, until: float, call: Callable[[int], Awaitable[Any]], kind: Kind) -> None:
    """``call(i)`` at a fixed rate until ``until`` (a late call is sent at once, never in a burst)."""
    for i in itertools.count():
        due = time.monotonic()
        if due >= until:
            return
        started = time.monotonic()
        try:
            await call(i)
            kind.latencies.append(time.monotonic() - started)
        except Exception as exc:  # counted and reported: a mixed run's errors are its findings
            kind.errors.append(f"{type(exc).__name__}: {exc}"[:200])
        await asyncio.sleep(max(0.0, due + interval - time.monotonic()))


async def _phase(
    target: str, extender: str, nodes: int, duration: float, busy: bool, options: dict[str, Any], phase: str
) -> dict[str, Kind]:
    kinds = {name: Kind() for name in (*INTERVALS, *(["what-if"] if busy else []))}
    names = [f"node-{i:05d}" for i in range(nodes)]
    async with (
        AsyncClient(target, **options) as decider,
        AsyncClient(target, **options) as feeder,
        aiohttp.ClientSession() as http,
    ):
        until = time.monotonic() + duration

        async def schedule(i: int) -> None:
            await decider.schedule(_pending(f"asked-{i}"), view="basic", timeout=10)

        async def apply(i: int) -> None:
            await feeder.apply([_pending(f"fed-{phase}-{i}")], timeout=10)

        async def extender_filter(i: int) -> None:
            body = json.dumps({"Pod": _pending(f"extender-{i}"), "Nodes": None, "NodeNames": names})
            async with http.post(
                f"{extender}/filter", data=body, headers={"Content-Type": "application/json"}, timeout=ONE_CALL
            ) as response:
                answer = await response.json()
                if response.status != 200 or answer.get("Error"):
                    raise RuntimeError(f"HTTP {response.status}: {answer.get('Error', '')}")

        async def what_if() -> None:
            if options:  # TLS or a token: the caller needs this process's channel settings
                found = await what_if_caller(target, until - time.monotonic(), nodes, **options)
            else:
                found = await _what_if_process(target, until - time.monotonic(), nodes)
            kinds["what-if"] = found

        tasks = [
            _every(INTERVALS["schedule"], until, schedule, kinds["schedule"]),
            _every(INTERVALS["extender filter"], until, extender_filter, kinds["extender filter"]),
            _every(INTERVALS["apply"], until, apply, kinds["apply"]),
            *([what_if()] if busy else []),
        ]
        await asyncio.gather(*tasks)
    return kinds


async def run(
    target: str, extender: str, duration: float = 15.0, nodes: int = 3000, pods: int = 15000, **options: Any
) -> Report:
    """The two phases against the server at ``target`` whose extender answers at ``extender`` (its URL
    prefix, e.g. http://127.0.0.1:8888/scheduler)."""
    async with AsyncClient(target, **options) as client:
        await load(client, nodes, pods)
    phases = {}
    for phase, busy in (("idle", False), ("busy", True)):
        phases[phase] = await _phase(target, extender, nodes, duration, busy, options, phase)
    return Report(nodes, pods, duration, phases)


if __name__ == "__main__":
    # python -m podfit.client.mixed TARGET SECONDS NODES: the what-if caller alone, its figures as JSON.
    result = asyncio.run(what_if_caller(sys.argv[1], float(sys.argv[2]), int(sys.argv[3])))
    print(json.dumps({"latencies": result.latencies, "errors": result.errors}))
