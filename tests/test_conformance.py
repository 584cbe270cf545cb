"""Parity with kube-scheduler v1.35.4 and v1.37.2, and with cluster-autoscaler's scale-down planner: replays
every public case of both versions, and every removal case under both destination rules, through the gRPC
API (as ``podfit conformance`` does, the version read from each case) and fails on any mismatch."""

from __future__ import annotations

from pathlib import Path

import pytest
from podfit.client.conformance import REMOVAL_RULES, case_version, filter_expect, load_cases, run_cases
from podfit.client.conformance_compare import (
    REMOVAL_CHECKS,
    Report,
    compare_answers,
    compare_case,
    compare_field_sets,
)

from tests.conftest import LiveServer
from tests.corpora import corpus

ROOT = Path(__file__).resolve().parents[1]
CORPORA = {
    "v1.35.4": corpus("cases-public.jsonl"),
    "v1.37.2": corpus("v1.37/cases-public.jsonl"),
}
# Volumes: the same storage cases answered by each version (STORAGE-DRA.md, v1.37/VERSIONS.md).
STORAGE_CORPORA = {
    "v1.35.4": corpus("storage/cases-public.jsonl"),
    "v1.37.2": corpus("v1.37/storage-public.jsonl"),
}
# Devices: the DRA cases answered by each version.
DRA_CORPORA = {
    "v1.35.4": corpus("dra/cases-public.jsonl"),
    "v1.37.2": corpus("v1.37/dra-public.jsonl"),
}


@pytest.mark.parametrize(
    ("corpus", "release"),
    [pytest.param(CORPORA, r, id=f"scheduling {r}") for r in sorted(CORPORA)]
    + [pytest.param(STORAGE_CORPORA, r, id=f"storage {r}") for r in sorted(STORAGE_CORPORA)]
    + [pytest.param(DRA_CORPORA, r, id=f"dra {r}") for r in sorted(DRA_CORPORA)],
)
async def test_every_public_case_passes_on_every_field(live: LiveServer, corpus: dict[str, Path], release: str) -> None:
    cases = load_cases(corpus[release])
    assert {case_version(c) for c in cases} == {release}, "the corpus answers as another version"
    report = await run_cases(cases, live.target)
    failed = [f["id"] for f in report.failures]
    details = "\n".join(f["diff"] for f in report.failures[:3])
    assert not failed, f"{len(failed)} of {len(cases)} {release} cases differ: {failed[:10]}\n{details}"
    assert report.passed == len(cases)


# cluster-autoscaler's scale-down planner (removal/FORMAT.md), each case under each destination rule.
REMOVAL = corpus("removal/cases-public.jsonl")


@pytest.mark.parametrize(
    "rule",
    [
        pytest.param("other-nodes", id="removal, podfit's rule: no candidate is a destination"),
        pytest.param("all-but-removed", id="removal, cluster-autoscaler's rule: all but the removed nodes"),
    ],
)
async def test_every_public_removal_case_passes_on_every_field(live: LiveServer, rule: str) -> None:
    cases = load_cases(REMOVAL)
    assert len(cases) == 150
    assert all(c[REMOVAL_RULES[rule]] is not None for c in cases), "every public case is stable under both rules"
    report = await run_cases(cases, live.target, removal_rules=(rule,))
    failed = [f["id"] for f in report.failures]
    details = "\n".join(f["diff"] for f in report.failures[:3])
    assert not failed, f"{len(failed)} of {len(cases)} removal cases differ under {rule}: {failed[:10]}\n{details}"
    assert report.passed == len(cases)
    assert all(tally.match == tally.total == len(cases) for tally in report.checks.values())


def _removal(**fields: object) -> dict[str, list[object]]:
    """One candidate's entry, per compared field, as the removal answers are compared."""
    entry: dict[str, object] = {
        "node": "n1",
        "removable": True,
        "reason": "",
        "blocking": None,
        "pods_to_move": ["default/p"],
        "daemonset_pods": [],
        "pdb": {"can_remove": True, "in_parallel": True, "blocking_pod": None},
        "destinations": {"default/p": "n2"},
        "unplaced_pod": None,
        **fields,
    }
    return {name: [entry[name]] for name in REMOVAL_CHECKS}


@pytest.mark.parametrize(
    ("answers", "passes", "diff"),
    [
        pytest.param({"other-nodes": (_removal(), _removal())}, True, "", id="identical candidates pass"),
        pytest.param(
            {"other-nodes": (_removal(), _removal(destinations={"default/p": "n3"}))},
            False,
            "other-nodes: destinations",
            id="another destination fails",
        ),
        pytest.param(
            {"other-nodes": (_removal(), _removal()), "all-but-removed": (_removal(), _removal(removable=False))},
            False,
            "all-but-removed: removable",
            id="one rule disagreeing fails the case",
        ),
    ],
)
def test_removal_comparison(
    answers: dict[str, tuple[dict[str, object], dict[str, object]]], passes: bool, diff: str
) -> None:
    report = Report.for_checks(REMOVAL_CHECKS)
    assert compare_field_sets(report, "case", answers) is passes
    assert (report.passed, report.failed) == (int(passes), int(not passes))
    if not passes:
        assert report.failures[0]["diff"].startswith(diff)
    assert report.checks["node"].total == len(answers)


