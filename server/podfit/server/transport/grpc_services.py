"""The podfit.v1 gRPC servicers: convert, call the scheduling service, convert back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
from podfit.k8s.convert import KIND_TO_ENUM
from podfit.k8s.selector import parse_label_selector
from podfit.server.cache.cluster_cache import BatchResult, Change, Delete, Outcome, UpdateRejected, Upsert
from podfit.server.model import Kind, Pod, ValidationError
from podfit.server.service import SchedulingService
from podfit.server.telemetry import annotate
from podfit.server.transport import convert
from podfit.server.transport.errors import NotFoundError, status_for, stream_errors, unary_errors
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import cluster_cache_pb2_grpc as cc_grpc
from podfit.v1 import scheduler_pb2 as sc
from podfit.v1 import scheduler_pb2_grpc as sc_grpc

_OUTCOMES = {
    Outcome.APPLIED: cc.UPDATE_OUTCOME_APPLIED,
    Outcome.STALE: cc.UPDATE_OUTCOME_STALE,
    Outcome.UNCHANGED: cc.UPDATE_OUTCOME_UNCHANGED,
}
# Stream requests read ahead of the one being applied; bounds what a fast feeder can queue here.
STREAM_WINDOW = 64


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
    def __init__(self, service: SchedulingService) -> None:
        self.service = service

    def _apply(self, changes: list[Change]) -> BatchResult:
        """Applies a batch; a refused update is reported at its request field path."""
        try:
            return self.service.apply(changes)
        except UpdateRejected as exc:
            raise ValidationError(f"updates[{exc.index}].upsert.pod.{exc.error.field}", exc.error.message) from None

    @unary_errors
    async def Apply(self, request: cc.ApplyRequest, context: grpc.aio.ServicerContext) -> cc.ApplyResponse:
        changes = convert.changes_from_updates(request.updates)
        result = self._apply(changes)
        annotate(updates=len(changes), generation=result.generation)
        return cc.ApplyResponse(
            generation=result.generation,
            results=[
                cc.UpdateResult(key=_key_message(change), outcome=_OUTCOMES[outcome])
                for change, outcome in zip(changes, result.outcomes, strict=True)
            ],
            applied_count=result.count(Outcome.APPLIED),
            stale_count=result.count(Outcome.STALE),
            unchanged_count=result.count(Outcome.UNCHANGED),
        )

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
            generation=generation, upserted_count=upserted, deleted_count=deleted, unchanged_count=unchanged
        )

    @stream_errors
    async def Stream(
        self, requests: AsyncIterator[cc.StreamRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[cc.StreamResponse]:
        """Applies each batch in order and acknowledges it; a bad batch is refused alone, in band."""
        queue: asyncio.Queue[cc.StreamRequest | None] = asyncio.Queue(maxsize=STREAM_WINDOW)

        async def read() -> None:
            try:
                async for request in requests:
                    await queue.put(request)
            finally:
                await queue.put(None)

        reader = asyncio.create_task(read())
        try:
            while (request := await queue.get()) is not None:
                try:
                    result = self._apply(convert.changes_from_updates(request.updates))
                except ValidationError as exc:
                    yield cc.StreamResponse(sequence=request.sequence, error=str(exc), error_field=exc.field)
                    continue
                yield cc.StreamResponse(
                    sequence=request.sequence,
                    generation=result.generation,
                    applied_count=result.count(Outcome.APPLIED),
                    stale_count=result.count(Outcome.STALE),
                    unchanged_count=result.count(Outcome.UNCHANGED),
                )
            await reader
        finally:
            reader.cancel()

    @unary_errors
    async def Get(self, request: cc.GetRequest, context: grpc.aio.ServicerContext) -> cc.GetResponse:
        kind = convert.kind_from_enum(request.key.kind, "key.kind")
        if not request.key.name:
            raise ValidationError("key.name", "is required")
        entry = self.service.cache.get(kind, request.key.namespace, request.key.name)
        if entry is None:
            where = f"{request.key.namespace or 'default'}/" if kind.namespaced else ""
            raise NotFoundError(f"{kind.value} {where}{request.key.name} is not in the cache")
        return cc.GetResponse(object=convert.object_from_source(entry.source), generation=self.service.cache.generation)

    @unary_errors
    async def List(self, request: cc.ListRequest, context: grpc.aio.ServicerContext) -> cc.ListResponse:
        kind = convert.kind_from_enum(request.kind, "kind")
        try:
            matches = parse_label_selector(request.label_selector)
        except ValueError as exc:
            raise ValidationError("label_selector", str(exc)) from exc
        objects = []
        for entry in self.service.cache.entries(kind):
            obj = entry.obj
            if request.namespace and getattr(obj, "namespace", "") != request.namespace:
                continue
            if not matches(getattr(obj, "labels", {})):
                continue
            if isinstance(obj, Pod) and request.pod_filter:
                bound = bool(obj.node_name)
                if (request.pod_filter == cc.POD_PHASE_FILTER_BOUND) != bound:
                    continue
            objects.append(convert.object_from_source(entry.source))
        return cc.ListResponse(objects=objects, generation=self.service.cache.generation)

    @unary_errors
    async def Stats(self, request: cc.StatsRequest, context: grpc.aio.ServicerContext) -> cc.StatsResponse:
        cache = self.service.cache
        pods = [e.obj for e in cache.entries(Kind.POD)]
        bound = sum(1 for p in pods if isinstance(p, Pod) and p.node_name)
        pending = cache.pending_pods
        return cc.StatsResponse(
            generation=cache.generation,
            nodes=cache.count(Kind.NODE),
            pods=len(pods),
            bound_pods=bound,
            pending_pods=len(pending),
            gated_pods=sum(1 for p in pending if p.scheduling_gates),
            namespaces=cache.count(Kind.NAMESPACE),
            pod_disruption_budgets=cache.count(Kind.POD_DISRUPTION_BUDGET),
            services=cache.count(Kind.SERVICE),
            replica_sets=cache.count(Kind.REPLICA_SET),
            stateful_sets=cache.count(Kind.STATEFUL_SET),
            replication_controllers=cache.count(Kind.REPLICATION_CONTROLLER),
            memory_bytes_estimate=cache.memory_estimate(),
        )


class SchedulerServicer(sc_grpc.SchedulerServicer):
    def __init__(self, service: SchedulingService) -> None:
        self.service = service

    def _pod(self, ref: sc.PodReference) -> Pod:
        pod = convert.pod_from_reference(ref, self.service.cache)
        annotate(pod=pod.key)
        return pod

    @unary_errors
    async def Filter(self, request: sc.FilterRequest, context: grpc.aio.ServicerContext) -> sc.FilterResponse:
        pod = self._pod(request.pod)
        decision = await self.service.decide(pod, list(request.node_names), request.scheduler_name, score=False)
        annotate(nodes=decision.candidate_count, feasible=decision.feasible_count, gated=decision.gated)
        return sc.FilterResponse(
            generation=decision.generation,
            gated=decision.gated,
            message=decision.message,
            nodes=convert.verdicts(decision) if request.view != sc.VIEW_BASIC else [],
            feasible_count=decision.feasible_count,
        )

    @unary_errors
    async def Score(self, request: sc.ScoreRequest, context: grpc.aio.ServicerContext) -> sc.ScoreResponse:
        pod = self._pod(request.pod)
        decision = await self.service.decide(pod, list(request.node_names), request.scheduler_name)
        annotate(nodes=decision.candidate_count, feasible=decision.feasible_count, gated=decision.gated)
        scores = decision.scores
        if request.view == sc.VIEW_BASIC:
            best = set(decision.best)
            scores = [s for s in scores if s.node_name in best]
        return sc.ScoreResponse(
            generation=decision.generation,
            gated=decision.gated,
            message=decision.message,
            scores=[convert.score_message(s) for s in scores],
        )

    async def _schedule(self, request: sc.ScheduleRequest) -> sc.ScheduleResponse:
        pod = self._pod(request.pod)
        node_names = list(request.node_names)
        decision = await self.service.decide(pod, node_names, request.scheduler_name)
        full = request.view != sc.VIEW_BASIC
        response = sc.ScheduleResponse(
            generation=decision.generation,
            gated=decision.gated,
            message=decision.message,
            selected_node=decision.selected,
            best_nodes=decision.best if full else [],
            best_count=len(decision.best),
            nodes=convert.verdicts(decision) if full else [],
            scores=[convert.score_message(s) for s in decision.scores] if full else [],
            feasible_count=decision.feasible_count,
        )
        if decision.selected and request.assume:
            source = convert.assumed_source(request.pod, self.service.cache, decision.selected)
            response.assumed_generation = self.service.assume(pod, decision.selected, source)
        elif not decision.selected and not decision.gated and not request.disable_preemption:
            response.preemption.CopyFrom(await self._preempt(pod, node_names, request.scheduler_name))
        annotate(
            nodes=decision.candidate_count,
            feasible=decision.feasible_count,
            selected=decision.selected,
            gated=decision.gated,
        )
        return response

    @unary_errors
    async def Schedule(self, request: sc.ScheduleRequest, context: grpc.aio.ServicerContext) -> sc.ScheduleResponse:
        return await self._schedule(request)

    @stream_errors
    async def ScheduleStream(
        self, requests: AsyncIterator[sc.ScheduleRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[sc.ScheduleResponse]:
        """Answers each request in order; an invalid one ends the stream with INVALID_ARGUMENT."""
        async for request in requests:
            yield await self._schedule(request)

    async def _preempt(self, pod: Pod, node_names: list[str], scheduler_name: str) -> sc.PreemptResponse:
        result, generation = self.service.preempt(pod, node_names, scheduler_name)
        return sc.PreemptResponse(
            generation=generation,
            nominated_node=result.nominated_node,
            victims=[
                sc.Victim(namespace=v.namespace, name=v.name, uid=v.uid, priority=v.priority)
                for v in sorted(result.victims, key=lambda v: v.key)
            ],
            num_pdb_violations=result.num_pdb_violations,
            node_ties=list(result.node_ties),
            message=result.message,
        )

    @unary_errors
    async def Preempt(self, request: sc.PreemptRequest, context: grpc.aio.ServicerContext) -> sc.PreemptResponse:
        pod = self._pod(request.pod)
        response = await self._preempt(pod, list(request.node_names), request.scheduler_name)
        annotate(nominated=response.nominated_node, victims=len(response.victims))
        return response


__all__ = ["ClusterCacheServicer", "SchedulerServicer", "status_for"]
