"""The kube-scheduler version through a real server: per request, per profile, in answers and Stats."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import grpc
import pytest
from podfit.client import PodfitError
from podfit.server.config import ConfigError
from podfit.server.settings import Settings, SettingsError
from podfit.v1 import scheduler_pb2 as sc
from podfit.v1 import simulation_pb2 as sim

from tests.builders import make_node, make_pod
from tests.conftest import LiveServer, start_live_server

# VERSIONS.md's example (doc-insufficient-cpu, node a): an empty 2-CPU, 8 GiB node and a pod asking
# 1000m / 100 MiB. Balance with the pod 75, without 100: v1.35 scores 75, v1.36 and v1.37
# 50 + (50 + 75 - 100) / 2.
BALANCED = {"v1.35.4": 75, "v1.36.3": 62, "v1.37.2": 62}


def cluster() -> list[dict[str, Any]]:
    return [
        make_node("a").capacity(cpu="2", memory="8Gi", pods="110").json(),
        make_node("b").capacity(cpu="1", memory="8Gi", pods="110").json(),
    ]


def pod() -> dict[str, Any]:
    return make_pod("p").req(cpu="1", memory="100Mi").json()


def plugin_scores(response: sc.ScheduleResponse | sc.ScoreResponse, node: str) -> dict[str, int]:
    (score,) = [s for s in response.scores if s.node_name == node]
    return {p.plugin: p.score for p in score.plugins}


@pytest.mark.parametrize(
    ("asked", "release"),
    [
        pytest.param("", "v1.37.2", id="no version: the server default, v1.37"),
        pytest.param("v1.35", "v1.35.4", id="v1.35"),
        pytest.param("v1.35.4", "v1.35.4", id="a v1.35 patch release"),
        pytest.param("v1.36", "v1.36.3", id="v1.36"),
        pytest.param("v1.36.0", "v1.36.3", id="another v1.36 patch answers as v1.36.3"),
        pytest.param("1.37", "v1.37.2", id="without the v"),
        pytest.param("v1.37.0", "v1.37.2", id="another v1.37 patch answers as v1.37.2"),
    ],
)
async def test_each_request_answers_as_the_version_it_names(live: LiveServer, asked: str, release: str) -> None:
    await live.client.apply(cluster())
    scheduled = await live.client.schedule(pod(), kube_scheduler_version=asked)
    scored = await live.client.score(pod(), kube_scheduler_version=asked)
    filtered = await live.client.filter(pod(), kube_scheduler_version=asked)
    preempted = await live.client.preempt(pod(), kube_scheduler_version=asked)
    for response in (scheduled, scored, filtered, preempted):
        assert response.kube_scheduler_version == release
    for response in (scheduled, scored):
        plugins = plugin_scores(response, "a")
        assert plugins["NodeResourcesBalancedAllocation"] == BALANCED[release]
        # VolumeBinding scores (0 for a pod without volumes) only where StorageCapacityScoring is on.
        assert ("VolumeBinding" in plugins) is (release == "v1.37.2")


async def test_what_if_calls_answer_as_the_version_they_name(live: LiveServer) -> None:
    await live.client.apply(cluster())
    for asked, release in (("", "v1.37.2"), ("v1.35", "v1.35.4"), ("v1.36.3", "v1.36.3")):
        request = sim.SimulateRequest(kube_scheduler_version=asked)
        simulated = await live.client._call(live.client.simulation.Simulate, request, 5)
        assert simulated.kube_scheduler_version == release
        batch = await live.client.schedule_batch([pod()], kube_scheduler_version=asked)
        assert batch.kube_scheduler_version == release
        assert batch.results[0].kube_scheduler_version == release
        # The batch assumed the pod: remove it for the next round.
        await live.client.replace("Pod", [])


@pytest.mark.parametrize(
    ("method", "request_message"),
    [
        pytest.param("Filter", sc.FilterRequest(kube_scheduler_version="v1.38"), id="Filter"),
        pytest.param("Schedule", sc.ScheduleRequest(kube_scheduler_version="v2"), id="Schedule"),
        pytest.param("Preempt", sc.PreemptRequest(kube_scheduler_version="latest"), id="Preempt"),
        pytest.param("Simulate", sim.SimulateRequest(kube_scheduler_version="v1.34"), id="Simulate"),
    ],
)
async def test_an_unsupported_version_is_invalid_argument_listing_the_supported(
    live: LiveServer, method: str, request_message: Any
) -> None:
    await live.client.apply(cluster())
    if method != "Simulate":
        request_message.pod.CopyFrom(sc.PodReference(kubernetes_json=json.dumps(pod()).encode()))
    stub = live.client.simulation if method == "Simulate" else live.client.scheduler
    with pytest.raises(PodfitError) as info:
        await live.client._call(getattr(stub, method), request_message, 5)
    assert info.value.code is grpc.StatusCode.INVALID_ARGUMENT
    field, description = info.value.field_violations[0]
    assert field == "kube_scheduler_version"
    assert "supported: v1.35 (v1.35.4), v1.36 (v1.36.3), v1.37 (v1.37.2)" in description


async def test_stats_says_which_versions_answer(live: LiveServer) -> None:
    stats = await live.client.stats()
    assert stats.kube_scheduler_version == "v1.37.2"
    assert list(stats.supported_kube_scheduler_versions) == ["v1.35.4", "v1.36.3", "v1.37.2"]
    assert dict(stats.profile_versions) == {"default-scheduler": "v1.37.2"}


async def test_a_profile_configured_for_v135_answers_as_v135_unless_asked_otherwise() -> None:
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "default-scheduler"}, {"schedulerName": "legacy"}, {"schedulerName": "current"}],
    }
    settings = Settings(scheduler_configuration=document, profile_versions={"legacy": "v1.35", "current": "v1.36"})
    server = await start_live_server(settings)
    try:
        await server.client.apply(cluster())
        legacy = await server.client.schedule(pod(), scheduler_name="legacy")
        current = await server.client.schedule(pod())
        asked = await server.client.schedule(pod(), scheduler_name="legacy", kube_scheduler_version="v1.37")
        assert (legacy.kube_scheduler_version, current.kube_scheduler_version) == ("v1.35.4", "v1.37.2")
        assert asked.kube_scheduler_version == "v1.37.2"
        assert plugin_scores(legacy, "a")["NodeResourcesBalancedAllocation"] == BALANCED["v1.35.4"]
        assert plugin_scores(asked, "a")["NodeResourcesBalancedAllocation"] == BALANCED["v1.37.2"]
        stats = await server.client.stats()
        assert dict(stats.profile_versions) == {
            "default-scheduler": "v1.37.2",
            "legacy": "v1.35.4",
            "current": "v1.36.3",
        }
        current_profile = await server.client.schedule(pod(), scheduler_name="current")
        assert current_profile.kube_scheduler_version == "v1.36.3"
        assert plugin_scores(current_profile, "a")["NodeResourcesBalancedAllocation"] == BALANCED["v1.36.3"]
    finally:
        await server.client.close()
        await server.running.stop(0)


@pytest.mark.parametrize(
    ("version", "node_name_text", "priorities"),
    [
        pytest.param("v1.35", "node(s) didn't match the requested node name", {"a": 10, "b": 8},
                     id="v1.35: NodeName rejects at Filter; balance with the pod"),
        pytest.param("v1.36", "node(s) didn't match the requested node name", {"a": 10, "b": 9},
                     id="v1.36: NodeName rejects at Filter as v1.35; BalancedAllocation scores as v1.37"),
        pytest.param("v1.37", "node(s) didn't satisfy plugin(s) [NodeName]", {"a": 10, "b": 9},
                     id="v1.37: NodeName restricts at PreFilter; the pod's effect on balance"),
    ],
)  # fmt: skip
async def test_the_extender_answers_as_the_servers_version(
    version: str, node_name_text: str, priorities: dict[str, int]
) -> None:
    """The extender's wire format names no version: it answers as the configured one."""
    server = await start_live_server(Settings(kube_scheduler_version=version))
    try:
        await server.client.apply(cluster())
        pinned = make_pod("pinned").node("a").req(cpu="1", memory="100Mi").json()
        async with aiohttp.ClientSession() as session:
            for verb, body in (("filter", pinned), ("prioritize", pod())):
                request = json.dumps({"Pod": body, "NodeNames": ["a", "b"]}).encode()
                headers = {"Content-Type": "application/json"}
                async with session.post(f"{server.extender_url}/{verb}", data=request, headers=headers) as response:
                    assert response.status == 200
                    answer = json.loads(await response.text())
                if verb == "filter":
                    assert answer["FailedAndUnresolvableNodes"] == {"b": node_name_text}
                else:
                    assert {entry["Host"]: entry["Score"] for entry in answer} == priorities
    finally:
        await server.client.close()
        await server.running.stop(0)


