"""``podfit conformance``: replays kube-scheduler's recorded answers through the public gRPC API."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from podfit.client.aio import AsyncClient
from podfit.client.conformance_compare import Report, compare_case
from podfit.v1 import scheduler_pb2 as sc

# Case field -> the kind it holds. Every kind is replaced per case, so the cache is exactly the case.
CASE_KINDS = (
    ("nodes", "Node"),
    ("pods", "Pod"),
    ("namespaces", "Namespace"),
    ("pdbs", "PodDisruptionBudget"),
    ("replicasets", "ReplicaSet"),
    ("services", "Service"),
    ("statefulsets", "StatefulSet"),
    ("replicationcontrollers", "ReplicationController"),
)
_CODES = {
    sc.STATUS_CODE_SUCCESS: "Success",
    sc.STATUS_CODE_UNSCHEDULABLE: "Unschedulable",
    sc.STATUS_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    sc.STATUS_CODE_ERROR: "Error",
}


def load_cases(path: str | Path) -> list[dict[str, Any]]:
    with open(path) as lines:
        return [json.loads(line) for line in lines if line.strip()]


def response_to_expect(response: sc.ScheduleResponse) -> dict[str, Any]:
    """A Schedule response in the shape of a case's ``expect``."""
    preemption = None
    if response.HasField("preemption"):
        p = response.preemption
        preemption = {
            "node": p.nominated_node,
            "victims": sorted(f"{v.namespace}/{v.name}" for v in p.victims),
            "node_ties": list(p.node_ties),
        }
    return {
        "gated": response.gated,
        "filter": {
            v.node_name: {
                "fits": v.fits,
                "plugin": v.plugin,
                "reasons": list(v.reasons),
                "code": _CODES.get(v.code, ""),
            }
            for v in response.nodes
        },
        "scores": {
            s.node_name: {"total": s.total, "plugins": {p.plugin: p.score for p in s.plugins}} for s in response.scores
        },
        "best": list(response.best_nodes),
        "preemption": preemption,
    }


async def answer_case(client: AsyncClient, case: Mapping[str, Any]) -> dict[str, Any]:
    for field, kind in CASE_KINDS:
        await client.replace(kind, list(case.get(field) or ()))
    return response_to_expect(await client.schedule(case["pod"]))


async def run_cases(cases: Iterable[Mapping[str, Any]], target: str, **client_options: Any) -> Report:
    report = Report()
    async with AsyncClient(target, **client_options) as client:
        for case in cases:
            compare_case(report, case["id"], case["expect"], await answer_case(client, case))
    return report


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_process(process: subprocess.Popen[Any]) -> None:
    """Asks a server process to stop (SIGTERM, its graceful drain), and kills it if it takes over 15 s."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()


class LocalServer:
    """A podfit-server subprocess on a loopback port (the client never imports the server)."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.target = f"127.0.0.1:{self.port}"
        env = {**os.environ, "PODFIT_LOG_LEVEL": "WARNING"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "podfit.server.app", "--grpc-addr", self.target, "--extender-addr", "off"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def wait_ready(self, timeout: float = 30.0) -> None:
        from podfit.client.sync import Client

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode() if self.process.stderr else ""
                raise RuntimeError(f"podfit-server exited: {err.strip()}")
            with Client(self.target) as client:
                try:
                    client.wait_ready(timeout=1.0)
                    return
                except Exception:
                    continue
        raise RuntimeError("podfit-server did not become ready")

    def stop(self) -> None:
        stop_process(self.process)

    def __enter__(self) -> LocalServer:
        self.wait_ready()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run(cases_path: str, target: str | None, **client_options: Any) -> Report:
    cases = load_cases(cases_path)
    if target:
        return asyncio.run(run_cases(cases, target, **client_options))
    with LocalServer() as server:
        return asyncio.run(run_cases(cases, server.target))
