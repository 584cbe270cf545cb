"""The owner's cache writes, in order, for the decision workers that keep replicas of its cache.

A worker process holds a copy of the cache and answers decisions from it; only the owner (the process
every write goes to) changes the cache itself. The owner records each write that changed something as
an operation, and the workers replay the operations in the owner's order over an image of the cache
taken at a known position: the cache is deterministic (``ClusterCache.apply`` over the same state with
the same changes gives the same state and generation), so a worker at position p answers exactly as the
owner did at p.

Operations are published in frames. A write made on the event loop is published at once (its answer
can then say where the journal stands after it); writes made by a heavy call on its thread wait for the
call to end, since a batch may still roll them back (``Tentative``), and a rolled-back write is discarded
unpublished: the owner's state after a rollback is exactly what it was, so the workers never hear of it.
"""

from __future__ import annotations

import asyncio
import pickle
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

# An operation: ("apply", [Change, ...]) or ("synced", feeder).
Op = tuple[str, Any]
# Frames kept for a follower that does not read them (stopped, or far too slow) before it is let go: it
# stops, and its owner starts it again from a new image.
MAX_BACKLOG_BYTES = 512 * 1024 * 1024


class FollowerDropped(Exception):
    """A follower fell more than MAX_BACKLOG_BYTES behind."""


class Journal:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[Op] = []
        # Operations published so far; a frame is (position after it, pickled operations).
        self.position = 0
        self._frames: deque[tuple[int, bytes]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._published: asyncio.Condition | None = None
        # Where each connected follower is (frames behind every one of them are dropped).
        self._cursors: dict[int, int] = {}
        self._dropped: set[int] = set()
        # What closes each follower's connection when it is let go (its task may be blocked writing to it).
        self._closers: dict[int, Callable[[], None]] = {}
        self._backlog_bytes = 0
        # Operations recorded and published in all, to tell a rollback from a write already sent.
        self._recorded = 0
        self._published_count = 0

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop whose thread publishes; writes from any other thread wait for ``publish``."""
        self._loop, self._loop_thread = loop, threading.get_ident()
        self._published = asyncio.Condition()

    def record(self, op: Op) -> None:
        with self._lock:
            self._pending.append(op)
            self._recorded += 1
        if self._loop is not None and threading.get_ident() == self._loop_thread:
            self.publish()

    def mark(self) -> int:
        """Where a tentative set of writes begins (see ``discard``)."""
        with self._lock:
            return self._recorded

    def discard(self, mark: int) -> None:
        """Forgets the writes recorded since ``mark``: they were rolled back before anyone saw them."""
        with self._lock:
            if self._published_count > mark:
                raise RuntimeError("rolled-back writes were already published to the decision workers")
            del self._pending[mark - self._published_count :]
            self._recorded = mark

    def publish(self) -> None:
        """Makes the pending operations one frame the followers receive; on the event loop's thread."""
        with self._lock:
            ops, self._pending = self._pending, []
            self._published_count += len(ops)
        if not ops:
            return
        frame = pickle.dumps(ops, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            self.position += len(ops)
            if self._cursors:
                self._frames.append((self.position, frame))
                self._backlog_bytes += len(frame)
                if self._backlog_bytes > MAX_BACKLOG_BYTES:
                    self._drop_laggards()
        if self._published is not None and self._loop is not None:
            self._loop.create_task(self._notify())

    async def _notify(self) -> None:
        assert self._published is not None
        async with self._published:
            self._published.notify_all()

    def cursor(self, follower: int) -> int:
        """Starts keeping frames for a new follower, whose image is taken now (while nothing writes: the
        operations still pending are already in the cache, so they belong to the position returned)."""
        with self._lock:
            position = self.position + len(self._pending)
            self._cursors[follower] = position
        return position

    def on_drop(self, follower: int, close: Callable[[], None]) -> None:
        """``close()`` is called (on the loop) if ``follower`` is let go for lagging."""
        self._closers[follower] = close

    def frames_after(self, position: int) -> Iterator[tuple[int, bytes]]:
        for end, frame in self._frames:
            if end > position:
                yield end, frame

    async def follow(self, follower: int, position: int) -> list[tuple[int, bytes]]:
        """The frames after ``position``, waiting for one when there are none yet."""
        assert self._published is not None
        with self._lock:
            self._cursors[follower] = position
            self._trim()
        async with self._published:
            await self._published.wait_for(
                lambda: follower in self._dropped or bool(self._frames and self._frames[-1][0] > position)
            )
        if follower in self._dropped:
            self._dropped.discard(follower)
            raise FollowerDropped(f"decision worker {follower} fell over {MAX_BACKLOG_BYTES} bytes behind")
        return list(self.frames_after(position))

    def forget(self, follower: int) -> None:
        self._closers.pop(follower, None)
        with self._lock:
            self._cursors.pop(follower, None)
            self._trim()

    def _drop_laggards(self) -> None:
        """Lets go of the followers furthest behind (under the lock) and of the frames kept for them."""
        oldest = min(self._cursors.values())
        dropped = []
        for follower, position in list(self._cursors.items()):
            if position == oldest:
                del self._cursors[follower]
                self._dropped.add(follower)
                dropped.append(follower)
        self._trim()
        if self._loop is not None:
            self._loop.create_task(self._notify())
            for follower in dropped:
                close = self._closers.pop(follower, None)
                if close is not None:
                    self._loop.call_soon_threadsafe(close)

    def _trim(self) -> None:
        """Drops the frames every follower has (under the lock)."""
        if not self._cursors:
            self._frames.clear()
            self._backlog_bytes = 0
            return
        oldest = min(self._cursors.values())
        while self._frames and self._frames[0][0] <= oldest:
            self._backlog_bytes -= len(self._frames.popleft()[1])