async def test_the_server_default_version_and_gates_are_settings() -> None:
    server = await start_live_server(
        Settings(kube_scheduler_version="v1.35", feature_gates="StorageCapacityScoring=true")
    )
    try:
        await server.client.apply(cluster())
        response = await server.client.schedule(pod())
        assert response.kube_scheduler_version == "v1.35.4"
        plugins = plugin_scores(response, "a")
        assert plugins["NodeResourcesBalancedAllocation"] == BALANCED["v1.35.4"]
        assert plugins["VolumeBinding"] == 0  # the gate turned v1.35's VolumeBinding scoring on
    finally:
        await server.client.close()
        await server.running.stop(0)


def restart_all_pod() -> dict[str, Any]:
    """A pod NodeDeclaredFeatures checks (RestartAllContainers needs a declared node feature, which no node of
    ``cluster()`` declares): it fits no node where the plugin runs, and both where it does not."""
    pod = make_pod("p")
    pod.spec["containers"] = [{"name": "c", "restartPolicyRules": [{"action": "RestartAllContainers"}]}]
    return pod.json()


@pytest.mark.parametrize(
    ("version", "gates", "asked", "answer"),
    [
        pytest.param("v1.36", "NodeDeclaredFeatures=false", "", "v1.36.3",
                     id="v1.36 server, gate off: starts and answers without the plugin"),
        pytest.param("v1.36", "NodeDeclaredFeatures=false", "v1.35", "v1.35.4",
                     id="v1.36 server, gate off: a request asking for v1.35 answers (the gate's alpha default)"),
        pytest.param("v1.36", "NodeDeclaredFeatures=false", "v1.37",
                     "cannot answer as v1.37.2: featureGates.NodeDeclaredFeatures: cannot set feature gate "
                     "NodeDeclaredFeatures to false, feature is locked to true in v1.37.2",
                     id="v1.36 server, gate off: a request asking for v1.37 is INVALID_ARGUMENT naming the gate"),
        pytest.param("v1.37", "NodeDeclaredFeatures=false", "", "featureGates.NodeDeclaredFeatures: cannot set "
                     "feature gate NodeDeclaredFeatures to false, feature is locked to true in v1.37.2",
                     id="v1.37 server, gate off: refused at start (locked in v1.37)"),
        pytest.param("v1.36", "NoSuchGate=true", "", "featureGates.NoSuchGate: unrecognized feature gate: NoSuchGate",
                     id="an unknown gate: refused at start"),
        pytest.param("v1.37", "CSIMigrationPortworx=false", "", "featureGates.CSIMigrationPortworx: unrecognized "
                     "feature gate: CSIMigrationPortworx (kube-scheduler v1.37.2 does not have it; it exists only in "
                     "v1.35.4)", id="v1.37 server, a gate only v1.35 has: refused at start"),
        pytest.param("v1.35", "DRAOptionalNodeOperations=false", "", "featureGates.DRAOptionalNodeOperations: "
                     "unrecognized feature gate: DRAOptionalNodeOperations (kube-scheduler v1.35.4 does not have it; "
                     "it exists only in v1.37.2)", id="v1.35 server, a gate only v1.37 has: refused at start"),
        pytest.param("v1.35", "CSIMigrationPortworx=true", "", "v1.35.4",
                     id="v1.35 server, a gate only v1.35 has: starts and answers"),
        pytest.param("v1.35", "CSIMigrationPortworx=true", "v1.37", "cannot answer as v1.37.2: featureGates."
                     "CSIMigrationPortworx: unrecognized feature gate: CSIMigrationPortworx (kube-scheduler v1.37.2",
                     id="v1.35 server, a gate only v1.35 has: a request asking for v1.37 is INVALID_ARGUMENT"),
        pytest.param("v1.35", "GenericWorkload=false,StorageCapacityScoring=true", "v1.37", "v1.37.2",
                     id="v1.35 server, gates v1.35 and v1.37 both have: a request asking for v1.37 answers"),
    ],
)  # fmt: skip
async def test_feature_gates_are_checked_against_the_version_that_answers(
    version: str, gates: str, asked: str, answer: str
) -> None:
    """A gate locked only in another version is settable, as kube-scheduler of the server's version takes it,
    and one its version's registry lacks is refused; ``answer``: the release that answers, or the start (or
    request) refusal's text."""
    settings = Settings(kube_scheduler_version=version, feature_gates=gates)
    if not answer.startswith(("v1.", "cannot answer")):
        with pytest.raises((ConfigError, SettingsError)) as refused:
            await start_live_server(settings)
        assert str(refused.value).startswith(answer)
        return
    server = await start_live_server(settings)
    try:
        await server.client.apply(cluster())
        if answer.startswith("cannot answer"):
            with pytest.raises(PodfitError) as info:
                await server.client.filter(restart_all_pod(), kube_scheduler_version=asked)
            assert info.value.code is grpc.StatusCode.INVALID_ARGUMENT
            field, description = info.value.field_violations[0]
            assert field == "kube_scheduler_version"
            assert description.startswith(answer)
            return
        filtered = await server.client.filter(restart_all_pod(), kube_scheduler_version=asked)
        assert filtered.kube_scheduler_version == answer
        if "NodeDeclaredFeatures=false" in gates:
            assert filtered.feasible_count == 2
            assert all(verdict.plugin != "NodeDeclaredFeatures" for verdict in filtered.nodes)
    finally:
        await server.client.close()
        await server.running.stop(0)
