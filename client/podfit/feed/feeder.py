"""Keeps a podfit cache current from a Kubernetes API server, the way an informer would.

Per kind: a paginated list, ``Replace`` of the kind, then a watch from the list's resourceVersion with
bookmarks. Every watch event of every kind goes, in arrival order, onto one ``ClusterCache.Stream``;
acknowledgements measure the lag. A relist (410 Gone) goes through the same ordered queue: its ``Replace``
waits for every earlier batch to be acknowledged, so no older event can be applied after it. podfit's
``server_epoch`` changes when the server restarts empty; the feeder then relists and replaces every kind
and calls ``MarkSynced`` again.

The official ``kubernetes`` client is synchronous. Lists and the opening of watches run in daemon threads,
and each open watch has one daemon thread reading its chunks into the event loop (with backpressure). Daemon
threads, because a watch blocked on a socket must never keep the process from exiting; cancelling the
feeder shuts the watch sockets down, which ends those threads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import http.client
import json
import logging
import random
import re
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
import urllib3
from kubernetes.client.exceptions import ApiException
from podfit.client.aio import AsyncClient
from podfit.client.errors import PodfitError
from podfit.feed.kinds import ALL_KINDS, KindSpec, Scope, watch_timeout
from podfit.feed.metrics import FeederMetrics, FeederStats
from podfit.k8s.convert import KIND_TO_ENUM, ConversionError, manifest_to_object
from podfit.v1 import cluster_cache_pb2 as cc

log = logging.getLogger("podfit.feed")

T = TypeVar("T")
Key = tuple[str, str, str]  # kind, namespace, name


class ListFailed(Exception):
    """A list of one kind failed: says which kind and which URL, which the client library's errors do not."""

    def __init__(self, kind: str, url: str, cause: BaseException) -> None:
        super().__init__(f"list {kind} at {url}: {_describe(cause)}")
        self.kind = kind
        self.url = url


# What a broken or refused API server connection raises; the feeder retries these with backoff.
_API_ERRORS: tuple[type[BaseException], ...] = (
    ListFailed,
    ApiException,
    urllib3.exceptions.HTTPError,
    http.client.HTTPException,
    OSError,
    json.JSONDecodeError,
)
_UPDATE_INDEX = re.compile(r"^updates\[(\d+)\]")


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter: attempt n waits ``min(maximum, initial * factor**n)`` times a random
    factor in [1 - jitter, 1]. It starts over after a success (a watch that delivered, a stream that acked)."""

    initial: float = 0.8
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 0.5

    def delay(self, attempt: int) -> float:
        base = min(self.maximum, self.initial * self.factor ** min(attempt, 64))
        return base * (1.0 - self.jitter * random.random())


class _Retry:
    def __init__(self, backoff: Backoff) -> None:
        self.backoff = backoff
        self.attempt = 0

    def next(self) -> float:
        delay = self.backoff.delay(self.attempt)
        self.attempt += 1
        return delay

    def reset(self) -> None:
        self.attempt = 0


class _Gone(Exception):
    """410: the resourceVersion to watch from is older than the API server keeps; relist."""


class _WatchError(Exception):
    """An ERROR event other than 410 ends the watch; it is resumed, as client-go does."""


_WATCH_ERRORS: tuple[type[BaseException], ...] = (_WatchError, *_API_ERRORS)


class _StreamEnded(Exception):
    """podfit ended the Stream without an error (e.g. shutting down)."""


class Resync(Exception):
    """podfit answered with another server epoch: it restarted and its cache is empty."""


_SYNC_ERRORS: tuple[type[BaseException], ...] = (Resync, PodfitError, *_API_ERRORS)


@dataclass
class _Event:
    kind: str
    key: Key
    update: cc.Update
    arrived: float  # time.monotonic() when the watch delivered it


@dataclass
class _Barrier:
    """A relist of one kind: its Replace runs once every earlier batch is acknowledged."""

    kind: str
    objects: list[cc.ClusterObject]
    done: asyncio.Future[None]


@dataclass
class _Batch:
    request: cc.StreamRequest
    events: list[_Event]


@dataclass
class _KindState:
    resource_version: str
    delivered: bool = False


@dataclass
class _Session:
    """What lives as long as one epoch of podfit: the ordered queue and the unacknowledged batches."""

    queue: asyncio.Queue[_Event | _Barrier]
    inflight: OrderedDict[int, _Batch] = field(default_factory=OrderedDict)
    held: _Event | _Barrier | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)


async def _in_thread(fn: Callable[[], T], abandoned: Callable[[T], object] | None = None) -> T:
    """Runs a blocking call in a daemon thread; ``abandoned`` cleans up a result nobody awaits any more."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def deliver(ok: bool, value: Any) -> None:
        if future.done():
            if ok and abandoned is not None:
                with contextlib.suppress(Exception):
                    abandoned(value)
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def target() -> None:
        try:
            result: Any = fn()
            ok = True
        except BaseException as exc:
            result, ok = exc, False
        try:
            loop.call_soon_threadsafe(deliver, ok, result)
        except RuntimeError:  # the loop is gone
            if ok and abandoned is not None:
                with contextlib.suppress(Exception):
                    abandoned(result)

    threading.Thread(target=target, name="podfit-feed-call", daemon=True).start()
    return await future


