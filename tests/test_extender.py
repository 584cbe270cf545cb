"""The kube-scheduler extender endpoint over real HTTP on loopback, with payloads captured between a
real kube-scheduler v1.35.4 and an extender (shared/conformance/extender-wire)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from podfit.client.conformance import CaseLoader, load_cases
from podfit.server.cycle import SchedulingCycle
from podfit.server.transport.extender import MAX_ROUNDS
from podfit.v1 import scheduler_pb2 as sc

from tests.builders import make_node, make_pod
from tests.conftest import LiveServer
from tests.corpora import corpus

WIRE = corpus("extender-wire")
CASES = corpus("cases-public.jsonl")
FILTER_KEYS = ["Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"]


def wire(name: str) -> Any:
    return json.loads((WIRE / name).read_text())


def wire_case(case_id: str) -> dict[str, Any]:
    return next(c for c in load_cases(corpus("extender-wire/wire-cases.jsonl")) if c["id"] == case_id)


async def load(live: LiveServer, case: dict[str, Any], loader: CaseLoader | None = None) -> None:
    """The case's objects, every kind replaced (or, with ``loader``, those that differ from its last case)."""
    await (loader or CaseLoader()).load(live.client, case)


async def post(
    live: LiveServer, verb: str, body: Any, raw: bytes | None = None, session: aiohttp.ClientSession | None = None
) -> tuple[int, Any]:
    """One extender call: on a new connection, or on ``session``'s kept-alive one (as kube-scheduler's
    HTTP client keeps its connection to an extender)."""
    if session is None:
        async with aiohttp.ClientSession() as own:
            return await post(live, verb, body, raw, own)
    data = raw if raw is not None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    async with session.post(f"{live.extender_url}/{verb}", data=data, headers=headers) as response:
        return response.status, json.loads(await response.text())


@pytest.mark.parametrize("mode", ["true", "false"])
async def test_filter_answers_in_kube_scheduler_wire_format(live: LiveServer, mode: str) -> None:
    await load(live, wire_case("wire-fit"))
    status, body = await post(live, "filter", wire(f"filter-request.nodeCacheCapable-{mode}.json"))
    captured = wire(f"filter-response.nodeCacheCapable-{mode}.json")
    assert status == 200
    assert list(body) == FILTER_KEYS
    assert (body["FailedNodes"], body["FailedAndUnresolvableNodes"], body["Error"]) == ({}, {}, "")
    if mode == "true":
        assert body["Nodes"] is None and body["NodeNames"] == captured["NodeNames"]
    else:
        assert body["NodeNames"] is None
        assert [n["metadata"]["name"] for n in body["Nodes"]["items"]] == [
            n["metadata"]["name"] for n in captured["Nodes"]["items"]
        ]
        assert body["Nodes"]["items"][0] == captured["Nodes"]["items"][0]


