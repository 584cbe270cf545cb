"""Decision workers: podfit-server on every core, with one owner of the cache.

``--workers N`` runs N processes behind the same listeners (SO_REUSEPORT: the kernel spreads connections
over them). The first is the **owner**: its cache is the cluster, and every write — Apply, Replace,
Stream, MarkSynced, a Schedule that assumes, a batch that is not a dry run, the extender's bind — is
made there, one at a time, exactly as a single process makes it. The other N-1 are **workers**: each keeps
a replica of the owner's cache, fed from the owner's journal (podfit.server.cache.journal) over a private
Unix socket, and answers the read-only calls (Filter, Score, Schedule without assume, Preempt, the
Simulation service, BestOptions, the extender's filter and prioritize) from it on its own core. A write
that reaches a worker is forwarded to the owner as it came, and answered once the worker's replica has
caught up with it, so a client sees its own writes on the same connection; Get, List and Stats wait
for the replica to catch up with the owner before answering. A decision made by a worker reflects every
write the owner acknowledged before the worker received it, give or take the replication delay (well
under a millisecond on an idle machine): the same promise an informer-fed kube-scheduler makes.

Reservations are serialised in one place, so no node is ever overbooked across workers and assuming
calls keep a single process's exactness. This is also the shape replicas across machines take: the
owner becomes a Lease-elected leader, the journal a network stream, and everything else stays as is.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import logging
import math
import os
import pickle
import secrets
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any

import grpc
from podfit.server.cache.cluster_cache import Change, Upsert
from podfit.server.cache.journal import FollowerDropped, Journal
from podfit.server.metrics import retire
from podfit.server.model import Kind, Pod
from podfit.server.reserver import OwnerGone, ReservationMoved
from podfit.server.service import GivenPod, SchedulingService
from podfit.server.transport.convert import upsert_from_object
from podfit.v1 import cluster_cache_pb2 as cc
from prometheus_client import CollectorRegistry, generate_latest

log = logging.getLogger("podfit.server")

# The private gRPC socket: the public services (writes a worker forwards) and these.
REPLICATION = "/podfit.internal.Replication"
POSITION = f"{REPLICATION}/Position"
READY = f"{REPLICATION}/Ready"
METRICS = f"{REPLICATION}/Metrics"
# The internal socket carries whole requests of any size: no message limit there.
INTERNAL_OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
# Trailing metadata of the owner's answer to a forwarded write: where its journal stands after it.
POSITION_KEY = "podfit-journal-position"
# Every call and connection on the private socket starts with this secret, which the owner hands each
# worker on its standard input (never in argv or the environment, which other processes can read).
TOKEN_KEY = "podfit-internal-token"
TOKEN_BYTES = 32
# A reservation on the stream: version, the generation it was decided at, then the pod's stored form (a
# serialized podfit.v1 ClusterObject, bound to its node). Typed and versioned: the owner decodes it as it
# decodes an Apply, and never unpickles anything a peer sends.
COMMIT_VERSION = 1
_COMMIT = struct.Struct("!BQ")
# The journal and the reservations travel on a plain Unix stream beside the gRPC socket: a gRPC message
# costs each side more CPU than the write it carries (a reservation's round trip took ~1 ms over gRPC
# against ~0.4 ms here, on 2 busy cores). A connection says first which it is.
STREAM_SOCKET = "replica.sock"
FOLLOW, COMMIT = b"F", b"C"
_LENGTH = struct.Struct("!I")
_POSITION = struct.Struct("!Q")
# A journal frame's header: the position after it, and the length of its pickled operations.
_FRAME = struct.Struct("!QQ")
# The image of the cache is written in pieces, each awaited (the owner's loop stays responsive).
CHUNK_BYTES = 8 * 1024 * 1024
# How long a scrape waits for a worker's figures.
METRICS_TIMEOUT_SECONDS = 2.0
# How long the owner waits at start for its workers to listen before it says it is listening itself.
START_TIMEOUT_SECONDS = 60.0


def default_workers(cgroup: str = "/sys/fs/cgroup") -> int:
    """Processes on the listeners by default: one per core this process may use, but one alone on two
    cores or fewer — there a single caller (kube-scheduler's extender calls, one decider) gains nothing from
    a second process and pays its replication, and the what-if process has the other core."""
    cores = available_cores(cgroup)
    return 1 if cores <= 2 else cores


def available_cores(cgroup: str = "/sys/fs/cgroup") -> int:
    """The cores this process may use: those it may run on, fewer under a CPU quota (a container's CPU
    limit leaves every core of the machine in the affinity mask)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    quota = _cpu_quota(cgroup)
    return max(1, min(cores, math.ceil(quota))) if quota else cores


def _cpu_quota(cgroup: str) -> float | None:
    """CPUs the cgroup may use (cgroup v2 ``cpu.max``, or v1's CFS quota and period); None: no limit."""
    try:
        with open(os.path.join(cgroup, "cpu.max")) as limit:
            quota, period = limit.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        with (
            open(os.path.join(cgroup, "cpu", "cpu.cfs_quota_us")) as q,
            open(os.path.join(cgroup, "cpu", "cpu.cfs_period_us")) as p,
        ):
            quota_us, period_us = int(q.read()), int(p.read())
        return None if quota_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None


def _identity(data: bytes) -> bytes:
    return data


# The position a decision worker must reach before answering the current call (its reservation's).
committed: ContextVar[int] = ContextVar("podfit_committed", default=0)


class _Positions(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Ends each successful unary answer on the private socket with the journal's position after it, so
    the forwarding worker waits for exactly that much of the journal."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    async def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        inner = handler.unary_unary

        async def behavior(request: Any, context: grpc.aio.ServicerContext) -> Any:
            response = await inner(request, context)
            context.set_trailing_metadata(((POSITION_KEY, str(self.journal.position)),))
            return response

        return handler._replace(unary_unary=behavior)


class Authenticated(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Refuses every call on the private socket that does not carry the owner's token: the socket's
    directory is the owner's alone, and this keeps it so even where another process shares the UID."""

    def __init__(self, token: bytes) -> None:
        self.token = token.hex()

    async def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> Any:
        given = dict(details.invocation_metadata or ()).get(TOKEN_KEY, "")
        if isinstance(given, str) and hmac.compare_digest(given, self.token):
            return await continuation(details)

        async def refuse(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "not a decision worker of this server")

        return grpc.unary_unary_rpc_method_handler(refuse, request_deserializer=_identity)


def encode_commit(generation: int, changes: Sequence[Change]) -> bytes:
    """A reservation for the owner: the pod's bound source, nothing the owner would have to trust."""
    pod = changes[0]
    if not isinstance(pod, Upsert) or pod.kind is not Kind.POD or not pod.source:
        raise ValueError("a reservation starts with the bound pod's stored form")
    return _COMMIT.pack(COMMIT_VERSION, generation) + pod.source


def decode_commit(request: bytes) -> tuple[int, GivenPod, str]:
    """(generation, the pod with its source, its node): ValueError for anything else."""
    if len(request) < _COMMIT.size:
        raise ValueError("a reservation too short for its header")
    version, generation = _COMMIT.unpack_from(request)
    if version != COMMIT_VERSION:
        raise ValueError(f"reservation encoding {version}, this owner reads {COMMIT_VERSION}")
    source = request[_COMMIT.size :]
    try:
        upsert = upsert_from_object(cc.ClusterObject.FromString(source), "reservation", Kind.POD)
    except Exception as exc:  # any undecodable or invalid pod: refused, never applied
        raise ValueError(f"a reservation that is no pod: {exc}") from None
    pod = upsert.obj
    if not isinstance(pod, Pod) or not pod.node_name:
        raise ValueError("a reservation of a pod bound to no node")
    return int(generation), GivenPod(pod, source), pod.node_name


class Owner:
    """The owner's side: the journal, the private socket the workers follow and forward to, and the
    worker processes themselves (restarted if one dies)."""

    def __init__(self, service: SchedulingService, command: Sequence[str], count: int, what_if: bool = False) -> None:
        self.service = service
        self.command = list(command)
        self.count = count
        # Whether a what-if process runs beside the workers (podfit.server.transport.what_if).
        self.what_if = what_if
        # Processes that report ready: the workers, and the what-if process.
        self.expected = count - 1 + int(what_if)
        self.journal = Journal()
        self.directory = tempfile.mkdtemp(prefix="podfit-owner-")
        os.chmod(self.directory, 0o700)
        self.target = f"unix:{os.path.join(self.directory, 'owner.sock')}"
        self.server: grpc.aio.Server | None = None
        self._stream_server: asyncio.Server | None = None
        # The workers' stream connections, each served by a task of its own (ended at stop).
        self._connections: set[asyncio.Task[Any]] = set()
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self._supervisors: list[asyncio.Task[None]] = []
        self._stopping = False
        self._followers = itertools.count(1)
        self.ready: set[int] = set()
        self._all_ready = asyncio.Event()
        # Each connected worker's metrics stream: a scrape puts a future here, the stream fills it.
        self._scrapes: set[asyncio.Queue[asyncio.Future[bytes]]] = set()
        self._last: dict[asyncio.Queue[asyncio.Future[bytes]], bytes] = {}
        # The counters and histograms of every worker that went away, summed into one exposition (so
        # none falls back, and a crash-looping worker adds nothing to keep).
        self.retired_metrics = b""
        # What each worker proves it is one, on every call and connection (see TOKEN_KEY).
        self.token = secrets.token_bytes(TOKEN_BYTES)

    async def start(self, register: Any) -> None:
        """Starts the private listener, with ``register(server)`` adding the public servicers (a worker
        forwards writes to them), then the workers."""
        self.journal.bind(asyncio.get_running_loop())
        self.service.cache.journal = self.journal
        self.service.gate.after_heavy.append(self.journal.publish)
        server = grpc.aio.server(
            interceptors=[Authenticated(self.token), _Positions(self.journal)], options=INTERNAL_OPTIONS
        )
        register(server)
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    REPLICATION.lstrip("/"),
                    {
                        "Position": grpc.unary_unary_rpc_method_handler(
                            self._position, request_deserializer=_identity, response_serializer=_identity
                        ),
                        "Ready": grpc.unary_unary_rpc_method_handler(
                            self._ready, request_deserializer=_identity, response_serializer=_identity
                        ),
                        "Metrics": grpc.stream_stream_rpc_method_handler(
                            self._metrics, request_deserializer=_identity, response_serializer=_identity
                        ),
                    },
                ),
            )
        )
        server.add_insecure_port(self.target)
        await server.start()
        self.server = server
        self._stream_server = await asyncio.start_unix_server(
            self._serve_stream, path=os.path.join(self.directory, STREAM_SOCKET)
        )
        for index in range(1, self.count):
            self._supervisors.append(asyncio.create_task(self._supervise(index)))
        if self.what_if:
            self._supervisors.append(asyncio.create_task(self._supervise(self.count, what_if=True)))

    async def wait_ready(self, stop: asyncio.Event) -> None:
        """Returns once every worker listens, ``stop`` is set, or START_TIMEOUT_SECONDS have passed."""
        if not self.expected:
            return
        waits = [asyncio.create_task(self._all_ready.wait()), asyncio.create_task(stop.wait())]
        await asyncio.wait(waits, timeout=START_TIMEOUT_SECONDS, return_when=asyncio.FIRST_COMPLETED)
        for task in waits:
            task.cancel()
        if not self._all_ready.is_set() and not stop.is_set():
            log.warning(
                "%d of %d decision workers listen after %.0f s; the owner serves without the others",
                *(len(self.ready), self.expected, START_TIMEOUT_SECONDS),
            )

    async def _metrics(self, requests: Any, context: grpc.aio.ServicerContext) -> None:
        """A worker's metrics stream: at each scrape the owner asks, the worker answers its exposition."""
        scrapes: asyncio.Queue[asyncio.Future[bytes]] = asyncio.Queue()
        self._scrapes.add(scrapes)
        try:
            while True:
                wanted = await scrapes.get()
                await context.write(b"")
                answer = await context.read()
                if answer is grpc.aio.EOF:
                    return
                self._last[scrapes] = answer
                if not wanted.done():  # a scrape that gave up on it has its last answer
                    wanted.set_result(answer)
        finally:
            self._scrapes.discard(scrapes)
            # A worker that went away keeps counting in /metrics: its counters must not fall back.
            if (last := self._last.pop(scrapes, None)) is not None:
                self.retired_metrics = retire(self.retired_metrics, last)

    async def worker_metrics(self) -> tuple[list[bytes], list[bytes]]:
        """For the owner's /metrics: each connected worker's Prometheus exposition (its last one when it
        does not answer in time), and the last of each worker that went away."""
        loop = asyncio.get_running_loop()
        asked: dict[asyncio.Future[bytes], asyncio.Queue[asyncio.Future[bytes]]] = {}
        for scrapes in list(self._scrapes):
            future: asyncio.Future[bytes] = loop.create_future()
            scrapes.put_nowait(future)
            asked[future] = scrapes
        answers = []
        if asked:
            done, _ = await asyncio.wait(asked, timeout=METRICS_TIMEOUT_SECONDS)
            for future, scrapes in asked.items():
                if future in done:
                    answers.append(future.result())
                else:
                    future.cancel()
                    if scrapes in self._last:
                        answers.append(self._last[scrapes])
        return answers, [self.retired_metrics] if self.retired_metrics else []

    async def _ready(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        """A worker has loaded its image and listens."""
        self.ready.add(int(request.decode()))
        if len(self.ready) >= self.expected:
            self._all_ready.set()
        return b""

    async def _follow(self, writer: asyncio.StreamWriter) -> None:
        """A worker's replica: an image of the cache, then every journal frame after it, as published."""
        follower = next(self._followers)
        service = self.service
        # A follower let go for lagging is closed at once, even while this task waits for it to drain.
        self.journal.on_drop(follower, writer.transport.abort)
        try:
            # The image is the cache frozen at this position (pointer copies on the loop, with no batch half
            # done), pickled on a thread while the owner goes on writing and deciding.
            async with service.gate.shared():
                position = self.journal.cursor(follower)
                state = (service.epoch, service.synced, service.cache.image())
            image = await asyncio.to_thread(pickle.dumps, state, pickle.HIGHEST_PROTOCOL)
            writer.write(_POSITION.pack(position) + _POSITION.pack(len(image)))
            for start in range(0, len(image), CHUNK_BYTES):
                writer.write(image[start : start + CHUNK_BYTES])
                await writer.drain()
            while True:
                for end, frame in await self.journal.follow(follower, position):
                    writer.write(_POSITION.pack(end) + _POSITION.pack(len(frame)) + frame)
                    position = end
                await writer.drain()
        finally:
            self.journal.forget(follower)

    async def _position(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        # Everything acknowledged is published (a heavy call's writes are acknowledged once it ends).
        return _POSITION.pack(self.journal.position)

    async def _serve_stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A worker's connection: FOLLOW (its replica's journal) or COMMIT (its reservations)."""
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            kind = await reader.readexactly(1)
            if not hmac.compare_digest(await reader.readexactly(TOKEN_BYTES), self.token):
                log.warning("a connection to the owner's private socket without its token: closed")
                return
            if kind == FOLLOW:
                await self._follow(writer)
                return
            while True:
                (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
                answer = await self._commit(await reader.readexactly(length))
                writer.write(_LENGTH.pack(len(answer)) + answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except FollowerDropped as exc:
            log.error("%s: its connection is closed, and it starts again from a new image", exc)
        except asyncio.CancelledError:
            # stop() ends every connection so. The task is asyncio's own connection handler, which nothing
            # awaits, and Python 3.11's StreamReaderProtocol logs one that ends cancelled as an error with a
            # traceback at each shutdown; ending it here keeps the log to what went wrong.
            pass
        finally:
            writer.close()
            if task is not None:
                self._connections.discard(task)

    async def _commit(self, request: bytes) -> bytes:
        """A worker's reservation, made if the cache is still at the generation it was decided on: then
        the worker's replica was the owner's cache, and the decision is the one the owner would make.
        Otherwise (or if the reservation is refused) b"": the worker sends the whole call here instead."""
        try:
            generation, pod, node_name = decode_commit(request)
        except ValueError as exc:
            log.warning("a decision worker's reservation refused: %s", exc)
            return b""
        service = self.service
        async with service.gate.shared():
            if service.cache.generation != generation:
                return b""
            before = self.journal.position
            try:
                assumed = service.assume(pod, node_name)
            except Exception:  # refused here, for any reason: the owner answers the whole call and says why
                log.debug("a decision worker's reservation refused by the owner", exc_info=True)
                return b""
            # Published at once (this is the loop's thread): the reservation is the journal's next operation.
            position = self.journal.position
        if position != before + 1:  # it changed nothing: let the owner answer the call whole
            return b""
        return _POSITION.pack(position) + _POSITION.pack(assumed)

    def _spawn(self, index: int, what_if: bool) -> subprocess.Popen[bytes]:
        command = [*self.command, "--follow", self.target, *(["--what-if"] if what_if else [])]
        process = subprocess.Popen(command, stdin=subprocess.PIPE)
        assert process.stdin is not None
        with contextlib.suppress(OSError):  # one that died at once is restarted like any other
            process.stdin.write(self.token.hex().encode() + b"\n")
            process.stdin.close()
        log.info("%s started (pid %d)", _role(index, what_if), process.pid)
        return process

    async def _supervise(self, index: int, what_if: bool = False) -> None:
        """Keeps worker ``index`` (or the what-if process) running: one that dies is logged and started
        again, after a pause that doubles (up to 30 s) while it keeps dying young, so a process that cannot
        start does not spin."""
        pause = 1.0
        while not self._stopping:
            started = time.monotonic()
            process = self.processes[index] = self._spawn(index, what_if)
            code = await asyncio.to_thread(process.wait)
            if self._stopping:
                return
            pause = 1.0 if time.monotonic() - started > 60 else min(pause * 2, 30.0)
            log.error(
                "%s (pid %d) exited with %s: starting it again in %.0f s",
                *(_role(index, what_if), process.pid, code, pause),
            )
            await asyncio.sleep(pause)

    async def stop(self, timeout: float = 10.0) -> None:
        """Stops the workers (SIGTERM: they drain as the owner does), then the private listener."""
        self._stopping = True
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                await asyncio.wait_for(asyncio.to_thread(process.wait), timeout)
            except TimeoutError:
                process.kill()
                await asyncio.to_thread(process.wait)
        for task in self._supervisors:
            task.cancel()
        if self._stream_server is not None:
            self._stream_server.close()
        for connection in list(self._connections):
            connection.cancel()
        if self.server is not None:
            await self.server.stop(0)
        shutil.rmtree(self.directory, ignore_errors=True)


def _role(index: int, what_if: bool) -> str:
    return "the what-if process" if what_if else f"decision worker {index}"


def _check_owner_directory(path: str) -> None:
    """The owner's socket must be in a directory only this user can write (the owner made it ``0700``):
    then what answers there is the owner, and its image and journal may be loaded."""
    info = os.stat(os.path.dirname(path))
    if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
        raise OwnerGone(f"the owner's directory is open to others (mode {stat.S_IMODE(info.st_mode):o}): refusing it")


def read_token(stream: Any = None) -> bytes:
    """The owner's token, as the owner writes it to a worker's standard input."""
    line = (stream or sys.stdin).readline().strip()
    try:
        token = bytes.fromhex(line)
    except ValueError:
        token = b""
    if len(token) != TOKEN_BYTES:
        raise OwnerGone("no token from the owner on standard input")
    return token


class Follower:
    """A worker's side: its replica of the owner's cache, and the channel writes are forwarded on.

    The journal is read as it arrives and applied ahead of any call waiting for the gate, so a decision
    queued behind a heavy call never runs on a replica older than what this worker had received."""

    # A decision worker never becomes the owner (OwnerLink.here).
    owner = False

    def __init__(
        self, service: SchedulingService, target: str, token: bytes, registry: CollectorRegistry | None = None
    ) -> None:
        self.service = service
        self.token = token
        self.channel = grpc.aio.insecure_channel(target, options=INTERNAL_OPTIONS)
        # Sent with every call on the private channel.
        self.metadata = ((TOKEN_KEY, token.hex()),)
        # The owner's private directory (never shown to callers: see forward.OwnerLink._relay).
        self.directory = os.path.dirname(target.removeprefix("unix:"))
        self.stream_path = os.path.join(self.directory, STREAM_SOCKET)
        self._commits: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._journal: asyncio.StreamWriter | None = None
        self._commit_lock = asyncio.Lock()
        self.registry = registry
        self._metrics_task: asyncio.Task[None] | None = None
        self.position = 0
        # Journal frames read but not yet applied, and the position after the last of them.
        self._received: list[tuple[int, bytes]] = []
        self.received = 0
        self._arrived = asyncio.Event()
        self._moved = asyncio.Condition()
        self.ended = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def _connect(self, kind: bytes, limit: int = 2**16) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        _check_owner_directory(self.stream_path)
        reader, writer = await asyncio.open_unix_connection(self.stream_path, limit=limit)
        writer.write(kind + self.token)
        return reader, writer

    async def start(self) -> None:
        """Loads the owner's image of the cache (before this worker listens), then follows its journal."""
        reader, writer = await self._connect(FOLLOW, CHUNK_BYTES)
        (position,) = _POSITION.unpack(await reader.readexactly(_POSITION.size))
        (length,) = _POSITION.unpack(await reader.readexactly(_POSITION.size))
        epoch, synced, state = pickle.loads(await reader.readexactly(length))
        service = self.service
        service.cache.restore_image(state)
        service.epoch = epoch
        if synced:
            await service.mark_synced()
        self.position = self.received = position
        self._journal = writer
        self._tasks = [asyncio.create_task(self._read(reader)), asyncio.create_task(self._replay())]

    async def _read(self, reader: asyncio.StreamReader) -> None:
        """Receives the journal's frames as they come, whatever the gate is doing."""
        try:
            while True:
                end, length = _FRAME.unpack(await reader.readexactly(_FRAME.size))
                self._received.append((end, await reader.readexactly(length)))
                self.received = end
                self._arrived.set()
        except (asyncio.IncompleteReadError, ConnectionError):
            log.error("decision worker: the owner's journal ended: this worker stops answering")
            self._lost("the owner's journal ended")

    async def _replay(self) -> None:
        """Applies what was received, in order, ahead of the calls queued for the gate."""
        try:
            while True:
                await self._arrived.wait()
                self._arrived.clear()
                async with self.service.gate.shared(first=True):
                    frames, self._received = self._received, []
                    for end, frame in frames:
                        ops = pickle.loads(frame)
                        for at, op in enumerate(ops, start=end - len(ops) + 1):
                            if at > self.position:  # else this worker made it already (its own reservation)
                                await self._apply(op)
                                self.position = at
                async with self._moved:
                    self._moved.notify_all()
        except Exception:
            log.exception("decision worker: cannot apply the owner's journal: this worker stops answering")
            self._lost("its replica could not apply the owner's journal")

    def _lost(self, why: str) -> None:
        """The replica can no longer be kept current: no decision is answered from it from now on."""
        self.service.replica_lost = why
        self.ended.set()
        if self._tasks:
            asyncio.get_running_loop().create_task(self._wake())

    async def _wake(self) -> None:
        async with self._moved:
            self._moved.notify_all()

    async def _apply(self, op: tuple[str, Any]) -> None:
        kind, value = op
        if kind == "apply":
            self.service.cache.apply(value)
        elif kind == "synced":
            await self.service.mark_synced(value)

    async def current(self) -> None:
        """Returns once the replica holds everything this worker has received (at once, normally)."""
        if self.position < self.received:
            await self.caught_up(self.received)

    async def caught_up(self, position: int) -> None:
        """Returns once the replica holds everything up to ``position``; OwnerGone if it never will."""
        async with self._moved:
            await self._moved.wait_for(lambda: self.position >= position or self.ended.is_set())
        if self.position < position:
            raise OwnerGone("the owner process is gone")

    async def commit(self, generation: int, changes: Sequence[Change]) -> int:
        """Has the owner make a reservation decided on this replica at ``generation`` (Reservations)."""
        request = encode_commit(generation, changes)
        async with self._commit_lock:
            try:
                if self._commits is None:
                    self._commits = await self._connect(COMMIT)
                reader, writer = self._commits
                writer.write(_LENGTH.pack(len(request)) + request)
                await writer.drain()
                (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
                answer = await reader.readexactly(length)
            except (OSError, asyncio.IncompleteReadError) as exc:
                self._drop_commits()
                raise OwnerGone("the owner process is gone") from exc
            except BaseException:
                self._drop_commits()  # cancelled mid-exchange: the stream's framing is lost with it
                raise
        if not answer:
            raise ReservationMoved(f"the cache moved past generation {generation}")
        (position,) = _POSITION.unpack_from(answer)
        (assumed,) = _POSITION.unpack_from(answer, _POSITION.size)
        cache = self.service.cache
        if self.position == position - 1 and cache.generation == generation:
            # The reservation is the journal's next operation after this replica's: make it here now
            # rather than wait for it to come round (the journal's copy is then skipped).
            cache.apply(changes)
            self.position = position
        else:
            committed.set(position)
        return int(assumed)

    def _drop_commits(self) -> None:
        if self._commits is not None:
            self._commits[1].close()
            self._commits = None

    async def listening(self) -> None:
        """Tells the owner this worker answers calls now."""
        ready = self.channel.unary_unary(READY, request_serializer=_identity, response_deserializer=_identity)
        await ready(str(os.getpid()).encode(), metadata=self.metadata)
        if self.registry is not None:
            self._metrics_task = asyncio.create_task(self._answer_scrapes(self.registry))

    async def _answer_scrapes(self, registry: CollectorRegistry) -> None:
        """Answers the owner's scrapes with this worker's figures for as long as the owner is there."""
        while not self.ended.is_set():
            metrics = self.channel.stream_stream(METRICS, request_serializer=_identity, response_deserializer=_identity)
            call = metrics(metadata=self.metadata)
            with contextlib.suppress(grpc.aio.AioRpcError):
                while await call.read() is not grpc.aio.EOF:
                    await call.write(bytes(generate_latest(registry)))
            await asyncio.sleep(1.0)

    def writes_refused(self) -> str:
        """A decision worker never owns the cache: it forwards every write."""
        return ""

    async def barrier(self, timeout: float | None = None) -> None:
        """Catches the replica up with everything the owner has acknowledged so far."""
        position_of = self.channel.unary_unary(POSITION, request_serializer=_identity, response_deserializer=_identity)
        (position,) = _POSITION.unpack(await position_of(b"", timeout=timeout, metadata=self.metadata))
        await self.caught_up(position)

    async def close(self) -> None:
        for task in (*self._tasks, self._metrics_task):
            if task is not None:
                task.cancel()
        self._drop_commits()
        if self._journal is not None:
            self._journal.close()
        await self.channel.close()
