"""The scheduling service: the cache, the engine and the decision memo behind every transport.

Transports (gRPC, the extender's HTTP) convert their wire formats into the domain calls here and
back; nothing below this module knows about a wire format.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aiocache import Cache
from podfit.server.cache.cluster_cache import BatchResult, Change, ClusterCache, Upsert
from podfit.server.engine import Decision, Engine, pod_signature
from podfit.server.framework.profile import Profile
from podfit.server.model import Kind, Node, Pod
from podfit.server.telemetry import Telemetry


class SchedulingService:
    def __init__(
        self,
        profiles: Mapping[str, Profile],
        *,
        telemetry: Telemetry | None = None,
        memo_ttl_seconds: float = 30.0,
        memo_backend: str = "memory",
        memo_options: Mapping[str, Any] | None = None,
        memo_max_entries: int = 1024,
    ) -> None:
        self.cache = ClusterCache()
        self.engine = Engine(self.cache, profiles)
        self.telemetry = telemetry or Telemetry.disabled()
        self._memo_ttl = memo_ttl_seconds
        options = {"namespace": f"podfit-{uuid.uuid4().hex}:", **(memo_options or {})}
        self._memo: Any = _make_memo(memo_backend, options) if memo_ttl_seconds > 0 else None
        # Entries of older generations can never be hit again: the memo is emptied when the
        # generation moves, and holds at most this many decisions of the current one.
        self._memo_generation = -1
        self._memo_entries = 0
        self._memo_max_entries = memo_max_entries
        self.telemetry.observe_cache(self.cache)

    # -- updates ---------------------------------------------------------------------------------

    def apply(self, changes: Iterable[Change]) -> BatchResult:
        return self.cache.apply(changes)

    def replace(self, kind: Kind, objects: Sequence[Upsert]) -> tuple[int, int, int, int]:
        return self.cache.replace(kind, objects)

    # -- decisions -------------------------------------------------------------------------------

    async def decide(
        self, pod: Pod, node_names: Sequence[str] = (), scheduler_name: str = "", *, score: bool = True
    ) -> Decision:
        """Filter (and score) at the current generation, memoised per (pod signature, generation).

        kube-scheduler calls an extender's filter and then prioritize for the same pod, and replicas
        of one workload ask the same question; both reuse the first answer while nothing changed.
        """
        generation = self.cache.generation
        key = None
        signature = pod_signature(pod)
        if self._memo is not None:
            if generation != self._memo_generation:
                if self._memo_entries:
                    await self._memo.clear()
                self._memo_generation, self._memo_entries = generation, 0
            nominated = self.cache.has_nominated_pods
            identity = pod.uid + pod.key if nominated else ""
            key = f"{generation}:{scheduler_name}:{score}:{signature}{identity}:{','.join(node_names)}"
            cached: Decision | None = await self._memo.get(key)
            if cached is not None:
                self.telemetry.memo_hit()
                return dataclasses.replace(cached)
        started = time.perf_counter()
        decision, _, _ = self.engine.decide(pod, node_names, scheduler_name, score=score, signature=signature)
        self.telemetry.decision_latency(time.perf_counter() - started, "decide")
        if key is not None and self.cache.generation == generation and self._memo_entries < self._memo_max_entries:
            await self._memo.set(key, decision, ttl=self._memo_ttl)
            self._memo_entries += 1
        return decision

    def decide_with_nodes(self, pod: Pod, nodes: Sequence[Node], scheduler_name: str = "") -> Decision:
        """Filter and score on caller-supplied Node objects (standing in for the cached ones)."""
        started = time.perf_counter()
        snapshot = self.cache.snapshot_with_nodes(nodes)
        decision, _, _ = self.engine.decide(pod, [n.name for n in nodes], scheduler_name, snapshot=snapshot)
        self.telemetry.decision_latency(time.perf_counter() - started, "decide")
        return decision

    def victims_on_nodes(
        self, pod: Pod, node_names: Sequence[str], nodes: Sequence[Node] = (), scheduler_name: str = ""
    ) -> dict[str, tuple[list[Pod], int]]:
        started = time.perf_counter()
        snapshot = self.cache.snapshot_with_nodes(nodes) if nodes else None
        result = self.engine.victims_on_nodes(pod, node_names, scheduler_name, snapshot=snapshot)
        self.telemetry.decision_latency(time.perf_counter() - started, "preempt")
        return result

    def assume(self, pod: Pod, node_name: str, source: bytes) -> int:
        """Reserves ``pod`` on ``node_name`` as a bound pod so the next decision sees it; returns the
        generation that holds the reservation."""
        bound = dataclasses.replace(pod, node_name=node_name, nominated_node_name="")
        return self.cache.apply([Upsert(Kind.POD, bound, source)]).generation

    def preempt(self, pod: Pod, node_names: Sequence[str] = (), scheduler_name: str = "") -> tuple[Any, int]:
        """DefaultPreemption's answer at the current generation: (result, generation)."""
        started = time.perf_counter()
        generation = self.cache.generation
        result = self.engine.preempt(pod, node_names, scheduler_name)
        self.telemetry.decision_latency(time.perf_counter() - started, "preempt")
        return result, generation

    async def close(self) -> None:
        if self._memo is not None:
            await self._memo.close()


def _make_memo(backend: str, options: dict[str, Any]) -> Any:
    if backend == "memory":
        # In-process: no I/O to time out, and aiocache's wait_for per call costs more than the lookup.
        return Cache(Cache.MEMORY, **{"timeout": None, **options})
    if backend in ("redis", "memcached"):
        backend_class = Cache.REDIS if backend == "redis" else Cache.MEMCACHED
        if backend_class is None:
            raise ValueError(f"memo.backend: {backend!r} needs aiocache's {backend} extra installed")
        from aiocache.serializers import PickleSerializer

        return Cache(backend_class, serializer=PickleSerializer(), **options)
    raise ValueError(f"memo.backend: {backend!r} must be memory, redis or memcached")
