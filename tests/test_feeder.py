"""``podfit feed`` against the list/watch test double (tests/fake_apiserver.py) through the real ``kubernetes``
client, feeding a real podfit server in-process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import grpc
import kubernetes
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from podfit.client import AsyncClient, PodfitError
from podfit.client import cli as podfit_cli
from podfit.feed import ALL_KINDS, Backoff, Feeder, select_kinds
from podfit.feed.command import load_api_client
from podfit.server.app import RunningServer, create_server
from podfit.server.settings import Settings
from podfit.v1 import cluster_cache_pb2 as cc

from tests.builders import make_node, make_pod
from tests.fake_apiserver import FakeApiServer

ROOT = Path(__file__).resolve().parents[1]
FAST = Backoff(initial=0.05, maximum=0.4)


# -- objects ---------------------------------------------------------------------------------------


def node(name: str, cpu: str = "4") -> dict[str, Any]:
    return make_node(name).capacity(cpu=cpu, memory="8Gi", pods="20").json()


def pod(name: str, node_name: str = "", phase: str = "Pending", cpu: str = "1", namespace: str = "default") -> dict:
    builder = make_pod(name, namespace).req(cpu=cpu)
    if node_name:
        builder = builder.node(node_name)
    data = builder.json()
    data["metadata"].pop("uid", None)
    data["status"] = {"phase": phase}
    return data


def one_of_each() -> dict[str, dict[str, Any]]:
    """An object of every kind podfit holds."""
    selector = {"matchLabels": {"app": "web"}}
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    return {
        "Namespace": {"metadata": {"name": "default", "labels": {"team": "a"}}},
        "Node": node("n1"),
        "Pod": pod("web-1", "n1"),
        "Service": {"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}}},
        "ReplicationController": {"metadata": {"name": "rc"}, "spec": {"selector": {"app": "web"}, "replicas": 1}},
        "PodDisruptionBudget": {"metadata": {"name": "pdb"}, "spec": {"selector": selector, "minAvailable": 1}},
        "ReplicaSet": {"metadata": {"name": "rs"}, "spec": {"selector": selector, "template": template}},
        "StatefulSet": {"metadata": {"name": "sts"}, "spec": {"selector": selector, "template": template}},
        "DaemonSet": {"metadata": {"name": "ds"}, "spec": {"selector": selector, "template": template}},
        "Job": {"metadata": {"name": "job"}, "spec": {"template": template}},
    }


# -- fixtures --------------------------------------------------------------------------------------


async def start_podfit(port: int = 0, **settings: Any) -> RunningServer:
    return await create_server(Settings(**settings), addr=f"127.0.0.1:{port}", extender_addr="off")


@pytest.fixture
async def fake() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as server:
        yield server


@pytest.fixture
def kubeconfig(fake: FakeApiServer, tmp_path: Path) -> Path:
    return fake.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def api(kubeconfig: Path) -> Iterable[Any]:
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
    yield client
    client.close()


class RecordingClient(AsyncClient):
    """Keeps every StreamRequest the feeder sends."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.sent: list[cc.StreamRequest] = []

    async def stream(self, batches: Any) -> AsyncIterator[cc.StreamResponse]:
        async def tee() -> AsyncIterator[cc.StreamRequest]:
            async for batch in batches:
                self.sent.append(batch)
                yield batch

        async for response in super().stream(tee()):
            yield response

    def sent_updates(self) -> list[tuple[str, str, str]]:
        """(upsert|delete, name, resourceVersion) of every update sent, in order."""
        result = []
        for request in self.sent:
            for update in request.updates:
                if update.HasField("delete"):
                    result.append(("delete", update.delete.name, update.delete.resource_version))
                else:
                    which = update.upsert.WhichOneof("object")
                    meta = getattr(update.upsert, which).metadata
                    result.append(("upsert", meta.name, meta.resource_version))
        return result