def _case(expect: dict[str, object]) -> dict[str, object]:
    return {"gated": False, "status": "", "filter": {}, "scores": {}, "best": [], "preemption": None, **expect}


@pytest.mark.parametrize(
    ("expect", "actual", "passes"),
    [
        pytest.param(_case({"best": ["a"]}), _case({"best": ["a"]}), True, id="identical answers pass"),
        pytest.param(_case({"best": ["a"]}), _case({"best": ["b"]}), False, id="a different best set fails"),
        pytest.param(
            _case({"filter": {"n": {"fits": False, "plugin": "P", "reasons": ["r"], "code": "Unschedulable"}}}),
            _case(
                {
                    "filter": {
                        "n": {"fits": False, "plugin": "P", "reasons": ["r"], "code": "UnschedulableAndUnresolvable"}
                    }
                }
            ),
            False,
            id="a different status code fails",
        ),
        pytest.param(
            _case({"scores": {"n": {"total": 3, "plugins": {"A": 3}}}}),
            _case({"scores": {"n": {"total": 3, "plugins": {"A": 3, "B": 0}}}}),
            False,
            id="a plugin score that should be skipped fails",
        ),
        pytest.param(
            _case({"preemption": {"node": "a", "victims": ["d/x"], "node_ties": ["a", "b"]}}),
            _case({"preemption": {"node": "b", "victims": ["d/y"], "node_ties": ["a", "b"]}}),
            False,
            id="another tied preemption node fails: upstream's node is the first tie",
        ),
        pytest.param(
            _case({"preemption": {"node": "a", "victims": ["d/x"], "node_ties": ["a", "b"]}}),
            _case({"preemption": {"node": "a", "victims": ["d/x"], "node_ties": ["a"]}}),
            False,
            id="a missing tied node fails",
        ),
        pytest.param(
            _case({"postfilter": "Unschedulable: preemption: x."}),
            _case({"postfilter": "Unschedulable: preemption: y."}),
            False,
            id="another PostFilter message fails",
        ),
        pytest.param(
            _case({"gated": True, "status": "SchedulingGates: waiting for scheduling gates: [a]"}),
            _case({"gated": True, "status": "SchedulingGates: waiting for scheduling gates: [b]"}),
            False,
            id="another gated status message fails",
        ),
        pytest.param(
            _case({"preemption": {"node": "a", "victims": ["d/x"], "node_ties": ["a"]}}),
            _case({"preemption": {"node": "a", "victims": ["d/y"], "node_ties": ["a"]}}),
            False,
            id="other victims on the nominated node fail",
        ),
    ],
)
def test_comparison_rules(expect: dict[str, object], actual: dict[str, object], passes: bool) -> None:
    report = Report()
    assert compare_case(report, "case", expect, actual) is passes
    assert (report.passed, report.failed) == (int(passes), int(not passes))


@pytest.mark.parametrize(
    ("answers", "passes", "tallies"),
    [
        pytest.param(
            {"Filter": {"best": ["a"]}, "Schedule": {"best": ["a"]}},
            True,
            {"best": (2, 2)},
            id="a field answered by two RPCs is judged twice",
        ),
        pytest.param(
            {"Score": {"best": ["a"]}, "Schedule": {"best": ["b"]}},
            False,
            {"best": (1, 2)},
            id="one RPC disagreeing fails the case",
        ),
        pytest.param(
            {"Preempt": {"postfilter": ""}},
            True,
            {"postfilter": (1, 1), "best": (0, 0)},
            id="fields an RPC does not answer are not judged",
        ),
    ],
)
def test_answers_of_several_rpcs(
    answers: dict[str, dict[str, object]], passes: bool, tallies: dict[str, tuple[int, int]]
) -> None:
    report = Report()
    assert compare_answers(report, "case", _case({"best": ["a"]}), answers) is passes
    for check, (match, total) in tallies.items():
        assert (report.checks[check].match, report.checks[check].total) == (match, total)
    if not passes:
        assert report.failures[0]["diff"].startswith("Schedule: best")


_SCORE_ERROR = 'running Score plugins: plugin "DynamicResources" failed with: number of allocations 1 is smaller'
_FILTER_ERROR = 'running "DynamicResources" filter plugin: class gpu: selector #0: CEL runtime error: no such key: x'
_FITS = {"n": {"fits": True, "plugin": "", "reasons": [], "code": "Success"}}


@pytest.mark.parametrize(
    ("expect", "filter_status"),
    [
        pytest.param(_case({"status": _SCORE_ERROR, "filter": _FITS}), "", id="a Score error is not Filter's"),
        pytest.param(_case({"status": _FILTER_ERROR}), _FILTER_ERROR, id="a Filter error is Filter's"),
        pytest.param(
            _case({"gated": True, "status": "SchedulingGates: waiting"}),
            "SchedulingGates: waiting",
            id="a PreEnqueue message is every RPC's",
        ),
        pytest.param(_case({"filter": _FITS}), "", id="no error"),
    ],
)
def test_filter_rpc_expectation(expect: dict[str, object], filter_status: str) -> None:
    assert filter_expect(expect)["status"] == filter_status
    report = Report()
    answers = {"Filter": {"status": filter_status}, "Score": {"status": expect["status"]}}
    assert compare_answers(report, "case", expect, answers, {"Filter": filter_expect(expect)})
