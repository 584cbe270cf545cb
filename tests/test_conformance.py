"""Parity with kube-scheduler v1.35.4, v1.36.3 and v1.37.2, and with cluster-autoscaler's scale-down planner:
replays every public case of every version, and every removal case under both destination rules, through the gRPC
API (as ``podfit conformance`` does, the version read from each case) and fails on any mismatch."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from podfit.client.cli import NO_CASES
from podfit.client.conformance import (
    CASE_KINDS,
    REMOVAL_RULES,
    CaseLoader,
    case_version,
    filter_expect,
    load_cases,
    run_cases,
)
from podfit.client.conformance_compare import (
    CHECKS,
    NOTHING_COMPARED,
    REMOVAL_CHECKS,
    Report,
    compare_answers,
    compare_case,
    compare_field_sets,
    compare_fields,
)

from tests.conformance_support import assert_every_case_passed
from tests.conftest import LiveServer
from tests.corpora import corpus

ROOT = Path(__file__).resolve().parents[1]
CORPORA = {
    "v1.35.4": corpus("cases-public.jsonl"),
    "v1.36.3": corpus("v1.36/cases-public.jsonl"),
    "v1.37.2": corpus("v1.37/cases-public.jsonl"),
}
# Volumes: the same storage cases answered by each version (STORAGE-DRA.md, v1.3x/VERSIONS.md).
STORAGE_CORPORA = {
    "v1.35.4": corpus("storage/cases-public.jsonl"),
    "v1.36.3": corpus("v1.36/storage-public.jsonl"),
    "v1.37.2": corpus("v1.37/storage-public.jsonl"),
}
# Devices: the DRA cases answered by each version.
DRA_CORPORA = {
    "v1.35.4": corpus("dra/cases-public.jsonl"),
    "v1.36.3": corpus("v1.36/dra-public.jsonl"),
    "v1.37.2": corpus("v1.37/dra-public.jsonl"),
}


@pytest.mark.parametrize(
    ("corpora", "kind"),
    [
        pytest.param(CORPORA, "scheduling", id="every supported release has its scheduling corpus"),
        pytest.param(STORAGE_CORPORA, "storage", id="every supported release has its storage corpus"),
        pytest.param(DRA_CORPORA, "dra", id="every supported release has its DRA corpus"),
    ],
)
def test_every_supported_release_is_replayed(corpora: dict[str, Path], kind: str) -> None:
    """A version podfit answers as (framework/versions.py) is supported only with its corpora replayed."""
    from podfit.server.framework.versions import VERSIONS

    assert sorted(corpora) == sorted(v.release for v in VERSIONS.values()), f"a {kind} corpus is missing"


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
    assert_every_case_passed(report, cases, release)


async def test_the_replay_loader_leaves_exactly_each_cases_objects_and_resends_only_what_changed(
    live: LiveServer,
) -> None:
    """The replays skip a kind whose objects equal the ones sent before it (CaseLoader): after each case the
    cache holds exactly that case's objects of every kind, the skipped ones included, and a kind is sent
    again only when it changed."""
    sent: list[str] = []

    class Counting:
        async def replace(self, kind: str, objects: list[Any]) -> Any:
            sent.append(kind)
            return await live.client.replace(kind, objects)

    cases = load_cases(CORPORA["v1.35.4"])[:30] + load_cases(STORAGE_CORPORA["v1.35.4"])[:15]
    cases += load_cases(DRA_CORPORA["v1.35.4"])[:15] + load_cases(CORPORA["v1.35.4"])[:1]
    loader, previous = CaseLoader(), None
    for case in cases:
        sent.clear()
        await loader.load(Counting(), case)  # type: ignore[arg-type]
        for field, kind in CASE_KINDS:
            objects = list(case.get(field) or ())
            held = (await live.client.list(kind)).objects
            names = sorted(getattr(o, str(o.WhichOneof("object"))).metadata.name for o in held)
            assert names == sorted(o["metadata"]["name"] for o in objects), (case["id"], kind)
            changed = previous is None or list(previous.get(field) or ()) != objects
            assert (kind in sent) == changed, (case["id"], kind)
        previous = case
    assert len(CASE_KINDS) == 18


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
    assert_every_case_passed(report, cases, f"removal ({rule})")
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


# -- a case with nothing to compare fails, in the CLI as in the suite ----------------------------------

PODFIT = str(Path(sys.executable).parent / "podfit")
_REMOVAL_CASE = load_cases(REMOVAL)[0]


def _removal_case(**fields: object) -> dict[str, object]:
    return {**_REMOVAL_CASE, "id": "rm-empty", **fields}


NOTHING_TO_COMPARE = {
    "no stable answer under either rule": (
        _removal_case(expect=None, expect_all_destinations=None, expect_all_destinations_stable=False),
        tuple(REMOVAL_RULES),
        "other-nodes: expect is missing or null",
    ),
    "CA's rule asked alone and its answer not marked stable": (
        _removal_case(expect_all_destinations_stable=False),
        ("all-but-removed",),
        "all-but-removed: expect_all_destinations is not marked stable",
    ),
    "podfit's rule asked alone and its answer missing": (
        _removal_case(expect=None),
        ("other-nodes",),
        "other-nodes: expect is missing or null",
    ),
    "no rule asked": (_removal_case(), (), "rules: no destination rule asked"),
}


@pytest.mark.parametrize("name", list(NOTHING_TO_COMPARE), ids=list(NOTHING_TO_COMPARE))
async def test_a_removal_case_with_nothing_to_compare_fails(live: LiveServer, name: str) -> None:
    case, rules, reason = NOTHING_TO_COMPARE[name]
    report = await run_cases([case], live.target, removal_rules=rules)
    assert (report.total, report.passed, report.ok) == (1, 0, False)
    (failure,) = report.failures
    assert failure["diff"].startswith(f"{NOTHING_COMPARED}: ") and reason in failure["diff"], failure["diff"]
    with pytest.raises(AssertionError, match=NOTHING_COMPARED):
        assert_every_case_passed(report, [case], "removal")


async def test_a_removal_case_compared_under_one_stable_rule_passes(live: LiveServer) -> None:
    """The control: a rule left out for want of a stable answer fails nothing while another compares."""
    case = _removal_case(expect_all_destinations_stable=False)
    report = await run_cases([case], live.target)
    assert_every_case_passed(report, [case], "removal")
    assert report.checks["node"].total == 1


@pytest.mark.parametrize(
    ("checks", "compare", "reason"),
    [
        pytest.param(
            CHECKS,
            lambda report: compare_case(report, "case", _case({}), {}),
            "no answer has a compared field",
            id="a scheduling answer without any compared field",
        ),
        pytest.param(
            CHECKS,
            lambda report: compare_answers(report, "case", _case({}), {"Filter": {}, "Preempt": {"victims": []}}),
            "no answer has a compared field",
            id="answers of several RPCs none with a compared field",
        ),
        pytest.param(
            REMOVAL_CHECKS,
            lambda report: compare_field_sets(report, "case", {}),
            "no answer to compare",
            id="a removal case answered under no rule",
        ),
        pytest.param(
            REMOVAL_CHECKS,
            lambda report: compare_field_sets(report, "case", {}, {"all-but-removed": "not stable"}),
            "all-but-removed: not stable",
            id="a removal case whose only rule was left out names why",
        ),
        pytest.param(
            (),
            lambda report: compare_fields(report, "case", {"node_count": 1}, {"node_count": 1}),
            "no checks to run",
            id="a report without checks",
        ),
    ],
)
def test_a_comparison_of_nothing_fails(checks: tuple[str, ...], compare: Callable[[Report], bool], reason: str) -> None:
    report = Report.for_checks(checks)
    assert compare(report) is False
    assert (report.total, report.passed, report.ok) == (1, 0, False)
    (failure,) = report.failures
    assert failure["diff"].startswith(f"{NOTHING_COMPARED}: ") and reason in failure["diff"], failure["diff"]


def _write_cases(path: Path, cases: list[dict[str, object]]) -> str:
    path.write_text("".join(json.dumps(case) + "\n" for case in cases))
    return str(path)


@pytest.mark.parametrize(
    ("cases", "out", "err"),
    [
        pytest.param(
            [NOTHING_TO_COMPARE["no stable answer under either rule"][0]],
            [f"--- rm-empty\n{NOTHING_COMPARED}: other-nodes: expect is missing", "0 passed, 1 failed"],
            "",
            id="a removal case without a stable answer",
        ),
        pytest.param(
            [_removal_case(id="rm-ok"), NOTHING_TO_COMPARE["no stable answer under either rule"][0]],
            [f"--- rm-empty\n{NOTHING_COMPARED}:", "1 passed, 1 failed"],
            "",
            id="one case with nothing to compare among passing ones",
        ),
        pytest.param([], ["0 passed, 0 failed"], NO_CASES, id="a file without cases"),
    ],
)
async def test_the_cli_fails_a_case_with_nothing_to_compare(
    live: LiveServer, tmp_path: Path, cases: list[dict[str, object]], out: list[str], err: str
) -> None:
    path = _write_cases(tmp_path / "cases.jsonl", cases)
    process = await asyncio.create_subprocess_exec(
        PODFIT, "--target", live.target, "conformance", path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 1, (stdout.decode(), stderr.decode())
    for line in out:
        assert line in stdout.decode(), stdout.decode()
    assert err in stderr.decode()