class Harness:
    def __init__(self, fake: FakeApiServer, api: Any) -> None:
        self.fake = fake
        self.api = api
        self.podfit: RunningServer | None = None
        self.client: RecordingClient | None = None
        self.feeder: Feeder | None = None
        self.task: asyncio.Task[None] | None = None
        self.reader = InMemoryMetricReader()

    async def start_podfit(self, port: int = 0, **settings: Any) -> RecordingClient:
        self.podfit = await start_podfit(port, **settings)
        if self.client is None:
            self.client = RecordingClient(f"127.0.0.1:{self.podfit.port}")
        return self.client

    def make_feeder(self, **options: Any) -> Feeder:
        assert self.client is not None
        defaults: dict[str, Any] = {
            "backoff": FAST,
            "watch_timeout_seconds": 60,
            "stats_interval_seconds": 0.3,
            "log_interval_seconds": 0,
            "meter_provider": MeterProvider(metric_readers=[self.reader]),
        }
        self.feeder = Feeder(self.client, self.api, **{**defaults, **options})
        return self.feeder

    async def run(self, **options: Any) -> Feeder:
        feeder = self.make_feeder(**options)
        self.task = asyncio.create_task(feeder.run())
        await asyncio.wait_for(feeder.wait_synced(), 10)
        await eventually(lambda: self.fake.open_watches() == len(feeder.kinds), "every kind watched")
        return feeder

    async def close(self) -> None:
        task, client, podfit = self.task, self.client, self.podfit
        self.task = self.client = self.podfit = None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if client is not None:
            await client.close()
        if podfit is not None:
            await podfit.stop(0)

    def metric_points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        points: list[Any] = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points


@pytest.fixture
async def harness(fake: FakeApiServer, api: Any) -> AsyncIterator[Harness]:
    h = Harness(fake, api)
    yield h
    await h.close()