def _close_response(response: Any) -> None:
    """Unblocks a thread reading the response (urllib3 >= 2.3 ``shutdown``), then closes it."""
    shutdown = getattr(response, "shutdown", None)
    with contextlib.suppress(Exception):
        if shutdown is not None:
            shutdown()
    with contextlib.suppress(Exception):
        response.release_conn()
    with contextlib.suppress(Exception):
        response.close()


class _WatchStream:
    """The lines of one watch response, read in a daemon thread and handed to the loop with backpressure."""

    def __init__(self, response: Any, name: str) -> None:
        self._response = response
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue(maxsize=16)
        self._stop = threading.Event()
        threading.Thread(target=self._read, name=f"podfit-watch-{name}", daemon=True).start()

    def _put(self, item: bytes | BaseException | None) -> bool:
        if self._stop.is_set():
            return False
        try:
            asyncio.run_coroutine_threadsafe(self._queue.put(item), self._loop).result()
        except (RuntimeError, concurrent.futures.CancelledError):
            return False
        return not self._stop.is_set()

    def _read(self) -> None:
        try:
            for chunk in self._response.stream(amt=None, decode_content=True):
                if chunk and not self._put(chunk):
                    return
        except BaseException as exc:
            self._put(exc)
            return
        self._put(None)

    async def lines(self) -> AsyncIterator[bytes]:
        buffer = b""
        while True:
            item = await self._queue.get()
            if item is None:
                if buffer.strip():
                    yield buffer
                return
            if isinstance(item, BaseException):
                raise item
            buffer += item
            *complete, buffer = buffer.split(b"\n")
            for line in complete:
                if line.strip():
                    yield line

    def close(self) -> None:
        self._stop.set()
        while not self._queue.empty():  # frees a reader thread blocked on a full queue
            self._queue.get_nowait()
        _close_response(self._response)


