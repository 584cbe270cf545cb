"""``podfit conformance``: replays recorded answers through the public gRPC API and compares.

Four corpora, told apart by their fields: kube-scheduler's decisions (a ``pod``), cluster-autoscaler's
drain simulation (a ``node`` to drain), its scale-down planner over several ``candidates`` and its
scale-up estimates (a ``template``); see shared/conformance/*/FORMAT.md.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from podfit.client import _requests as rq
from podfit.client.aio import AsyncClient
from podfit.client.conformance_compare import (
    DRAIN_CHECKS,
    ESTIMATE_CHECKS,
    REMOVAL_CHECKS,
    Report,
    compare_answers,
    compare_field_sets,
    compare_fields,
)
from podfit.v1 import scheduler_pb2 as sc

# Case field -> the kind it holds. Every kind is made the case's (CaseLoader), so the cache is exactly the case.
CASE_KINDS = (
    ("nodes", "Node"),
    ("pods", "Pod"),
    ("namespaces", "Namespace"),
    ("pdbs", "PodDisruptionBudget"),
    ("replicasets", "ReplicaSet"),
    ("services", "Service"),
    ("statefulsets", "StatefulSet"),
    ("replicationcontrollers", "ReplicationController"),
    ("storageclasses", "StorageClass"),
    ("persistentvolumes", "PersistentVolume"),
    ("persistentvolumeclaims", "PersistentVolumeClaim"),
    ("csinodes", "CSINode"),
    ("csidrivers", "CSIDriver"),
    ("csistoragecapacities", "CSIStorageCapacity"),
    ("volumeattachments", "VolumeAttachment"),
    ("deviceclasses", "DeviceClass"),
    ("resourceslices", "ResourceSlice"),
    ("resourceclaims", "ResourceClaim"),
)
# Keys of a scheduling case that are not objects to load (FORMAT.md, STORAGE-DRA.md, v1.37/VERSIONS.md).
CASE_FIELDS = frozenset({"id", "doc", "features", "meta", "kube_scheduler_version", "pod", "expect"})


def check_case_keys(case: Mapping[str, Any]) -> None:
    """Refuses a scheduling case with a top-level key podfit does not know, naming it: ignoring it would
    answer another question than the one recorded."""
    known = CASE_FIELDS | {field for field, _ in CASE_KINDS}
    unknown = sorted(set(case) - known)
    where = f"case {case.get('id', '?')}"
    if unknown:
        raise ValueError(f"{where}: unknown top-level key {unknown[0]!r}")


def load_cases(path: str | Path) -> list[dict[str, Any]]:
    """The cases of a JSON Lines file, gzip-compressed when its name ends in ``.gz``."""
    opener: Any = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _verdicts(nodes: Iterable[sc.NodeVerdict]) -> dict[str, Any]:
    return {
        v.node_name: {
            "fits": v.fits,
            "plugin": v.plugin,
            "reasons": list(v.reasons),
            "code": rq.STATUS_CODE_NAMES.get(v.code, ""),
        }
        for v in nodes
    }


def _scores(scores: Iterable[sc.NodeScore]) -> dict[str, Any]:
    return {s.node_name: {"total": s.total, "plugins": {p.plugin: p.score for p in s.plugins}} for s in scores}


def _preemption(p: sc.PreemptResponse) -> dict[str, Any]:
    return {
        "node": p.nominated_node,
        "victims": sorted(f"{v.namespace}/{v.name}" for v in p.victims),
        "node_ties": list(p.node_ties),
    }


def _postfilter(p: sc.PreemptResponse) -> str:
    """``"<code>: <message>"`` as the corpus records PostFilter's status; "" when it did not run."""
    code = rq.STATUS_CODE_NAMES.get(p.code, "")
    return f"{code}: {p.message}" if code else ""


