"""Replicas on different machines: one replicated log (NATS JetStream), one elected owner, failover.

``--replicated-log nats://a:4222,nats://b:4222,...`` turns podfit-server into one replica of a group. The
log is the engine's, not podfit's: a JetStream stream replicated by the engine's own Raft (R3 on three
nodes), so podfit implements no consensus, replication protocol or election of its own.

- **One owner.** Replicas campaign for a lease (``transport.election``: a ``coordination.k8s.io/v1`` Lease
  in a cluster, a key of the engine's KV elsewhere), judged as client-go judges a Lease: lapsed once it has
  not changed for the holder's lease on the candidate's own clock, taken with optimistic concurrency; the
  owner renews it every third of the lease. The election only says who may own. The owner makes every write,
  exactly as a single process does (its cache records each one in a ``Journal``), and ships the journal's
  frames to the stream, in order, each append fenced by ``Nats-Expected-Last-Sequence``: an append succeeds
  only if the log ends where this owner believes it does. A new owner first appends an ``owner`` entry after
  the last entry it has applied, so once it has one, any append by a deposed owner fails — fencing by the
  log, not by timing. A deposed owner (fenced, or unable to renew within its lease) stops at once, as
  kube-scheduler does when it loses its lease, and starts again as a replica from the log.
- **Nothing acknowledged is lost.** Every answer the owner gives (a write's OK, and any decision that
  read it) waits until the log holds everything its cache held when it answered (``Durable``); an
  answer whose entry could not be appended is UNAVAILABLE, never OK.
- **Replicas** apply the log in order (a pull consumer from the sequence after their snapshot, read in
  batches of ``PULL_BATCH``) and
  answer every read-only call from their cache; writes and assumes go to the owner's peer address
  (named in its ``owner`` log entry) exactly as a decision worker's go to its owner (``transport.forward``), and the
  answer returns once this replica has applied the entry holding it: read-your-writes per connection.
- **Snapshots** (the cache's image at a log sequence) are kept in the engine's object store; the stream is
  purged below them (keeping a margin), so the log stays bounded, and a new or restarted replica loads
  the snapshot and then the log after it.
- **Readiness.** A replica is ready (gRPC health SERVING, ``/readyz`` 200) while it is connected to the
  engine and, at its last look at the log's end (every ``POLL_SECONDS``), at most ``MAX_LAG_ENTRIES``
  behind it; otherwise NOT_SERVING. The owner looks too: one it cut off from the engine is NOT_SERVING
  within ``POLL_SECONDS`` plus a second, before its lease runs out, and from then on refuses each write
  before making it (``Replica.writes_refused``) instead of holding it until its lease ends.
- **The extender's bind verb** is a write: made by the owner, answered once the log holds it
  (``ReplicaBinds``; the peer listener's Bind for a bind another replica received).

Entries and snapshots are pickled cache operations (the journal's), each sealed with an HMAC-SHA256 under
the group's shared key (``replication.keyFile``): nothing unsealed by that key is ever unpickled. The same
key authenticates peers on the owner's peer address.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import itertools
import json
import logging
import os
import pickle
import ssl
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import msgspec
import nats
from grpc_status import rpc_status
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    Header,
    KeyValueConfig,
    ObjectStoreConfig,
    StreamConfig,
)
from nats.js.errors import BadRequestError, KeyNotFoundError, NotFoundError
from nats.js.kv import KeyValue
from nats.js.object_store import ObjectStore
from podfit.server.cache.cluster_cache import Change
from podfit.server.cache.journal import Journal
from podfit.server.reserver import OwnerGone, ReservationMoved
from podfit.server.service import CacheNotSyncedError, SchedulingService
from podfit.server.transport.election import (
    LEASE_BUCKET,
    Election,
    EngineLease,
    KubeAccess,
    KubernetesLease,
    LeaseLost,
)
from podfit.server.transport.errors import status_for
from podfit.server.transport.extender import REFUSALS, Args, BadRequest, Extender, Handler, bind_here, decode_args
from podfit.server.transport.workers import (
    INTERNAL_OPTIONS,
    POSITION,
    POSITION_KEY,
    REPLICATION,
    TOKEN_KEY,
    Authenticated,
    committed,
    decode_commit,
    encode_commit,
)

log = logging.getLogger("podfit.server")
T = TypeVar("T")

STREAM = "PODFIT_LOG"
SUBJECT = "podfit.log"
SNAPSHOT_BUCKET = "podfit_snapshots"
SNAPSHOT_NAME = "cache"
COMMIT = f"{REPLICATION}/Commit"
BIND = f"{REPLICATION}/Bind"
# JetStream's "wrong last sequence": another owner appended since this one last did.
WRONG_LAST_SEQUENCE = 10071
_SEQ = struct.Struct("!Q")
_DIGEST = hashlib.sha256().digest_size
# How often a replica looks at where the log ends (readiness), and how far behind it may be and ready.
POLL_SECONDS = 0.25
MAX_LAG_ENTRIES = 64
# A replica reads the log PULL_BATCH entries per request at most; a request waits in the engine for
# PULL_SECONDS, with a heartbeat every PULL_HEARTBEAT_SECONDS while nothing is sent.
PULL_BATCH = 512
PULL_SECONDS = 2.0
PULL_HEARTBEAT_SECONDS = 0.5
# Behind the log's end with no entry arriving for this long: not ready, and the log is followed anew.
STALL_SECONDS = 1.0
# Entries kept in the stream below the newest snapshot, for replicas a little behind it.
SNAPSHOT_MARGIN = 1_000


class Fenced(Exception):
    """This process is not (any longer) the owner: the log moved on under it, or its lease is gone."""


class EngineSilent(Fenced):
    """The engine took no append for as long as a lease lasts: whoever owns, it is not this process."""


def seal(key: bytes, payload: bytes) -> bytes:
    return hmac.new(key, payload, hashlib.sha256).digest() + payload


def unseal(key: bytes, data: bytes) -> bytes:
    digest, payload = data[:_DIGEST], data[_DIGEST:]
    if not hmac.compare_digest(digest, hmac.new(key, payload, hashlib.sha256).digest()):
        raise ValueError("a log entry or snapshot not sealed with this group's key: refused")
    return payload


def engine_tls(ca_file: str, cert_file: str, key_file: str) -> ssl.SSLContext | None:
    """TLS to the engine: its nodes' certificates checked against ``ca_file`` (or the system's CAs) and
    their names against the URLs'; this replica's certificate presented when the engine asks for one.
    None when nothing is set: plain connections (``tls://`` URLs still use the system's CAs)."""
    if not (ca_file or cert_file):
        return None
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_file or None)
    if cert_file:
        context.load_cert_chain(cert_file, key_file)
    return context