def _object_key(kind: str, obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return kind, str(meta.get("namespace") or ""), str(meta.get("name") or "")


class Feeder:
    """Feeds ``target_client``'s podfit from the API server ``api`` (a ``kubernetes.client.ApiClient``).

    ``await feeder.run()`` runs until cancelled; ``await feeder.sync_once()`` is the initial sync alone.
    ``namespace`` and ``label_selector`` scope the namespaced kinds (see ``Scope``): podfit's Replace
    replaces the whole kind, so a scoped feeder must be the only feeder of its podfit, and podfit then
    knows nothing of the pods of other namespaces, whose resources on the nodes it counts as free.
    """

    def __init__(
        self,
        target_client: AsyncClient,
        api: Any,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        kinds: Iterable[KindSpec] = ALL_KINDS,
        feeder_name: str = "",
        backoff: Backoff | None = None,
        page_size: int = 500,
        watch_timeout_seconds: int = 300,
        request_timeout_seconds: float = 60.0,
        max_batch: int = 500,
        window: int = 32,
        queue_size: int = 10_000,
        stats_interval_seconds: float = 15.0,
        log_interval_seconds: float = 60.0,
        meter_provider: Any = None,
    ) -> None:
        self.client = target_client
        self.api = api
        self.scope = Scope(namespace or None, label_selector or None)
        self.kinds = tuple(kinds)
        self.feeder_name = feeder_name or f"podfit feed@{socket.gethostname()}"
        self.backoff = backoff or Backoff()
        self.page_size = page_size
        self.watch_timeout_seconds = watch_timeout_seconds
        self.request_timeout_seconds = request_timeout_seconds
        self.max_batch = max_batch
        self.window = window
        self.queue_size = queue_size
        self.stats_interval_seconds = stats_interval_seconds
        self.log_interval_seconds = log_interval_seconds
        self.metrics = FeederMetrics(meter_provider)
        # The podfit server's epoch as of the last full sync; "" when the server does not report one.
        self.epoch: str | None = None
        # Per kind, where a watch would resume: the list's resourceVersion, then each event's and bookmark's.
        self.resource_versions: dict[str, str] = {}
        self._sequence = 0
        self._last_response = 0.0
        self._synced = asyncio.Event()

    @property
    def stats(self) -> FeederStats:
        return self.metrics.stats

    async def wait_synced(self) -> None:
        """Returns once the current podfit epoch has been fully synced (again after a restart)."""
        await self._synced.wait()

    # -- the initial sync --------------------------------------------------------------------------

    async def sync_once(self) -> dict[str, str]:
        """Lists every kind, Replaces each in podfit, then MarkSynced: the resourceVersion of each list."""
        listed = await asyncio.gather(*(self._list(spec) for spec in self.kinds))
        epoch: str | None = None
        for spec, (_, objects) in zip(self.kinds, listed, strict=True):
            replaced = await self.client.replace(spec.kind, objects, timeout=self.request_timeout_seconds)
            epoch = self._same_epoch(epoch, replaced.server_epoch)
            log.info(
                "synced %s: %d objects (%d upserted, %d deleted)",
                spec.kind,
                len(objects),
                replaced.upserted_count,
                replaced.deleted_count,
            )
        marked = await self.client.mark_synced(self.feeder_name, timeout=self.request_timeout_seconds)
        epoch = self._same_epoch(epoch, marked.server_epoch)
        self.epoch = epoch or ""
        self.resource_versions = {spec.kind: rv for spec, (rv, _) in zip(self.kinds, listed, strict=True)}
        self._last_response = time.monotonic()
        self.metrics.synced(marked.generation, self.epoch)
        self._synced.set()
        log.info("podfit synced at generation %d (server epoch %s)", marked.generation, self.epoch or "-")
        return dict(self.resource_versions)

    @staticmethod
    def _same_epoch(expected: str | None, seen: str) -> str | None:
        if not seen:
            return expected
        if expected and seen != expected:
            raise Resync(f"podfit restarted during the sync (epoch {expected} -> {seen})")
        return seen

    def _check_epoch(self, seen: str) -> None:
        if seen and self.epoch and seen != self.epoch:
            raise Resync(f"podfit restarted (server epoch {self.epoch} -> {seen})")

    def _convert(self, kind: str, obj: Mapping[str, Any]) -> cc.ClusterObject | None:
        try:
            return manifest_to_object(obj, kind)
        except ConversionError as exc:
            meta = obj.get("metadata") or {}
            log.warning("skipping %s %s/%s: %s", kind, meta.get("namespace", ""), meta.get("name", ""), exc)
            return None

    def _url(self, spec: KindSpec) -> str:
        """The collection URL a list of ``spec`` asks (namespaced when the feed is), for error messages."""
        path = spec.path
        if spec.namespaced and self.scope.namespace:
            prefix, _, resource = path.rpartition("/")
            path = f"{prefix}/namespaces/{self.scope.namespace}/{resource}"
        return f"{getattr(self.api.configuration, 'host', '')}{path}"

    async def _list(self, spec: KindSpec) -> tuple[str, list[cc.ClusterObject]]:
        """A consistent, paginated list (no resourceVersion: the newest state, as a relist needs)."""
        method, arguments = self.scope.call(self.api, spec)
        url = self._url(spec)

        def fetch() -> tuple[str, list[dict[str, Any]]]:
            # In the thread: conversion of a large list must not stall the event loop.
            items: list[dict[str, Any]] = []
            token: str | None = None
            while True:
                try:
                    response = method(
                        **arguments,
                        limit=self.page_size,
                        _continue=token,
                        _preload_content=False,
                        _request_timeout=self.request_timeout_seconds,
                    )
                except ApiException as exc:
                    if exc.status == 410 and token:  # the continue token expired: list again from the start
                        items, token = [], None
                        continue
                    raise
                try:
                    page = json.loads(response.data)
                finally:
                    _close_response(response)
                items.extend(page.get("items") or [])
                metadata = page.get("metadata") or {}
                token = metadata.get("continue") or None
                if not token:
                    return str(metadata.get("resourceVersion") or ""), items

        def fetch_and_convert() -> tuple[str, list[cc.ClusterObject], int]:
            try:
                version, items = fetch()
            except _API_ERRORS as exc:
                raise ListFailed(spec.kind, url, exc) from exc
            objects = [o for o in (self._convert(spec.kind, item) for item in items) if o is not None]
            return version, objects, len(items) - len(objects)

        resource_version, objects, skipped = await _in_thread(fetch_and_convert)
        for _ in range(skipped):
            self.metrics.skipped(spec.kind)
        return resource_version, objects

    # -- running -----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Syncs, then follows every kind until cancelled; resyncs in full whenever podfit restarts."""
        retry = _Retry(self.backoff)
        while True:
            try:
                versions = await self.sync_once()
            except _SYNC_ERRORS as exc:
                # Resync here: the epoch changed between two responses of one sync (a restart, or several
                # podfit replicas behind one address, which needs one feeder per replica).
                delay = retry.next()
                log.warning("sync failed: %s; retrying in %.1fs", _describe(exc), delay)
                await asyncio.sleep(delay)
                continue
            retry.reset()
            try:
                await self._follow(versions)
            except Resync as exc:
                log.warning("%s: resyncing every kind", exc)
            except Exception:  # a bug: logged, and a full resync rather than a dead feeder
                delay = retry.next()
                log.exception("feeder failed; resyncing every kind in %.1fs", delay)
                await asyncio.sleep(delay)
            self._synced.clear()
            self.metrics.unsynced()
            self.metrics.resynced()

    async def _follow(self, versions: Mapping[str, str]) -> None:
        session = _Session(asyncio.Queue(maxsize=self.queue_size))
        self.metrics.dropped_pending(self.metrics.stats.pending)  # the old session's queue is gone
        self.metrics.pending_since(None)
        tasks = [asyncio.create_task(self._pump(session), name="podfit-feed-pump")]
        tasks.append(asyncio.create_task(self._housekeeping(), name="podfit-feed-housekeeping"))
        for spec in self.kinds:
            state = _KindState(versions[spec.kind])
            tasks.append(asyncio.create_task(self._watch_kind(session, spec, state), name=f"podfit-watch-{spec.kind}"))
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()  # raises Resync (or a bug)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- watching ----------------------------------------------------------------------------------

    async def _watch_kind(self, session: _Session, spec: KindSpec, state: _KindState) -> None:
        retry = _Retry(self.backoff)
        while True:
            state.delivered = False
            started = time.monotonic()
            try:
                await self._watch_once(session, spec, state)
                # Ended by the server at its timeout: re-watch at once, unless it ended at once and empty
                # (a misbehaving proxy), which must not become a busy loop.
                if state.delivered or time.monotonic() - started >= 1.0:
                    retry.reset()
                else:
                    await asyncio.sleep(retry.next())
            except _Gone:
                log.info("%s: resourceVersion %s is gone (410): relisting", spec.kind, state.resource_version)
                state.resource_version = self.resource_versions[spec.kind] = await self._relist(session, spec, retry)
                retry.reset()
            except _WATCH_ERRORS as exc:
                if state.delivered:
                    retry.reset()
                delay = retry.next()
                self.metrics.reconnected(spec.kind)
                log.warning(
                    "%s watch ended: %s; re-watching from resourceVersion %s in %.1fs",
                    spec.kind,
                    _describe(exc),
                    state.resource_version,
                    delay,
                )
                await asyncio.sleep(delay)

    async def _watch_once(self, session: _Session, spec: KindSpec, state: _KindState) -> None:
        method, arguments = self.scope.call(self.api, spec)
        timeout = watch_timeout(self.watch_timeout_seconds)

        def open_watch() -> Any:
            return method(
                **arguments,
                watch=True,
                resource_version=state.resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout,
                _preload_content=False,
                # connect, and read: the server ends the watch at its timeout; silence beyond that is a dead peer
                _request_timeout=(self.request_timeout_seconds, timeout + 30),
            )

        try:
            response = await _in_thread(open_watch, _close_response)
        except ApiException as exc:
            if exc.status == 410:
                raise _Gone(str(exc.reason)) from None
            raise
        stream = _WatchStream(response, spec.kind)
        try:
            async for line in stream.lines():
                await self._on_event(session, spec, state, json.loads(line))
        finally:
            stream.close()

    async def _on_event(self, session: _Session, spec: KindSpec, state: _KindState, event: Mapping[str, Any]) -> None:
        kind_of_event = str(event.get("type") or "")
        obj = event.get("object") or {}
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if kind_of_event == "ERROR":
            if obj.get("code") == 410:
                raise _Gone(str(obj.get("message") or ""))
            raise _WatchError(f"{obj.get('code')} {obj.get('reason')}: {obj.get('message')}")
        if kind_of_event == "BOOKMARK":
            self._advance(spec, state, version)
            return
        key = _object_key(spec.kind, obj)
        update: cc.Update | None = None
        if kind_of_event in ("ADDED", "MODIFIED"):
            converted = self._convert(spec.kind, obj)
            if converted is None:
                self.metrics.skipped(spec.kind)
            else:
                update = cc.Update(upsert=converted)
        elif kind_of_event == "DELETED":
            update = cc.Update(
                delete=cc.ObjectKey(
                    kind=cc.ObjectKind.ValueType(KIND_TO_ENUM[spec.kind]),
                    namespace=key[1],
                    name=key[2],
                    resource_version=version,
                )
            )
        else:
            log.warning("%s watch: ignoring an event of type %r", spec.kind, kind_of_event)
        if update is not None:
            self.metrics.received()
            await session.queue.put(_Event(spec.kind, key, update, time.monotonic()))
        self._advance(spec, state, version)

    def _advance(self, spec: KindSpec, state: _KindState, version: str) -> None:
        """The point a re-watch resumes from: the last event queued, or a bookmark."""
        if version:
            state.resource_version = self.resource_versions[spec.kind] = version
        state.delivered = True

    async def _relist(self, session: _Session, spec: KindSpec, retry: _Retry) -> str:
        while True:
            try:
                version, objects = await self._list(spec)
                break
            except _API_ERRORS as exc:
                delay = retry.next()
                log.warning("%s relist failed: %s; retrying in %.1fs", spec.kind, _describe(exc), delay)
                await asyncio.sleep(delay)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        await session.queue.put(_Barrier(spec.kind, objects, done))
        await done
        self.metrics.relisted(spec.kind)
        log.info("%s relisted: %d objects at resourceVersion %s", spec.kind, len(objects), version)
        return version

    # -- the podfit side ---------------------------------------------------------------------------

    async def _pump(self, session: _Session) -> None:
        """Keeps one Stream open; after a failure, re-opens it and resends what was not acknowledged."""
        retry = _Retry(self.backoff)
        while True:
            try:
                await self._stream(session, retry)
            except (PodfitError, grpc.RpcError, _StreamEnded) as exc:
                self.metrics.reconnected("podfit")
                log.warning("podfit stream ended: %s", _describe(exc))
            while True:  # wait for podfit; a new epoch ends the session (Resync)
                delay = retry.next()
                await asyncio.sleep(delay)
                try:
                    stats = await self.client.stats(timeout=self.request_timeout_seconds)
                except PodfitError as exc:
                    log.warning("podfit unreachable: %s; retrying", exc)
                    continue
                self._last_response = time.monotonic()
                self._check_epoch(stats.server_epoch)
                break

    async def _stream(self, session: _Session, retry: _Retry) -> None:
        requests: asyncio.Queue[cc.StreamRequest | None] = asyncio.Queue()
        for batch in session.inflight.values():
            requests.put_nowait(batch.request)

        async def source() -> AsyncIterator[cc.StreamRequest]:
            while (request := await requests.get()) is not None:
                yield request

        writer = asyncio.create_task(self._write(session, requests))
        reader = asyncio.create_task(self._read(session, self.client.stream(source()), requests, retry))
        try:
            done, _ = await asyncio.wait({writer, reader}, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()
        finally:
            requests.put_nowait(None)
            for task in (writer, reader):
                task.cancel()
            await asyncio.gather(writer, reader, return_exceptions=True)

    def _send(self, session: _Session, events: list[_Event], requests: asyncio.Queue[cc.StreamRequest | None]) -> None:
        self._sequence += 1
        request = cc.StreamRequest(sequence=self._sequence, updates=[e.update for e in events])
        session.inflight[self._sequence] = _Batch(request, events)
        requests.put_nowait(request)
        self._note_pending(session)

    def _note_pending(self, session: _Session) -> None:
        first = next(iter(session.inflight.values()), None)
        self.metrics.pending_since(first.events[0].arrived if first and first.events else None)

    async def _write(self, session: _Session, requests: asyncio.Queue[cc.StreamRequest | None]) -> None:
        while True:
            while len(session.inflight) >= self.window:
                session.changed.clear()
                await session.changed.wait()
            item = session.held or await session.queue.get()
            session.held = None
            if isinstance(item, _Barrier):
                session.held = item  # kept until done, so a failure retries it on the next stream
                while session.inflight:
                    session.changed.clear()
                    await session.changed.wait()
                try:
                    replaced = await self.client.replace(item.kind, item.objects, timeout=self.request_timeout_seconds)
                except PodfitError as exc:
                    if exc.code != grpc.StatusCode.INVALID_ARGUMENT:
                        raise  # podfit unreachable: the pump reconnects and this relist is retried
                    log.error("podfit refused the relist of %s: %s; the kind stays as it was", item.kind, exc)
                    self.metrics.refused(item.kind, len(item.objects))
                else:
                    self._last_response = time.monotonic()
                    self._check_epoch(replaced.server_epoch)
                session.held = None
                if not item.done.done():
                    item.done.set_result(None)
                continue
            events = [item]
            while len(events) < self.max_batch and not session.queue.empty():
                following = session.queue.get_nowait()
                if isinstance(following, _Barrier):
                    session.held = following
                    break
                events.append(following)
            self._send(session, events, requests)

    async def _read(
        self,
        session: _Session,
        responses: AsyncIterator[cc.StreamResponse],
        requests: asyncio.Queue[cc.StreamRequest | None],
        retry: _Retry,
    ) -> None:
        async for ack in responses:
            now = time.monotonic()
            self._last_response = now
            self._check_epoch(ack.server_epoch)
            batch = session.inflight.pop(ack.sequence, None)
            if batch is None:
                log.warning("podfit acknowledged unknown sequence %d", ack.sequence)
                continue
            retry.reset()
            if ack.error:
                self._refused(session, batch, ack, requests)
            else:
                counts: dict[str, int] = {}
                for event in batch.events:
                    counts[event.kind] = counts.get(event.kind, 0) + 1
                self.metrics.acknowledged(counts, [now - e.arrived for e in batch.events], ack.generation)
            self._note_pending(session)
            session.changed.set()
        raise _StreamEnded("podfit closed the stream")

    def _refused(
        self,
        session: _Session,
        batch: _Batch,
        ack: cc.StreamResponse,
        requests: asyncio.Queue[cc.StreamRequest | None],
    ) -> None:
        """podfit refused the batch atomically: drop the offending update, resend the others (minus those a
        later batch already supersedes, which must not be applied after it)."""
        match = _UPDATE_INDEX.match(ack.error_field)
        index = int(match.group(1)) if match else -1
        if not 0 <= index < len(batch.events):
            log.error("podfit refused a batch of %d updates: %s (%s)", len(batch.events), ack.error, ack.error_field)
            for event in batch.events:
                self.metrics.refused(event.kind)
            self.metrics.dropped_pending(len(batch.events))
            return
        bad = batch.events[index]
        log.error(
            "podfit refused %s %s/%s: %s (%s); dropped", bad.kind, bad.key[1], bad.key[2], ack.error, ack.error_field
        )
        self.metrics.refused(bad.kind)
        later = {e.key for b in session.inflight.values() for e in b.events}
        rest = [e for i, e in enumerate(batch.events) if i != index and e.key not in later]
        self.metrics.dropped_pending(len(batch.events) - len(rest))
        if rest:
            self._send(session, rest, requests)

    async def _housekeeping(self) -> None:
        """Polls Stats when podfit has been quiet (a restart is noticed without events); logs a summary."""
        tick = max(0.05, min(self.stats_interval_seconds, self.log_interval_seconds or self.stats_interval_seconds))
        last_log = time.monotonic()
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            if self.log_interval_seconds and now - last_log >= self.log_interval_seconds:
                last_log = now
                log.info("feeder: %s", self.stats.summary())
            if now - self._last_response >= self.stats_interval_seconds:
                try:
                    stats = await self.client.stats(timeout=self.request_timeout_seconds)
                except PodfitError:
                    continue  # an outage: the pump notices it and reconnects
                self._last_response = time.monotonic()
                self._check_epoch(stats.server_epoch)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        text = f"HTTP {exc.status} {exc.reason}"
        message = _status_message(exc.body)
        if message:
            text += f": {message}"  # the apiserver's own words: for a 403, the user, verb, resource and group
        if exc.status == 403:
            text += " (the feeder needs list and watch on every kind it feeds: ClusterRole podfit-feeder)"
        return text
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        exc = exc.reason  # "Max retries exceeded with url ... (Caused by ...)": the cause is the news
    if isinstance(exc, urllib3.exceptions.NewConnectionError):
        # "<HTTPSConnection(host=..., port=...) at 0x..>: Failed to establish a new connection: [Errno 111] ..."
        return str(exc).split(">: ", 1)[-1]
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0] if text else type(exc).__name__


def _status_message(body: object) -> str:
    """The ``message`` of a Kubernetes Status body, when the body is one."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not isinstance(body, str) or not body.startswith("{"):
        return ""
    try:
        status = json.loads(body)
    except json.JSONDecodeError:
        return ""
    message = status.get("message") if isinstance(status, dict) else None
    return message.strip() if isinstance(message, str) else ""