def response_to_expect(response: sc.ScheduleResponse) -> dict[str, Any]:
    """A Schedule response in the shape of a case's ``expect``."""
    ran = response.HasField("preemption") and response.preemption.code != sc.STATUS_CODE_UNSPECIFIED
    return {
        "gated": response.gated,
        "status": response.message,
        "filter": _verdicts(response.nodes),
        "scores": _scores(response.scores),
        "best": list(response.best_nodes),
        "preemption": _preemption(response.preemption) if ran else None,
        "postfilter": _postfilter(response.preemption) if ran else "",
    }


def _best_of(scores: Mapping[str, Any]) -> list[str]:
    top = max((s["total"] for s in scores.values()), default=None)
    return sorted(name for name, s in scores.items() if s["total"] == top)


# A recorded case without ``kube_scheduler_version`` is a v1.35.4 answer (shared/conformance/v1.37/VERSIONS.md).
UNVERSIONED_CASES = "v1.35.4"


def filter_expect(expect: Mapping[str, Any]) -> Mapping[str, Any]:
    """What the Filter RPC should answer of a case: a framework error recorded after every node was
    filtered came from Score, which Filter does not run."""
    if expect.get("status") and expect.get("filter") and not expect.get("gated"):
        return {**expect, "status": ""}
    return expect


def case_version(case: Mapping[str, Any]) -> str:
    """The kube-scheduler version that answered a recorded case."""
    return str(case.get("kube_scheduler_version") or UNVERSIONED_CASES)


class CaseLoader:
    """Makes the server's cache exactly a case's objects, kind by kind (``Replace``), one case after another.

    A kind whose objects are the same as the previous case's is not sent again: the server already holds
    exactly them, as the decision RPCs a replay asks never write. Most cases leave most of the 18 kinds
    empty, so a replay sends a few Replace calls per case instead of 18. The first case replaces every
    kind (whatever the server held before), and nothing else may write to the server during a replay.
    """

    def __init__(self) -> None:
        self._held: dict[str, list[Any]] = {}

    async def load(self, client: AsyncClient, case: Mapping[str, Any]) -> None:
        for field, kind in CASE_KINDS:
            objects = list(case.get(field) or ())
            if kind not in self._held or self._held[kind] != objects:
                await client.replace(kind, objects)
                self._held[kind] = objects


async def answer_case(
    client: AsyncClient, case: Mapping[str, Any], loader: CaseLoader | None = None
) -> dict[str, dict[str, Any]]:
    """The case's answers from every decision RPC (Filter, Score, Schedule, Preempt), each in the
    ``expect`` shape with the fields that RPC answers. ``loader`` carries what the previous case loaded
    (a fresh one replaces every kind)."""
    check_case_keys(case)
    await (loader or CaseLoader()).load(client, case)
    pod = case["pod"]
    version = case_version(case)
    filtered = await client.filter(pod, kube_scheduler_version=version)
    scored = await client.score(pod, kube_scheduler_version=version)
    preempted = await client.preempt(pod, kube_scheduler_version=version)
    ran = preempted.code != sc.STATUS_CODE_UNSPECIFIED
    scores = _scores(scored.scores)
    return {
        "Filter": {"gated": filtered.gated, "status": filtered.message, "filter": _verdicts(filtered.nodes)},
        "Score": {"gated": scored.gated, "status": scored.message, "scores": scores, "best": _best_of(scores)},
        "Schedule": response_to_expect(await client.schedule(pod, kube_scheduler_version=version)),
        "Preempt": {
            "preemption": _preemption(preempted) if ran else None,
            "postfilter": _postfilter(preempted) if ran else "",
        },
    }


# The drain cases' workload kinds; every one is replaced per case, so a controller absent from the
# case is absent from the cache (ControllerNotFound).
DRAIN_WORKLOAD_KINDS = ("ReplicaSet", "StatefulSet", "ReplicationController", "Job", "DaemonSet")


