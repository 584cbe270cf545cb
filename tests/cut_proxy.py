"""A TCP proxy on loopback that a test can cut: the link between one podfit replica and the engine.

Each replica reaches each engine node through a ``Link`` of its own, so a test can cut one replica off
from the engine while every other process, and its gRPC listeners, go on. Two ways to cut, as networks
fail:

- **blackholed**: bytes stop moving either way, connections stay open and new ones get no answer (no
  data passes them). What either side sent meanwhile is held, in order, and delivered when the link
  heals, as TCP retransmits once a partition ends: a deposed owner's append sent into the blackhole
  reaches the engine late, which is what fencing by the log must refuse.
- **severed**: every connection is reset at once and new ones are reset as they arrive, until healed.

All links live on one event loop in a thread of their own (the tests' own loop is often blocked in a
synchronous wait); ``cut``/``heal`` are called from any thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, Literal, TypeVar

T = TypeVar("T")
Cut = Literal["blackholed", "severed"]
CHUNK = 65536


class Link:
    """127.0.0.1:``port`` forwarded to 127.0.0.1:``upstream`` while open."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = 0
        self.cut: Cut | None = None
        self._open = asyncio.Event()
        self._open.set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accepted, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut == "severed":
            _reset(writer)
            return
        self._writers.add(writer)
        await self._open.wait()  # a blackhole: the connection is taken, nothing answers until it heals
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            _reset(writer)
            self._writers.discard(writer)
            return
        self._writers.add(up_writer)
        try:
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        finally:
            for end in (writer, up_writer):
                self._writers.discard(end)
                end.close()

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await source.read(CHUNK)
                # Held here while blackholed (the kernel's buffers fill behind it), delivered in order after.
                await self._open.wait()
                if not data:
                    if sink.can_write_eof():
                        sink.write_eof()
                    return
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            _reset(sink)

    def _cut(self, how: Cut) -> None:
        self.cut = how
        self._open.clear()
        if how == "severed":
            for writer in list(self._writers):
                _reset(writer)
            self._writers.clear()

    def _heal(self) -> None:
        self.cut = None
        self._open.set()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            _reset(writer)
        self._open.set()


def _reset(writer: asyncio.StreamWriter) -> None:
    transport = writer.transport
    if not transport.is_closing():
        transport.abort()  # a reset, not an orderly close


class Links:
    """The links of a test run, on their own event loop in a thread; closed by ``close()``."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="cut-proxy", daemon=True)
        self._thread.start()
        self.links: list[Link] = []

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(10)

    def link(self, upstream: int) -> Link:
        async def started() -> Link:
            link = Link(upstream)
            await link.start()
            return link

        link = self._run(started())
        self.links.append(link)
        return link

    def cut(self, links: list[Link], how: Cut) -> None:
        async def cut() -> None:
            for link in links:
                link._cut(how)

        self._run(cut())

    def heal(self, links: list[Link]) -> None:
        async def heal() -> None:
            for link in links:
                link._heal()

        self._run(heal())

    def close(self) -> None:
        async def closed() -> None:
            await asyncio.gather(*(link.close() for link in self.links))

        try:
            self._run(closed())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()