async def eventually(check: Callable[[], bool | Awaitable[bool]], what: str, timeout: float = 8.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        await asyncio.sleep(0.02)


async def pod_names(client: AsyncClient) -> dict[str, str]:
    """name -> nodeName of the cached pods."""
    listed = await client.list("Pod")
    return {o.pod.metadata.name: o.pod.spec.node_name for o in listed.objects}


def has_pods(client: AsyncClient, expected: dict[str, str]) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await pod_names(client) == expected

    return check


# -- the initial sync ------------------------------------------------------------------------------


async def test_initial_sync_replaces_every_kind_and_marks_synced(harness: Harness, fake: FakeApiServer) -> None:
    for kind, obj in one_of_each().items():
        fake.add(kind, obj)
    fake.add("Pod", pod("done", "n1", phase="Succeeded"))
    fake.add("Pod", pod("crashed", "n1", phase="Failed"))
    for i in range(2, 8):  # more nodes than a page
        fake.add("Node", node(f"n{i}"))
    client = await harness.start_podfit()
    await client.apply([pod("stale-leftover", "n1")])  # gone after the Replace of pods
    feeder = harness.make_feeder(page_size=3)

    versions = await feeder.sync_once()

    assert set(versions) == {k.kind for k in ALL_KINDS}
    assert all(v.isdigit() for v in versions.values())
    stats = await client.stats()
    counts = {
        "nodes": 7,
        "pods": 1,
        "namespaces": 1,
        "pod_disruption_budgets": 1,
        "services": 1,
        "replica_sets": 1,
        "stateful_sets": 1,
        "replication_controllers": 1,
        "jobs": 1,
        "daemon_sets": 1,
    }
    assert {name: getattr(stats, name) for name in counts} == counts
    assert await pod_names(client) == {"web-1": "n1"}
    assert stats.synced and stats.server_epoch == feeder.epoch != ""
    assert feeder.stats.synced and feeder.stats.server_epoch == feeder.epoch
    # Paginated lists, and finished pods filtered by the API server.
    node_lists = [q for p, q in fake.requests if p == "/api/v1/nodes"]
    assert [q.get("limit") for q in node_lists] == ["3"] * 3 and "continue" in node_lists[1]
    pod_list = next(q for p, q in fake.requests if p == "/api/v1/pods")
    assert pod_list["fieldSelector"] == "status.phase!=Succeeded,status.phase!=Failed"
    # A decision works on what was fed.
    decision = await client.schedule(pod("new", cpu="2"))
    assert decision.selected_node.startswith("n")


async def test_decisions_fail_until_the_feeder_synced(harness: Harness, fake: FakeApiServer) -> None:
    fake.add("Node", node("n1"))
    client = await harness.start_podfit(wait_for_sync=True)
    with pytest.raises(PodfitError) as refused:
        await client.schedule(pod("new"))
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert refused.value.reason == "CACHE_NOT_SYNCED"
    assert not (await client.stats()).synced

    await harness.make_feeder().sync_once()

    assert (await client.schedule(pod("new"))).selected_node == "n1"


async def test_namespace_and_label_scoping(harness: Harness, fake: FakeApiServer) -> None:
    fake.add("Namespace", {"metadata": {"name": "team-a"}})
    fake.add("Namespace", {"metadata": {"name": "team-b"}})
    fake.add("Node", node("n1"))
    a1 = pod("a1", "n1", namespace="team-a")
    a1["metadata"]["labels"] = {"feed": "yes"}
    fake.add("Pod", a1)
    fake.add("Pod", pod("a2", "n1", namespace="team-a"))
    fake.add("Pod", pod("b1", "n1", namespace="team-b"))
    client = await harness.start_podfit()

    await harness.make_feeder(namespace="team-a", label_selector="feed=yes").sync_once()

    assert await pod_names(client) == {"a1": "n1"}
    assert [o.namespace.metadata.name for o in (await client.list("Namespace")).objects] == ["team-a"]
    assert (await client.stats()).nodes == 1
    paths = {p for p, _ in fake.requests}
    assert "/api/v1/namespaces/team-a/pods" in paths and "/api/v1/pods" not in paths


# -- following the watch ---------------------------------------------------------------------------


async def test_events_reach_podfit_in_order(harness: Harness, fake: FakeApiServer) -> None:
    fake.add("Node", node("n1"))
    fake.add("Pod", pod("old", "n1"))
    client = await harness.start_podfit()
    feeder = await harness.run()
    client.sent.clear()

    written = [
        fake.add("Pod", pod("web")),  # pending...
        fake.modify("Pod", pod("web", "n1", phase="Running")),  # ...then bound
        fake.add("Pod", pod("tmp")),
        fake.delete("Pod", "tmp"),
        fake.modify("Pod", pod("old", "n1", phase="Succeeded")),  # finished: DELETED by the field selector
        fake.add("Pod", pod("failed-at-once", "n1", phase="Failed")),  # never matches: never sent
    ]
    for i in range(20):
        labelled = pod("web", "n1", phase="Running")
        labelled["metadata"]["labels"] = {"step": str(i)}
        written.append(fake.modify("Pod", labelled))
    fake.add("Node", node("n2"))
    fake.delete("Node", "n1")

    await eventually(has_pods(client, {"web": "n1"}), "pods fed")
    await eventually(lambda: feeder.stats.pending == 0, "every event acknowledged")
    assert [o.node.metadata.name for o in (await client.list("Node")).objects] == ["n2"]
    web = (await client.get("Pod", "web")).object.pod
    assert (
        web.metadata.labels["step"] == "19"
        and web.metadata.resource_version == written[-1]["metadata"]["resourceVersion"]
    )
    pod_updates = [u for u in client.sent_updates() if u[1] != "n1" and u[1] != "n2"]
    rv = [w["metadata"]["resourceVersion"] for w in written]
    expected = [
        ("upsert", "web", rv[0]),
        ("upsert", "web", rv[1]),
        ("upsert", "tmp", rv[2]),
        ("delete", "tmp", rv[3]),
        ("delete", "old", rv[4]),
        *(("upsert", "web", v) for v in rv[6:]),
    ]
    assert pod_updates == expected
    assert feeder.stats.events == len(client.sent_updates())
    lag = harness.metric_points("podfit.feeder.lag_seconds")
    assert lag and sum(p.count for p in lag) == feeder.stats.events
    assert sum(p.value for p in harness.metric_points("podfit.feeder.events")) == feeder.stats.events


async def test_a_bookmark_moves_the_resume_point_only(harness: Harness, fake: FakeApiServer) -> None:
    fake.add("Node", node("n1"))
    client = await harness.start_podfit()
    feeder = await harness.run()
    sent_before = len(client.sent_updates())
    fake.add("Service", {"metadata": {"name": "svc"}})  # moves the global resourceVersion
    assert fake.bookmark("Pod") == 1
    await eventually(lambda: len(client.sent_updates()) == sent_before + 1, "the service fed")
    await eventually(lambda: feeder.resource_versions["Pod"] == str(fake.rv), "the bookmark seen")
    fake.drop_watches("Pod")
    await eventually(lambda: len(fake.watch_requests("Pod")) == 2, "pods re-watched")
    assert fake.watch_requests("Pod")[-1]["resourceVersion"] == str(fake.rv)
    assert fake.watch_requests("Pod")[-1]["allowWatchBookmarks"] in ("true", "True")
    assert len(client.sent_updates()) == sent_before + 1 and feeder.stats.relists == 0


async def test_a_dropped_watch_resumes_with_backoff_and_loses_nothing(harness: Harness, fake: FakeApiServer) -> None:
    fake.add("Node", node("n1"))
    client = await harness.start_podfit()
    feeder = await harness.run(backoff=Backoff(initial=0.3, maximum=1.0, jitter=0.0))
    fake.add("Pod", pod("before", "n1"))
    await eventually(has_pods(client, {"before": "n1"}), "first pod")
    resume_from = str(fake.rv)

    dropped_at = time.monotonic()
    assert fake.drop_watches() == len(feeder.kinds)
    fake.add("Pod", pod("during", "n1"))  # written while nobody watches
    fake.delete("Pod", "before")

    await eventually(has_pods(client, {"during": "n1"}), "events written during the outage")
    assert time.monotonic() - dropped_at >= 0.3  # the first retry waited its backoff
    rewatch = fake.watch_requests("Pod")[-1]
    assert rewatch["resourceVersion"] == resume_from
    assert feeder.stats.reconnects >= len(feeder.kinds) and feeder.stats.relists == 0
    # Dropped again right away: the next wait is longer, then everything goes on.
    await eventually(lambda: fake.open_watches("Pod") == 1, "pods watched again")
    fake.drop_watches("Pod")
    fake.add("Pod", pod("after", "n1"))
    await eventually(has_pods(client, {"during": "n1", "after": "n1"}), "events after the second drop")


async def test_a_watch_ended_by_its_timeout_is_reopened_at_once(harness: Harness, fake: FakeApiServer) -> None:
    client = await harness.start_podfit()
    feeder = await harness.run(watch_timeout_seconds=1)
    await eventually(lambda: len(fake.watch_requests("Node")) >= 2, "nodes re-watched after the timeout", 5)
    assert 1 <= int(fake.watch_requests("Node")[0]["timeoutSeconds"]) < 2
    fake.add("Node", node("n9"))
    await eventually(lambda: len(client.sent_updates()) == 1, "a node fed")
    assert feeder.stats.reconnects == 0


@pytest.mark.parametrize("how", ["error-event", "http-410", "injected-410"])
async def test_gone_relists_and_replaces_the_kind(harness: Harness, fake: FakeApiServer, how: str) -> None:
    fake.gone_as_http = how == "http-410"
    fake.add("Node", node("n1"))
    fake.add("Pod", pod("kept", "n1"))
    fake.add("Pod", pod("removed", "n1"))
    client = await harness.start_podfit()
    feeder = await harness.run()
    await eventually(has_pods(client, {"kept": "n1", "removed": "n1"}), "initial pods")
    lists_before = sum(1 for p, q in fake.requests if p == "/api/v1/pods" and "watch" not in q)

    if how == "injected-410":
        fake.fail_next_watch("Pod", 410)
        fake.drop_watches("Pod")
        fake.add("Pod", pod("added", "n1"))
        fake.delete("Pod", "removed")
    else:
        # The watch is cut before these events reach it, then the history is compacted past them.
        fake.drop_watches("Pod")
        fake.add("Pod", pod("added", "n1"))
        fake.delete("Pod", "removed")
        fake.compact("Pod")

    await eventually(lambda: feeder.stats.relists == 1, "a relist")
    await eventually(has_pods(client, {"kept": "n1", "added": "n1"}), "pods relisted")
    assert sum(1 for p, q in fake.requests if p == "/api/v1/pods" and "watch" not in q) == lists_before + 1
    # Watching again from the relist's resourceVersion, and following.
    await eventually(lambda: fake.open_watches("Pod") == 1, "pods watched again")
    fake.add("Pod", pod("later", "n1"))
    await eventually(has_pods(client, {"kept": "n1", "added": "n1", "later": "n1"}), "events after the relist")
    assert harness.metric_points("podfit.feeder.relists")[0].value == 1


async def test_a_refused_update_is_dropped_and_the_feed_goes_on(harness: Harness, fake: FakeApiServer) -> None:
    fake.add("Node", node("n1"))
    fake.add("Pod", pod("gated"))
    client = await harness.start_podfit()
    feeder = await harness.run()
    await eventually(has_pods(client, {"gated": ""}), "initial pod")

    invalid = pod("gated")
    invalid["spec"]["schedulingGates"] = [{"name": "example.com/late"}]  # podfit refuses adding a gate
    fake.modify("Pod", invalid)
    fake.add("Pod", pod("next", "n1"))  # most likely in the same batch: resent without the refused update

    await eventually(has_pods(client, {"gated": "", "next": "n1"}), "the feed went on")
    assert feeder.stats.refused_updates == 1
    await eventually(lambda: feeder.stats.pending == 0, "nothing left pending")


# -- podfit restarts -------------------------------------------------------------------------------


async def test_a_restarted_podfit_is_noticed_by_its_epoch_and_resynced(harness: Harness, fake: FakeApiServer) -> None:
    for kind, obj in one_of_each().items():
        fake.add(kind, obj)
    client = await harness.start_podfit(wait_for_sync=True)
    feeder = await harness.run()
    first_epoch = feeder.epoch
    assert harness.podfit is not None
    port = harness.podfit.port

    await harness.podfit.stop(0)
    fake.add("Pod", pod("while-down", "n1"))  # happens while podfit is away
    await eventually(lambda: feeder.stats.reconnects >= 1, "the feeder saw the stream end")
    await asyncio.sleep(0.3)  # the feeder retries while nobody answers
    harness.podfit = await start_podfit(port, wait_for_sync=True)

    await eventually(lambda: feeder.stats.resyncs == 1, "a resync", 15)
    await asyncio.wait_for(feeder.wait_synced(), 10)
    stats = await client.stats()
    assert stats.server_epoch == feeder.epoch != first_epoch
    assert stats.synced and stats.nodes == 1 and stats.services == 1 and stats.jobs == 1
    assert await pod_names(client) == {"web-1": "n1", "while-down": "n1"}
    assert (await client.schedule(pod("new"))).selected_node == "n1"
    # And the feed goes on against the new server.
    fake.delete("Pod", "while-down")
    await eventually(has_pods(client, {"web-1": "n1"}), "events after the resync")


async def test_an_idle_feeder_notices_a_restart_through_stats(harness: Harness, fake: FakeApiServer) -> None:
    fake.add("Node", node("n1"))
    await harness.start_podfit()
    feeder = await harness.run()
    first_epoch = feeder.epoch
    assert harness.podfit is not None
    # Another process answering on the same address with an empty cache (the stream is not cut here:
    # only the Stats poll can tell).
    other = await start_podfit()
    other_client = AsyncClient(f"127.0.0.1:{other.port}")
    try:
        feeder.client = other_client
        await eventually(lambda: feeder.stats.resyncs == 1, "a resync from Stats")
        await asyncio.wait_for(feeder.wait_synced(), 10)
        assert feeder.epoch != first_epoch and (await other_client.stats()).nodes == 1
    finally:
        await harness.close()
        await other_client.close()
        await other.stop(0)


# -- the command -----------------------------------------------------------------------------------


async def test_the_feed_command_runs_until_sigterm(fake: FakeApiServer, kubeconfig: Path, tmp_path: Path) -> None:
    fake.add("Node", node("n1"))
    fake.add("Pod", pod("web", "n1"))
    podfit = await start_podfit(wait_for_sync=True)
    client = AsyncClient(f"127.0.0.1:{podfit.port}")
    log_file = tmp_path / "feed.log"
    with log_file.open("wb") as stderr:  # a file, not a pipe nobody reads while the test runs
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "podfit.client.cli",
            "--target",
            f"127.0.0.1:{podfit.port}",
            "feed",
            "--kubeconfig",
            str(kubeconfig),
            "--kinds",
            "nodes,pods,namespaces",
            "--log-interval",
            "0.5",
            cwd=ROOT,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=stderr,
        )
    try:

        async def synced() -> bool:
            return (await client.stats()).synced

        await eventually(synced, "the command synced podfit", 15)
        assert await pod_names(client) == {"web": "n1"}
        fake.add("Pod", pod("second", "n1"))
        await eventually(has_pods(client, {"web": "n1", "second": "n1"}), "an event fed by the command")
        await eventually(lambda: fake.open_watches() == 3, "three kinds watched")
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 10) == 0, log_file.read_text()
        log = log_file.read_text()
        assert "podfit synced" in log and "SIGTERM: stopping" in log and "stopped: generation=" in log
        assert "Traceback" not in log
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await client.close()
        await podfit.stop(0)