def corpus_of(case: Mapping[str, Any]) -> str:
    if "pod" in case:
        return "scheduler"
    if "node" in case and "options" in case:
        return "drain"
    if "candidates" in case and "nodes" in case:
        return "removal"
    if "template" in case and "node_group" in case:
        return "estimate"
    raise ValueError(f"case {case.get('id', '?')}: not a kube-scheduler, drain, removal or estimate case")


async def answer_drain_case(client: AsyncClient, case: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(expect, answer) of a drain case, both in the shape of the report's checks."""
    workloads = list(case.get("workloads") or ())
    await client.replace("Pod", [])
    await client.replace("Node", [case["node"]])
    await client.replace("Pod", list(case["pods"]))
    await client.replace("PodDisruptionBudget", list(case.get("pdbs") or ()))
    for kind in DRAIN_WORKLOAD_KINDS:
        await client.replace(kind, [w for w in workloads if w.get("kind") == kind])
    o = case["options"]
    response = await client.simulate_drain(
        [case["node"]["metadata"]["name"]],
        skip_nodes_with_system_pods=o["skipNodesWithSystemPods"],
        skip_nodes_with_local_storage=o["skipNodesWithLocalStorage"],
        skip_nodes_with_custom_controller_pods=o["skipNodesWithCustomControllerPods"],
        min_replica_count=o["minReplicaCount"],
        # GetPodsToMove handed every pod, terminal ones too (the scale-down loop would list none).
        skip_terminal_pods=False,
        now=datetime.fromisoformat(case["timestamp"]),
    )
    (node,) = response.nodes
    answer: dict[str, Any] = {
        "blocking": None,
        "blocking_error": None,
        "pods_to_move": [m.name for m in node.pods_to_move],
        "daemonset_pods": [key.split("/", 1)[1] for key in node.daemonset_pods],
    }
    if node.HasField("blocking_pod"):
        b = node.blocking_pod
        answer["blocking"] = {"pod": b.name, "namespace": b.namespace, "reason": b.reason}
        # The recording shows the replica-count pointer upstream formats with %d as <ptr>.
        answer["blocking_error"] = re.sub(r"spec: \d+ min:", "spec: <ptr> min:", b.message)
    if node.HasField("pdb"):
        pdb = node.pdb
        answer["pdb_can_remove"] = {"can_remove": pdb.can_remove, "in_parallel": pdb.in_parallel}
        if pdb.HasField("blocking_pod"):
            b = pdb.blocking_pod
            answer["pdb_can_remove"]["blocking"] = {"pod": b.name, "namespace": b.namespace, "reason": b.reason}
    expect = dict(case["expect"])
    blocking = expect.get("blocking")
    expect["blocking"] = None if blocking is None else {k: v for k, v in blocking.items() if k != "error"}
    expect["blocking_error"] = None if blocking is None else blocking.get("error")
    return expect, answer


# The destination rules a removal case is answered under (SimulateDrainRequest.destinations), each with
# the field of the case that records cluster-autoscaler's answer.
REMOVAL_RULES = {"other-nodes": "expect", "all-but-removed": "expect_all_destinations"}


def _with_kind(objects: Iterable[Mapping[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The removal corpus stores nodes and pods without apiVersion/kind."""
    return [{"apiVersion": "v1", "kind": kind, **o} for o in objects]


def _candidate(node: Any) -> dict[str, Any]:
    """One NodeDrain in the shape of a removal case's candidate entry (FORMAT.md's mapping)."""
    blocking, pdb = None, None
    if node.HasField("blocking_pod"):
        b = node.blocking_pod
        blocking = {"pod": f"{b.namespace}/{b.name}", "reason": b.reason}
    if node.HasField("pdb"):
        p = node.pdb
        held = f"{p.blocking_pod.namespace}/{p.blocking_pod.name}" if p.HasField("blocking_pod") else None
        pdb = {"can_remove": p.can_remove, "in_parallel": p.in_parallel, "blocking_pod": held}
    return {
        "node": node.node_name,
        "removable": node.removable,
        "reason": node.unremovable_reason,
        "blocking": blocking,
        "pods_to_move": [f"{m.namespace}/{m.name}" for m in node.pods_to_move],
        "daemonset_pods": list(node.daemonset_pods),
        "pdb": pdb,
        "destinations": {f"{m.namespace}/{m.name}": m.node_name for m in node.pods_to_move} if node.removable else {},
        "unplaced_pod": node.unplaced_pod or None,
    }


def _by_field(candidates: Iterable[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Per compared field, its value for each candidate in order (``blocking`` without the informational
    ``error``)."""
    rows = [
        {**c, "blocking": None if c["blocking"] is None else {k: c["blocking"][k] for k in ("pod", "reason")}}
        for c in candidates
    ]
    return {name: [row[name] for row in rows] for name in REMOVAL_CHECKS}


def removal_rules_left_out(case: Mapping[str, Any], rules: Iterable[str]) -> dict[str, str]:
    """Rule -> why a removal case cannot be compared under it: cluster-autoscaler's recorded answer is
    missing (``null``: its runs disagreed) or not marked stable (removal/FORMAT.md)."""
    left_out = {}
    for rule in rules:
        field = REMOVAL_RULES[rule]
        if case.get(field) is None:
            left_out[rule] = f"{field} is missing or null (no stable answer was recorded)"
        elif rule == "all-but-removed" and not case.get("expect_all_destinations_stable"):
            left_out[rule] = f"{field} is not marked stable (expect_all_destinations_stable is not true)"
    return left_out


async def answer_removal_case(
    client: AsyncClient, case: Mapping[str, Any], rules: Iterable[str] = tuple(REMOVAL_RULES)
) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Rule -> (expect, answer) of a removal case, per compared field a list over the candidates. A rule
    whose recorded answer is missing or not stable is left out (``removal_rules_left_out``)."""
    rules = tuple(rules)
    left_out = removal_rules_left_out(case, rules)
    await client.replace("Pod", [])
    await client.replace("Node", _with_kind(case["nodes"], "Node"))
    await client.replace("Pod", _with_kind(case["pods"], "Pod"))
    await client.replace("PodDisruptionBudget", list(case.get("pdbs") or ()))
    workloads = list(case.get("workloads") or ())
    for kind in DRAIN_WORKLOAD_KINDS:
        await client.replace(kind, [w for w in workloads if w.get("kind") == kind])
    o = case["options"]
    answers = {}
    for rule in rules:
        if rule in left_out:
            continue
        expect = case[REMOVAL_RULES[rule]]
        response = await client.simulate_drain(
            list(case["candidates"]),
            skip_nodes_with_system_pods=o["skipNodesWithSystemPods"],
            skip_nodes_with_local_storage=o["skipNodesWithLocalStorage"],
            skip_nodes_with_custom_controller_pods=o["skipNodesWithCustomControllerPods"],
            min_replica_count=o["minReplicaCount"],
            expendable_pods_priority_cutoff=o["expendablePodsPriorityCutoff"],
            now=datetime.fromisoformat(case["timestamp"]),
            destinations=rule,
        )
        answers[rule] = (_by_field(expect), _by_field(_candidate(n) for n in response.nodes))
    return answers


async def answer_estimate_case(client: AsyncClient, case: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(expect, answer) of an estimate case; pod names compared as sets, orders as lists."""
    await client.replace("Pod", [])
    await client.replace("Node", list(case["nodes"]))
    await client.replace("Pod", list(case["pods"]))
    pending = {p["metadata"]["name"]: p for p in case["pending"]}
    group = case["node_group"]
    response = await client.estimate_scale_up(
        [[pending[name] for name in names] for names in case["groups"]],
        [(group["id"], case["template"], group["max_size"] - group["max_new_nodes"], group["max_size"])],
    )
    (got,) = response.estimates
    expect = case["expect"]
    answer = {
        "node_count": got.node_count,
        "scheduled": sorted(key.split("/", 1)[1] for key in got.scheduled),
        "unscheduled": sorted(key.split("/", 1)[1] for key in got.unscheduled),
        "group_order": list(got.group_order),
        "scheduled_per_group": list(got.scheduled_per_group),
    }
    want = {**{k: expect[k] for k in ESTIMATE_CHECKS}}
    want["scheduled"], want["unscheduled"] = sorted(want["scheduled"]), sorted(want["unscheduled"])
    return want, answer


async def run_cases(
    cases: Iterable[Mapping[str, Any]],
    target: str,
    progress: Callable[[], object] | None = None,
    removal_rules: Iterable[str] = tuple(REMOVAL_RULES),
    **client_options: Any,
) -> Report:
    """Replays the cases of one corpus (the first case's) and reports them; ``progress`` is called once
    per case done. A removal case is answered under each of ``removal_rules`` (see ``REMOVAL_RULES``) with
    a stable recorded answer, and passes when every one matches; a case with nothing to compare fails."""
    rules = tuple(removal_rules)
    report: Report | None = None
    corpus = ""
    loader = CaseLoader()
    async with AsyncClient(target, **client_options) as client:
        for case in cases:
            if report is None:
                corpus = corpus_of(case)
                checks = {"drain": DRAIN_CHECKS, "estimate": ESTIMATE_CHECKS, "removal": REMOVAL_CHECKS}.get(corpus)
                report = Report.for_checks(checks) if checks else Report()
            elif corpus_of(case) != corpus:
                raise ValueError(f"case {case.get('id', '?')}: a {corpus_of(case)} case among {corpus} cases")
            if corpus == "scheduler":
                expect = case["expect"]
                answers = await answer_case(client, case, loader)
                compare_answers(report, case["id"], expect, answers, {"Filter": filter_expect(expect)})
            elif corpus == "removal":
                compared = await answer_removal_case(client, case, rules)
                left_out = removal_rules_left_out(case, rules) if rules else {"rules": "no destination rule asked"}
                compare_field_sets(report, case["id"], compared, left_out)
            else:
                answer = answer_drain_case if corpus == "drain" else answer_estimate_case
                compare_fields(report, case["id"], *await answer(client, case))
            if progress is not None:
                progress()
    return report or Report()


def free_port() -> int:
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


# A LocalServer takes no default port but its own gRPC one (the extender's and /metrics' may be taken).
# /metrics stays on, on a port of its own: benchmarks measure the server as it runs by default, with
# the Prometheus reader attached.
NO_OTHER_LISTENERS = ("--extender-addr", "off", "--metrics-addr", "127.0.0.1:0")
# One process unless the flags say otherwise: the conformance replay and the CLI's own servers answer one
# caller at a time, and a decision worker would only double the start-up (podfit bench passes --workers).
ONE_PROCESS = ("--workers", "1", "--no-what-if-process")


class LocalServer:
    """A podfit-server subprocess on a loopback port (the client never imports the server)."""

    def __init__(self, *flags: str) -> None:
        """``flags`` are added to podfit-server's (after the defaults, so they win: e.g. an extender address)."""
        self.port = free_port()
        self.target = f"127.0.0.1:{self.port}"
        env = {**os.environ, "PODFIT_LOG_LEVEL": "WARNING"}
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "podfit.server.app", "--grpc-addr", self.target),
                *(*NO_OTHER_LISTENERS, *ONE_PROCESS, *flags),
            ],
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


def run(
    cases_path: str,
    target: str | None,
    progress: Callable[[int], Callable[[], object]] | None = None,
    **client_options: Any,
) -> Report:
    """``progress``, given the number of cases, returns the per-case callback (the CLI's progress bar)."""
    cases = load_cases(cases_path)
    step = progress(len(cases)) if progress is not None else None
    if target:
        return asyncio.run(run_cases(cases, target, step, **client_options))
    with LocalServer() as server:
        return asyncio.run(run_cases(cases, server.target, step))