def read_key(path: str) -> bytes:
    with open(path, "rb") as file:
        key = file.read().strip()
    if len(key) < 16:
        raise ValueError(f"replication.keyFile {path}: the key must be at least 16 bytes")
    return key


@dataclass(frozen=True, slots=True)
class ReplicationSettings:
    urls: Sequence[str]
    key: bytes
    # Where this replica's peer listener is reached by the others (named in its ``owner`` log entry when it owns).
    address: str
    # TLS to the engine: (CA, client certificate, its key) files, see ``engine_tls``; none set: plain.
    tls_files: tuple[str, str, str] = ("", "", "")
    lease_seconds: float = 5.0
    snapshot_entries: int = 1_000
    replicas: int = 3
    # The owner's election: a coordination.k8s.io/v1 Lease (namespace, name, how to reach the API server),
    # or None for the engine's KV lease.
    kubernetes_lease: KubeLease | None = None


@dataclass(frozen=True, slots=True)
class KubeLease:
    access: KubeAccess
    namespace: str
    name: str


def make_election(settings: ReplicationSettings, engine: Engine, identity: str) -> Election:
    """The election strategy the settings choose: a Kubernetes Lease, or the engine's KV lease."""
    kube = settings.kubernetes_lease
    if kube is not None:
        return KubernetesLease(kube.access, kube.namespace, kube.name, identity, settings.lease_seconds)
    return EngineLease(engine, identity, settings.address.encode(), settings.lease_seconds)


class Engine:
    """podfit's use of JetStream: the log stream, the lease bucket and the snapshot store."""

    def __init__(self, settings: ReplicationSettings) -> None:
        self.settings = settings
        self.nc: Any = None
        self.js: JetStreamContext | None = None
        self.lease: KeyValue | None = None
        self.snapshots: ObjectStore | None = None

    async def connect(self, timeout: float = 30.0) -> None:
        # A ping every lease, two unanswered and the connection is dropped and made again (the default, two
        # minutes, left a connection into a blackhole "connected" for four).
        self.nc = await nats.connect(
            list(self.settings.urls),
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.2,
            connect_timeout=2,
            ping_interval=self.settings.lease_seconds,  # type: ignore[arg-type,unused-ignore]
            max_outstanding_pings=2,
            **({"tls": tls} if (tls := engine_tls(*self.settings.tls_files)) is not None else {}),
        )
        self.js = self.nc.jetstream(timeout=5.0)
        replicas = min(self.settings.replicas, len(self.settings.urls))
        deadline = time.monotonic() + timeout
        while True:  # a cluster still electing its meta leader refuses for a moment
            try:
                await self.js.add_stream(StreamConfig(name=STREAM, subjects=[SUBJECT], num_replicas=replicas))
                self.lease = await self.js.create_key_value(
                    KeyValueConfig(bucket=LEASE_BUCKET, history=1, replicas=replicas)
                )
                self.snapshots = await self.js.create_object_store(
                    SNAPSHOT_BUCKET, ObjectStoreConfig(bucket=SNAPSHOT_BUCKET, replicas=replicas)
                )
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    @property
    def connected(self) -> bool:
        return bool(self.nc is not None and self.nc.is_connected)

    async def last_sequence(self) -> int:
        assert self.js is not None
        info = await self.js.stream_info(STREAM)
        return int(info.state.last_seq)

    async def append(self, entry: bytes, expected: int, message_id: str, within: float) -> int:
        """Appends ``entry`` if the log ends at ``expected``; its sequence. Fenced if another owner
        appended since; retried (the same message id, so never twice) while the engine does not answer,
        for at most ``within`` seconds."""
        assert self.js is not None
        headers = {"Nats-Expected-Last-Sequence": str(expected), "Nats-Msg-Id": message_id}
        deadline = time.monotonic() + within
        while True:
            try:
                ack = await self.js.publish(SUBJECT, entry, timeout=1.0, headers=dict(headers))
                return int(ack.seq)
            except BadRequestError as exc:
                if exc.err_code == WRONG_LAST_SEQUENCE:
                    raise Fenced(f"the log moved past {expected}: another owner appended") from exc
                raise
            except (TimeoutError, nats.errors.Error) as exc:
                if time.monotonic() > deadline:
                    raise EngineSilent(f"the engine did not take an append for {within:.1f} s") from exc
                await asyncio.sleep(0.05)

    async def put_snapshot(self, blob: bytes) -> None:
        assert self.snapshots is not None
        await self.snapshots.put(SNAPSHOT_NAME, blob)

    async def get_snapshot(self) -> bytes | None:
        assert self.snapshots is not None
        try:
            result = await self.snapshots.get(SNAPSHOT_NAME)
        except (NotFoundError, KeyNotFoundError, nats.js.errors.ObjectNotFoundError):
            return None
        return bytes(result.data or b"")

    async def purge_below(self, sequence: int) -> None:
        assert self.js is not None
        if sequence > 1:
            await self.js.purge_stream(STREAM, seq=sequence)

    async def close(self) -> None:
        if self.nc is not None:
            with contextlib.suppress(Exception):
                await self.nc.close()


