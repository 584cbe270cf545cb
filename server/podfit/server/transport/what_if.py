"""What-if in a process of its own: where podfit-server runs more than one process, Simulate,
EstimateScaleUp, SimulateDrain and BestOptions are answered by a replica that answers nothing else.

The kernel hands each connection to one of the processes listening on the public ports (SO_REUSEPORT);
without this, kube-scheduler's extender calls and decisions that land on the process running an
autoscaler's simulation would share its interpreter. The process that receives a what-if question
sends it on over the owner's private directory (``what-if.sock``, the same token as the workers'), with
the journal position it has itself reached: the what-if process answers once its replica holds that much,
so a caller reads its own writes there as anywhere. Until the what-if process listens (it is starting, or
being restarted after dying), the process that received the question answers it itself: a what-if only
reads, so answering it here rather than there changes nothing but where it runs.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import Message
from podfit.server.transport.forward import pass_on, serialize, unreachable
from podfit.server.transport.workers import INTERNAL_OPTIONS, TOKEN_KEY, Follower

WHAT_IF_SOCKET = "what-if.sock"
# Request metadata on the private socket: the journal position the answer must reflect.
WANTED_KEY = "podfit-journal-wanted"


class WhatIfLink:
    """A public process's way to the what-if process; ``bind`` once the owner's directory is known."""

    def __init__(self) -> None:
        self.channel: grpc.aio.Channel | None = None
        self._metadata: tuple[tuple[str, str], ...] = ()
        self._position: Callable[[], int] = lambda: 0
        self._directory = ""
        # Questions answered there, and here for want of it (a test and an operator can tell which).
        self.sent = 0
        self.kept = 0

    def bind(self, directory: str, token: bytes, position: Callable[[], int]) -> None:
        self.channel = grpc.aio.insecure_channel(
            f"unix:{os.path.join(directory, WHAT_IF_SOCKET)}", options=INTERNAL_OPTIONS
        )
        self._metadata = ((TOKEN_KEY, token.hex()),)
        self._position = position
        self._directory = directory

    async def answer(self, path: str, request: Any, response_type: type[Message], context: Any) -> Message | None:
        """The what-if process's answer to ``path``; None when it cannot be reached (the caller answers)."""
        if self.channel is None or not os.path.exists(os.path.join(self._directory, WHAT_IF_SOCKET)):
            self.kept += 1
            return None
        call = self.channel.unary_unary(
            path, request_serializer=serialize, response_deserializer=response_type.FromString
        )
        metadata = (*self._metadata, (WANTED_KEY, str(self._position())))
        try:
            response: Message = await call(request, timeout=context.time_remaining(), metadata=metadata)
        except grpc.aio.AioRpcError as exc:
            if unreachable(exc):
                # Not listening (any more): answered here.
                self.kept += 1
                return None
            await pass_on(context, exc, self._directory)
            raise AssertionError("aborted") from exc
        self.sent += 1
        return response

    async def close(self) -> None:
        if self.channel is not None:
            await self.channel.close()


def what_if(
    path: str, response_type: type[Message]
) -> Callable[[Callable[[Any, Any, Any], Awaitable[Any]]], Callable[[Any, Any, Any], Awaitable[Any]]]:
    """A what-if method: answered by the what-if process where there is one (``self.what_if``)."""

    def decorate(method: Callable[[Any, Any, Any], Awaitable[Any]]) -> Callable[[Any, Any, Any], Awaitable[Any]]:
        @functools.wraps(method)
        async def wrapper(self: Any, request: Any, context: Any) -> Any:
            link: WhatIfLink | None = self.what_if
            if link is not None:
                answer = await link.answer(path, request, response_type, context)
                if answer is not None:
                    return answer
            return await method(self, request, context)

        return wrapper

    return decorate


class CaughtUp(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """In the what-if process: each question waits until the replica holds the journal position its
    sender had reached (``WANTED_KEY``), so it reads every write acknowledged to that caller."""

    def __init__(self, follower: Follower) -> None:
        self.follower = follower

    async def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(details)
        wanted = dict(details.invocation_metadata or ()).get(WANTED_KEY, "")
        if handler is None or handler.unary_unary is None or not isinstance(wanted, str) or not wanted.isdigit():
            return handler
        inner = handler.unary_unary
        follower = self.follower

        async def behavior(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await follower.caught_up(int(wanted))
            return await inner(request, context)

        return handler._replace(unary_unary=behavior)
