"""The podfit.v1 gRPC servicers: convert, call the scheduling service, convert back."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import AsyncIterator, Sequence

import grpc
from podfit.k8s.convert import KIND_TO_ENUM
from podfit.k8s.limits import bounded
from podfit.k8s.selector import parse_field_selector, parse_label_selector
from podfit.server.cache.cluster_cache import BatchResult, Change, Delete, Entry, Outcome, UpdateRejected, Upsert
from podfit.server.model import Kind, ValidationError
from podfit.server.service import PodInput, PodRejected, SchedulingService, field_selector_keys
from podfit.server.simulation.questions import Frozen
from podfit.server.telemetry import annotate
from podfit.server.transport import convert, paging
from podfit.server.transport.decoding import Undecodable, accepts_undecodable
from podfit.server.transport.errors import NotFoundError, heavy, log_fault, stream_errors, unary_errors, ungated
from podfit.server.transport.forward import OwnerLink, current, forwarded, forwarded_stream
from podfit.server.transport.what_if import WhatIfLink, what_if
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import cluster_cache_pb2_grpc as cc_grpc
from podfit.v1 import scheduler_pb2 as sc
from podfit.v1 import scheduler_pb2_grpc as sc_grpc
from podfit.v1 import simulation_pb2 as sim
from podfit.v1 import simulation_pb2_grpc as sim_grpc

_OUTCOMES = {
    Outcome.APPLIED: cc.UPDATE_OUTCOME_APPLIED,
    Outcome.STALE: cc.UPDATE_OUTCOME_STALE,
    Outcome.UNCHANGED: cc.UPDATE_OUTCOME_UNCHANGED,
}
# Stream requests read ahead of the one being applied; bounds what a fast feeder can queue here.
STREAM_WINDOW = 64
# Method paths on the owner, for what a decision worker forwards (podfit.server.transport.forward).
CACHE = f"/{cc.DESCRIPTOR.services_by_name['ClusterCache'].full_name}/"
SCHEDULER = f"/{sc.DESCRIPTOR.services_by_name['Scheduler'].full_name}/"
SIMULATION = f"/{sim.DESCRIPTOR.services_by_name['Simulation'].full_name}/"
SCHEDULE = SCHEDULER + "Schedule"


def _key_message(change: Change) -> cc.ObjectKey:
    if isinstance(change, Delete):
        return cc.ObjectKey(
            kind=cc.ObjectKind.ValueType(KIND_TO_ENUM[change.kind.value]), namespace=change.namespace, name=change.name
        )
    obj = change.obj
    return cc.ObjectKey(
        kind=cc.ObjectKind.ValueType(KIND_TO_ENUM[change.kind.value]),
        namespace=getattr(obj, "namespace", "") if change.kind.namespaced else "",
        name=obj.name,
        resource_version=getattr(obj, "resource_version", ""),
    )


class ClusterCacheServicer(cc_grpc.ClusterCacheServicer):
    def __init__(self, service: SchedulingService, owner: OwnerLink | None = None) -> None:
        self.service = service
        # In a decision worker: where writes go (podfit.server.transport.workers).
        self.owner = owner

    def _apply(self, changes: list[Change]) -> BatchResult:
        """Applies a batch; a refused update is reported at its request field path."""
        try:
            return self.service.apply(changes)
        except UpdateRejected as exc:
            raise ValidationError(f"updates[{exc.index}].upsert.pod.{exc.error.field}", exc.error.message) from None

    @forwarded(CACHE + "Apply", cc.ApplyResponse)
    @unary_errors
    async def Apply(self, request: cc.ApplyRequest, context: grpc.aio.ServicerContext) -> cc.ApplyResponse:
        changes = convert.changes_from_updates(request.updates)
        result = self._apply(changes)
        annotate(updates=len(changes), generation=result.generation)
        return cc.ApplyResponse(
            generation=result.generation,
            server_epoch=self.service.epoch,
            results=[
                cc.UpdateResult(key=_key_message(change), outcome=_OUTCOMES[outcome])
                for change, outcome in zip(changes, result.outcomes, strict=True)
            ],
            applied_count=result.count(Outcome.APPLIED),
            stale_count=result.count(Outcome.STALE),
            unchanged_count=result.count(Outcome.UNCHANGED),
        )

    @forwarded(CACHE + "Replace", cc.ReplaceResponse)
    @unary_errors
    async def Replace(self, request: cc.ReplaceRequest, context: grpc.aio.ServicerContext) -> cc.ReplaceResponse:
        kind = convert.kind_from_enum(request.kind, "kind")
        upserts: list[Upsert] = [
            convert.upsert_from_object(obj, f"objects[{i}]", expected_kind=kind)
            for i, obj in enumerate(request.objects)
        ]
        try:
            generation, upserted, deleted, unchanged = self.service.replace(kind, upserts)
        except UpdateRejected as exc:
            raise ValidationError(f"objects[{exc.index}].pod.{exc.error.field}", exc.error.message) from None
        annotate(kind=kind.value, objects=len(upserts), generation=generation)
        return cc.ReplaceResponse(
            generation=generation,
            upserted_count=upserted,
            deleted_count=deleted,
            unchanged_count=unchanged,
            server_epoch=self.service.epoch,
        )

    def _refusal(self, request: cc.StreamRequest | Undecodable, exc: Exception) -> cc.StreamResponse:
        """A batch refused in band; whatever went wrong, the stream goes on with the next batch."""
        sequence = request.varint("sequence") if isinstance(request, Undecodable) else request.sequence
        log_fault("podfit.v1.ClusterCache.Stream", exc)
        if isinstance(exc, ValidationError):
            error, field = str(exc), exc.field
        elif isinstance(exc, RecursionError | UnicodeError):
            error, field = "the batch cannot be processed: it nests too deeply or holds invalid text", ""
        else:
            error, field = "the batch cannot be applied: internal error; the server log has the details", ""
        return cc.StreamResponse(
            sequence=sequence, error=bounded(error), error_field=bounded(field, 256), server_epoch=self.service.epoch
        )

    @forwarded_stream(CACHE + "Stream", cc.StreamResponse)
    @accepts_undecodable
    @stream_errors
    async def Stream(
        self, requests: AsyncIterator[cc.StreamRequest | Undecodable], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[cc.StreamResponse]:
        """Applies each batch in order and acknowledges it; a bad batch is refused alone, in band."""
        queue: asyncio.Queue[cc.StreamRequest | Undecodable | None] = asyncio.Queue(maxsize=STREAM_WINDOW)

        async def read() -> None:
            ended = True
            try:
                async for request in requests:
                    await queue.put(request)
            except asyncio.CancelledError:
                # The stream is over and nobody reads the queue: waiting to put the end marker into a full
                # queue would keep this task, and up to a window of batches, alive for good.
                ended = False
                raise
            finally:
                if ended:
                    await queue.put(None)

        reader = asyncio.create_task(read())
        epoch = self.service.epoch
        try:
            while (request := await queue.get()) is not None:
                try:
                    if isinstance(request, Undecodable):
                        raise request.error()
                    changes = convert.changes_from_updates(request.updates)
                    async with self.service.gate.shared():
                        result = self._apply(changes)
                except Exception as exc:  # any bad batch is refused in band; it never ends the stream
                    yield self._refusal(request, exc)
                    continue
                yield cc.StreamResponse(
                    sequence=request.sequence,
                    generation=result.generation,
                    applied_count=result.count(Outcome.APPLIED),
                    stale_count=result.count(Outcome.STALE),
                    unchanged_count=result.count(Outcome.UNCHANGED),
                    server_epoch=epoch,
                )
            await reader
        finally:
            reader.cancel()

    @current(CACHE + "Get", cc.GetResponse)
    @unary_errors
    @ungated
    async def Get(self, request: cc.GetRequest, context: grpc.aio.ServicerContext) -> cc.GetResponse:
        kind = convert.kind_from_enum(request.key.kind, "key.kind")
        if not request.key.name:
            raise ValidationError("key.name", "is required")
        entry = self.service.get(kind, request.key.namespace, request.key.name)
        if entry is None:
            where = f"{request.key.namespace or 'default'}/" if kind.namespaced else ""
            raise NotFoundError(f"{kind.value} {where}{request.key.name} is not in the cache")
        response = cc.GetResponse(
            object=convert.object_from_source(entry.source),
            generation=self.service.generation,
            server_epoch=self.service.epoch,
        )
        if kind is Kind.NODE:
            for allocation in self._node_allocations([entry]):
                response.node_allocation.CopyFrom(allocation)
        return response

    @current(CACHE + "List", cc.ListResponse)
    @unary_errors
    @ungated
    async def List(self, request: cc.ListRequest, context: grpc.aio.ServicerContext) -> cc.ListResponse:
        kind = convert.kind_from_enum(request.kind, "kind")
        try:
            matches = parse_label_selector(request.label_selector)
        except ValueError as exc:
            raise ValidationError("label_selector", str(exc)) from exc
        try:
            fields = parse_field_selector(request.field_selector, field_selector_keys(kind))
        except ValueError as exc:
            raise ValidationError("field_selector", str(exc)) from exc
        if request.limit < 0:
            raise ValidationError("limit", "must not be negative")
        bound = None if not request.pod_filter else request.pod_filter == cc.POD_PHASE_FILTER_BOUND
        listing = paging.listing_of(request)
        after = paging.position(request.continue_token, listing, self.service.epoch)
        entries = self.service.list(kind, request.namespace, matches, bound, fields if request.field_selector else None)
        page, remaining = paging.page(entries, after, request.limit)
        response = cc.ListResponse(
            generation=self.service.generation,
            server_epoch=self.service.epoch,
            remaining_item_count=remaining,
        )
        for entry in page:
            response.objects.add().MergeFromString(entry.source)
        if remaining:
            response.continue_token = paging.token(listing, self.service.epoch, paging.key_of(page[-1]))
        if kind is Kind.NODE:
            response.node_allocations.extend(self._node_allocations(page))
        return response

    def _node_allocations(self, entries: Sequence[Entry]) -> list[cc.NodeAllocation]:
        """The allocations of the listed nodes (of the page, when a listing is paged), in their order."""
        names = (getattr(e.obj, "name", "") for e in entries)
        return [convert.node_allocation(a) for a in self.service.node_allocations(names)]

    @current(CACHE + "Stats", cc.StatsResponse)
    @unary_errors
    @ungated
    async def Stats(self, request: cc.StatsRequest, context: grpc.aio.ServicerContext) -> cc.StatsResponse:
        return cc.StatsResponse(**dataclasses.asdict(self.service.stats()), server_epoch=self.service.epoch)

    @forwarded(CACHE + "MarkSynced", cc.MarkSyncedResponse)
    @unary_errors
    async def MarkSynced(
        self, request: cc.MarkSyncedRequest, context: grpc.aio.ServicerContext
    ) -> cc.MarkSyncedResponse:
        generation = await self.service.mark_synced(request.feeder)
        annotate(feeder=request.feeder, generation=generation)
        return cc.MarkSyncedResponse(generation=generation, server_epoch=self.service.epoch)


class SchedulerServicer(sc_grpc.SchedulerServicer):
    """Converts requests into SchedulingService calls and their results into responses; nothing else
    (the service resolves cached pods, decides, assumes and preempts)."""

    def __init__(self, service: SchedulingService, owner: OwnerLink | None = None) -> None:
        self.service = service
        # In a decision worker: the owner, which makes every reservation (podfit.server.transport.workers).
        self.owner = owner

    @staticmethod
    def _pod(ref: sc.PodReference, *, with_source: bool = False) -> PodInput:
        pod = convert.pod_input(ref, with_source=with_source)
        annotate(pod=pod.key)
        return pod

    @unary_errors
    @ungated
    async def Filter(self, request: sc.FilterRequest, context: grpc.aio.ServicerContext) -> sc.FilterResponse:
        pod = self._pod(request.pod)
        decision = await self.service.decide(
            pod,
            list(request.node_names),
            request.scheduler_name,
            score=False,
            explain=True,
            version=request.kube_scheduler_version,
        )
        annotate(nodes=decision.candidate_count, feasible=decision.feasible_count, gated=decision.gated)
        response = sc.FilterResponse(
            generation=decision.generation,
            server_epoch=self.service.epoch,
            gated=decision.gated,
            message=decision.message,
            feasible_count=decision.feasible_count,
            unschedulable_message=decision.unschedulable_message,
            kube_scheduler_version=decision.kube_scheduler_version,
        )
        if request.view != sc.VIEW_BASIC:
            convert.add_verdicts(response.nodes, decision)
        return response

    @unary_errors
    @ungated
    async def Score(self, request: sc.ScoreRequest, context: grpc.aio.ServicerContext) -> sc.ScoreResponse:
        pod = self._pod(request.pod)
        decision = await self.service.decide(
            pod, list(request.node_names), request.scheduler_name, version=request.kube_scheduler_version
        )
        annotate(nodes=decision.candidate_count, feasible=decision.feasible_count, gated=decision.gated)
        response = sc.ScoreResponse(
            generation=decision.generation,
            gated=decision.gated,
            message=decision.message,
            server_epoch=self.service.epoch,
            kube_scheduler_version=decision.kube_scheduler_version,
        )
        convert.add_scores(response.scores, decision, set(decision.best) if request.view == sc.VIEW_BASIC else None)
        return response

    async def _schedule(self, request: sc.ScheduleRequest) -> sc.ScheduleResponse:
        try:
            result = await self.service.schedule(
                self._pod(request.pod, with_source=request.assume),
                list(request.node_names),
                request.scheduler_name,
                assume=request.assume,
                preempt=not request.disable_preemption,
                version=request.kube_scheduler_version,
                details=request.view != sc.VIEW_BASIC,
            )
        except UpdateRejected as exc:
            # Assuming the pod would replace a cached one in a way kube-apiserver refuses.
            raise ValidationError(f"pod.{exc.error.field}", exc.error.message) from None
        annotate(
            nodes=result.candidate_count,
            feasible=result.feasible_count,
            selected=result.selected,
            gated=result.gated,
        )
        return convert.schedule_response(result, full=request.view != sc.VIEW_BASIC, epoch=self.service.epoch)

    @forwarded(SCHEDULE, sc.ScheduleResponse, when=lambda request: request.assume, optimistic=True)
    @unary_errors
    @ungated
    async def Schedule(self, request: sc.ScheduleRequest, context: grpc.aio.ServicerContext) -> sc.ScheduleResponse:
        return await self._gated_schedule(request, context)

    @stream_errors
    async def ScheduleStream(
        self, requests: AsyncIterator[sc.ScheduleRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[sc.ScheduleResponse]:
        """Answers each request in order; an invalid one ends the stream with INVALID_ARGUMENT."""
        async for request in requests:
            if request.assume and self.owner is not None:
                schedule = SchedulerServicer._gated_schedule
                yield await self.owner.answer(SCHEDULE, sc.ScheduleResponse, schedule, self, request, context)
            else:
                yield await self._gated_schedule(request, context)

    async def _gated_schedule(self, request: sc.ScheduleRequest, context: object) -> sc.ScheduleResponse:
        """A Schedule that reserves is a writer (it waits for a batch in progress); one that does not is a
        reader of the service's view."""
        if not request.assume:
            return await self._schedule(request)
        async with self.service.gate.shared():
            return await self._schedule(request)

    @forwarded(SCHEDULER + "ScheduleBatch", sc.ScheduleBatchResponse, when=lambda request: not request.dry_run)
    @unary_errors
    @heavy
    async def ScheduleBatch(
        self, request: sc.ScheduleBatchRequest, context: grpc.aio.ServicerContext
    ) -> sc.ScheduleBatchResponse:
        limits = self.service.limits
        # Counted before anything is decoded: decoding 10,000s of pods is work too.
        limits.check_pods(len(request.pods))
        pods = [convert.pod_input(ref, f"pods[{i}]", with_source=True) for i, ref in enumerate(request.pods)]
        full = request.view != sc.VIEW_BASIC
        try:
            placement = await self.service.gate.run_heavy(
                functools.partial(
                    self.service.schedule_batch,
                    pods,
                    list(request.node_names),
                    request.scheduler_name,
                    all_or_nothing=request.all_or_nothing,
                    preempt=not request.disable_preemption,
                    details=full,
                    dry_run=request.dry_run,
                    version=request.kube_scheduler_version,
                )
            )
        except PodRejected as exc:
            raise convert.located_pod_error(exc, request.scheduler_name) from None
        placed = sum(1 for r in placement.results if r.assumed_generation)
        annotate(pods=len(pods), placed=placed, generation=placement.generation)
        epoch = self.service.epoch
        return sc.ScheduleBatchResponse(
            results=[convert.schedule_response(r, full=full, epoch=epoch) for r in placement.results],
            generation=placement.generation,
            server_epoch=epoch,
            assumed_generation=placement.assumed_generation,
            placed_count=placed,
            all_placed=placement.all_placed,
            kube_scheduler_version=self.service.release_for(request.kube_scheduler_version, request.scheduler_name),
        )

    @unary_errors
    @ungated
    async def Preempt(self, request: sc.PreemptRequest, context: grpc.aio.ServicerContext) -> sc.PreemptResponse:
        pod = self._pod(request.pod)
        version = request.kube_scheduler_version
        result, generation = self.service.preempt(pod, list(request.node_names), request.scheduler_name, version)
        annotate(nominated=result.nominated_node, victims=len(result.victims))
        release = self.service.release_for(version, request.scheduler_name, pod)
        return convert.preempt_response(result, generation, self.service.epoch, release)