class Shipper:
    """The owner's side of the log: the journal's frames, appended in order, each fenced by the sequence
    the previous one got. Frames published while an append is in flight go together in the next entry."""

    def __init__(self, engine: Engine, journal: Journal, key: bytes, last: int, identity: str) -> None:
        self.engine, self.journal, self.key = engine, journal, key
        self.last = last
        self.identity = identity
        # The journal position every answer so far is covered up to, and the entry holding it.
        self.durable = journal.position
        self.failed: BaseException | None = None
        self._moved = asyncio.Condition()
        self._ids = itertools.count(1)
        self._task: asyncio.Task[None] | None = None
        self.appended = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        follower = -1
        position = self.journal.cursor(follower)
        try:
            while True:
                frames = await self.journal.follow(follower, position)
                end = frames[-1][0]
                entry = seal(self.key, pickle.dumps(("frames", [frame for _, frame in frames])))
                self.last = await self.engine.append(
                    entry, self.last, f"{self.identity}-{next(self._ids)}", self.engine.settings.lease_seconds
                )
                self.appended += 1
                position = self.durable = end
                async with self._moved:
                    self._moved.notify_all()
        except BaseException as exc:
            self.failed = exc
            async with self._moved:
                self._moved.notify_all()
            if not isinstance(exc, asyncio.CancelledError):
                log.error("owner: the log refused an append (%s): this process is no longer the owner", exc)
        finally:
            self.journal.forget(follower)

    async def covered(self, position: int) -> int:
        """Waits until the log holds the journal up to ``position``; the log's sequence then. Fenced when
        it never will."""
        if self.durable < position:
            async with self._moved:
                await self._moved.wait_for(lambda: self.durable >= position or self.failed is not None)
        if self.durable < position:
            raise Fenced("this process is no longer the owner: its last writes are not in the log")
        return self.last

    async def landed(self) -> None:
        """Returns when the next append has landed (or the shipper stopped)."""
        async with self._moved:
            await self._moved.wait()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


