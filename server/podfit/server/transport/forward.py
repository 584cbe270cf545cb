"""A decision worker's writes, forwarded to the owner as they came (podfit.server.transport.workers).

Servicer methods that change the cache are marked ``forwarded``: in the owner (or a single process) they
run as written; in a worker the request goes to the owner over the private socket, and the answer comes
back once the worker's replica holds what it acknowledged. The owner's refusals (INVALID_ARGUMENT with
its field path, FAILED_PRECONDITION...) reach the caller unchanged, details included.

A Schedule that assumes is decided by the worker itself, and only its reservation goes to the owner
(``SchedulingService.reservations``); when the owner's cache moved on since the decision, the call is
forwarded whole and the owner decides it again.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import grpc
from google.protobuf.message import Message
from grpc_status import rpc_status
from podfit.server.reserver import OwnerGone, ReservationMoved
from podfit.server.transport.decoding import Undecodable
from podfit.server.transport.errors import status_for
from podfit.server.transport.workers import POSITION_KEY, committed

OWNER_GONE = "the process that owns the cache cannot be reached; retry (it restarts, or another replica takes over)"


async def owner_gone(context: grpc.aio.ServicerContext) -> None:
    """UNAVAILABLE with reason OWNER_GONE (ErrorInfo), as for any call a worker without owner refuses."""
    await context.abort_with_status(rpc_status.to_status(status_for(OwnerGone(OWNER_GONE))))


def serialize(request: Message | Undecodable) -> bytes:
    """A request as received, for another process of this server."""
    return request.data if isinstance(request, Undecodable) else request.SerializeToString()


def unreachable(exc: grpc.aio.AioRpcError) -> bool:
    """Whether a call on the private socket failed for want of a peer (UNAVAILABLE without the status
    details every podfit refusal carries), rather than being refused by it."""
    trailing = tuple(exc.trailing_metadata() or ())
    answered = any(key == "grpc-status-details-bin" for key, _ in trailing)
    return exc.code() is grpc.StatusCode.UNAVAILABLE and not answered


async def pass_on(context: grpc.aio.ServicerContext, exc: grpc.aio.AioRpcError, directory: str) -> None:
    """A peer's refusal, to the caller as the peer sent it, the private directory's path hidden."""
    details = (exc.details() or "").replace(directory, "<owner>")
    await context.abort(exc.code(), details, tuple(exc.trailing_metadata() or ()))


# A worker decides assuming calls itself while most of its reservations are accepted; when the owner's
# cache keeps moving under it (concurrent assumes elsewhere), the decision made here is wasted work, and
# it forwards them instead, trying again every PROBE_EVERY calls.
REFUSED_AT_MOST = 0.5
PROBE_EVERY = 16


class Upstream(Protocol):
    """What a replica forwards through: the channel to the owner, and where its own replica stands."""

    @property
    def owner(self) -> bool: ...

    @property
    def directory(self) -> str: ...

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]: ...

    @property
    def channel(self) -> grpc.aio.Channel: ...

    async def caught_up(self, position: int) -> None: ...

    async def barrier(self, timeout: float | None = None) -> None: ...

    def writes_refused(self) -> str:
        """In the owner: why it refuses a write now, before making it ("" when it takes them)."""
        ...


class OwnerLink:
    """A replica's way to the owner: a decision worker's ``Follower``, or a replica on the replicated log
    (``transport.replicated.Replica``), which becomes the owner itself when it takes the lease."""

    def __init__(self, follower: Upstream) -> None:
        self.follower = follower
        # Share of recent reservations the owner refused (exponentially weighted).
        self.refused = 0.0
        self._assumes = 0

    @property
    def here(self) -> bool:
        """Whether this process is the owner now (a replica that took the lease): nothing to forward."""
        return self.follower.owner

    async def admit(self, context: grpc.aio.ServicerContext) -> None:
        """In the owner, before a write is made: UNAVAILABLE (OWNER_GONE, saying why) at once when it could
        not be acknowledged now (a replica group's owner cut off from the log), rather than after a lease."""
        if why := self.follower.writes_refused():
            await context.abort_with_status(rpc_status.to_status(status_for(OwnerGone(why))))

    async def caught_up(self, context: grpc.aio.ServicerContext, position: int | None = None) -> None:
        """Waits until the replica holds the journal up to ``position`` (None: every write the owner has
        acknowledged so far)."""
        try:
            if position is None:
                await self.follower.barrier(context.time_remaining())
            else:
                await self.follower.caught_up(position)
        except (OwnerGone, grpc.aio.AioRpcError):
            await owner_gone(context)

    async def _relay(self, context: grpc.aio.ServicerContext, exc: grpc.aio.AioRpcError) -> None:
        """The owner's own refusal, as it sent it; a failure of the private channel itself (its text names
        the private socket) is OWNER_GONE."""
        if unreachable(exc):
            await owner_gone(context)
        await pass_on(context, exc, self.follower.directory)

    async def unary(
        self, method: str, request: Any, response_type: type[Message], context: Any, *, follow: bool = True
    ) -> Any:
        """``method`` answered by the owner; with ``follow``, once this replica holds what it wrote."""
        call = self.follower.channel.unary_unary(
            method, request_serializer=serialize, response_deserializer=response_type.FromString
        )
        answer = call(request, timeout=context.time_remaining(), metadata=self.follower.metadata)
        try:
            response = await answer
            trailing = dict(await answer.trailing_metadata() or ())
        except grpc.aio.AioRpcError as exc:
            await self._relay(context, exc)
        if not follow:
            return response
        position = trailing.get(POSITION_KEY)
        await self.caught_up(context, int(position) if isinstance(position, str) else None)
        return response

    async def answer(
        self, path: str, response_type: type[Message], method: Any, servicer: Any, request: Any, context: Any
    ) -> Any:
        """An assuming call: decided here with its reservation made by the owner, or, when the owner
        refuses it (or keeps refusing this worker's), answered whole by ``path`` on the owner."""
        if self.here:
            await self.admit(context)
        response = await self._decided_here(method, servicer, request, context)
        if response is None:
            response = await self.unary(path, request, response_type, context)
        return response

    async def _decided_here(self, method: Any, servicer: Any, request: Any, context: Any) -> Any:
        """``method`` answered by this worker, its reservation made by the owner; None when the owner
        refused the reservation (the cache moved on)."""
        self._assumes += 1
        if self.refused > REFUSED_AT_MOST and self._assumes % PROBE_EVERY:
            return None
        token = committed.set(0)
        try:
            response = await method(servicer, request, context)
            position = committed.get()
        except ReservationMoved:
            self.refused = 0.8 * self.refused + 0.2
            return None
        finally:
            committed.reset(token)
        self.refused *= 0.8
        if position:
            await self.caught_up(context, position)
        return response

    async def stream(
        self, method: str, requests: AsyncIterator[Any], response_type: type[Message], context: Any
    ) -> AsyncIterator[Any]:
        call = self.follower.channel.stream_stream(
            method, request_serializer=serialize, response_deserializer=response_type.FromString
        )(requests, timeout=context.time_remaining(), metadata=self.follower.metadata)
        try:
            async for response in call:
                await self.caught_up(context)
                yield response
        except grpc.aio.AioRpcError as exc:
            await self._relay(context, exc)
        finally:
            call.cancel()


def forwarded(
    path: str,
    response_type: type[Message],
    when: Callable[[Any], bool] | None = None,
    *,
    optimistic: bool = False,
) -> Callable[[Callable[[Any, Any, Any], Awaitable[Any]]], Callable[[Any, Any, Any], Awaitable[Any]]]:
    """A unary method that writes: in a worker, ``path`` on the owner answers it (only requests for which
    ``when`` holds, when given). ``optimistic``: the worker decides and only reserves at the owner, which
    answers the whole call only when the reservation is refused."""

    def decorate(method: Callable[[Any, Any, Any], Awaitable[Any]]) -> Callable[[Any, Any, Any], Awaitable[Any]]:
        @functools.wraps(method)
        async def wrapper(self: Any, request: Any, context: Any) -> Any:
            owner: OwnerLink | None = self.owner
            if owner is None or (when is not None and not when(request)):
                return await method(self, request, context)
            if owner.here:
                await owner.admit(context)
                return await method(self, request, context)
            if optimistic:
                return await owner.answer(path, response_type, method, self, request, context)
            return await owner.unary(path, request, response_type, context)

        return wrapper

    return decorate


def forwarded_stream(
    path: str, response_type: type[Message]
) -> Callable[[Callable[[Any, Any, Any], AsyncIterator[Any]]], Callable[[Any, Any, Any], AsyncIterator[Any]]]:
    """A stream of writes: in a worker, the whole stream goes to ``path`` on the owner."""

    Method = Callable[[Any, Any, Any], AsyncIterator[Any]]

    def decorate(method: Method) -> Method:
        @functools.wraps(method)
        async def wrapper(self: Any, requests: Any, context: Any) -> AsyncIterator[Any]:
            owner: OwnerLink | None = self.owner
            if owner is not None and owner.here:
                await owner.admit(context)
            answers = (
                method(self, requests, context)
                if owner is None or owner.here
                else owner.stream(path, requests, response_type, context)
            )
            async for answer in answers:
                yield answer

        return wrapper

    return decorate


def current(
    path: str, response_type: type[Message]
) -> Callable[[Callable[[Any, Any, Any], Awaitable[Any]]], Callable[[Any, Any, Any], Awaitable[Any]]]:
    """An inspection (Get, List, Stats): in a worker, answered once the replica has caught up with the
    owner, so it shows every write acknowledged before it was asked — or, while a batch holds this
    worker's replica (which then cannot advance), answered by ``path`` on the owner. Where the cache is
    written (the owner, one process), it waits for a batch in progress: its thread is changing the cache."""

    def decorate(method: Callable[[Any, Any, Any], Awaitable[Any]]) -> Callable[[Any, Any, Any], Awaitable[Any]]:
        @functools.wraps(method)
        async def wrapper(self: Any, request: Any, context: Any) -> Any:
            owner: OwnerLink | None = self.owner
            gate = self.service.gate
            if owner is not None and not owner.here:
                if gate.busy:
                    return await owner.unary(path, request, response_type, context, follow=False)
                await owner.caught_up(context)
            if gate.busy:
                # A batch is writing the cache on its thread: read it once the batch has let go.
                async with gate.shared():
                    return await method(self, request, context)
            return await method(self, request, context)

        return wrapper

    return decorate
