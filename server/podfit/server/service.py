"""The scheduling service: the facade the transports call, one method per RPC flow.

Transports (gRPC, the extender's HTTP) convert their wire formats into the calls here and back, and
do nothing else: they never read the cache themselves. Data flows one way: updates go into the cache;
each flow takes a snapshot of it (the live one, or one frozen for readers on other threads), resolves
the pods it was given, and runs the scheduling cycle (``podfit.server.cycle``) over it, through the
decision memo (``podfit.server.memo``); the cycle's Reserve is written by a ``Reserver``
(``podfit.server.reserver``), the only writer besides updates.
"""

from __future__ import annotations

import builtins
import dataclasses
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from podfit.server.budget import Limits, check_deadline
from podfit.server.cache.cluster_cache import (
    BatchResult,
    Change,
    ClusterCache,
    Entry,
    Tentative,
    UpdateRejected,
    Upsert,
)
from podfit.server.cache.overlay import Overlay
from podfit.server.cache.snapshot import Snapshot
from podfit.server.cycle import ScheduleResult, SchedulingCycle
from podfit.server.engine import Decision, Engine, pod_signature
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import BytesArray, PreemptionResult
from podfit.server.framework.profile import Profile
from podfit.server.framework.replicas import ReplicaPlan, Replicas
from podfit.server.framework.versions import VERSIONS
from podfit.server.gate import Gate
from podfit.server.memo import DecisionMemo
from podfit.server.model import Kind, Node, Pod, ValidationError
from podfit.server.reserver import OwnerGone, OwnerReserver, Reservations, Reserver, StoredForms
from podfit.server.simulation.questions import WhatIf
from podfit.server.telemetry import Telemetry

log = logging.getLogger("podfit.server")
CACHE_NOT_SYNCED_MESSAGE = "cache not synced: waiting for a feeder's initial sync (podfit feed)"


class NotFoundError(LookupError):
    """A referenced object is not in the cache."""


class CacheNotSyncedError(RuntimeError):
    """A decision was asked of a server started with --wait-for-sync before any feeder marked the cache
    synced: answering from a cache still being filled would be answering for a cluster that does not
    exist (FAILED_PRECONDITION, CACHE_NOT_SYNCED; the extender's 503)."""

    def __init__(self) -> None:
        super().__init__(CACHE_NOT_SYNCED_MESSAGE)


class StalePodError(ValueError):
    """An assume of a pod older than the cache's copy (its resourceVersion is behind): the reservation
    would be ignored as stale, so it is refused before anything changes."""


class PodRejected(ValueError):
    """Pod ``index`` of a batch cannot be scheduled at all (bad reference, unknown profile, a duplicate);
    nothing of the batch was assumed. ``error`` is the underlying fault, its field relative to the pod."""

    def __init__(self, index: int, error: Exception) -> None:
        super().__init__(f"pod {index}: {error}")
        self.index = index
        self.error = error