@pytest.mark.parametrize("mode", ["true", "false"])
async def test_prioritize_scales_podfit_scores_to_extender_priorities(live: LiveServer, mode: str) -> None:
    await load(live, wire_case("wire-fit"))
    request = wire(f"prioritize-request.nodeCacheCapable-{mode}.json")
    status, body = await post(live, "prioritize", request)
    assert status == 200
    assert [list(entry) for entry in body] == [["Host", "Score"]] * 3
    assert [entry["Host"] for entry in body] == ["node-a", "node-c", "node-b"]
    grpc_scores = await live.client.score(request["Pod"], node_names=["node-a", "node-b", "node-c"])
    best = grpc_scores.scores[0]
    expected = {s.node_name: s.total * 10 // best.total for s in grpc_scores.scores}
    assert {e["Host"]: e["Score"] for e in body} == expected
    assert max(e["Score"] for e in body) == 10


@pytest.mark.parametrize("mode", ["true", "false"])
async def test_preempt_keeps_the_candidates_podfit_agrees_with(live: LiveServer, mode: str) -> None:
    await load(live, wire_case("wire-preempt"))
    status, body = await post(live, "preempt", wire(f"preempt-request.nodeCacheCapable-{mode}.json"))
    assert status == 200
    assert body == wire("preempt-response.json")


async def test_preempt_drops_nodes_where_podfit_sees_no_victims(live: LiveServer) -> None:
    await load(live, wire_case("wire-preempt"))
    request = wire("preempt-request.nodeCacheCapable-true.json")
    request["NodeNameToMetaVictims"]["node-b"] = {"Pods": [{"UID": "nobody"}], "NumPDBViolations": 0}
    request["NodeNameToMetaVictims"]["ghost"] = {"Pods": [{"UID": "nobody"}], "NumPDBViolations": 0}
    _, body = await post(live, "preempt", request)
    assert sorted(body["NodeNameToMetaVictims"]) == ["node-a", "node-c"]


async def test_nodes_sent_without_node_cache_are_used_for_the_decision(live: LiveServer) -> None:
    await live.client.apply(
        [
            make_node("n1").capacity(cpu="1", memory="1Gi", pods="10").json(),
            make_pod("busy").node("n1").req(cpu="500m").json(),
        ]
    )
    pod = make_pod("p").req(cpu="1").json()
    bigger = make_node("n1").capacity(cpu="4", memory="1Gi", pods="10").json()
    _, body = await post(live, "filter", {"Pod": pod, "Nodes": {"metadata": {}, "items": [bigger]}, "NodeNames": None})
    assert [n["metadata"]["name"] for n in body["Nodes"]["items"]] == ["n1"]
    _, cached = await post(live, "filter", {"Pod": pod, "Nodes": None, "NodeNames": ["n1", "unknown"]})
    assert cached["NodeNames"] == []
    assert cached["FailedNodes"] == {"n1": "Insufficient cpu"}
    assert cached["FailedAndUnresolvableNodes"] == {"unknown": "node(s) not found in podfit's cache"}


async def test_bind_records_the_binding(live: LiveServer) -> None:
    await live.client.apply([make_node("n1").json(), make_pod("p").req(cpu="1").json()])
    args = {"PodName": "p", "PodNamespace": "default", "PodUID": "uid-default-p", "Node": "n1"}
    status, body = await post(live, "bind", args)
    assert (status, body) == (200, {"Error": ""})
    assert (await live.client.get("Pod", "p")).object.pod.spec.node_name == "n1"
    assert (await live.client.stats()).bound_pods == 1


@pytest.mark.parametrize(
    ("verb", "body", "raw", "message"),
    [
        pytest.param("filter", None, b"{nope", "not valid JSON", id="bad JSON"),
        pytest.param("filter", [], None, "must be a JSON object", id="a JSON array"),
        pytest.param("filter", None, b'{"Pod": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nests too deeply",
                     id="deeply nested JSON"),
        pytest.param("filter", {"Nodes": None, "NodeNames": []}, None, "Pod: is required", id="no pod"),
        pytest.param("prioritize", {"Pod": make_pod().json()}, None, "one of Nodes or NodeNames", id="no nodes"),
        pytest.param("filter", {"Pod": make_pod().req(cpu="lots").json(), "NodeNames": []}, None,
                     "Pod.spec.containers[0].resources.requests.cpu", id="a malformed quantity names its field"),
        pytest.param("filter", {"Pod": make_pod().json(), "Nodes": {"items": [{"metadata": {}}]}}, None,
                     "Nodes.items[0].metadata.name", id="a node without a name"),
        pytest.param("preempt", {"Pod": make_pod().json()}, None, "NodeNameToVictims", id="preempt without candidates"),
        pytest.param("bind", {"PodName": "ghost", "PodNamespace": "default", "Node": "n1"}, None,
                     "not in podfit's cache", id="binding an unknown pod"),
        pytest.param("bind", {"PodName": "p"}, None, "Node: is required", id="binding without a node"),
    ],
)  # fmt: skip
async def test_bad_input_is_http_400(live: LiveServer, verb: str, body: Any, raw: bytes | None, message: str) -> None:
    status, answer = await post(live, verb, body, raw)
    assert status == 400
    assert message in answer["Error"] and "Traceback" not in answer["Error"]


async def test_unknown_verbs_and_methods(live: LiveServer) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{live.extender_url}/unknown", data=b"{}") as response:
            assert response.status == 404
        async with session.get(f"{live.extender_url}/filter") as response:
            assert response.status == 405


def _grpc_verdicts(response: sc.FilterResponse) -> tuple[list[str], dict[str, str], dict[str, str]]:
    passing = [v.node_name for v in response.nodes if v.fits]
    failed = {v.node_name: ", ".join(v.reasons) for v in response.nodes if v.code == sc.STATUS_CODE_UNSCHEDULABLE}
    unresolvable = {
        v.node_name: ", ".join(v.reasons)
        for v in response.nodes
        if v.code == sc.STATUS_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE
    }
    return passing, failed, unresolvable


async def test_extender_verdicts_equal_the_grpc_api_on_the_public_cases(live: LiveServer) -> None:
    compared = 0
    loader = CaseLoader()
    async with aiohttp.ClientSession() as session:
        for case in load_cases(CASES):
            if case["pod"]["spec"].get("schedulingGates"):
                continue
            await load(live, case, loader)
            names = sorted(n["metadata"]["name"] for n in case["nodes"])
            asked = {"Pod": case["pod"], "Nodes": None, "NodeNames": names}
            _, body = await post(live, "filter", asked, session=session)
            expected = _grpc_verdicts(await live.client.filter(case["pod"], node_names=names))
            got = (body["NodeNames"], body["FailedNodes"], body["FailedAndUnresolvableNodes"])
            assert got == expected, case["id"]
            compared += 1
    assert compared == 420


def _decisions_looked_up(live: LiveServer) -> int:
    """Decisions computed (the decision-duration histogram's count) plus those recalled from the memo."""
    data = live.metrics.get_metrics_data()
    assert data is not None
    total = 0
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == "podfit.decision.duration":
                    total += sum(int(point.count) for point in metric.data.data_points)
                elif metric.name == "podfit.decision.memo_hits":
                    total += sum(int(point.value) for point in metric.data.data_points)
    return total


async def _expected_priorities(live: LiveServer, pod: Any, names: list[str]) -> list[dict[str, Any]]:
    """From gRPC Score, asked with the names reversed: a question of its own to the decision memo, so
    the answer is decided afresh, not recalled from what the extender's own calls remembered."""
    asked = list(reversed(names))
    scores = {s.node_name: s.total for s in (await live.client.score(pod, node_names=asked)).scores}
    top = max(scores.values())
    return [{"Host": name, "Score": scores[name] * 10 // top if top > 0 else 0} for name in names]


@pytest.mark.parametrize(
    "separators",
    [
        pytest.param((",", ":"), id="compact, as Go encodes it: the filter's own answer is sent back"),
        pytest.param((", ", ": "), id="spaced: the names are compared, not the bytes"),
    ],
)
async def test_prioritize_after_filter_is_answered_from_the_filter_call_and_equals_a_fresh_decision(
    live: LiveServer, separators: tuple[str, str]
) -> None:
    """kube-scheduler calls filter, then prioritize with the nodes filter passed: once podfit has seen a
    prioritize call, filter scores too and prioritize decides nothing, with the same answer."""
    reused = 0
    loader = CaseLoader()
    async with aiohttp.ClientSession() as session:
        for case in load_cases(CASES)[:120]:
            if case["pod"]["spec"].get("schedulingGates"):
                continue
            await load(live, case, loader)
            names = sorted(n["metadata"]["name"] for n in case["nodes"])
            asked = {"Pod": case["pod"], "Nodes": None, "NodeNames": names}
            raw = json.dumps(asked, separators=separators).encode()
            _, filtered = await post(live, "filter", None, raw, session)
            passing = filtered["NodeNames"]
            if len(passing) < 2:
                continue
            before = _decisions_looked_up(live)
            request = {"Pod": case["pod"], "Nodes": None, "NodeNames": passing}
            raw = json.dumps(request, separators=separators).encode()
            _, body = await post(live, "prioritize", None, raw, session)
            reused += _decisions_looked_up(live) == before
            assert body == await _expected_priorities(live, case["pod"], passing), case["id"]
    assert reused >= 40  # every call but the first, which taught podfit that prioritize follows filter


async def test_prioritize_decides_afresh_when_the_cluster_changed_since_filter(live: LiveServer) -> None:
    await live.client.apply([make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods="10").json() for i in (1, 2)])
    pod = make_pod("p").req(cpu="1").json()
    request = {"Pod": pod, "Nodes": None, "NodeNames": ["n1", "n2"]}
    await post(live, "prioritize", request)  # podfit learns that prioritize follows filter
    _, filtered = await post(live, "filter", request)
    assert filtered["NodeNames"] == ["n1", "n2"]
    await live.client.apply([make_pod("busy").node("n1").req(cpu="3").json()])
    _, body = await post(live, "prioritize", request)
    assert body == await _expected_priorities(live, pod, ["n1", "n2"])
    assert body[0] == {"Host": "n1", "Score": body[0]["Score"]} and body[0]["Score"] < body[1]["Score"] == 10


async def test_prioritize_with_full_nodes_reuses_filter_only_for_the_same_node_objects(live: LiveServer) -> None:
    await live.client.apply([make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods="10").json() for i in (1, 2)])
    await live.client.apply([make_pod("busy").node("n1").req(cpu="2").json()])
    pod = make_pod("p").req(cpu="1").json()
    nodes = [make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods="10").json() for i in (1, 2)]
    for i, node in enumerate(nodes):
        node["metadata"].update(uid=f"uid-{i}", resourceVersion="7")
    request = {"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}
    await post(live, "prioritize", request)
    await post(live, "filter", request)
    before = _decisions_looked_up(live)
    _, same = await post(live, "prioritize", request)
    assert _decisions_looked_up(live) == before
    await post(live, "filter", request)
    # n2 changed between the calls (a new resourceVersion): the filter's scores do not apply to it.
    changed = json.loads(json.dumps(request))
    changed["Nodes"]["items"][1]["metadata"]["resourceVersion"] = "8"
    changed["Nodes"]["items"][1]["status"]["allocatable"]["cpu"] = "64"
    before = _decisions_looked_up(live)
    _, fresh = await post(live, "prioritize", changed)
    assert _decisions_looked_up(live) == before + 1
    assert same == [{"Host": "n1", "Score": 9}, {"Host": "n2", "Score": 10}]
    assert [e["Host"] for e in fresh] == ["n1", "n2"] and fresh[1]["Score"] == 10


async def test_prioritize_decides_again_when_the_scoring_after_filter_failed(
    live: LiveServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Filter answers first and scores afterwards: a failure there costs prioritize a decision, never
    its answer."""
    await live.client.apply([make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods="10").json() for i in (1, 2)])
    await live.client.apply([make_pod("busy").node("n1").req(cpu="2").json()])
    pod = make_pod("p").req(cpu="1").json()
    request = {"Pod": pod, "Nodes": None, "NodeNames": ["n1", "n2"]}
    other = make_pod("other").req(cpu="2").json()  # not the pod asked about next, which the memo would hold
    await post(live, "prioritize", {**request, "Pod": other})  # podfit learns that prioritize follows filter
    score = SchedulingCycle.score
    failures: list[int] = []

    def fails_once(self: SchedulingCycle, *args: Any) -> Any:
        if not failures:
            failures.append(1)
            raise RuntimeError("scoring broke")
        return score(self, *args)

    monkeypatch.setattr(SchedulingCycle, "score", fails_once)
    _, filtered = await post(live, "filter", request)
    assert filtered["NodeNames"] == ["n1", "n2"]
    status, body = await post(live, "prioritize", request)
    assert failures == [1] and status == 200
    assert (
        body
        == await _expected_priorities(live, pod, ["n1", "n2"])
        == [
            {"Host": "n1", "Score": body[0]["Score"]},
            {"Host": "n2", "Score": 10},
        ]
    )
    assert "scoring after filter failed" in caplog.text


async def test_filters_in_flight_together_each_get_their_own_scores(live: LiveServer) -> None:
    """More filters at once than podfit keeps rounds for: each prioritize still answers for its own pod
    (from its filter's scores, or decided again once that round was dropped), never another pod's."""
    await live.client.apply([make_node(f"n{i}").capacity(cpu="8", memory="16Gi", pods="20").json() for i in range(3)])
    names = ["n0", "n1", "n2"]
    pods = [make_pod(f"p{k}").req(cpu="100m").json() for k in range(24)]
    for k, pod in enumerate(pods):  # each pod prefers a node of its own: their priorities differ
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [names[k % 3]]}]}
        preferred = [{"weight": 100, "preference": term}]
        pod["spec"]["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
    expected = [await _expected_priorities(live, pod, names) for pod in pods]
    await post(live, "prioritize", {"Pod": pods[0], "Nodes": None, "NodeNames": names})
    filtered = await asyncio.gather(
        *(post(live, "filter", {"Pod": pod, "Nodes": None, "NodeNames": names}) for pod in pods)
    )
    assert all(body["NodeNames"] == names for _, body in filtered)
    before = _decisions_looked_up(live)
    for pod, answer in zip(pods, expected, strict=True):
        status, body = await post(live, "prioritize", {"Pod": pod, "Nodes": None, "NodeNames": names})
        assert status == 200 and body == answer
    # The last MAX_ROUNDS filters' rounds answer their prioritize; each other one looks its pod up again.
    assert _decisions_looked_up(live) - before == len(pods) - MAX_ROUNDS