def test_the_feed_command_without_configuration_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert podfit_cli.main(["feed"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("podfit: no Kubernetes configuration: pass --kubeconfig") and err.count("\n") == 1
    assert podfit_cli.main(["feed", "--kubeconfig", str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("podfit: kubeconfig ") and err.count("\n") == 1
    assert podfit_cli.main(["feed", "--kinds", "nodes,widgets", "--kubeconfig", str(tmp_path / "x")]) == 1
    assert "widgets" in capsys.readouterr().err


# -- units -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempt", "low", "high"),
    [(0, 0.4, 0.8), (1, 0.8, 1.6), (3, 3.2, 6.4), (5, 12.8, 25.6), (40, 15.0, 30.0)],
)
def test_backoff_grows_with_jitter_and_is_capped(attempt: int, low: float, high: float) -> None:
    delays = [Backoff().delay(attempt) for _ in range(200)]
    assert all(low <= d <= high for d in delays) and len(set(delays)) > 1


def test_kinds_are_chosen_by_kubectl_names() -> None:
    assert [k.kind for k in select_kinds(["po", "nodes", "pdb"])] == ["Node", "Pod", "PodDisruptionBudget"]
    assert {k.kind for k in ALL_KINDS} == {
        "Node",
        "Pod",
        "Namespace",
        "PodDisruptionBudget",
        "Service",
        "ReplicaSet",
        "StatefulSet",
        "ReplicationController",
        "Job",
        "DaemonSet",
        "StorageClass",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "CSINode",
        "CSIDriver",
        "CSIStorageCapacity",
        "VolumeAttachment",
        "DeviceClass",
        "ResourceSlice",
        "ResourceClaim",
    }


def test_load_api_client_from_a_kubeconfig(kubeconfig: Path, fake: FakeApiServer) -> None:
    api = load_api_client(str(kubeconfig), None, pool_size=7)
    try:
        assert api.configuration.host == fake.url and api.configuration.connection_pool_maxsize == 7
    finally:
        api.close()


async def test_an_api_server_that_is_down_costs_one_line_per_backoff(tmp_path: Path) -> None:
    """No urllib3 retry chatter: each failed attempt is one line naming the kind, the URL and the cause."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "down", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "c", "context": {"cluster": "down", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    log_file = tmp_path / "feed.log"
    with log_file.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "podfit.client.cli", "--target", "127.0.0.1:1", "feed",
            "--kubeconfig", str(kubeconfig), "--kinds", "nodes",
            cwd=ROOT, stdout=asyncio.subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
    try:
        await asyncio.sleep(3.5)
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 10) == 0, log_file.read_text()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    lines = [line for line in log_file.read_text().splitlines() if "WARNING" in line or "Retrying" in line]
    failures = [line for line in lines if "sync failed: " in line]
    # Backoff from 0.8 s doubling with up to 50% jitter: 2 to 5 attempts in 3.5 s, and nothing else.
    assert 2 <= len(failures) <= 5 and len(lines) == len(failures), "\n".join(lines)
    url = f"http://127.0.0.1:{port}/api/v1/nodes"
    assert all(f"sync failed: list Node at {url}: " in line and "Connection refused" in line for line in failures), (
        failures[0]
    )
