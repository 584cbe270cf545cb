"""Who may use the cache when: decisions and updates on the event loop, heavy calls one at a time on a
worker thread — readers over a frozen snapshot, beside everything else; writers (a batch) alone among
writers.

Decisions and updates are short and run on the event loop, interleaved only where they await; updates
and reservations hold the gate *shared*, decisions that reserve nothing do not hold it at all. A heavy
call takes the one **heavy slot** (first come, first served; at most ``waiting_limit`` queued, one more
is refused) and runs on a worker thread, so the event loop stays free:

- a **reader** (Simulate, EstimateScaleUp, SimulateDrain, BestOptions, Preempt) gets a frozen snapshot
  of the generation current when it starts (``ClusterCache.freeze``) and holds nothing else: decisions
  and updates go on, and later generations, while it reads the one it was given;
- a **writer** (a ScheduleBatch that reserves) also holds the cache *exclusively* against the other
  writers — updates and reservations, which hold it shared: it waits for them to leave, and those that
  come after it wait until it is done (updates are delayed, never dropped). Shared and exclusive
  holders are served in arrival order, so an update that arrived before a batch runs before it, and a
  stream of updates never starves one. Decisions that reserve nothing hold nothing: as a writer starts,
  ``before_writer`` lets the service publish the generation they read meanwhile.

Leaving a queue (a caller cancelled, or its deadline passed) serves whoever it held back at once: every
grant is made synchronously, so nothing waits on a wakeup that nobody sends. Every heavy call has a
server-side deadline (``limits.heavyCallSeconds``) whatever the client sends, covering its wait and its
run; the thread stops at its next check (``budget.check_deadline``) once it passes, the client goes
away or the server stops, and a writer keeps the cache until its thread has let go of it.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from typing import Any, TypeVar

from podfit.server.budget import (
    DeadlineExceeded,
    cancellation_scope,
    current_deadline,
    deadline_at,
    sharing_scope,
)

T = TypeVar("T")

# A heavy call's server-side deadline when none is configured (limits.heavyCallSeconds).
DEFAULT_HEAVY_CALL_SECONDS = 30.0


class HeavyCallsBusy(Exception):
    """Too many heavy calls are already waiting: RESOURCE_EXHAUSTED, retry later."""


@dataclass(eq=False, slots=True)
class _Waiter:
    exclusive: bool
    granted: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


async def _until_granted(
    granted: asyncio.Future[None],
    deadline: float | None,
    give_back: Callable[[], None],
    leave: Callable[[], None],
    ahead: Callable[[], str],
) -> None:
    """Waits for ``granted`` until ``deadline`` (``time.monotonic()``; None: none). On cancellation or at
    the deadline, a grant that came meanwhile is given back, else the waiter leaves its queue; both let
    the next waiter in at once. The deadline is DeadlineExceeded, naming what was ``ahead()``."""
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout_at(None if deadline is None else loop.time() + deadline - time.monotonic()):
            await asyncio.shield(granted)
    except BaseException as exc:
        (give_back if granted.done() else leave)()
        if isinstance(exc, TimeoutError):
            raise DeadlineExceeded(f"the deadline passed while waiting for {ahead()}") from None
        raise


class _Slot:
    """The heavy-call thread: one holder, the rest queued in arrival order."""

    def __init__(self) -> None:
        self.held = False
        self.queue: deque[asyncio.Future[None]] = deque()

    async def take(self, deadline: float | None) -> None:
        if not self.held and not self.queue:
            self.held = True
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.queue.append(granted)
        await _until_granted(
            granted,
            deadline,
            self.give,
            lambda: self.queue.remove(granted),
            lambda: f"the heavy calls ahead of this call ({len(self.queue)} waiting, one running)",
        )

    def give(self) -> None:
        if self.queue:
            self.queue.popleft().set_result(None)
        else:
            self.held = False


class Gate:
    def __init__(self, waiting_limit: int = 8, heavy_seconds: float = DEFAULT_HEAVY_CALL_SECONDS) -> None:
        # Heavy calls allowed to wait while one runs; one more is refused.
        self.waiting_limit = waiting_limit
        # Each heavy call's deadline on this server, from its arrival (queue wait included).
        self.heavy_seconds = heavy_seconds
        self._shared = 0
        self._exclusive = False
        self._queue: deque[_Waiter] = deque()
        self._slot = _Slot()
        # One thread: heavy calls run one at a time.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="podfit-heavy")
        self.heavy_started = 0
        # The running heavy call's cancellation flag.
        self._running: threading.Event | None = None
        # Called on the event loop as a writer takes the cache (the service publishes the snapshot that
        # readers read meanwhile), and as each heavy call lets go of it (the journal publishes what the
        # call wrote once no rollback can come).
        self.before_writer: list[Callable[[], None]] = []
        self.after_heavy: list[Callable[[], None]] = []

    @property
    def busy(self) -> bool:
        """Whether a heavy call holds the cache exclusively (a batch)."""
        return self._exclusive

    @property
    def heavy_running(self) -> bool:
        """Whether a heavy call (reader or writer) has the heavy-call thread."""
        return self._slot.held

    @property
    def waiting(self) -> int:
        """Heavy calls queued (not yet running)."""
        return len(self._slot.queue)

    @property
    def queued(self) -> int:
        """Shared and exclusive holders queued for the cache."""
        return len(self._queue)

    def _admit(self) -> None:
        """Grants the queue's head in arrival order: every shared waiter up to the first heavy call, or
        that heavy call alone once nobody holds the cache. Synchronous, so no grant is ever lost."""
        while self._queue and not self._exclusive:
            head = self._queue[0]
            if head.exclusive:
                if self._shared:
                    return
                self._exclusive = True
            else:
                self._shared += 1
            self._queue.popleft()
            head.granted.set_result(None)

    def _release_shared(self) -> None:
        self._shared -= 1
        self._admit()

    def _release_exclusive(self) -> None:
        self._exclusive = False
        self._admit()

    async def _wait(self, waiter: _Waiter, deadline: float | None, first: bool = False) -> None:
        """Queues ``waiter`` (at the head when ``first``) until granted; leaves the queue (and lets the
        next in) when cancelled or at ``deadline`` (DeadlineExceeded)."""
        if first:
            self._queue.appendleft(waiter)
        else:
            self._queue.append(waiter)
        self._admit()

        def leave() -> None:
            self._queue.remove(waiter)
            self._admit()

        await _until_granted(
            waiter.granted,
            deadline,
            self._release_exclusive if waiter.exclusive else self._release_shared,
            leave,
            lambda: f"the batch holding the cache ({len(self._queue)} queued for it)",
        )

    @asynccontextmanager
    async def shared(self, *, first: bool = False) -> AsyncIterator[None]:
        """Held around a decision or an update (no wait at all while nothing is queued and no heavy call
        runs). ``first``: ahead of everyone queued — a decision worker's replication, so that the calls
        queued behind a heavy call decide on everything the worker had received by then."""
        if self._exclusive or (self._queue and not first):
            await self._wait(_Waiter(False), current_deadline(), first)
        else:
            self._shared += 1
        try:
            yield
        finally:
            self._release_shared()

    async def run_heavy(
        self,
        fn: Callable[..., T],
        *args: Any,
        queued: bool = True,
        exclusive: bool = True,
        prepare: Callable[[], Any] | None = None,
    ) -> T:
        """``fn(*args)`` on the heavy-call thread, within the caller's deadline and this server's
        (``heavy_seconds``); cancelled with the calling task. ``exclusive``: with the cache to itself (a
        writer); otherwise a reader, which holds nothing but the thread. ``prepare()`` runs on the event loop
        once the call's turn has come, and its result is passed to ``fn`` first (a reader's frozen snapshot,
        taken then so it is the newest). ``queued`` False: not counted against ``waiting_limit`` and
        without the server's deadline."""
        waiting = self.waiting
        if queued and waiting >= self.waiting_limit:
            raise HeavyCallsBusy(
                f"{waiting} heavy calls (simulations, estimates, drains, preemptions, batches) are "
                "already waiting for the one running; retry later"
            )
        deadline = current_deadline()
        if queued:
            mine = time.monotonic() + self.heavy_seconds
            deadline = mine if deadline is None else min(deadline, mine)
        await self._slot.take(deadline)
        try:
            if exclusive:
                if self._exclusive or self._shared or self._queue:
                    await self._wait(_Waiter(True), deadline)
                else:
                    self._exclusive = True
            try:
                if exclusive:
                    for hook in self.before_writer:
                        hook()
                if prepare is not None:
                    args = (prepare(), *args)
                return await self._run(fn, args, deadline, sharing=not exclusive)
            finally:
                try:
                    for hook in self.after_heavy:
                        hook()
                finally:
                    # Whatever a hook raised, the cache is let go: nothing may wait on a gate left shut.
                    if exclusive:
                        self._release_exclusive()
        finally:
            self._running = None
            self._slot.give()

    async def _run(self, fn: Callable[..., T], args: tuple[Any, ...], deadline: float | None, sharing: bool) -> T:
        cancelled = self._running = threading.Event()
        with cancellation_scope(cancelled), deadline_at(deadline), sharing_scope() if sharing else nullcontext():
            context = contextvars.copy_context()
        self.heavy_started += 1
        future = asyncio.get_running_loop().run_in_executor(self._executor, context.run, fn, *args)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            # The caller left (client gone, deadline, shutdown): stop the thread at its next check and
            # keep the thread (and a writer the cache) until it has, however often this task is cancelled.
            cancelled.set()
            while not future.done():
                with suppress(asyncio.CancelledError):
                    await asyncio.wait({future})
            if not future.cancelled():
                future.exception()  # the thread's own ending (CallCancelled): retrieved, not logged
            raise

    async def stop(self, timeout: float = 1.0) -> None:
        """Cancels the running heavy call (the server is stopping) and waits, up to ``timeout``, for its
        thread to let go of the cache."""
        if self._running is not None:
            self._running.set()
        ends = time.monotonic() + timeout
        while self._slot.held and time.monotonic() < ends:
            await asyncio.sleep(0.01)
        self._executor.shutdown(wait=False, cancel_futures=True)