@dataclasses.dataclass(frozen=True, slots=True)
class CachedPod:
    """A pod named by reference to the cache; the service resolves it."""

    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace or 'default'}/{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class GivenPod:
    """A pod sent with the request: its record and its stored form (a serialized ``podfit.v1``
    ClusterObject, as Get/List return it), which becomes the cache entry when the pod is assumed."""

    pod: Pod
    source: bytes = b""

    @property
    def key(self) -> str:
        return self.pod.key


# What a decision is about: a record (never assumed), a pod with its source, or a cached pod.
PodInput = Pod | GivenPod | CachedPod


@dataclasses.dataclass(slots=True)
class BatchPlacement:
    """A ScheduleBatch answer: one result per pod, in order."""

    results: list[ScheduleResult]
    # The generation the batch started from (and the one the cache is at again after a rollback).
    generation: int
    # The generation that holds every reservation of the batch; 0 when nothing was assumed.
    assumed_generation: int = 0

    @property
    def all_placed(self) -> bool:
        return all(r.assumed_generation for r in self.results)


@dataclasses.dataclass(frozen=True, slots=True)
class NodeAllocation:
    """What the scheduler counts as taken on a node (its NodeInfo): cpu in millicores, others in units."""

    node_name: str
    requested: Mapping[str, int]
    pod_count: int


@dataclasses.dataclass(frozen=True, slots=True)
class CacheStats:
    generation: int
    nodes: int
    pods: int
    bound_pods: int
    pending_pods: int
    gated_pods: int
    namespaces: int
    pod_disruption_budgets: int
    services: int
    replica_sets: int
    stateful_sets: int
    replication_controllers: int
    memory_bytes_estimate: int
    jobs: int
    daemon_sets: int
    # False until the first MarkSynced on a server started with --wait-for-sync; True otherwise.
    synced: bool = True
    # The release a request naming no version gets from the default profile, every release a request
    # may name, and each profile's own release.
    kube_scheduler_version: str = ""
    supported_kube_scheduler_versions: list[str] = dataclasses.field(default_factory=list)
    profile_versions: dict[str, str] = dataclasses.field(default_factory=dict)
    storage_classes: int = 0
    persistent_volumes: int = 0
    persistent_volume_claims: int = 0
    csi_nodes: int = 0
    csi_drivers: int = 0
    csi_storage_capacities: int = 0
    volume_attachments: int = 0
    device_classes: int = 0
    resource_slices: int = 0
    resource_claims: int = 0
    workers: int = 1
    what_if_process: bool = False


def field_selector_keys(kind: Kind) -> frozenset[str]:
    """The fields List's field_selector takes for ``kind`` (kube-apiserver's common two, plus the pod's node)."""
    common = frozenset({"metadata.name", "metadata.namespace"})
    return common | {"spec.nodeName"} if kind is Kind.POD else common


def selectable_fields(obj: object) -> dict[str, str]:
    fields = {"metadata.name": getattr(obj, "name", ""), "metadata.namespace": getattr(obj, "namespace", "")}
    if isinstance(obj, Pod):
        fields["spec.nodeName"] = obj.node_name
    return fields


class SchedulingService:
    """The cache, its snapshots and the scheduling cycle behind every transport, one method per RPC flow.

    Every flow decides on one snapshot with one CycleState. Decisions that reserve nothing are readers:
    they read ``view()``, the cache's snapshot, or, while a batch writes the cache on the heavy-call
    thread, the snapshot frozen when it started — they never wait for it. Updates and reservations are
    the writers; nothing awaits between reading a snapshot and reserving what was decided on it.
    """

    def __init__(
        self,
        profiles: Mapping[str, Profile],
        *,
        forms: StoredForms,
        telemetry: Telemetry | None = None,
        memo_ttl_seconds: float = 30.0,
        memo_backend: str = "memory",
        memo_options: Mapping[str, Any] | None = None,
        memo_max_entries: int = 1024,
        wait_for_sync: bool = False,
        limits: Limits | None = None,
    ) -> None:
        self.cache = ClusterCache()
        # How a reservation changes a stored object (the transport's wire format).
        self.forms = forms
        # Per-request limits, checked before any work (podfit.server.budget).
        self.limits = limits or Limits()
        # Writers share the cache on the event loop; a batch has it alone, on the heavy-call thread, while
        # readers go on over the snapshot published for them as it starts (``view``).
        self.gate = Gate(self.limits.heavy_calls_waiting, self.limits.heavy_call_seconds)
        self.gate.before_writer.append(self._publish_view)
        self.gate.after_heavy.append(self._retire_view)
        # While a batch writes: the snapshot readers read, and the batch's undo record (the pods it
        # reserved, as they were before it).
        self._reading: Snapshot | None = None
        self._batch: Tentative | None = None
        # Schedules that reserve: the last one's question, and where the next identical pods go while the
        # cache stays at the generation that holds the last of them (a burst of replicas; see schedule).
        self._burst: _Burst | None = None
        # This process's cache id, new at every start: a restart empties the cache, and a feeder that sees
        # another epoch knows it must resync in full.
        self.epoch = uuid.uuid4().hex
        # With ``wait_for_sync`` decisions are refused (CacheNotSyncedError) until a feeder's MarkSynced.
        self._synced = not wait_for_sync
        self._sync_listeners: builtins.list[Callable[[], Awaitable[None]]] = []
        # Set at SIGTERM: readiness turns false (the extender's /readyz 503) while calls are still served.
        self.shutting_down = False
        # Processes serving this cache (the owner and its decision workers, podfit.server.transport.workers).
        self.workers = 1
        # Whether a what-if process answers this server's what-if questions (podfit.server.transport.what_if).
        self.what_if_process = False
        # In a decision worker: the owner, which makes every reservation.
        self.reservations: Reservations | None = None
        # In a decision worker whose replica can no longer be kept current (its owner went away, or let it
        # go): why. Nothing is answered from that replica from then on (OwnerGone).
        self.replica_lost = ""
        self.engine = Engine(self.cache, profiles)
        self.telemetry = telemetry or Telemetry.disabled()
        options = {"namespace": f"podfit-{uuid.uuid4().hex}:", **(memo_options or {})}
        self.memo = (
            DecisionMemo(memo_backend, options, memo_ttl_seconds, memo_max_entries, self.telemetry)
            if memo_ttl_seconds > 0
            else None
        )
        self.telemetry.observe_cache(self.cache)
        # The what-if questions, each over a snapshot frozen for it (podfit.server.simulation.questions).
        self.what_if = WhatIf(self.cache, self.engine, self.limits, self.telemetry, self.resolve, self.require_synced)

    # -- updates ---------------------------------------------------------------------------------

    def apply(self, changes: Iterable[Change]) -> BatchResult:
        return self.cache.apply(changes)

    def replace(self, kind: Kind, objects: Sequence[Upsert]) -> tuple[int, int, int, int]:
        return self.cache.replace(kind, objects)

    # -- sync state ------------------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        """Whether decisions are answered: from the start, or (``wait_for_sync``) after ``mark_synced``."""
        return self._synced

    def require_synced(self) -> None:
        """Raises CacheNotSyncedError unless the cache is synced, OwnerGone when it is a replica that can
        no longer be kept current; every decision flow starts with it."""
        if self.replica_lost:
            raise OwnerGone(f"this decision worker's replica is no longer current ({self.replica_lost})")
        if not self._synced:
            raise CacheNotSyncedError()

    def on_synced(self, listener: Callable[[], Awaitable[None]]) -> None:
        """Awaits ``listener`` when the cache becomes synced (readiness); never if it already is."""
        self._sync_listeners.append(listener)

    async def mark_synced(self, feeder: str = "") -> int:
        """A feeder's initial list of every kind is in the cache (upstream's WaitForCacheSync): decisions
        are answered from now on. Idempotent; returns the current generation."""
        generation = self.cache.generation
        if self._synced:
            log.debug("cache already synced; MarkSynced from feeder %r ignored", feeder)
            return generation
        self._synced = True
        if self.cache.journal is not None:
            self.cache.journal.record(("synced", feeder))
        log.info(
            "cache synced by feeder %r at generation %d",
            feeder,
            generation,
            extra={"feeder": feeder, "generation": generation},
        )
        for listener in self._sync_listeners:
            await listener()
        return generation

    # -- reads -----------------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        return self.cache.generation

    def get(self, kind: Kind, namespace: str, name: str) -> Entry | None:
        return self.cache.get(kind, namespace, name)

    def list(
        self,
        kind: Kind,
        namespace: str = "",
        labels: Callable[[Mapping[str, str]], bool] | None = None,
        bound: bool | None = None,
        fields: Callable[[Mapping[str, str]], bool] | None = None,
    ) -> builtins.list[Entry]:
        """Cached objects of ``kind``, optionally in one namespace, matching a label predicate, (for
        pods) bound or not, and matching a field predicate over ``selectable_fields``."""
        found = []
        for entry in self.cache.entries(kind):
            obj = entry.obj
            if namespace and getattr(obj, "namespace", "") != namespace:
                continue
            if labels is not None and not labels(getattr(obj, "labels", {})):
                continue
            if bound is not None and isinstance(obj, Pod) and bool(obj.node_name) != bound:
                continue
            if fields is not None and not fields(selectable_fields(obj)):
                continue
            found.append(entry)
        return found

    def node_allocations(self, names: Iterable[str]) -> builtins.list[NodeAllocation]:
        """The NodeInfo sums of these cached nodes, read from the scheduler's own aggregates so that
        clients never re-derive effective requests."""
        infos = self.view().node_info_map
        found = []
        for name in names:
            info = infos.get(name)
            if info is not None:
                found.append(NodeAllocation(name, dict(info.requested), len(info.pods)))
        return found

    def stats(self) -> CacheStats:
        cache = self.cache
        pods = [e.obj for e in cache.entries(Kind.POD)]
        pending = cache.pending_pods
        return CacheStats(
            generation=cache.generation,
            nodes=cache.count(Kind.NODE),
            pods=len(pods),
            bound_pods=sum(1 for p in pods if isinstance(p, Pod) and p.node_name),
            pending_pods=len(pending),
            gated_pods=sum(1 for p in pending if p.scheduling_gates),
            namespaces=cache.count(Kind.NAMESPACE),
            pod_disruption_budgets=cache.count(Kind.POD_DISRUPTION_BUDGET),
            services=cache.count(Kind.SERVICE),
            replica_sets=cache.count(Kind.REPLICA_SET),
            stateful_sets=cache.count(Kind.STATEFUL_SET),
            replication_controllers=cache.count(Kind.REPLICATION_CONTROLLER),
            memory_bytes_estimate=cache.memory_estimate(),
            jobs=cache.count(Kind.JOB),
            daemon_sets=cache.count(Kind.DAEMON_SET),
            synced=self._synced,
            kube_scheduler_version=self.engine.release_for(),
            supported_kube_scheduler_versions=[v.release for v in VERSIONS.values()],
            profile_versions={name: f.profile.version.release for name, f in self.engine.frameworks.items()},
            storage_classes=cache.count(Kind.STORAGE_CLASS),
            persistent_volumes=cache.count(Kind.PERSISTENT_VOLUME),
            persistent_volume_claims=cache.count(Kind.PERSISTENT_VOLUME_CLAIM),
            csi_nodes=cache.count(Kind.CSI_NODE),
            csi_drivers=cache.count(Kind.CSI_DRIVER),
            csi_storage_capacities=cache.count(Kind.CSI_STORAGE_CAPACITY),
            volume_attachments=cache.count(Kind.VOLUME_ATTACHMENT),
            device_classes=cache.count(Kind.DEVICE_CLASS),
            resource_slices=cache.count(Kind.RESOURCE_SLICE),
            resource_claims=cache.count(Kind.RESOURCE_CLAIM),
            workers=self.workers,
            what_if_process=self.what_if_process,
        )

    def unknown_nodes(self, names: Sequence[str]) -> set[str]:
        """The names that are no cached node (one set lookup each: kube-scheduler sends thousands)."""
        nodes = self.view().node_info_map
        return {name for name in names if name not in nodes}

    def has_node(self, name: str) -> bool:
        return self.cache.get(Kind.NODE, "", name) is not None

    def view(self) -> Snapshot:
        """What readers decide on: the cache's snapshot, or, while a batch writes the cache on the heavy
        thread, the one frozen as it started (the last committed generation)."""
        return self._reading or self.cache.snapshot()

    def _publish_view(self) -> None:
        """On the event loop, as a batch takes the cache: readers go on over this generation, frozen."""
        self._reading = self.cache.freeze()

    def _retire_view(self) -> None:
        self._reading = None

    def _lookup(self, kind: Kind, namespace: str, name: str) -> Entry | None:
        """A cached object as readers see it: while a batch writes, as it was before the batch."""
        entry = self.cache.get(kind, namespace, name)
        batch = self._batch
        if batch is not None and self._reading is not None:
            # Read after the live entry: a batch records an object's old entry before it changes it.
            before = batch.before(kind, namespace, name)
            if before is not False:
                return before
        return entry

    def resolve(self, pod: PodInput) -> tuple[Pod, bytes]:
        """The record and stored form of ``pod``; a cached pod is looked up (NotFoundError if absent)."""
        if isinstance(pod, Pod):
            return pod, b""
        if isinstance(pod, GivenPod):
            return pod.pod, pod.source
        entry = self._lookup(Kind.POD, pod.namespace, pod.name)
        if entry is None or not isinstance(entry.obj, Pod):
            raise NotFoundError(f"pod {pod.key} is not in the cache")
        return entry.obj, entry.source

    # -- decisions -------------------------------------------------------------------------------

    def cycle(self, version: str = "") -> SchedulingCycle:
        """The scheduling cycle answering as kube-scheduler ``version`` ("" : each profile's own)."""
        return SchedulingCycle(self.engine.at_version(version), self.telemetry)

    def reserver(self, apply: Callable[[Iterable[Change]], BatchResult] | None = None) -> Reserver:
        """Who writes a reservation: the cache here (or ``apply``, a batch's undoable view of it), or, in a
        decision worker, the owner, if its cache is still at the generation decided on."""
        if self.reservations is not None and apply is None:
            return OwnerReserver(self.cache, self.forms, self.reservations)
        return Reserver(self.cache, self.forms, apply)

    def _question(
        self, pod: Pod, signature: str, node_names: Sequence[str], scheduler_name: str, score: bool, version: str
    ) -> str:
        """The memo key of a decision, but for the generation."""
        identity = pod.uid + pod.key if self.cache.has_nominated_pods else ""
        return f"{version}:{scheduler_name}:{score}:{signature}{identity}:{','.join(node_names)}"

    async def _recall(self, generation: int, question: str) -> tuple[str | None, Decision | None]:
        if self.memo is None:
            return None, None
        return await self.memo.recall(generation, question)

    async def _remember(self, key: str | None, decision: Decision) -> None:
        if key is not None and self.memo is not None:
            await self.memo.remember(key, decision, self.view().generation)

    def _pending_view(self, given: PodInput, pod: Pod, snapshot: Snapshot) -> tuple[Pod, Snapshot | None]:
        """A cached pod that is bound, asked about by name, is answered as kube-scheduler would see it
        pending again: without its node and without its own reservation on that node (a snapshot where
        it is not bound). Any other pod: as given, on ``snapshot`` (None)."""
        if not isinstance(given, CachedPod) or not pod.node_name or pod.terminal:
            return pod, None
        overlay = Overlay(snapshot)
        if overlay.node(pod.node_name) is not None:
            overlay.remove_pod(pod)
        return dataclasses.replace(pod, node_name=""), overlay.snapshot()

    async def _ask(
        self, pod: PodInput, node_names: Sequence[str], scheduler_name: str, score: bool, version: str
    ) -> _Asked:
        """A decision's inputs, and the memo's answer when it holds one."""
        self.require_synced()
        cycle = self.cycle(version)
        snapshot = self.view()
        resolved, _ = self.resolve(pod)
        resolved, pending = self._pending_view(pod, resolved, snapshot)
        signature = pod_signature(resolved)
        if pending is not None:
            # A pending view's snapshot is not the cache's: its answers are not memoised.
            return _Asked(cycle, resolved, pending, signature, None, None)
        question = self._question(resolved, signature, node_names, scheduler_name, score, version)
        key, remembered = await self._recall(snapshot.generation, question)
        return _Asked(cycle, resolved, self.view(), signature, key, remembered)

    async def decide(
        self,
        pod: PodInput,
        node_names: Sequence[str] = (),
        scheduler_name: str = "",
        *,
        score: bool = True,
        explain: bool = False,
        version: str = "",
        encoded: BytesArray | None = None,
    ) -> Decision:
        """Filter (and score) at the readers' generation, memoised per (pod signature, generation).

        With ``explain`` a decision where nothing fits also runs PostFilter, so that its
        ``unschedulable_message`` is the whole FailedScheduling text (a Filter answer).
        """
        cycle, resolved, snapshot, signature, key, remembered = await self._ask(
            pod, node_names, scheduler_name, score, version
        )
        if remembered is not None and (remembered.explained or not explain):
            return remembered
        decision, state, _ = cycle.decide(
            resolved, snapshot, node_names, scheduler_name, score=score, signature=signature, encoded=encoded
        )
        if explain:
            cycle.explain(decision, resolved, state, snapshot, scheduler_name)
        await self._remember(key, decision)
        return decision

    async def decide_filter_first(
        self,
        pod: PodInput,
        node_names: Sequence[str] = (),
        scheduler_name: str = "",
        *,
        version: str = "",
        encoded: BytesArray | None = None,
    ) -> tuple[Decision, Scoring]:
        """(the filter's decision, then what gives the scored one): the answer ``decide`` gives, in two
        steps on one snapshot. A caller that answers a filter before anyone asks for scores (the extender:
        kube-scheduler calls prioritize only after its own scoring) scores once it has answered, off the
        caller's wait. A decision the memo holds comes scored at once; the scores are None once the cache
        has changed since the filter (a decision never reads across a write)."""
        cycle, resolved, snapshot, signature, key, remembered = await self._ask(
            pod, node_names, scheduler_name, True, version
        )
        if remembered is not None:
            return remembered, decided(remembered)
        decision, state, _ = cycle.decide(
            resolved, snapshot, node_names, scheduler_name, score=False, signature=signature, encoded=encoded
        )

        async def scored() -> Decision | None:
            if self.view().generation != decision.generation:
                # A write ran since: the cache's tables are no longer the filter's (the caller decides again).
                return None
            result = cycle.score(decision, state, resolved, snapshot, signature, scheduler_name)
            await self._remember(key, result)
            return result

        return decision, scored

    async def schedule(
        self,
        pod: PodInput,
        node_names: Sequence[str] = (),
        scheduler_name: str = "",
        *,
        assume: bool = False,
        preempt: bool = True,
        version: str = "",
        details: bool = True,
    ) -> ScheduleResult:
        """One scheduling cycle: filter, score and select on one snapshot; then Reserve on the selected
        node (when ``assume``), or, when nothing fits and ``preempt``, PostFilter on the same snapshot and
        CycleState. Decisions that assume nothing are memoised like ``decide``'s.

        Without ``details``, a burst of identical pods that reserve, one call after another, is placed as a
        batch places a run of them (``framework.replicas``): the second call's decision plans the next
        ones, and each later call takes its node from the plan while the cache is still at the generation
        holding the previous one, so nothing else changed in between; otherwise it decides."""
        self.require_synced()
        cycle = self.cycle(version)
        # A reservation is made on the cache as it is (a writer: no batch runs meanwhile).
        read = self.cache.snapshot if assume else self.view
        snapshot = read()
        resolved, source = self.resolve(pod)
        if not assume:
            resolved, pending = self._pending_view(pod, resolved, snapshot)
            if pending is not None:
                return cycle.schedule(resolved, source, pending, node_names, scheduler_name, preempt=preempt)
        if assume:
            self._check_current(resolved)
        signature = pod_signature(resolved)
        question = self._question(resolved, signature, node_names, scheduler_name, True, version)
        burst, self._burst = self._burst, None
        burst_size = _FIRST_PLAN
        plannable = assume and not details and not self._on_a_node(resolved)
        if plannable and burst is not None and burst.question == question and burst.generation == snapshot.generation:
            # A replica of the last pod reserved, nothing else written since: plan from that pod's decision.
            if burst.plan is None:
                burst.plan = burst.replicas.plan(burst.size, snapshot)
            if burst.plan is not None and burst.plan.placements:
                placer = self.reserver()
                result = cycle.place(resolved, source, burst.plan, snapshot, placer, scheduler_name)
                result.assumed_generation = await placer.commit()
                if result.assumed_generation:
                    burst.generation = result.assumed_generation
                    self._burst = burst
                return result
            # The plan is spent (every replica it placed came): plan further next time.
            burst_size = _next_plan_size(burst.size, full=burst.plan is not None)
        key, decision = await self._recall(snapshot.generation, question)
        current = read()
        if current.generation != snapshot.generation:
            # A remote memo (redis, memcached) awaits: other calls may have changed the cache meanwhile,
            # reserving the room this one saw, or updating the pod. Read it all again and decide anew;
            # from here to the reservation nothing awaits, so the decision is made on the rows reserved.
            snapshot = current
            resolved, source = self.resolve(pod)
            if assume:
                self._check_current(resolved)
            signature, decision = pod_signature(resolved), None
            plannable = plannable and not self._on_a_node(resolved)
        reserver = self.reserver() if assume else None
        # A memoised "nothing fits" serves only when it was answered with PostFilter exactly as asked now
        # (otherwise it lacks the CycleState PostFilter needs: decide afresh).
        if decision is not None and not (
            decision.selected or decision.gated or (decision.post_filter is not None) == preempt
        ):
            decision = None
        result = cycle.schedule(
            resolved,
            source,
            snapshot,
            node_names,
            scheduler_name,
            reserver=reserver,
            preempt=preempt,
            signature=signature,
            decided=decision,
            replicas=plannable,
        )
        replicas, result.replicas = result.replicas, None
        if reserver is not None:
            result.assumed_generation = await reserver.commit()
            if replicas is not None and result.assumed_generation:
                self._burst = _Burst(question, replicas, result.assumed_generation, burst_size)
        elif decision is None and result.decision is not None:
            await self._remember(key, result.decision)
        return result

    def _on_a_node(self, pod: Pod) -> bool:
        """Whether the cache holds ``pod`` bound already: reserving it again changes a second row, the one it
        leaves, which a plan of replicas does not foresee."""
        entry = self.cache.get(Kind.POD, pod.namespace, pod.name)
        return entry is not None and bool(getattr(entry.obj, "node_name", ""))

    def _check_current(self, pod: Pod) -> None:
        newer = self.cache.newer_version(Kind.POD, pod)
        if newer is not None:
            raise StalePodError(
                f"pod {pod.key} has resourceVersion {pod.resource_version!r}, older than the cached {newer!r}: "
                "nothing was reserved; send the current pod (or name the cached one)"
            )

    def schedule_batch(
        self,
        pods: Sequence[PodInput],
        node_names: Sequence[str] = (),
        scheduler_name: str = "",
        *,
        all_or_nothing: bool = False,
        preempt: bool = True,
        details: bool = True,
        dry_run: bool = False,
        version: str = "",
    ) -> BatchPlacement:
        """Schedules ``pods`` in order with assume, each seeing the reservations of the pods before it.

        With ``all_or_nothing`` nothing stays assumed unless every pod was placed: the tentative
        reservations are undone and the cache is exactly as before, generation included; every pod is
        still answered (as decided with the earlier pods placed), stating the starting generation.
        Every pod is resolved and checked before anything is assumed (PodRejected names the first bad
        one), and an error midway undoes the batch too. With ``dry_run`` every reservation is undone at
        the end, placed or not: the answers of a batch that changes nothing. A writer: run alone among
        writers (the gate), beside readers of the generation it started from (``view``). Without
        ``details`` the results keep only each decision's outcome.
        """
        self.require_synced()
        self.limits.check_pods(len(pods))
        cycle = self.cycle(version)
        resolved: builtins.list[tuple[Pod, bytes]] = []
        seen: dict[str, int] = {}
        for i, pod in enumerate(pods):
            try:
                record, source = self.resolve(pod)
                cycle.engine.framework_for(record, scheduler_name)
                self._check_current(record)
            except (ValidationError, LookupError, StalePodError) as exc:
                raise PodRejected(i, exc) from None
            if record.key in seen:
                raise PodRejected(i, ValidationError("", f"is pod {record.key} again (as pods[{seen[record.key]}])"))
            seen[record.key] = i
            resolved.append((record, source))
        # Without details, a run of identical pods is placed from the decision of its first pod where that
        # decision shows where each goes (``framework.replicas``): the answers are the same, decided once.
        signatures = [pod_signature(record) for record, _ in resolved] if not details else []
        identical_after = _identical_after(signatures)
        tentative = self._batch = self.cache.tentative()
        reserver = self.reserver(tentative.apply)
        placement = BatchPlacement([], tentative.generation)
        plan: ReplicaPlan | None = None
        plan_size = _FIRST_PLAN  # replicas planned at a time (_next_plan_size)
        try:
            for i, (record, source) in enumerate(resolved):
                # A batch is a heavy call: it stops at its deadline, and its reservations are undone.
                check_deadline()
                # Only a pod not bound yet is planned for or placed by a plan (see _on_a_node).
                plannable = bool(signatures) and not self._on_a_node(record)
                try:
                    if plannable and plan is not None and plan.placements:
                        result = cycle.place(record, source, plan, self.cache.snapshot(), reserver, scheduler_name)
                    else:
                        result = cycle.schedule(
                            record,
                            source,
                            self.cache.snapshot(),
                            node_names,
                            scheduler_name,
                            reserver=reserver,
                            preempt=preempt,
                            signature=signatures[i] if signatures else None,
                            replicas=plannable and identical_after[i] > 0,
                        )
                        replicas, result.replicas = result.replicas, None
                        plan = None
                        if replicas is not None:
                            wanted = min(identical_after[i], plan_size)
                            plan = replicas.plan(wanted, self.cache.snapshot())
                            full = plan is not None and len(plan.placements) == wanted
                            plan_size = _next_plan_size(plan_size, full)
                except UpdateRejected as exc:
                    # The pod replaces a cached one in a way kube-apiserver would refuse.
                    raise PodRejected(i, exc.error) from None
                if not details:
                    result.decision = None
                placement.results.append(result)
        except BaseException:
            tentative.rollback()
            raise
        finally:
            self._batch = None
        if dry_run or (all_or_nothing and not placement.all_placed):
            tentative.rollback()
            for result in placement.results:
                result.assumed_generation = 0
                result.generation = placement.generation
        elif any(r.assumed_generation for r in placement.results):
            placement.assumed_generation = self.cache.generation
        return placement

    def nodes_from_k8s(
        self, items: Sequence[tuple[Any, str, str, str]], path: str, load: Callable[[Any], Any]
    ) -> builtins.list[Node]:
        """Caller-sent Kubernetes Nodes as records, each given as (its source, name, uid,
        resourceVersion): an unchanged cached node is that node and other versions are converted once
        (see ``ClusterCache.node_from_k8s``); ``load(source)`` runs only when converting."""
        node_from_k8s = self.cache.node_from_k8s
        return [
            node_from_k8s(source, f"{path}[{i}]", name, uid, version, load)
            for i, (source, name, uid, version) in enumerate(items)
        ]

    async def decide_with_nodes(self, pod: Pod, nodes: Sequence[Node], scheduler_name: str = "") -> Decision:
        """Filter and score on caller-supplied Node objects (standing in for the cached ones). When they
        are the cached nodes this is ``decide`` over their names, memo included."""
        self.require_synced()
        snapshot = self.cache.snapshot_with_nodes(nodes, self.view())
        if snapshot.pod_index is None:
            return await self.decide(pod, [n.name for n in nodes], scheduler_name)
        decision, _, _ = self.cycle().decide(pod, snapshot, [n.name for n in nodes], scheduler_name)
        return decision

    def victims_on_nodes(
        self, pod: Pod, node_names: Sequence[str], nodes: Sequence[Node] = (), scheduler_name: str = ""
    ) -> dict[str, tuple[builtins.list[Pod], int]]:
        self.require_synced()
        started = time.perf_counter()
        snapshot = self.cache.snapshot_with_nodes(nodes, self.view()) if nodes else self.view()
        result = self.engine.victims_on_nodes(pod, node_names, scheduler_name, snapshot=snapshot)
        self.telemetry.decision_latency(time.perf_counter() - started, "preempt")
        return result

    def assume(self, pod: GivenPod | CachedPod, node_name: str) -> int:
        """Reserves ``pod`` on ``node_name`` as a bound pod so the next decision sees it (Reserve plugins
        included, as the cycle that chose the node would); returns the generation that holds it."""
        self.require_synced()
        record, source = self.resolve(pod)
        self._check_current(record)
        if not node_name:
            return 0
        held = self.cycle().reserve(CycleState(), record, node_name, self.cache.snapshot())
        return Reserver(self.cache, self.forms).reserve(record, source, node_name, held)

    def preempt(
        self,
        pod: PodInput,
        node_names: Sequence[str] = (),
        scheduler_name: str = "",
        version: str = "",
    ) -> tuple[PreemptionResult, int]:
        """DefaultPreemption's answer at the readers' generation: (result, generation). A read, answered on
        the event loop like a Schedule's PostFilter (tens of milliseconds at 20,000 pods)."""
        self.require_synced()
        engine = self.engine.at_version(version)
        snapshot = self.view()
        resolved, _ = self.resolve(pod)
        resolved, pending = self._pending_view(pod, resolved, snapshot)
        started = time.perf_counter()
        result = engine.preempt(resolved, node_names, scheduler_name, snapshot=pending or snapshot)
        self.telemetry.decision_latency(time.perf_counter() - started, "preempt")
        return result, snapshot.generation

    def release_for(self, version: str = "", scheduler_name: str = "", pod: PodInput | None = None) -> str:
        """The kube-scheduler release that answers a request naming ``version`` (""), ``scheduler_name``
        and ``pod`` (its spec.schedulerName picks the profile when no name is given)."""
        resolved = self.resolve(pod)[0] if pod is not None and not scheduler_name else None
        return self.engine.at_version(version).release_for(scheduler_name, resolved)

    async def close(self) -> None:
        await self.gate.stop()
        if self.memo is not None:
            await self.memo.close()


@dataclasses.dataclass(slots=True)
class _Burst:
    """The last Schedule that reserved: its question, its decision, and once a replica came, the plan the
    next identical pods are placed by; valid while the cache is at ``generation`` (nothing else wrote)."""

    question: str
    replicas: Replicas
    generation: int
    size: int
    plan: ReplicaPlan | None = None


# Replicas planned from one decision: the first plan's, and the most (each ranks that many nodes and
# re-scores as many rows).
_FIRST_PLAN = 16
_PLANNED_REPLICAS = 256


def _next_plan_size(size: int, full: bool) -> int:
    """Doubled while every replica planned was placed, else back to the first size: a run whose plans
    stop early (each replica filling its node, say) re-scores few rows for nothing."""
    return min(size * 2, _PLANNED_REPLICAS) if full else _FIRST_PLAN


def _identical_after(signatures: Sequence[str]) -> builtins.list[int]:
    """For each pod, how many pods right after it share its signature."""
    after = [0] * len(signatures)
    for i in range(len(signatures) - 2, -1, -1):
        if signatures[i] == signatures[i + 1]:
            after[i] = after[i + 1] + 1
    return after


class _Asked(NamedTuple):
    """A decision's inputs: the pod as decided and the snapshot it is decided on (a bound pod asked about
    by name: pending again, on a snapshot without it), its signature, and the memo's key and answer."""

    cycle: SchedulingCycle
    pod: Pod
    snapshot: Snapshot
    signature: str
    key: str | None
    remembered: Decision | None


# What gives a decision's scored form (``decide_filter_first``).
Scoring = Callable[[], Awaitable[Decision | None]]


def decided(decision: Decision) -> Scoring:
    """The Scoring of a decision that needs no more work."""

    async def ready() -> Decision | None:
        return decision

    return ready
