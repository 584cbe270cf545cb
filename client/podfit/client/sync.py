"""The blocking client, for scripts and the CLI."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, cast

import grpc
from podfit.client import _requests as rq
from podfit.client.errors import PodfitError
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import cluster_cache_pb2_grpc as cc_grpc
from podfit.v1 import scheduler_pb2 as sc
from podfit.v1 import scheduler_pb2_grpc as sc_grpc
from podfit.v1 import simulation_pb2 as sim
from podfit.v1 import simulation_pb2_grpc as sim_grpc


class Client:
    """``with Client("localhost:50051") as client: client.schedule(pod_yaml)``."""

    def __init__(
        self, target: str = rq.DEFAULT_TARGET, *, config: rq.ChannelConfig | None = None, **kwargs: Any
    ) -> None:
        self.config = config or rq.ChannelConfig(target=target, **kwargs)
        credentials = self.config.credentials()
        if credentials is None:
            self._channel = grpc.insecure_channel(self.config.target, options=self.config.options())
        else:
            self._channel = grpc.secure_channel(self.config.target, credentials, options=self.config.options())
        self.cache = cc_grpc.ClusterCacheStub(self._channel)
        self.scheduler = sc_grpc.SchedulerStub(self._channel)
        self.simulation = sim_grpc.SimulationStub(self._channel)
        self._metadata = self.config.metadata()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def wait_ready(self, timeout: float = 10.0) -> None:
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise PodfitError(
                grpc.StatusCode.UNAVAILABLE, f"no podfit server answered at {self.config.target}"
            ) from None

    def _call(self, method: Callable[..., Any], request: Any, timeout: float | None) -> Any:
        try:
            return method(request, metadata=self._metadata, timeout=timeout)
        except grpc.RpcError as exc:
            raise PodfitError.from_rpc_error(exc) from None

    def apply(
        self, objects: Any = (), *, deletes: Iterable[cc.ObjectKey] = (), timeout: float | None = None
    ) -> cc.ApplyResponse:
        return cast(cc.ApplyResponse, self._call(self.cache.Apply, rq.apply_request(objects, deletes), timeout))

    def delete(self, kind: str, name: str, namespace: str = "", timeout: float | None = None) -> cc.ApplyResponse:
        return self.apply(deletes=[rq.object_key(kind, name, namespace)], timeout=timeout)

    def replace(self, kind: str, objects: Any, timeout: float | None = None) -> cc.ReplaceResponse:
        return cast(cc.ReplaceResponse, self._call(self.cache.Replace, rq.replace_request(kind, objects), timeout))

    def get(self, kind: str, name: str, namespace: str = "", timeout: float | None = None) -> cc.GetResponse:
        return cast(
            cc.GetResponse, self._call(self.cache.Get, cc.GetRequest(key=rq.object_key(kind, name, namespace)), timeout)
        )

    def list(
        self,
        kind: str,
        namespace: str = "",
        label_selector: str = "",
        pod_filter: str = "",
        timeout: float | None = None,
        *,
        field_selector: str = "",
    ) -> cc.ListResponse:
        """Every matching object in one answer, however many pages the server splits it into;
        ``field_selector`` as kubectl's (``spec.nodeName=node-a``), evaluated by the server."""
        merged = cc.ListResponse()
        for page in self.list_pages(
            kind, namespace, label_selector, pod_filter, timeout=timeout, field_selector=field_selector
        ):
            rq.merge_page(merged, page)
        return merged

    def list_pages(
        self,
        kind: str,
        namespace: str = "",
        label_selector: str = "",
        pod_filter: str = "",
        *,
        limit: int = 0,
        timeout: float | None = None,
        field_selector: str = "",
    ) -> Iterator[cc.ListResponse]:
        """The List pages in turn (at most ``limit`` objects each; 0: as many as fit), following
        continue_token; ``timeout`` applies to each page."""
        request = rq.list_request(kind, namespace, label_selector, pod_filter, limit, field_selector)
        while True:
            page = cast(cc.ListResponse, self._call(self.cache.List, request, timeout))
            yield page
            if not page.continue_token:
                return
            request.continue_token = page.continue_token

    def stats(self, timeout: float | None = None) -> cc.StatsResponse:
        return cast(cc.StatsResponse, self._call(self.cache.Stats, cc.StatsRequest(), timeout))

    def mark_synced(self, feeder: str = "", timeout: float | None = None) -> cc.MarkSyncedResponse:
        """Tells a server started with --wait-for-sync that the initial list of every kind has been applied,
        so it starts answering decisions (idempotent). ``feeder`` names the caller in the server's log. A
        later response whose ``server_epoch`` differs from this one's means the server restarted empty."""
        return cast(cc.MarkSyncedResponse, self._call(self.cache.MarkSynced, rq.mark_synced_request(feeder), timeout))

    def stream(self, batches: Iterable[cc.StreamRequest]) -> Iterator[cc.StreamResponse]:
        try:
            yield from self.cache.Stream(iter(batches), metadata=self._metadata)
        except grpc.RpcError as exc:
            raise PodfitError.from_rpc_error(exc) from None

    def filter(
        self,
        pod: Any,
        node_names: Sequence[str] = (),
        scheduler_name: str = "",
        timeout: float | None = None,
        *,
        kube_scheduler_version: str = "",
    ) -> sc.FilterResponse:
        """``kube_scheduler_version`` ("v1.36", say; "" the profile's; Stats lists the supported ones) on
        every decision call."""
        request = rq.filter_request(pod, node_names, scheduler_name, kube_scheduler_version=kube_scheduler_version)
        return cast(sc.FilterResponse, self._call(self.scheduler.Filter, request, timeout))

    def score(
        self,
        pod: Any,
        node_names: Sequence[str] = (),
        scheduler_name: str = "",
        timeout: float | None = None,
        *,
        kube_scheduler_version: str = "",
    ) -> sc.ScoreResponse:
        request = rq.score_request(pod, node_names, scheduler_name, kube_scheduler_version=kube_scheduler_version)
        return cast(sc.ScoreResponse, self._call(self.scheduler.Score, request, timeout))

    def schedule(
        self,
        pod: Any,
        node_names: Sequence[str] = (),
        scheduler_name: str = "",
        *,
        assume: bool = False,
        disable_preemption: bool = False,
        view: str = "full",
        timeout: float | None = None,
        kube_scheduler_version: str = "",
    ) -> sc.ScheduleResponse:
        """``view="basic"`` returns only the outcome (selected/best nodes, counts, preemption)."""
        request = rq.schedule_request(
            pod, node_names, scheduler_name, assume, disable_preemption, view, kube_scheduler_version
        )
        return cast(sc.ScheduleResponse, self._call(self.scheduler.Schedule, request, timeout))

    def schedule_stream(self, requests: Iterable[sc.ScheduleRequest]) -> Iterator[sc.ScheduleResponse]:
        """Schedules a stream of pods on one call (build requests with ``podfit.client.schedule_request``)."""
        try:
            yield from self.scheduler.ScheduleStream(iter(requests), metadata=self._metadata)
        except grpc.RpcError as exc:
            raise PodfitError.from_rpc_error(exc) from None

    def schedule_batch(
        self,
        pods: Iterable[Any],
        node_names: Sequence[str] = (),
        scheduler_name: str = "",
        *,
        all_or_nothing: bool = False,
        disable_preemption: bool = False,
        view: str = "full",
        timeout: float | None = None,
        kube_scheduler_version: str = "",
        dry_run: bool = False,
    ) -> sc.ScheduleBatchResponse:
        """Schedules ``pods`` in order on one call, assuming them; each sees the earlier ones.
        ``all_or_nothing`` leaves the cache untouched unless every pod is placed (gang scheduling); ``dry_run``
        leaves it untouched whatever happens (the answers only)."""
        request = rq.schedule_batch_request(
            pods, node_names, scheduler_name, all_or_nothing, disable_preemption, view, kube_scheduler_version, dry_run
        )
        return cast(sc.ScheduleBatchResponse, self._call(self.scheduler.ScheduleBatch, request, timeout))

    def preempt(
        self,
        pod: Any,
        node_names: Sequence[str] = (),
        scheduler_name: str = "",
        timeout: float | None = None,
        *,
        kube_scheduler_version: str = "",
    ) -> sc.PreemptResponse:
        request = rq.preempt_request(pod, node_names, scheduler_name, kube_scheduler_version)
        return cast(sc.PreemptResponse, self._call(self.scheduler.Preempt, request, timeout))

    def simulate(
        self,
        pods: Iterable[Any],
        scenario: sim.Scenario | None = None,
        scheduler_name: str = "",
        timeout: float | None = None,
    ) -> sim.SimulateResponse:
        """A what-if scenario, then ``pods`` placed in order inside it; the server's cache never changes."""
        request = rq.simulate_request(pods, scenario, scheduler_name)
        return cast(sim.SimulateResponse, self._call(self.simulation.Simulate, request, timeout))

    def estimate_scale_up(
        self,
        groups: Iterable[Iterable[Any]],
        node_groups: Iterable[rq.NodeGroupSpec],
        scheduler_name: str = "",
        timeout: float | None = None,
    ) -> sim.EstimateScaleUpResponse:
        """cluster-autoscaler's binpacking estimate for each (id, template, current size, max size[, the
        template's ResourceSlices])."""
        request = rq.estimate_request(groups, node_groups, scheduler_name)
        return cast(sim.EstimateScaleUpResponse, self._call(self.simulation.EstimateScaleUp, request, timeout))

    def simulate_drain(
        self, node_names: Sequence[str], timeout: float | None = None, **options: Any
    ) -> sim.SimulateDrainResponse:
        """cluster-autoscaler's removal simulation of ``node_names``: per node, whether it can go (its drain
        rules and PDBs) and where each pod would move. ``options``: see ``drain_request``."""
        request = rq.drain_request(node_names, **options)
        return cast(sim.SimulateDrainResponse, self._call(self.simulation.SimulateDrain, request, timeout))
