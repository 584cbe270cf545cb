"""The "why pending" message: kube-scheduler's FailedScheduling event text on Filter and Schedule, as
v1.35.4 and v1.37.2 write it (each case asked as the version that answered it).

The expected text of every public case where nothing fits is built here from the case's recorded
per-node reasons and PostFilter status, by upstream's FitError rule (framework/types.go), not by
podfit's code: ``0/N nodes are available: <count> <reason>, ... (sorted as strings).`` followed by
`` <PostFilter message>`` when PostFilter said something.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest
from podfit.client.conformance import CaseLoader, case_version, load_cases
from podfit.server.framework.fit_error import event_message, fit_error

from tests.conftest import LiveServer
from tests.test_conformance import CORPORA


def upstream_fit_error(expect: Mapping[str, Any], *, with_post_filter: bool = True) -> str:
    """FitError.Error() from a case's ``expect``: the reason histogram over every node's recorded
    reasons, then PostFilter's message (the text after "<code>: ") with one space and no period."""
    filter_ = expect["filter"]
    counts = Counter(reason for verdict in filter_.values() for reason in verdict["reasons"])
    message = f"0/{len(filter_)} nodes are available: " + ", ".join(sorted(f"{n} {r}" for r, n in counts.items()))
    message += "."
    post = expect["postfilter"].split(": ", 1)[1] if with_post_filter else ""
    return f"{message} {post}" if post else message


def unschedulable_cases(release: str = "v1.37.2") -> list[dict[str, Any]]:
    return [c for c in load_cases(CORPORA[release]) if not c["expect"]["gated"] and not c["expect"]["best"]]


async def load_case(live: LiveServer, case: Mapping[str, Any], loader: CaseLoader | None = None) -> None:
    """The case's objects, every kind replaced (or, with ``loader``, those that differ from its last case)."""
    await (loader or CaseLoader()).load(live.client, case)


@pytest.mark.parametrize("release", sorted(CORPORA))
async def test_every_public_case_where_nothing_fits_carries_the_event_message(live: LiveServer, release: str) -> None:
    cases = unschedulable_cases(release)
    assert len(cases) > 100  # the corpus has 137; an empty selection would prove nothing
    mismatches = []
    loader = CaseLoader()
    for case in cases:
        await load_case(live, case, loader)
        want = upstream_fit_error(case["expect"])
        version = case_version(case)
        filtered = await live.client.filter(case["pod"], kube_scheduler_version=version)
        scheduled = await live.client.schedule(case["pod"], kube_scheduler_version=version)
        unpreempted = await live.client.schedule(case["pod"], disable_preemption=True, kube_scheduler_version=version)
        got = (filtered.unschedulable_message, scheduled.unschedulable_message, unpreempted.unschedulable_message)
        if got != (want, want, upstream_fit_error(case["expect"], with_post_filter=False)):
            mismatches.append(f"{case['id']}:\n  want {want!r}\n  got  {got!r}")
    assert not mismatches, f"{len(mismatches)} cases differ:\n" + "\n".join(mismatches[:5])


def _first_case(predicate: Any) -> dict[str, Any]:
    return next(c for c in load_cases(CORPORA["v1.37.2"]) if predicate(c["expect"]))


@pytest.mark.parametrize(
    ("pick", "expected_empty"),
    [
        pytest.param(lambda e: e["gated"], True, id="a gated pod has no FitError"),
        pytest.param(lambda e: bool(e["best"]), True, id="a pod that fits has no message"),
    ],
)
async def test_no_message_when_something_fits_or_the_pod_is_gated(
    live: LiveServer, pick: Any, expected_empty: bool
) -> None:
    case = _first_case(pick)
    await load_case(live, case)
    filtered = await live.client.filter(case["pod"])
    scheduled = await live.client.schedule(case["pod"])
    assert (filtered.unschedulable_message == "") is expected_empty
    assert (scheduled.unschedulable_message == "") is expected_empty
    assert filtered.gated == case["expect"]["gated"]


async def test_a_cluster_without_nodes_says_so(live: LiveServer) -> None:
    case = unschedulable_cases()[0]
    empty = copy.deepcopy(case)
    empty["nodes"], empty["pods"] = [], []
    await load_case(live, empty)
    assert (await live.client.filter(case["pod"])).unschedulable_message == "no nodes available to schedule pods"
    assert (await live.client.schedule(case["pod"])).unschedulable_message == "no nodes available to schedule pods"


@pytest.mark.parametrize(
    ("num_nodes", "reasons", "pre_filter", "post_filter", "expected"),
    [
        pytest.param(
            12,
            {"Insufficient cpu": 10, "node(s) had untolerated taint(s)": 2},
            "",
            "",
            "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) had untolerated taint(s).",
            id="counts are sorted as strings, so 10 comes before 2",
        ),
        pytest.param(
            3,
            {"ignored": 3},
            "node(s) didn't satisfy plugin NodeAffinity",
            "preemption: x.",
            "0/3 nodes are available: node(s) didn't satisfy plugin NodeAffinity. preemption: x.",
            id="a PreFilter rejection replaces the histogram",
        ),
        pytest.param(
            2,
            {"Too many pods": 2},
            "",
            "preemption: not eligible due to preemptionPolicy=Never.",
            "0/2 nodes are available: 2 Too many pods. preemption: not eligible due to preemptionPolicy=Never.",
            id="the PostFilter message follows with a space and no added period",
        ),
    ],
)
def test_fit_error_rule(
    num_nodes: int, reasons: dict[str, int], pre_filter: str, post_filter: str, expected: str
) -> None:
    assert fit_error(num_nodes, reasons, pre_filter, post_filter) == expected


@pytest.mark.parametrize(
    ("length", "expected_length", "truncated"),
    [
        pytest.param(1024, 1024, False, id="1024 bytes stay whole"),
        pytest.param(1025, 1024, True, id="longer texts are cut to 1024 bytes ending in ' ...'"),
    ],
)
def test_event_message_limit(length: int, expected_length: int, truncated: bool) -> None:
    text = event_message("x" * length)
    assert len(text.encode()) == expected_length
    assert text.endswith(" ...") is truncated