class SimulationServicer(sim_grpc.SimulationServicer):
    """Converts what-if requests for the service; the scenario logic lives in podfit.server.simulation.
    Where the server runs a what-if process, the questions go there (``what_if``)."""

    def __init__(self, service: SchedulingService, what_if: WhatIfLink | None = None) -> None:
        self.service = service
        self.what_if = what_if

    @what_if(SIMULATION + "Simulate", sim.SimulateResponse)
    @unary_errors
    @heavy
    async def Simulate(self, request: sim.SimulateRequest, context: grpc.aio.ServicerContext) -> sim.SimulateResponse:
        limits = self.service.limits
        limits.check_pods(len(request.pods))
        version = request.kube_scheduler_version

        def answer(frozen: Frozen) -> sim.SimulateResponse:
            # Decoded and encoded on the heavy-call thread too: 1,000 pods are a long stall on the loop.
            scenario = convert.scenario_from_message(request.scenario, "scenario")
            pods = [convert.pod_input(ref, f"pods[{i}]") for i, ref in enumerate(request.pods)]
            result = self.service.what_if.simulate(frozen, scenario, pods, request.scheduler_name, version)
            response = convert.simulate_response(result, self.service.epoch)
            response.kube_scheduler_version = self.service.release_for(version, request.scheduler_name)
            return response

        response = await self.service.gate.run_heavy(answer, exclusive=False, prepare=self.service.what_if.freeze)
        annotate(pods=len(request.pods), hypothetical_nodes=len(response.hypothetical_nodes))
        return response

    @what_if(SIMULATION + "EstimateScaleUp", sim.EstimateScaleUpResponse)
    @unary_errors
    @heavy
    async def EstimateScaleUp(
        self, request: sim.EstimateScaleUpRequest, context: grpc.aio.ServicerContext
    ) -> sim.EstimateScaleUpResponse:
        limits = self.service.limits
        total = sum(len(group.pods) for group in request.groups)
        limits.check_grouped_pods(total)
        version = request.kube_scheduler_version

        def answer(frozen: Frozen) -> sim.EstimateScaleUpResponse:
            groups = [
                [convert.pod_input(ref, f"groups[{i}].pods[{j}]") for j, ref in enumerate(group.pods)]
                for i, group in enumerate(request.groups)
            ]
            node_groups = [
                convert.node_group(group, f"node_groups[{i}]") for i, group in enumerate(request.node_groups)
            ]
            generation, estimates = self.service.what_if.estimate_scale_up(
                frozen, groups, node_groups, request.scheduler_name, version
            )
            response = convert.estimate_response(generation, estimates, self.service.epoch)
            response.kube_scheduler_version = self.service.release_for(version, request.scheduler_name)
            return response

        response = await self.service.gate.run_heavy(answer, exclusive=False, prepare=self.service.what_if.freeze)
        annotate(groups=len(request.groups), node_groups=len(request.node_groups))
        return response

    @what_if(SIMULATION + "SimulateDrain", sim.SimulateDrainResponse)
    @unary_errors
    @heavy
    async def SimulateDrain(
        self, request: sim.SimulateDrainRequest, context: grpc.aio.ServicerContext
    ) -> sim.SimulateDrainResponse:
        options = convert.drain_options(request.options, "options")
        destinations = convert.drain_destinations(request.destinations, "destinations")
        now = convert.optional_time(request, "now")
        version = request.kube_scheduler_version
        node_names = list(request.node_names)

        def answer(frozen: Frozen) -> sim.SimulateDrainResponse:
            result = self.service.what_if.simulate_drain(
                frozen, node_names, options, now, request.scheduler_name, version, destinations
            )
            response = convert.drain_response(result, self.service.epoch)
            response.kube_scheduler_version = self.service.release_for(version, request.scheduler_name)
            return response

        response = await self.service.gate.run_heavy(
            answer, exclusive=False, prepare=functools.partial(self.service.what_if.freeze, node_names)
        )
        annotate(nodes=len(request.node_names))
        return response
