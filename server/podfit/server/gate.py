"""Who may use the cache when: many decisions and updates at once on the event loop, or one heavy call
alone on a worker thread.

Decisions and updates are short and run on the event loop, interleaved only where they await; they hold
the gate *shared*. A heavy call (a simulation, an estimate, a drain, BestOptions, preemption, a batch)
holds it *exclusively*: it waits for the shared holders to finish, new ones wait behind it, and it runs on
a worker thread over the cache it then has to itself — so the event loop stays free for what needs no
gate (health checks, Stats, Get and List, /metrics), which answer within a few milliseconds while it runs
(the thread gives up the interpreter lock every few milliseconds). Updates are delayed, never dropped.

Why a thread rather than a process pool or cooperative chunking: decisions read the cache's own
structures in place (no copy is made for a snapshot), so another process would need the whole cluster
shipped to it for each call, and chunking on the event loop would let updates change those structures
under a half-done simulation. Excluding writers for the duration is what keeps the thread's view
consistent, at the price of updates waiting behind at most one heavy call (bounded by its deadline).

A heavy call ends when its deadline passes, when its client goes away, or when the server stops: the
event loop sets the call's cancellation flag, which the simulation loops check between steps
(``budget.check_deadline``), and keeps the gate closed until the thread has let go of the cache.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, suppress
from typing import Any, TypeVar

from podfit.server.budget import cancellation_scope

T = TypeVar("T")


class HeavyCallsBusy(Exception):
    """Too many heavy calls are already waiting: RESOURCE_EXHAUSTED, retry later."""


class Gate:
    def __init__(self, waiting_limit: int = 8) -> None:
        # Heavy calls allowed to wait while one runs; one more is refused.
        self.waiting_limit = waiting_limit
        self._shared = 0
        self._exclusive = False
        self._waiting = 0
        self._changed: asyncio.Condition | None = None
        # One thread: heavy calls run one at a time anyway.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="podfit-heavy")
        self.heavy_started = 0
        # The running heavy call's cancellation flag.
        self._running: threading.Event | None = None
        # Called on the event loop as each heavy call lets go of the cache (the journal publishes what
        # the call wrote once no rollback can come).
        self.after_heavy: list[Callable[[], None]] = []

    @property
    def busy(self) -> bool:
        """Whether a heavy call holds the cache."""
        return self._exclusive

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    @asynccontextmanager
    async def shared(self) -> AsyncIterator[None]:
        """Held around a decision or an update (no wait at all while no heavy call runs or waits)."""
        if self._exclusive or self._waiting:
            changed = self._condition()
            async with changed:
                await changed.wait_for(lambda: not (self._exclusive or self._waiting))
        self._shared += 1
        try:
            yield
        finally:
            self._shared -= 1
            if not self._shared and self._waiting:
                await self._notify()

    async def _notify(self) -> None:
        changed = self._condition()
        async with changed:
            changed.notify_all()

    async def run_heavy(self, fn: Callable[..., T], *args: Any, queued: bool = True) -> T:
        """``fn(*args)`` on the worker thread with the cache to itself; cancelled with the calling task.
        ``queued`` False: not counted against ``waiting_limit`` (a decision worker's image, which must not
        be refused for the callers' load)."""
        if queued and self._waiting >= self.waiting_limit:
            raise HeavyCallsBusy(
                f"{self._waiting} heavy calls (simulations, estimates, drains, preemptions, batches) are "
                "already waiting for the one running; retry later"
            )
        self._waiting += 1
        try:
            changed = self._condition()
            async with changed:
                await changed.wait_for(lambda: not self._exclusive and not self._shared)
                self._exclusive = True
        finally:
            self._waiting -= 1
        cancelled = self._running = threading.Event()
        try:
            with cancellation_scope(cancelled):
                context = contextvars.copy_context()
            self.heavy_started += 1
            future = asyncio.get_running_loop().run_in_executor(self._executor, context.run, fn, *args)
            try:
                return await asyncio.shield(future)
            except asyncio.CancelledError:
                # The caller left (client gone, deadline, shutdown): stop the thread at its next check
                # and keep the cache to ourselves until it has, however often this task is cancelled.
                cancelled.set()
                while not future.done():
                    with suppress(asyncio.CancelledError):
                        await asyncio.wait({future})
                raise
        finally:
            for hook in self.after_heavy:
                hook()
            self._exclusive, self._running = False, None
            await self._notify()

    async def stop(self, timeout: float = 1.0) -> None:
        """Cancels the running heavy call (the server is stopping) and waits, up to ``timeout``, for its
        thread to let go of the cache."""
        if self._running is not None:
            self._running.set()
        changed = self._condition()
        with suppress(TimeoutError):
            async with changed:
                await asyncio.wait_for(changed.wait_for(lambda: not self._exclusive), timeout)
        self._executor.shutdown(wait=False, cancel_futures=True)
