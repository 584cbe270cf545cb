"""The decision memo: a wrapper around the scheduling cycle that answers a question asked again at the same
generation without deciding it again.

kube-scheduler calls an extender's filter and then prioritize for the same pod, and the replicas of one
workload ask the same question: each reuses the first answer while nothing changed. The generation is part
of every key, so the memo never answers from an older cache; it is emptied when the generation moves.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Mapping
from typing import Any

from aiocache import Cache
from podfit.server.engine import Decision
from podfit.server.telemetry import Telemetry

log = logging.getLogger("podfit.server")


class DecisionMemo:
    """Decisions of the current generation by question, in aiocache (in-process, redis or memcached)."""

    def __init__(
        self,
        backend: str,
        options: Mapping[str, Any],
        ttl_seconds: float,
        max_entries: int,
        telemetry: Telemetry,
    ) -> None:
        self._cache = make_backend(backend, dict(options))
        self._ttl = ttl_seconds
        # A remote memo (redis, memcached) may be shared with other replicas and other users: aiocache's
        # clear() would flush the whole database there, so its old entries are left to expire instead
        # (the generation is part of every key, so they are never hit again).
        self._private = backend == "memory"
        # Entries of older generations can never be hit again: the memo is emptied when the generation
        # moves, and holds at most this many decisions of the current one.
        self._generation = -1
        self._entries = 0
        self._max_entries = max_entries
        self._failure_logged = -float("inf")
        self.telemetry = telemetry

    async def recall(self, generation: int, question: str) -> tuple[str, Decision | None]:
        """(key, the decision remembered for ``question`` at ``generation``, or None)."""
        if generation != self._generation:
            if self._entries and self._private:
                await self._io(self._cache.clear())
            self._generation, self._entries = generation, 0
        key = f"{generation}:{question}"
        if not self._entries:
            # Nothing of this generation is remembered (always so for a run of assumes): skip the lookup.
            self.telemetry.memo_miss()
            return key, None
        cached: Decision | None = await self._io(self._cache.get(key))
        if cached is None or cached.generation != generation:
            self.telemetry.memo_miss()
            return key, None
        self.telemetry.memo_hit()
        return key, dataclasses.replace(cached)

    async def remember(self, key: str, decision: Decision, current: int) -> None:
        """Keeps ``decision`` if it is of the ``current`` generation, the one its key was made at."""
        if current == decision.generation == self._generation and self._entries < self._max_entries:
            self._entries += 1
            await self._io(self._cache.set(key, decision, ttl=self._ttl))

    async def _io(self, operation: Awaitable[Any]) -> Any:
        """The memo's answer, or None when a remote memo fails (down, slow, out of connections): the memo
        only saves work, so a failure costs a recomputation, never a decision. Logged at most every 10 s."""
        try:
            return await operation
        except Exception as exc:  # any memo failure is a miss
            now = time.monotonic()
            if now - self._failure_logged >= 10.0:
                self._failure_logged = now
                log.warning("decision memo unavailable, deciding without it: %s: %s", type(exc).__name__, exc)
            return None

    async def close(self) -> None:
        await self._cache.close()


def make_backend(backend: str, options: dict[str, Any]) -> Any:
    if backend == "memory":
        # In-process: no I/O to time out, and aiocache's wait_for per call costs more than the lookup.
        return Cache(Cache.MEMORY, **{"timeout": None, **options})
    if backend in ("redis", "memcached"):
        backend_class = Cache.REDIS if backend == "redis" else Cache.MEMCACHED
        if backend_class is None:
            raise ValueError(f"memo.backend: {backend!r} needs aiocache's {backend} extra installed")
        from aiocache.serializers import PickleSerializer

        if backend == "redis":
            from redis.asyncio import BlockingConnectionPool

            # redis' default pool refuses the 101st concurrent call (MaxConnectionsError): wait instead.
            options = {"connection_pool_class": BlockingConnectionPool, "pool_max_size": 64, **options}
        return Cache(backend_class, serializer=PickleSerializer(), **options)
    raise ValueError(f"memo.backend: {backend!r} must be memory, redis or memcached")
