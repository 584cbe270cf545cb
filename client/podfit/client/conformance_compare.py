"""Compares podfit's answers with kube-scheduler's recorded answers (shared/conformance/FORMAT.md).

Pure functions over the ``expect`` shape, so that the gRPC runner, the extender tests and in-process
tests all judge answers the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Every field of a kube-scheduler case's ``expect`` (FORMAT.md), each judged on every RPC that answers it.
CHECKS = (
    "gated",
    "status",
    "filter",
    "filter_fits",
    "score_total",
    "score_plugins",
    "best",
    "preemption",
    "node_ties",
    "postfilter",
)
# cluster-autoscaler's corpora (shared/conformance/drain and estimate): one check per compared field.
DRAIN_CHECKS = ("blocking", "blocking_error", "pods_to_move", "daemonset_pods", "pdb_can_remove")
ESTIMATE_CHECKS = ("node_count", "scheduled", "unscheduled", "group_order", "scheduled_per_group")
# Its scale-down planner (shared/conformance/removal): each a list with one entry per candidate.
REMOVAL_CHECKS = (
    "node",
    "removable",
    "reason",
    "blocking",
    "pods_to_move",
    "daemonset_pods",
    "pdb",
    "destinations",
    "unplaced_pod",
)


@dataclass
class Tally:
    match: int = 0
    total: int = 0

    def add(self, ok: bool) -> None:
        self.total += 1
        self.match += int(ok)

    def as_dict(self) -> dict[str, int]:
        return {"match": self.match, "total": self.total}


@dataclass
class Report:
    total: int = 0
    passed: int = 0
    checks: dict[str, Tally] = field(default_factory=lambda: {c: Tally() for c in CHECKS})

    @classmethod
    def for_checks(cls, checks: tuple[str, ...]) -> Report:
        return cls(checks={c: Tally() for c in checks})

    plugins: dict[str, dict[str, Tally]] = field(default_factory=dict)
    failures: list[dict[str, str]] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return self.total - self.passed

    @property
    def ok(self) -> bool:
        """Whether the run passes: at least one case, and every case compared on something and matched."""
        return self.total > 0 and self.failed == 0

    def plugin(self, name: str, kind: str) -> Tally:
        entry = self.plugins.setdefault(name, {"filter": Tally(), "score": Tally()})
        return entry[kind]

    def as_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "passed": self.passed,
            "failed": self.failed,
            "checks": {name: tally.as_dict() for name, tally in self.checks.items()},
            "plugins": {
                name: {kind: tally.as_dict() for kind, tally in kinds.items()}
                for name, kinds in sorted(self.plugins.items())
            },
            "failures": self.failures,
        }


def _verdict(entry: Mapping[str, Any] | None) -> tuple[Any, ...]:
    if entry is None:
        return ("<absent>",)
    return (bool(entry.get("fits")), entry.get("plugin", ""), tuple(entry.get("reasons") or ()), entry.get("code", ""))


def compare_case(report: Report, case_id: str, expect: Mapping[str, Any], actual: Mapping[str, Any]) -> bool:
    """Adds one case to the report; returns whether it passed. ``actual`` has the ``expect`` shape
    (fields it lacks are not judged)."""
    return compare_answers(report, case_id, expect, {"": actual})


def compare_answers(
    report: Report,
    case_id: str,
    expect: Mapping[str, Any],
    answers: Mapping[str, Mapping[str, Any]],
    expects: Mapping[str, Mapping[str, Any]] | None = None,
) -> bool:
    """Adds one case answered by several RPCs: ``answers`` maps an RPC name to what it answered, in the
    ``expect`` shape but with only the fields that RPC gives. Every field present is judged exactly
    against ``expect`` (or the RPC's own entry in ``expects``) and tallied under its check; a case passes
    when every one matches."""
    diffs: list[str] = []
    report.total += 1
    before = _tallied(report)
    for source, actual in answers.items():
        where = f"{source}: " if source else ""
        wanted = (expects or {}).get(source, expect)
        for check, judge in _JUDGES.items():
            if check in actual:
                diffs.extend(f"{where}{d}" for d in judge(report, wanted, actual))
    if _tallied(report) == before:
        diffs.append(_nothing_compared(f"no answer has a compared field ({', '.join(_JUDGES)})"))
    return _finish(report, case_id, diffs)


def _judge_gated(report: Report, expect: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    ok = bool(expect.get("gated")) == bool(actual.get("gated"))
    report.checks["gated"].add(ok)
    return [] if ok else [f"gated: expected {expect.get('gated')}, got {actual.get('gated')}"]


def _judge_status(report: Report, expect: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    ok = (expect.get("status") or "") == (actual.get("status") or "")
    report.checks["status"].add(ok)
    return [] if ok else [f"status: expected {expect.get('status')!r}, got {actual.get('status')!r}"]


def _judge_filter(report: Report, expect: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    diffs = []
    exp_filter: Mapping[str, Any] = expect.get("filter") or {}
    act_filter: Mapping[str, Any] = actual.get("filter") or {}
    for node in sorted(set(exp_filter) | set(act_filter)):
        e, a = exp_filter.get(node), act_filter.get(node)
        same = _verdict(e) == _verdict(a)
        report.checks["filter"].add(same)
        report.checks["filter_fits"].add(
            bool(e and e.get("fits")) == bool(a and a.get("fits")) and (e is None) == (a is None)
        )
        for name in {(e or {}).get("plugin", ""), (a or {}).get("plugin", "")} - {""}:
            report.plugin(name, "filter").add(same)
        if not same:
            diffs.append(f"filter[{node}]: expected {json.dumps(e)}, got {json.dumps(a)}")
    return diffs


def _judge_scores(report: Report, expect: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    diffs = []
    exp_scores: Mapping[str, Any] = expect.get("scores") or {}
    act_scores: Mapping[str, Any] = actual.get("scores") or {}
    for node in sorted(set(exp_scores) | set(act_scores)):
        if node not in exp_scores or node not in act_scores:
            report.checks["score_total"].add(False)
            report.checks["score_plugins"].add(False)
            diffs.append(f"scores[{node}]: {'missing' if node in exp_scores else 'unexpected'}")
            continue
        e, a = exp_scores[node], act_scores[node]
        same_total = e.get("total") == a.get("total")
        report.checks["score_total"].add(same_total)
        if not same_total:
            diffs.append(f"scores[{node}].total: expected {e.get('total')}, got {a.get('total')}")
        e_plugins, a_plugins = e.get("plugins") or {}, a.get("plugins") or {}
        report.checks["score_plugins"].add(dict(e_plugins) == dict(a_plugins))
        for name in sorted(set(e_plugins) | set(a_plugins)):
            same = e_plugins.get(name) == a_plugins.get(name)
            report.plugin(name, "score").add(same)
            if not same:
                diffs.append(
                    f"scores[{node}].plugins[{name}]: expected {e_plugins.get(name)}, got {a_plugins.get(name)}"
                )
    return diffs


def _judge_best(report: Report, expect: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    ok = list(expect.get("best") or []) == list(actual.get("best") or [])
    report.checks["best"].add(ok)
    return [] if ok else [f"best: expected {expect.get('best')}, got {actual.get('best')}"]


def _judge_preemption(report: Report, expect: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    """The nominated node and its victims exactly (upstream's node is the first of the tied nodes), and
    the tie set on its own check."""
    e, a = expect.get("preemption"), actual.get("preemption")
    diffs = []
    ok = _preemption_key(e) == _preemption_key(a)
    report.checks["preemption"].add(ok)
    if not ok:
        diffs.append(f"preemption: expected {json.dumps(e)}, got {json.dumps(a)}")
    ties_ok = (e or {}).get("node_ties") == (a or {}).get("node_ties") and (e is None) == (a is None)
    report.checks["node_ties"].add(ties_ok)
    if not ties_ok and ok:
        diffs.append(f"preemption.node_ties: expected {json.dumps(e)}, got {json.dumps(a)}")
    return diffs


def _judge_postfilter(report: Report, expect: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    ok = (expect.get("postfilter") or "") == (actual.get("postfilter") or "")
    report.checks["postfilter"].add(ok)
    return [] if ok else [f"postfilter: expected {expect.get('postfilter')!r}, got {actual.get('postfilter')!r}"]


def _preemption_key(p: Mapping[str, Any] | None) -> tuple[str, list[str]] | None:
    return None if p is None else (p.get("node", ""), sorted(p.get("victims") or []))


_JUDGES = {
    "gated": _judge_gated,
    "status": _judge_status,
    "filter": _judge_filter,
    "scores": _judge_scores,
    "best": _judge_best,
    "preemption": _judge_preemption,
    "postfilter": _judge_postfilter,
}


def compare_fields(report: Report, case_id: str, expect: Mapping[str, Any], actual: Mapping[str, Any]) -> bool:
    """Adds one case of a cluster-autoscaler corpus: each of the report's checks is one field of ``actual``
    compared for equality with ``expect`` (the caller puts both in the same shape). An ``expect`` without
    the field (``pdb_can_remove`` when a pod blocks) must not have it in ``actual`` either."""
    return compare_field_sets(report, case_id, {"": (expect, actual)})


def compare_field_sets(
    report: Report,
    case_id: str,
    answers: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any]]],
    left_out: Mapping[str, str] | None = None,
) -> bool:
    """``compare_fields`` for a case answered several ways (label -> (expect, actual)), e.g. a removal case
    under each destination rule: every field of every answer is tallied, and the case passes when all match.
    ``left_out`` names the labels not answered and why (a removal rule without a stable recorded answer);
    a case with nothing compared at all fails, with those reasons."""
    diffs = []
    report.total += 1
    before = _tallied(report)
    for label, (expect, actual) in answers.items():
        where = f"{label}: " if label else ""
        for name, tally in report.checks.items():
            e, a = expect.get(name), actual.get(name)
            ok = e == a
            tally.add(ok)
            if not ok:
                diffs.append(f"{where}{name}: expected {json.dumps(e)}, got {json.dumps(a)}")
    if _tallied(report) == before:
        reasons = "; ".join(f"{label}: {reason}" for label, reason in (left_out or {}).items())
        diffs.append(_nothing_compared(reasons or ("no answer to compare" if report.checks else "no checks to run")))
    return _finish(report, case_id, diffs)


# The start of the failure of a case that was compared on nothing (such a case is never a pass).
NOTHING_COMPARED = "nothing compared"


def _nothing_compared(why: str) -> str:
    return f"{NOTHING_COMPARED}: {why}; a case that checks nothing cannot pass"


def _tallied(report: Report) -> int:
    """How many comparisons the report holds, over all checks."""
    return sum(tally.total for tally in report.checks.values())


def _finish(report: Report, case_id: str, diffs: list[str]) -> bool:
    if diffs:
        report.failures.append({"id": case_id, "diff": "\n".join(diffs)})
        return False
    report.passed += 1
    return True


def format_table(report: Report) -> str:
    """The per-check and per-plugin accuracy table the runner prints."""
    lines = ["check          match/total", "-------------  -----------"]
    for name, tally in report.checks.items():
        lines.append(f"{name:<14} {tally.match}/{tally.total}")
    if not report.plugins:
        return "\n".join(lines)
    lines += ["", "plugin                             filter        score", "-" * 58]
    for name, kinds in sorted(report.plugins.items()):
        f, s = kinds["filter"], kinds["score"]
        lines.append(f"{name:<34} {_pct(f):>12} {_pct(s):>12}")
    return "\n".join(lines)


def _pct(tally: Tally) -> str:
    if not tally.total:
        return "-"
    return f"{100.0 * tally.match / tally.total:5.1f}% ({tally.match}/{tally.total})"
