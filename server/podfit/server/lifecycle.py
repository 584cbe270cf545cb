"""Graceful shutdown, Kubernetes-style: NOT_SERVING first, then drain, then exit as soon as the work is done.

On SIGTERM a pod is still in its Service's endpoints for a moment: load balancers and kube-proxy notice
the readiness change only after their next probe or watch event. So the server (1) reports NOT_SERVING
at once and keeps serving everything for ``shutdown_delay`` seconds; (2) ends long-lived streams with
UNAVAILABLE "server shutting down", so feeders and watchers reconnect to another replica; (3) serves
every call that has reached it until none has started for a short quiet period, and only then closes
the port: grpc core cancels calls it holds but has not handed to the application yet, so closing while
the transport still queues calls would answer them CANCELLED; (4) stops, the grace period bounding it all.

Why "no call started lately" rather than "no call in flight": a decision runs without yielding to the
event loop, so between any two calls nothing is in flight even while thousands wait in the transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

log = logging.getLogger("podfit.server")
SHUTTING_DOWN_MESSAGE = "server shutting down"
# No new call for this long (and none in flight) means the transport holds no queued call.
QUIET_SECONDS = 0.5
_HEALTH = "/grpc.health.v1.Health/"


class Drain(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Counts calls as they reach the application and ends response streams when told to.

    Installed innermost, so a stream it ends is seen by telemetry as UNAVAILABLE like any other answer.
    """

    def __init__(self) -> None:
        self.started = 0
        self.in_flight = 0
        self._last_start = time.monotonic()
        self._ending = asyncio.Event()
        self.refusing = False

    @property
    def ending(self) -> bool:
        return self._ending.is_set()

    def end_streams(self) -> None:
        """Ends every open response stream (and refuses new ones) with UNAVAILABLE."""
        self._ending.set()

    def refuse(self) -> None:
        """Answers every new call UNAVAILABLE (safe to retry elsewhere: nothing was done) from now on."""
        self.refusing = True

    def quiet_for(self) -> float:
        """Seconds since a call last started or a unary call ended; 0 while a unary call is served."""
        return 0.0 if self.in_flight else time.monotonic() - self._last_start

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return handler
        # Health checks keep being answered (NOT_SERVING) and are not work to wait for: a load balancer
        # probing every 100 ms must not hold the drain open until the grace runs out.
        health = details.method.startswith(_HEALTH)
        if not health:
            self.started += 1
            self._last_start = time.monotonic()
            if self.refusing:
                return _refusal(handler)
        if handler.unary_unary is not None:
            return handler if health else handler._replace(unary_unary=self._counted(handler.unary_unary))
        if handler.response_streaming:
            behavior = handler.stream_stream or handler.unary_stream
            # A coroutine writes with context.write; anything else (an async generator function, or a
            # wrapper that returns one) yields its responses.
            if inspect.iscoroutinefunction(behavior):
                wrapped: Any = self._writer_until_ending(behavior)
            else:
                wrapped = self._generator_until_ending(behavior)
            if handler.stream_stream is not None:
                return handler._replace(stream_stream=wrapped)
            return handler._replace(unary_stream=wrapped)
        return handler

    def _counted(self, behavior: Callable[[Any, Any], Awaitable[Any]]) -> Callable[[Any, Any], Awaitable[Any]]:
        async def counted(request: Any, context: grpc.aio.ServicerContext) -> Any:
            self.in_flight += 1
            try:
                return await behavior(request, context)
            finally:
                self.in_flight -= 1
                self._last_start = time.monotonic()

        return counted

    def _generator_until_ending(
        self, behavior: Callable[[Any, Any], AsyncIterator[Any]]
    ) -> Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]:
        """An async-generator handler (Stream, ScheduleStream): each response is passed on; when the
        server ends streams, the handler is stopped where it waits (for the next request, between
        batches: a batch is applied without yielding, so none is cut in half) and the call ends."""

        async def until_ending(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            if self.ending:
                await context.abort(grpc.StatusCode.UNAVAILABLE, SHUTTING_DOWN_MESSAGE)
            responses = behavior(request, context)
            ending = asyncio.ensure_future(self._ending.wait())
            try:
                while True:
                    step = asyncio.ensure_future(anext(responses))
                    await asyncio.wait((step, ending), return_when=asyncio.FIRST_COMPLETED)
                    if not step.done():
                        step.cancel()
                        await asyncio.wait((step,))
                        await context.abort(grpc.StatusCode.UNAVAILABLE, SHUTTING_DOWN_MESSAGE)
                    try:
                        response = step.result()
                    except StopAsyncIteration:
                        return
                    yield response
            finally:
                ending.cancel()
                await _close(responses)

        return until_ending

    def _writer_until_ending(
        self, behavior: Callable[[Any, Any], Awaitable[None]]
    ) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[None]]:
        """A handler that writes with ``context.write`` (grpc's Health.Watch): cancelled at shutdown."""

        async def until_ending(request: Any, context: grpc.aio.ServicerContext) -> None:
            if self.ending:
                await context.abort(grpc.StatusCode.UNAVAILABLE, SHUTTING_DOWN_MESSAGE)
            work = asyncio.ensure_future(behavior(request, context))
            ending = asyncio.ensure_future(self._ending.wait())
            try:
                await asyncio.wait((work, ending), return_when=asyncio.FIRST_COMPLETED)
                if work.done():
                    work.result()
                    return
                work.cancel()
                await asyncio.wait((work,))
                await context.abort(grpc.StatusCode.UNAVAILABLE, SHUTTING_DOWN_MESSAGE)
            finally:
                ending.cancel()
                work.cancel()

        return until_ending


def _refusal(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    async def refuse(request: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(grpc.StatusCode.UNAVAILABLE, SHUTTING_DOWN_MESSAGE)

    behavior = "unary_unary"
    if handler.response_streaming:
        behavior = "stream_stream" if handler.request_streaming else "unary_stream"
    elif handler.request_streaming:
        behavior = "stream_unary"
    return handler._replace(**{behavior: refuse})


async def _close(responses: AsyncIterator[Any]) -> None:
    aclose = getattr(responses, "aclose", None)
    if aclose is not None:
        # RuntimeError: still running elsewhere; CancelledError: cancelled on the way.
        with contextlib.suppress(RuntimeError, asyncio.CancelledError):
            await aclose()


async def wait_until_quiet(drain: Drain, deadline: float, stop_early: asyncio.Event | None = None) -> bool:
    """Waits (at most until the monotonic ``deadline``) for the calls that reached the server to be
    answered: none in flight and none started for QUIET_SECONDS. False when the deadline came first."""
    while time.monotonic() < deadline:
        if drain.quiet_for() >= QUIET_SECONDS or (stop_early is not None and stop_early.is_set()):
            return True
        await asyncio.sleep(min(0.02, max(0.0, deadline - time.monotonic())))
    return False


async def sleep_unless(seconds: float, event: asyncio.Event) -> None:
    """Sleeps ``seconds`` or until ``event`` is set (a second signal cuts the shutdown delay short)."""
    if seconds <= 0:
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