async def _retrying(call: Callable[[], Awaitable[T]], within: float) -> T:
    """``call()`` again while the engine does not answer (a cluster still electing its leaders)."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await call()
        except (TimeoutError, nats.errors.Error):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


def _encode_entry(kind: str, value: Any) -> bytes:
    return pickle.dumps((kind, value), protocol=pickle.HIGHEST_PROTOCOL)


class Replica:
    """One replica of the group: its cache fed from the log, and — while it holds the lease — the owner.

    ``on_ready(bool)`` is called as readiness changes; ``on_promoted()`` when this replica becomes the
    owner (its servicers then make writes instead of forwarding them); ``on_deposed(why)`` when it was the
    owner and no longer is (the process stops)."""

    def __init__(
        self,
        service: SchedulingService,
        settings: ReplicationSettings,
        on_ready: Callable[[bool], Awaitable[None]],
        on_promoted: Callable[[], None],
        on_deposed: Callable[[str], None],
    ) -> None:
        self.service = service
        self.settings = settings
        self.engine = Engine(settings)
        self.key = settings.key
        self.identity = f"{settings.address}/{os.getpid()}/{os.urandom(4).hex()}"
        self.election = make_election(settings, self.engine, self.identity)
        self.on_ready, self.on_promoted, self.on_deposed = on_ready, on_promoted, on_deposed
        # The last log entry applied to this cache.
        self.applied = 0
        self.log_end = 0
        self.owner = False
        self.owner_address = ""
        self.shipper: Shipper | None = None
        self.journal: Journal | None = None
        self._moved = asyncio.Condition()
        self.ended = asyncio.Event()
        self._subscription: Any = None
        self._follower: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._ready = False
        self._channel: grpc.aio.Channel | None = None
        self._channel_address = ""
        self.metadata = ((TOKEN_KEY, hashlib.sha256(self.key).digest().hex()),)
        # The owner's private directory, hidden from callers in a peer's refusals (forward.pass_on).
        self.directory = "\0"
        self.promoted_at = 0.0
        self.entries_applied = 0
        self.deposed = False
        # Why this owner cannot take a write now (cut off from the log's end), as last seen; "" when it can.
        self.cut_off = ""

    # -- start: snapshot, then the log after it -----------------------------------------------------

    async def start(self, timeout: float = 30.0) -> None:
        await self.engine.connect(timeout)
        blob = await _retrying(self.engine.get_snapshot, timeout)
        if blob:
            self._load(blob)
        started, first = time.monotonic(), self.applied
        await _retrying(self._subscribe, timeout)
        # Caught up with the log as it ends now before answering anything.
        self.log_end = await _retrying(self.engine.last_sequence, timeout)
        await self.caught_up(self.log_end)
        took = time.monotonic() - started
        log.info(
            "replica caught up with %d log entries in %.2f s (%.0f entries/s)",
            self.applied - first,
            took,
            (self.applied - first) / max(took, 1e-6),
        )
        self._tasks = [asyncio.create_task(self._campaign()), asyncio.create_task(self._watch())]
        log.info("replica at log entry %d (generation %d)", self.applied, self.service.generation)

    def _load(self, blob: bytes) -> None:
        (sequence,) = _SEQ.unpack_from(blob)
        epoch, synced, state, *owner = pickle.loads(unseal(self.key, blob[_SEQ.size :]))
        self.service.cache.restore_image(state)
        self.service.epoch = epoch
        if owner:
            # The owner that took it: its ``owner`` entry may be below the snapshot, purged, and writes
            # are forwarded to it (an older snapshot names none: the next ``owner`` entry does).
            self.owner_address = owner[0]
        if synced and not self.service.synced:
            asyncio.get_running_loop().create_task(self.service.mark_synced())
        self.applied = sequence
        log.info("replica loaded the snapshot at log entry %d", sequence)

    async def _subscribe(self) -> None:
        """Follows the log from the entry after this cache's: a task of its own (``_follow``)."""
        self._follower = asyncio.create_task(self._follow())

    async def _resubscribe(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
            await asyncio.gather(self._follower, return_exceptions=True)
        if not self.owner:
            self._follower = asyncio.create_task(self._follow())

    async def _follow(self) -> None:
        """Reads the log in order, in batches, through a pull consumer of its own made from the entry after
        this cache's (``_pull``); whatever goes wrong with it (an engine node that died with it, entries lost
        while the connection was made again), it is made anew from the entry after the last applied."""
        while not self.owner and not self.ended.is_set():
            try:
                await self._pull()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("replica: reading the log: %r", exc)
                await asyncio.sleep(0.1)

    async def _pull(self) -> None:
        """One pull consumer (ephemeral, in memory, no acks) from the entry after this cache's, asked for
        PULL_BATCH entries at a time; each entry is applied as it arrives, so a replica far behind gets a
        batch per round trip and one caught up gets each append as soon as the stream holds it (the request
        waits in the engine for it). A request expires after PULL_SECONDS and is made again; the engine's
        heartbeat comes every PULL_HEARTBEAT_SECONDS while nothing else does, and none for three of them
        means the consumer is gone: returns, and ``_follow`` makes another."""
        nc, js = self.engine.nc, self.engine.js
        assert nc is not None and js is not None
        inbox = nc.new_inbox()
        # Delivered into a queue of this task's: taking a message already there costs no timer (nats-py's
        # next_msg starts a task and a timeout for each, which cost more than applying the entry).
        arrived: asyncio.Queue[Any] = asyncio.Queue()

        async def deliver(msg: Any) -> None:
            arrived.put_nowait(msg)

        subscription = self._subscription = await nc.subscribe(inbox, cb=deliver)
        name = f"podfit-{os.urandom(8).hex()}"
        try:
            config = ConsumerConfig(
                name=name,
                deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                opt_start_seq=self.applied + 1,
                ack_policy=AckPolicy.NONE,
                filter_subject=SUBJECT,
                inactive_threshold=PULL_SECONDS * 4,
                mem_storage=True,
                num_replicas=1,
            )
            await js.add_consumer(STREAM, config, timeout=2.0)
            request = json.dumps(
                {
                    "batch": PULL_BATCH,
                    "expires": int(PULL_SECONDS * 1e9),
                    "idle_heartbeat": int(PULL_HEARTBEAT_SECONDS * 1e9),
                }
            ).encode()
            next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.{name}"
            while not self.owner and not self.ended.is_set():
                await nc.publish(next_subject, request, reply=inbox)
                delivered = 0
                while delivered < PULL_BATCH:
                    if arrived.empty():
                        msg = await asyncio.wait_for(arrived.get(), PULL_HEARTBEAT_SECONDS * 3)
                    else:
                        msg = arrived.get_nowait()
                    status = (msg.headers or {}).get(Header.STATUS)
                    if status == "100":  # the engine's heartbeat: the consumer is there, nothing new yet
                        continue
                    if status in ("404", "408"):  # the request expired (408), or found nothing: ask again
                        break
                    if status:  # the consumer is gone, its leader moved, ...: make another
                        raise RuntimeError(
                            f"the log's consumer answered {status} {msg.headers.get(Header.DESCRIPTION)}"
                        )
                    delivered += 1
                    sequence = int(msg.metadata.sequence.stream)
                    if sequence != self.applied + 1:
                        # Entries missing: purged below a snapshot, or delivered while the connection was
                        # down. Asked for by sequence, the next one says which (``_on_entry``); then follow
                        # again from after it.
                        found = await js.get_msg(STREAM, seq=self.applied + 1, subject=SUBJECT, next=True)
                        await self._on_entry(int(found.seq or 0), found.data or b"")
                        return
                    await self._on_entry(sequence, msg.data or b"")
        finally:
            self._subscription = None
            with contextlib.suppress(Exception):
                await subscription.unsubscribe()
            # Ephemeral: it also goes by itself after inactive_threshold.
            asyncio.get_running_loop().create_task(self._forget_consumer(name))

    async def _forget_consumer(self, name: str) -> None:
        assert self.engine.js is not None
        with contextlib.suppress(Exception):
            await self.engine.js.delete_consumer(STREAM, name)

    async def _on_entry(self, sequence: int, data: bytes) -> None:
        if sequence <= self.applied:
            return
        try:
            if sequence != self.applied + 1:
                # Purged below a snapshot this replica had not reached: start again from the snapshot.
                blob = await asyncio.wait_for(self.engine.get_snapshot(), 30)
                if blob is None or _SEQ.unpack_from(blob)[0] < sequence - 1:
                    raise RuntimeError(
                        f"log entries {self.applied + 1}..{sequence - 1} are gone and no snapshot holds them"
                    )
                async with self.service.gate.shared(first=True):
                    self._load(blob)
                if sequence <= self.applied:
                    return
            kind, value = pickle.loads(unseal(self.key, data))
            async with self.service.gate.shared(first=True):
                await self._apply(kind, value)
            self.applied = sequence
            self.entries_applied += 1
        except Exception as exc:
            log.exception("replica: cannot apply log entry %d: this replica stops", sequence)
            self._lost(f"cannot apply log entry {sequence}: {exc}")
        async with self._moved:
            self._moved.notify_all()

    async def _apply(self, kind: str, value: Any) -> None:
        if kind == "owner":
            self.owner_address, epoch = value
            self.service.epoch = epoch
            return
        for frame in value:
            for op, argument in pickle.loads(frame):
                if op == "apply":
                    self.service.cache.apply(argument)
                elif op == "synced":
                    await self.service.mark_synced(argument)

    def _lost(self, why: str) -> None:
        self.service.replica_lost = why
        self.ended.set()

    def writes_refused(self) -> str:
        """Why this owner refuses a write now, before making it: at its last look it could not see the log's
        end (``_watch``), so an answer would wait up to a lease for an append that may never land. "" when it
        takes writes (and in a replica that is not the owner: it forwards them). Refusing early changes no
        fencing: an owner cut off is deposed by the log, as ever."""
        if not self.owner or not self.cut_off:
            return ""
        return (
            f"the owner cannot reach the replicated log ({self.cut_off}): the write was not made; retry "
            "(another replica takes over if this one stays cut off)"
        )

    # -- the peer channel to the owner (transport.forward's OwnerLink uses it) ------------------------

    @property
    def channel(self) -> grpc.aio.Channel:
        if self._channel is None or self._channel_address != self.owner_address:
            if self._channel is not None:
                asyncio.get_running_loop().create_task(self._channel.close())
            self._channel = grpc.aio.insecure_channel(self.owner_address or "127.0.0.1:1", options=INTERNAL_OPTIONS)
            self._channel_address = self.owner_address
        return self._channel

    async def caught_up(self, position: int) -> None:
        """Returns once this cache holds the log up to entry ``position``; OwnerGone if it never will."""
        async with self._moved:
            await self._moved.wait_for(lambda: self.applied >= position or self.ended.is_set())
        if self.applied < position:
            raise OwnerGone("this replica lost the log")

    async def barrier(self, timeout: float | None = None) -> None:
        """Catches up with everything acknowledged so far: the log's end."""
        if self.owner:
            return
        if timeout is not None:
            end = await asyncio.wait_for(self.engine.last_sequence(), timeout)
        else:
            end = await self.engine.last_sequence()
        await self.caught_up(end)

    async def commit(self, generation: int, changes: Sequence[Change]) -> int:
        """A reservation decided on this replica, made by the owner if its cache is still at ``generation``
        (as a decision worker's: Reservations); the answer follows once this replica applied it."""
        call = self.channel.unary_unary(COMMIT, request_serializer=_identity, response_deserializer=_identity)
        try:
            answer = await call(encode_commit(generation, changes), metadata=self.metadata, timeout=10.0)
        except grpc.aio.AioRpcError as exc:
            raise OwnerGone(f"the owner did not take the reservation: {exc.code().name} {exc.details()}") from exc
        if not answer:
            raise ReservationMoved(f"the owner's cache moved past generation {generation}")
        sequence, assumed = _SEQ.unpack_from(answer), _SEQ.unpack_from(answer, _SEQ.size)
        committed.set(sequence[0])
        return int(assumed[0])

    # -- ownership -------------------------------------------------------------------------------

    async def _campaign(self) -> None:
        """Takes the lease when it is free, released or lapsed (``transport.election``: judged on this
        replica's own clock, taken with optimistic concurrency, so two candidates never both win), then
        holds it (renewing) for as long as this process owns."""
        election = self.election
        warned, warned_at = "", 0.0
        while not self.owner:
            try:
                held = await election.acquire()
            except Exception as exc:  # no answer, or refused: look again (the same warning once per 10 s)
                if repr(exc) != warned or time.monotonic() - warned_at > 10:
                    log.warning("campaigning for the %s: %r", election.describe(), exc)
                    warned, warned_at = repr(exc), time.monotonic()
                held = False
            while held:
                try:
                    await self._promote()
                    break
                except Exception as exc:
                    # The engine did not answer in time (electing a leader, say): keep the lease if it is
                    # still this replica's, and try again; otherwise campaign again.
                    log.warning("taking over as owner did not finish (%r): trying again", exc)
                    try:
                        await election.renew()
                    except Exception:
                        held = False
            if not self.owner:
                await asyncio.sleep(election.retry_seconds)
        await self._hold()

    async def _promote(self) -> None:
        """Catches up with the log, then fences it with an ``owner`` entry; from then on this replica
        makes every write and appends it."""
        started = renewed = time.monotonic()
        while True:
            if time.monotonic() - started > self.settings.lease_seconds * 2 / 3:
                raise TimeoutError("catching up with the log took too long")
            if time.monotonic() - renewed > self.settings.lease_seconds / 3:
                # Still catching up (the engine slow to answer): the lease must not lapse meanwhile.
                await self.election.renew()
                renewed = time.monotonic()
            end = await self.engine.last_sequence()
            await asyncio.wait_for(self.caught_up(end), self.settings.lease_seconds / 3)
            entry = seal(self.key, _encode_entry("owner", (self.settings.address, self.service.epoch)))
            try:
                fence = await self.engine.append(
                    entry, end, f"{self.identity}-owner-{end}", self.settings.lease_seconds
                )
                break
            except EngineSilent:
                raise
            except Fenced:
                continue  # a deposed owner's last append landed meanwhile: it is in the log; apply it first
        await self.caught_up(fence)
        if self._follower is not None:  # the owner writes the log; it no longer reads it
            self._follower.cancel()
        if self._subscription is not None:
            with contextlib.suppress(Exception):
                await self._subscription.unsubscribe()
        journal = self.journal = Journal()
        journal.bind(asyncio.get_running_loop())
        self.service.cache.journal = journal
        self.service.gate.after_heavy.append(journal.publish)
        self.shipper = Shipper(self.engine, journal, self.key, fence, self.identity)
        self.shipper.start()
        self.owner = True
        self.promoted_at = time.monotonic()
        self.owner_address = self.settings.address
        self.on_promoted()
        log.info(
            "this replica is the owner from log entry %d (took over in %.3f s; %s)",
            fence,
            time.monotonic() - started,
            self.election.describe(),
        )
        self._tasks.append(asyncio.create_task(self._snapshots()))

    async def _hold(self) -> None:
        """Renews the lease every third of its duration; a refused renewal, or none for two thirds of it
        (the renew deadline, shorter than the lease a candidate waits out), deposes this owner."""
        lease = self.settings.lease_seconds
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(lease / 3)
            if self.shipper is not None and self.shipper.failed is not None:
                self._depose(f"the log refused an append: {self.shipper.failed}")
                return
            try:
                await asyncio.wait_for(self.election.renew(), lease / 3)
                renewed = time.monotonic()
            except LeaseLost as exc:
                self._depose(str(exc))
                return
            except Exception:
                if time.monotonic() - renewed > lease * 2 / 3:
                    self._depose(f"the lease was not renewed for {time.monotonic() - renewed:.1f} s")
                    return

    def _depose(self, why: str) -> None:
        log.error("this replica is no longer the owner (%s): it stops, to start again from the log", why)
        self.owner = False
        self.deposed = True
        self.service.replica_lost = f"no longer the owner: {why}"
        self.ended.set()
        self.on_deposed(why)

    async def covered(self) -> int:
        """In the owner: waits until the log holds every write made so far; the log's sequence then."""
        if self.shipper is None or self.journal is None:
            return self.applied
        return await self.shipper.covered(self.journal.position)

    async def _snapshots(self) -> None:
        """The owner's snapshots: the cache's image at a log entry, every ``snapshot_entries`` entries,
        taken while nothing is waiting to be appended; the log below it (less a margin) is purged. Under a
        steady stream of writes something is nearly always waiting: the image is then taken just as an
        append lands (before the next write arrives), trying for up to a second (checked only once a
        second, snapshots were starved: 3,000 sequential writes went by with none)."""
        assert self.shipper is not None and self.journal is not None
        shipper, journal, service = self.shipper, self.journal, self.service
        last = shipper.last
        while True:
            await asyncio.sleep(1.0)
            if shipper.last - last < self.settings.snapshot_entries:
                continue
            state: Any = None
            trying_until = time.monotonic() + 1.0
            while state is None and shipper.failed is None and time.monotonic() < trying_until:
                async with service.gate.shared():
                    if shipper.durable == journal.position:
                        sequence = shipper.last
                        state = (service.epoch, service.synced, service.cache.image(), self.settings.address)
                if state is None:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(shipper.landed(), 0.1)
            if state is None:
                continue
            try:
                blob = await asyncio.to_thread(pickle.dumps, state, pickle.HIGHEST_PROTOCOL)
                await self.engine.put_snapshot(_SEQ.pack(sequence) + seal(self.key, blob))
                await self.engine.purge_below(sequence + 1 - SNAPSHOT_MARGIN)
                last = sequence
                log.info("snapshot at log entry %d (%d bytes)", sequence, len(blob))
            except Exception:
                log.exception("snapshot at log entry %d not stored", sequence)

    # -- readiness -------------------------------------------------------------------------------

    async def _watch(self) -> None:
        """Readiness: connected, and (a replica) at most MAX_LAG_ENTRIES behind the log's end as last seen."""
        progress, behind_since = self.applied, 0.0
        while not self.ended.is_set():
            ready = False
            try:
                if self.owner:
                    if not self.engine.connected:
                        self.cut_off = "not connected to the engine"
                    elif self.shipper is not None and self.shipper.failed is not None:
                        self.cut_off = f"the log refused an append: {self.shipper.failed}"
                    else:
                        # A link gone silent (a blackhole keeps the connection open) shows only here: the
                        # engine must answer this look within 1 s, or the owner is not ready.
                        try:
                            await asyncio.wait_for(self.engine.last_sequence(), 1.0)
                            self.cut_off = ""
                        except TimeoutError:
                            self.cut_off = "the engine did not say where the log ends within 1 s"
                        except Exception as exc:
                            self.cut_off = f"the engine did not say where the log ends: {exc!r}"
                    ready = not self.cut_off
                else:
                    self.log_end = await asyncio.wait_for(self.engine.last_sequence(), 1.0)
                    now = time.monotonic()
                    if self.applied >= self.log_end or self.applied != progress:
                        behind_since = 0.0 if self.applied >= self.log_end else now
                    elif not behind_since:
                        behind_since = now
                    progress = self.applied
                    stalled = bool(behind_since) and now - behind_since > STALL_SECONDS
                    ready = self.engine.connected and self.log_end - self.applied <= MAX_LAG_ENTRIES and not stalled
                    if stalled:
                        # Entries wait and none arrives (its consumer was on an engine node that died, say):
                        # follow the log again from the entry after this cache's.
                        log.warning("replica: no log entry for %.1f s while behind: following anew", now - behind_since)
                        await self._resubscribe()
                        behind_since = now
            except Exception:
                ready = False
            if ready != self._ready:
                self._ready = ready
                log.info(
                    "replica %s (log entry %d of %d)", "ready" if ready else "not ready", self.applied, self.log_end
                )
                await self.on_ready(ready)
            await asyncio.sleep(POLL_SECONDS)
        if self._ready:
            self._ready = False
            await self.on_ready(False)

    async def close(self) -> None:
        """Stops following, campaigning and appending; an owner stopping gracefully then releases its lease
        (the next owner need not wait for it to lapse: it still fences the log before its first write)."""
        if self._follower is not None:
            self._follower.cancel()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.shipper is not None:
            await self.shipper.stop()
        if self.owner and not self.deposed:
            await self.election.release()
            log.info("released the %s", self.election.describe())
        await self.election.close()
        if self._channel is not None:
            await self._channel.close()
        await self.engine.close()


def _identity(data: bytes) -> bytes:
    return data


class Durable(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """In the owner: no answer leaves before the log holds every write its cache held when it answered
    (an OK for a write, and any decision that may have read one); UNAVAILABLE when the log refused it."""

    def __init__(self, replica: Replica) -> None:
        self.replica = replica

    async def _covered(self, context: grpc.aio.ServicerContext) -> None:
        try:
            await self.replica.covered()
        except Fenced as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"{exc}; retry (another replica takes over)")

    async def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(details)
        if handler is None or details.method.startswith("/grpc.health.v1.Health/"):
            return handler
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                response = await inner(request, context)
                await self._covered(context)
                return response

            return handler._replace(unary_unary=unary)
        behavior = handler.stream_stream or handler.unary_stream
        if behavior is None or asyncio.iscoroutinefunction(behavior):
            return handler

        async def streaming(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async for response in behavior(request, context):
                await self._covered(context)
                yield response

        if handler.stream_stream is not None:
            return handler._replace(stream_stream=streaming)
        return handler._replace(unary_stream=streaming)


class PeerPositions(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """On the owner's peer listener: a forwarded write's answer ends with the log entry that holds it, so
    the forwarding replica answers once it has applied that entry (read-your-writes); a replica that is not
    the owner refuses (UNAVAILABLE: the caller's replica retries with the owner the lease names)."""

    def __init__(self, replica: Replica) -> None:
        self.replica = replica

    async def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        replica = self.replica
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                if not replica.owner:
                    await context.abort(grpc.StatusCode.UNAVAILABLE, "not the owner")
                if why := replica.writes_refused():
                    # With the status details of a refusal: the forwarding replica passes the why on.
                    await context.abort_with_status(rpc_status.to_status(status_for(OwnerGone(why))))
                response = await inner(request, context)
                try:
                    sequence = await replica.covered()
                except Fenced as exc:
                    await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
                context.set_trailing_metadata(((POSITION_KEY, str(sequence)),))
                return response

            return handler._replace(unary_unary=unary)
        return handler


def peer_handlers(replica: Replica, service: SchedulingService) -> grpc.GenericRpcHandler:
    """Position (the log entry every acknowledged write is in), Commit (a replica's reservation) and Bind
    (the extender's bind verb a replica received)."""
    extender = Extender(service)

    async def position(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return _SEQ.pack(await replica.covered())

    async def commit(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            generation, pod, node_name = decode_commit(request)
        except ValueError as exc:
            log.warning("a replica's reservation refused: %s", exc)
            return b""
        async with service.gate.shared():
            if service.cache.generation != generation:
                return b""
            try:
                assumed = service.assume(pod, node_name)
            except Exception:  # refused here: the owner answers the whole call and says why
                return b""
        return _SEQ.pack(await replica.covered()) + _SEQ.pack(assumed)

    async def bind(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        """The bind verb as this owner's extender answers it: ``{"result": ...}``, or ``{"refused": why}``
        for what it would answer 400 (the caller's replica answers the same)."""
        try:
            service.require_synced()
            answer = {"result": await bind_here(service, extender.bind, decode_args(request))}
        except CacheNotSyncedError as exc:
            answer = {"unsynced": str(exc)}
        except REFUSALS as exc:
            answer = {"refused": str(exc)}
        return msgspec.json.encode(answer)

    return grpc.method_handlers_generic_handler(
        REPLICATION.lstrip("/"),
        {
            "Position": grpc.unary_unary_rpc_method_handler(
                position, request_deserializer=_identity, response_serializer=_identity
            ),
            "Commit": grpc.unary_unary_rpc_method_handler(
                commit, request_deserializer=_identity, response_serializer=_identity
            ),
            "Bind": grpc.unary_unary_rpc_method_handler(
                bind, request_deserializer=_identity, response_serializer=_identity
            ),
        },
    )


class ReplicaBinds:
    """The extender's bind verb on a replica (``transport.extender.Binds``): a write like any other. The
    owner makes it and answers once the log holds it; any other replica sends it to the owner (its peer
    listener's Bind) and answers once it has applied the log entry holding it, so kube-scheduler reads
    its bind on the replica it asked. No owner answering, or an owner cut off from the log: OwnerGone (503)."""

    # As long as a forwarded write may take (a reservation: Replica.commit).
    TIMEOUT_SECONDS = 10.0

    def __init__(self, replica: Replica) -> None:
        self.replica = replica

    async def bind(self, args: Args, here: Handler) -> Any:
        replica = self.replica
        if replica.owner:
            if why := replica.writes_refused():
                raise OwnerGone(why)
            result = await here(args)
            try:
                await replica.covered()
            except Fenced as exc:
                raise OwnerGone(f"{exc}; another replica takes over") from exc
            return result
        call = replica.channel.unary_unary(BIND, request_serializer=_identity, response_deserializer=_identity)
        answer = call(msgspec.json.encode(dict(args)), metadata=replica.metadata, timeout=self.TIMEOUT_SECONDS)
        try:
            body = await answer
            trailing = dict(await answer.trailing_metadata() or ())
        except grpc.aio.AioRpcError as exc:
            why = exc.details() or exc.code().name
            raise OwnerGone(f"no owner of the replica group took the bind ({why})") from exc
        position = trailing.get(POSITION_KEY)
        if isinstance(position, str):
            await replica.caught_up(int(position))
        decoded = msgspec.json.decode(body)
        if "refused" in decoded:
            raise BadRequest(decoded["refused"])
        if "unsynced" in decoded:
            raise CacheNotSyncedError()
        return decoded["result"]


async def start_peer_server(
    replica: Replica, service: SchedulingService, register: Callable[[grpc.aio.Server], None]
) -> grpc.aio.Server:
    """The peer listener: the public services (writes forwarded by other replicas) and Position/Commit,
    for callers with the group's key; answered only while this replica is the owner."""
    token = hashlib.sha256(replica.key).digest()
    # Durable too: a forwarded Stream's answers leave only once the log holds each batch.
    interceptors = [Authenticated(token), PeerPositions(replica), Durable(replica)]
    server = grpc.aio.server(interceptors=interceptors, options=INTERNAL_OPTIONS)
    register(server)
    server.add_generic_rpc_handlers((peer_handlers(replica, service),))
    if server.add_insecure_port(replica.settings.address) == 0:
        raise OSError(f"cannot listen on replication.peerAddr {replica.settings.address}")
    await server.start()
    return server


__all__ = ["POSITION", "Durable", "Fenced", "Replica", "ReplicaBinds", "ReplicationSettings", "start_peer_server"]
