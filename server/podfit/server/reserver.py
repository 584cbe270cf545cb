"""Reservations: writing what a scheduling cycle placed, as kube-scheduler's assume writes its cache.

A placement is the pod bound to its node plus what the Reserve plugins hold for it (DynamicResources'
claims). One ``Reserver`` turns that into cache changes, whichever way they are made: applied here
(``CacheReserver``, on the cache or on a batch's undoable view of it), or, in a decision worker, sent to
the owner of the cache, which makes every reservation of the server (``OwnerReserver``). The stored form of
what is written (the wire format Get and List return) is the transport's: it hands a ``StoredForms``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from podfit.server.cache.cluster_cache import BatchResult, Change, ClusterCache, Upsert
from podfit.server.model import Kind, Pod
from podfit.server.model.dra import ResourceClaim


class ReservationMoved(Exception):
    """A decision worker's reservation was refused by the owner: the cache moved on since the decision
    was made on the worker's replica. The owner decides the call again (podfit.server.transport.workers)."""


class OwnerGone(Exception):
    """A decision worker lost its owner: nothing it answers could be reserved or kept current."""


class StoredForms(Protocol):
    """How a reservation changes an object's stored form (the transport's wire format)."""

    def bound(self, source: bytes, node_name: str) -> bytes:
        """A pod's stored form bound to ``node_name``."""
        ...

    def claim(self, source: bytes, claim: ResourceClaim) -> bytes:
        """A claim's stored form with ``claim``'s allocation and reservations."""
        ...


class Reservations(Protocol):
    """Where a decision worker's reservations are made: the owner of the cache."""

    async def commit(self, generation: int, changes: Sequence[Change]) -> int:
        """Applies ``changes`` if the cache is still at ``generation`` (the one they were decided on) and
        returns the generation holding them; raises ReservationMoved otherwise, OwnerGone if it cannot ask."""
        ...


class Reserver:
    """Makes placements: ``reserve`` during the cycle (synchronously, on the snapshot's generation), then
    ``commit`` once the cycle is over, which returns the generation holding them (0: none)."""

    def __init__(
        self, cache: ClusterCache, forms: StoredForms, apply: Callable[[Iterable[Change]], BatchResult] | None = None
    ) -> None:
        self.cache = cache
        self.forms = forms
        self._apply = apply or cache.apply
        self.generation = 0

    def changes(self, pod: Pod, source: bytes, node_name: str, held: Sequence[object]) -> list[Change]:
        """The cache changes of placing ``pod`` (sent with its stored form ``source``) on ``node_name``."""
        if not source:
            raise ValueError(f"pod {pod.key} was given without its source and cannot be assumed")
        bound = dataclasses.replace(pod, node_name=node_name, nominated_node_name="")
        changes: list[Change] = [Upsert(Kind.POD, bound, self.forms.bound(source, node_name))]
        for record in held:
            if isinstance(record, ResourceClaim):
                entry = self.cache.get(Kind.RESOURCE_CLAIM, record.namespace, record.name)
                if entry is not None:
                    changes.append(Upsert(Kind.RESOURCE_CLAIM, record, self.forms.claim(entry.source, record)))
        return changes

    def reserve(self, pod: Pod, source: bytes, node_name: str, held: Sequence[object] = ()) -> int:
        """Writes the placement; the generation holding it (provisional until ``commit``)."""
        self.generation = self._apply(self.changes(pod, source, node_name, held)).generation
        return self.generation

    async def commit(self) -> int:
        return self.generation


class OwnerReserver(Reserver):
    """A decision worker's reservations: held while the cycle runs, then made by the owner if its cache is
    still at the generation they were decided on (``Reservations.commit``)."""

    def __init__(self, cache: ClusterCache, forms: StoredForms, owner: Reservations) -> None:
        super().__init__(cache, forms, self._hold)
        self.owner = owner
        self.decided_at = cache.generation
        self.held: list[Change] | None = None

    def _hold(self, changes: Iterable[Change]) -> BatchResult:
        self.held = list(changes)
        return BatchResult(self.decided_at + 1)

    async def commit(self) -> int:
        if self.held is None:
            return 0
        return await self.owner.commit(self.decided_at, self.held)
