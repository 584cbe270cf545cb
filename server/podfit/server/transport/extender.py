"""The kube-scheduler extender endpoint (``k8s.io/kube-scheduler/extender/v1``) over HTTP/JSON.

kube-scheduler, configured with an ``extenders:`` entry, POSTs ExtenderArgs to ``<prefix>/filter`` and
``<prefix>/prioritize``, ExtenderPreemptionArgs to ``<prefix>/preempt`` and ExtenderBindingArgs to
``<prefix>/bind``. Keys are the Go field names (``Pod``, ``NodeNames``, ``FailedNodes``...), unused
alternatives are explicit ``null``, and any non-200 answer is an error to the scheduler, so bad input
is a 400 with a one-line message. Decisions come from the same SchedulingService as the gRPC API.

On a server started with --wait-for-sync, every verb answers 503 (``{"Error": ..., "reason":
"CACHE_NOT_SYNCED"}``) until a feeder marks the cache synced, so a kube-scheduler whose extender entry is
``ignorable: true`` skips podfit instead of obeying an empty cache; ``GET /readyz`` is 503 until then too.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import msgspec
import numpy as np
from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError
from podfit.k8s.limits import UntrustedInputError, bounded, check_json
from podfit.server.cache.cluster_cache import UpdateRejected
from podfit.server.engine import Decision, UnknownNodeError, UnknownProfileError
from podfit.server.framework.interfaces import BytesArray, Int64Array
from podfit.server.framework.status import Code
from podfit.server.model import Node, Pod, ValidationError
from podfit.server.model.objects import pod_from_k8s
from podfit.server.reserver import OwnerGone
from podfit.server.service import CachedPod, CacheNotSyncedError, NotFoundError, SchedulingService, Scoring, decided
from podfit.server.transport.errors import RateLimitedLog

log = logging.getLogger("podfit.server.extender")
_log_unexpected = RateLimitedLog(log)
_log_rejected = RateLimitedLog(log)
MAX_EXTENDER_PRIORITY = 10
DEFAULT_PREFIX = "/scheduler"
REASON_NOT_CACHED = "node(s) not found in podfit's cache"
CACHE_NOT_SYNCED = "CACHE_NOT_SYNCED"
BIND_DISABLED = "the bind verb is disabled on this server (podfit-server --extender-bind enables it)"
MAX_BODY_BYTES = web.AppKey("max_body_bytes", int)
# How long a request body may take to arrive (the connection idle timeout, as for slow headers).
BODY_TIMEOUT = web.AppKey("body_timeout", float)
# What the request metrics count for a client that went away before its answer (nginx's convention).
CLIENT_CLOSED_REQUEST = 499
# kube-scheduler's extender client keeps connections alive between calls; this closes forgotten ones.
DEFAULT_IDLE_TIMEOUT_SECONDS = 60.0


class BadRequest(ValueError):
    """Answered with HTTP 400."""


class Encoded(bytes):
    """An answer already encoded as JSON (a prioritize answered from the round its filter kept)."""


def _json_response(body: Any, status: int = 200) -> web.Response:
    data = body if isinstance(body, Encoded) else msgspec.json.encode(body)
    return web.Response(body=data, status=status, content_type="application/json")


# The body's top-level fields stay raw JSON until a verb reads them: without a node cache kube-scheduler
# sends ~750 KB of v1 Nodes per call, of which podfit needs each node's name, uid and resourceVersion
# (the cache holds the rest) and returns the passing ones verbatim.
Args = Mapping[str, msgspec.Raw]
_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])


class _Meta(msgspec.Struct):
    name: str = ""
    uid: str = ""
    resourceVersion: str = ""


class _Head(msgspec.Struct):
    """What podfit reads of a Node before knowing whether it must convert the whole object."""

    metadata: _Meta = msgspec.field(default_factory=_Meta)


class _NodeList(msgspec.Struct):
    items: list[msgspec.Raw] | None = None


_HEAD = msgspec.json.Decoder(_Head)
_NAMES = msgspec.json.Decoder(list[str] | None)
_NODE_LIST = msgspec.json.Decoder(_NodeList)


class ClientGone(Exception):
    """The client closed the connection before its request body arrived: nobody is left to answer."""


async def _body(request: web.Request) -> Args:
    """The request body decoded; a body that cannot be decompressed is a 400, one that takes longer than
    the idle timeout to arrive ends in 408 (and the connection closes), a client that leaves is ClientGone."""
    try:
        if request.content.is_eof():
            raw = await request.read()  # all there already (kube-scheduler's bodies are small): no timer
        else:
            raw = await asyncio.wait_for(request.read(), request.app[BODY_TIMEOUT])
    except RequestPayloadError as exc:
        raise BadRequest(f"request body cannot be read: {bounded(str(exc).strip(), 200)}") from None
    except TimeoutError:
        raise web.HTTPRequestTimeout(
            text=msgspec.json.encode({"Error": "the request body did not arrive within the idle timeout"}).decode(),
            content_type="application/json",
            headers={"Connection": "close"},
        ) from None
    except ConnectionError:
        raise ClientGone from None
    return decode_args(raw)


def decode_args(raw: bytes) -> Args:
    """A request body's top-level fields (each kept raw); BadRequest when it is not a JSON object."""
    try:
        return _FIELDS.decode(raw)
    except msgspec.ValidationError:
        raise BadRequest("request body must be a JSON object") from None
    except msgspec.DecodeError as exc:
        raise BadRequest(f"request body is not valid JSON: {bounded(str(exc), 200)}") from None
    except RecursionError:
        raise BadRequest("request body nests too deeply") from None


def _field(args: Args, key: str) -> Any:
    """A top-level field decoded (None when absent or null); what becomes Python objects is bounded first
    (Nodes are not: they stay raw, decoded by msgspec into fixed structs)."""
    raw = args.get(key)
    if raw is None:
        return None
    try:
        check_json(bytes(raw), key)
        return msgspec.json.decode(raw)
    except UntrustedInputError as exc:
        raise BadRequest(str(exc)) from None
    except RecursionError:
        raise BadRequest(f"{key}: nests too deeply") from None


def _pod(args: Args) -> Pod:
    pod = _field(args, "Pod")
    if not isinstance(pod, dict):
        raise BadRequest("Pod: is required")
    # The spec's bytes key its derived fields: kube-scheduler asks about replicas one after another.
    spec = _FIELDS.decode(args["Pod"]).get("spec")
    return pod_from_k8s(pod, "Pod", bytes(spec) if spec is not None else b"")


def _node_items(raw: msgspec.Raw) -> list[tuple[msgspec.Raw, _Meta]] | None:
    """ExtenderArgs.Nodes as (the item as sent, its metadata); None for a null NodeList."""
    try:
        node_list = _NODE_LIST.decode(raw) if bytes(raw) != b"null" else None
    except msgspec.ValidationError as exc:
        raise BadRequest(f"Nodes: {exc}") from None
    if node_list is None:
        return None
    items = []
    for i, item in enumerate(node_list.items or ()):
        try:
            items.append((item, _HEAD.decode(item).metadata))
        except msgspec.ValidationError as exc:
            raise BadRequest(f"Nodes.items[{i}]: {exc}") from None
    return items


class _Scored(NamedTuple):
    """A filter call's scores: its decision, scored, and the prioritize answer for exactly the nodes it
    passed, encoded, when kube-scheduler is known to send them back as ``_Round.sent_json``."""

    decision: Decision
    answer: Encoded | None = None


class _Round(NamedTuple):
    """A filter call's answer, kept for the prioritize call kube-scheduler makes next for the same pod."""

    # The nodes the filter passed: names, or (name, uid, resourceVersion); made a set only when a
    # prioritize call does not send them back exactly (below).
    passing: Collection[Any]
    # Scored once the filter has answered (kube-scheduler scores on its side meanwhile), at the filter's
    # generation; None when the cache moved on first or the scoring failed (prioritize decides again).
    scored: asyncio.Future[_Scored | None]
    # What kube-scheduler sends prioritize when it sends the nodes this filter passed, as JSON, in field
    # ``sent_field``: the passing names as the filter answered them (the request's own bytes when every
    # node passed), or, every whole Node passing, the request's Nodes (re-encoded the same by Go).
    sent_json: bytes = b""
    sent_field: str = "NodeNames"


_SCORING: set[asyncio.Future[_Scored | None]] = set()

# Filter answers kept for prioritize: kube-scheduler asks one pod at a time, so a few cover several
# schedulers (or profiles) sharing podfit; each holds its pod's scored decision.
MAX_ROUNDS = 16


class Extender:
    def __init__(self, service: SchedulingService) -> None:
        self.service = service
        # Set by the first prioritize call: from then on filter scores too, and prioritize reuses that.
        self.scores_wanted = False
        self.rounds: OrderedDict[bytes, _Round] = OrderedDict()
        self.rounds_reused = 0

    # -- verbs -----------------------------------------------------------------------------------

    async def filter(self, args: Args) -> dict[str, Any]:
        """ExtenderArgs -> ExtenderFilterResult. Once kube-scheduler is known to call prioritize, the
        decision also scores the passing nodes, right after this answer is sent (kube-scheduler runs its
        own scoring meanwhile), and prioritize answers from it: each pod is decided once."""
        pod = _pod(args)
        scored = self.scores_wanted
        sent = _Sent.of(args)
        decision, order, unknown, full_nodes, scoring = await self._decide(
            args, pod, score=scored, sent=sent, filter_first=True
        )
        rejected = decision.rejections()
        failed: dict[str, str] = {}
        unresolvable = {name: REASON_NOT_CACHED for name in unknown}
        for name, status in rejected.items():
            if status.code is Code.UNSCHEDULABLE:
                failed[name] = status.message
            else:
                unresolvable[name] = status.message
        # Usually every node sent passes: the answer is then the request's own list, not a copy of it.
        everyone = not rejected and not unknown and not decision.gated
        passing = order if everyone else [n for n in order if n not in rejected and n not in unknown]
        if decision.gated:
            passing = []
        error = decision.message if decision.gated else ""
        names: Any = passing
        if everyone and full_nodes is None:
            names = args["NodeNames"]  # raw JSON, answered verbatim
        if scored and passing and not decision.failed:
            if full_nodes is None:
                listed = bytes(names) if everyone else msgspec.json.encode(passing)
                spliced = sent if everyone else None
                kept = _Round(passing, self._score(scoring, passing, spliced), listed)
            else:
                keep_set = set(passing)
                identities = frozenset(_identity(m) for _, m in full_nodes if m.name in keep_set)
                answered = self._score(scoring, passing, None, encode=everyone)
                kept = _Round(identities, answered)
                if everyone:
                    kept = kept._replace(sent_json=bytes(args["Nodes"]), sent_field="Nodes")
            self._keep(args, kept)
        if full_nodes is None:
            return {
                "Nodes": None,
                "NodeNames": names,
                "FailedNodes": failed,
                "FailedAndUnresolvableNodes": unresolvable,
                "Error": error,
            }
        keep = set(passing)
        nodes = args["Nodes"] if everyone else {"metadata": {}, "items": [i for i, m in full_nodes if m.name in keep]}
        return {
            "Nodes": nodes,
            "NodeNames": None,
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable,
            "Error": error,
        }

    def _score(
        self, scoring: Scoring, passing: Sequence[str], sent: _Sent | None, *, encode: bool = True
    ) -> asyncio.Future[_Scored | None]:
        """The filter's scores, computed once the event loop is free again: after this call's answer is
        written (aiohttp writes it in the same step), before the prioritize call can arrive."""

        async def scores() -> _Scored | None:
            try:
                decision = await scoring()
                if decision is None or decision.failed or decision.score_table is None:
                    return None
                return _Scored(decision, _priorities_json(passing, decision, sent) if encode else None)
            except Exception as exc:  # prioritize decides again, and says why if it fails too
                _log_unexpected(logging.ERROR, "extender: scoring after filter failed", exc_info=exc)
                return None

        task = asyncio.ensure_future(scores())
        # The loop keeps only a weak reference to a task: held here until it ran, even if its round is
        # dropped first (MAX_ROUNDS filters answered in one turn of the loop).
        _SCORING.add(task)
        task.add_done_callback(_SCORING.discard)
        return task

    async def prioritize(self, args: Args) -> Encoded:
        """ExtenderArgs -> HostPriorityList: podfit's totals scaled to 0..MaxExtenderPriority, the best
        node at the maximum; nodes podfit finds infeasible score 0."""
        self.scores_wanted = True
        recalled = await self._recall(args)  # the pod is not even decoded when filter already answered
        if isinstance(recalled, Encoded):
            return recalled
        order, decision = recalled
        if decision is None:
            decision, order, _, _, _ = await self._decide(args, _pod(args), score=True)
        return _priorities_json(order, decision)

    async def preempt(self, args: Args) -> dict[str, Any]:
        """ExtenderPreemptionArgs -> ExtenderPreemptionResult: of the scheduler's candidate nodes, those
        where podfit's DefaultPreemption also finds victims, with podfit's victims (by UID)."""
        pod = _pod(args)
        proposed = _field(args, "NodeNameToMetaVictims")
        if proposed is None:
            proposed = _field(args, "NodeNameToVictims")
        if not isinstance(proposed, dict):
            raise BadRequest("NodeNameToVictims or NodeNameToMetaVictims: one of them is required")
        names = [name for name in proposed if self.service.has_node(name)]
        victims = self.service.victims_on_nodes(pod, names)
        return {
            "NodeNameToMetaVictims": {
                name: {"Pods": [{"UID": p.uid} for p in pods], "NumPDBViolations": violations}
                for name, (pods, violations) in victims.items()
            }
        }

    async def bind(self, args: Args) -> dict[str, Any]:
        """ExtenderBindingArgs -> ExtenderBindingResult: reserves the pod on the node in the cache, through
        the same Schedule-with-assume path as gRPC, restricted to that node; a pod that no longer fits
        there is refused (``Error`` says why) and nothing is recorded."""
        name, namespace, uid, node = (_field(args, k) for k in ("PodName", "PodNamespace", "PodUID", "Node"))
        if not isinstance(name, str) or not name:
            raise BadRequest("PodName: is required")
        if not isinstance(node, str) or not node:
            raise BadRequest("Node: is required")
        namespace = namespace if isinstance(namespace, str) and namespace else "default"
        try:
            pod, _ = self.service.resolve(CachedPod(namespace, name))
        except NotFoundError:
            raise BadRequest(f"pod {namespace}/{name} is not in podfit's cache") from None
        if uid and pod.uid and uid != pod.uid:
            raise BadRequest(f"PodUID: {uid} does not match the cached pod's uid {pod.uid}")
        if not self.service.has_node(node):
            raise BadRequest(f"Node: {node} is not in podfit's cache")
        result = await self.service.schedule(CachedPod(namespace, name), [node], assume=True, preempt=False)
        if result.assumed_generation:
            return {"Error": ""}
        if result.gated:
            why = result.message
        else:
            status = result.decision.rejections().get(node) if result.decision is not None else None
            why = status.message if status is not None else "rejected by the filters"
        return {"Error": f"bind: pod {namespace}/{name} does not fit node {node}: {why}"}

    # -- shared ----------------------------------------------------------------------------------

    def _keep(self, args: Args, answer: _Round) -> None:
        key = bytes(args["Pod"])
        self.rounds[key] = answer
        self.rounds.move_to_end(key)
        while len(self.rounds) > MAX_ROUNDS:
            self.rounds.popitem(last=False)

    async def _recall(self, args: Args) -> Encoded | tuple[list[str], Decision | None]:
        """(the nodes asked about, in order; the filter call's decision when it answers this call exactly:
        the same pod, nothing changed since, and exactly the nodes that filter passed), or the whole
        answer when the names came back exactly as the filter sent them."""
        kept = self.rounds.pop(bytes(args.get("Pod", b"")), None)
        if kept is None:
            return [], None
        scored = await kept.scored
        if scored is None or scored.decision.generation != self.service.generation:
            return [], None
        if scored.answer is not None and bytes(args.get(kept.sent_field, b"")) == kept.sent_json:
            self.rounds_reused += 1
            return scored.answer
        if "NodeNames" in args and bytes(args["NodeNames"]) != b"null":
            try:
                names = _NAMES.decode(args["NodeNames"]) or []
            except msgspec.ValidationError:
                return [], None  # _decide says why
            asked: frozenset[Any] = frozenset(names)
        elif "Nodes" in args:
            try:
                items = _node_items(args["Nodes"]) or []
            except BadRequest:
                return [], None
            names = [m.name for _, m in items]
            asked = frozenset(_identity(m) for _, m in items)
        else:
            return [], None
        if asked != frozenset(kept.passing) or len(names) != len(asked):
            return [], None
        self.rounds_reused += 1
        return names, scored.decision

    async def _decide(
        self, args: Args, pod: Pod, *, score: bool, sent: _Sent | None = None, filter_first: bool = False
    ) -> tuple[Decision, list[str], set[str], list[tuple[msgspec.Raw, _Meta]] | None, Scoring]:
        """(decision, node order as sent, names unknown to the cache, the Node items as sent when sent,
        what gives the scored decision). With node names, ``score`` and ``filter_first``, the decision comes
        filtered only and the last element scores it (None once the cache changed); otherwise the decision
        is complete and the last element gives it."""
        try:
            names = _NAMES.decode(args["NodeNames"]) if "NodeNames" in args else None
        except msgspec.ValidationError:
            raise BadRequest("NodeNames: must be a list of node names") from None
        node_list = _node_items(args["Nodes"]) if "Nodes" in args else None
        if names is not None:
            try:
                # Usually every name is a cached node: finding each is the decision's own first step.
                encoded = sent.encoded if sent is not None else None
                decision, scoring = await self._decide_names(pod, names, score, encoded, filter_first)
                return decision, names, set(), None, scoring
            except UnknownNodeError:
                pass
            unknown = self.service.unknown_nodes(names)
            known = [n for n in names if n not in unknown]
            if not known:
                empty = Decision(generation=self.service.generation)
                return empty, names, unknown, None, decided(empty)
            decision, scoring = await self._decide_names(pod, known, score, None, filter_first)
            return decision, names, unknown, None, scoring
        if node_list is not None:
            nodes: list[Node] = self.service.nodes_from_k8s(
                [(raw, m.name, m.uid, m.resourceVersion) for raw, m in node_list], "Nodes.items", msgspec.json.decode
            )
            order = [n.name for n in nodes]
            if len(set(order)) != len(order):
                raise BadRequest("Nodes.items: node names must be unique")
            if not nodes:
                empty = Decision(generation=self.service.generation)
                return empty, [], set(), [], decided(empty)
            decision = await self.service.decide_with_nodes(pod, nodes)
            return decision, order, set(), node_list, decided(decision)
        raise BadRequest("one of Nodes or NodeNames is required")

    async def _decide_names(
        self, pod: Pod, names: list[str], score: bool, encoded: BytesArray | None, filter_first: bool
    ) -> tuple[Decision, Scoring]:
        if score and filter_first:
            return await self.service.decide_filter_first(pod, names, encoded=encoded)
        decision = await self.service.decide(pod, names, score=score, encoded=encoded)
        return decision, decided(decision)


def _priorities_json(order: Sequence[str], decision: Decision, sent: _Sent | None = None) -> Encoded:
    """HostPriorityList, encoded: podfit's totals scaled to 0..MaxExtenderPriority, the best node at the
    maximum; nodes podfit finds infeasible score 0. ``sent``: the request's names, when ``order`` is
    exactly them and every one is feasible."""
    table = decision.score_table
    top = int(table.totals.max()) if table is not None and len(table.totals) else 0
    if table is None or top <= 0:
        return Encoded(msgspec.json.encode([{"Host": name, "Score": 0} for name in order]))
    scaled = table.totals * MAX_EXTENDER_PRIORITY // top
    if sent is not None:
        answer = sent.scored(scaled)
        if answer is not None:
            return answer
    by_name = dict(zip(table.names.tolist(), scaled.tolist(), strict=True))
    return Encoded(msgspec.json.encode([{"Host": name, "Score": by_name.get(name, 0)} for name in order]))


# A HostPriority ends with its score, and the next begins: the text between two names.
_BETWEEN = [b'","Score":%d},{"Host":"' % score for score in range(MAX_EXTENDER_PRIORITY + 1)]


class _Sent(NamedTuple):
    """The NodeNames of a request as kube-scheduler (Go) writes them: compact, nothing escaped. Cut from
    the JSON as bytes, they are found in the snapshot by one binary search, and the prioritize answer is
    spliced from them, without a Python string or dict per node (a few hundred per pod)."""

    names: list[bytes]
    encoded: BytesArray

    @classmethod
    def of(cls, args: Args) -> _Sent | None:
        raw = args.get("NodeNames")
        if raw is None:
            return None
        sent = bytes(raw)
        # Without a backslash a JSON string holds no quote, so '","' only ever separates two names; and
        # with two quotes per name, there is no quote anywhere else (no space between the names, say).
        if b"\\" in sent or not (sent.startswith(b'["') and sent.endswith(b'"]')):
            return None
        names = sent[2:-2].split(b'","')
        if sent.count(b'"') != 2 * len(names):
            return None
        return cls(names, np.array(names, dtype=np.bytes_))

    def scored(self, scaled: Int64Array) -> Encoded | None:
        """The prioritize answer, ``scaled`` being in name order (the score table's, over exactly these
        names); None when a name was sent twice or a score is outside 0..MaxExtenderPriority."""
        if len(self.names) != len(scaled) or int(scaled.min()) < 0 or int(scaled.max()) > MAX_EXTENDER_PRIORITY:
            return None
        # Byte order of UTF-8 is code point order, the table's: rank each name sent among the table's rows.
        rank = np.argsort(self.encoded, kind="stable")
        ordered = self.encoded[rank]
        if len(ordered) > 1 and not bool((ordered[1:] > ordered[:-1]).all()):
            return None
        scores = np.empty_like(scaled)
        scores[rank] = scaled
        parts: list[bytes] = [b""] * (2 * len(self.names))
        parts[0::2] = self.names
        parts[1::2] = [_BETWEEN[score] for score in scores.tolist()]
        parts[-1] = b'","Score":%d}]' % scores[-1]
        return Encoded(b'[{"Host":"' + b"".join(parts))


def _identity(meta: _Meta) -> tuple[str, str, str]:
    """A full Node as sent: an unchanged node keeps its uid and resourceVersion."""
    return (meta.name, meta.uid, meta.resourceVersion)


Handler = Callable[[Args], Awaitable[Any]]
# What the extender refuses as the caller's fault (400), wherever the verb was answered.
REFUSALS = (BadRequest, ValidationError, UnknownProfileError, UpdateRejected, RecursionError, UnicodeError)


class Binds(Protocol):
    """Where the bind verb's write is made when this process is one replica of a group on a replicated log
    (``transport.replicated.ReplicaBinds``): ``here(args)`` in the owner, answered once the log holds it;
    sent to the owner from any other replica, answered once this replica has applied it. OwnerGone (a 503)
    when no owner takes it."""

    async def bind(self, args: Args, here: Handler) -> Any: ...


async def bind_here(service: SchedulingService, handler: Handler, args: Args) -> Any:
    """The bind verb made in this process: the one writer among the verbs, it waits for a batch in
    progress, as updates do."""
    async with service.gate.shared():
        return await handler(args)


def _route(
    handler: Handler, verb: str, service: SchedulingService, binds: Binds | None = None
) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        status = 500
        try:
            response = await answer(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            service.telemetry.extender_request(verb, status)

    async def answer(request: web.Request) -> web.Response:
        try:
            # Before the body is read: an unsynced cache answers nothing, whatever was asked.
            service.require_synced()
            body = await _body(request)
            if verb == "bind" and binds is not None:
                result = await binds.bind(body, lambda args: bind_here(service, handler, args))
            elif verb == "bind":
                result = await bind_here(service, handler, body)
            else:
                # Readers decide on the service's view and never wait for a writer.
                result = await handler(body)
            return _json_response(result)
        except CacheNotSyncedError as exc:
            return _json_response({"Error": f"{verb}: {exc}", "reason": CACHE_NOT_SYNCED}, status=503)
        except OwnerGone as exc:
            return _json_response({"Error": f"{verb}: {exc}: retry", "reason": "OWNER_GONE"}, status=503)
        except ClientGone:
            # Not an error of podfit's: counted apart, logged at debug level only.
            log.debug("extender %s: the client closed the connection before sending its request", verb)
            return _json_response({"Error": f"{verb}: the client went away"}, status=CLIENT_CLOSED_REQUEST)
        except REFUSALS as exc:
            message = bounded(f"{verb}: {exc}" if str(exc) else f"{verb}: the request cannot be processed")
            _log_rejected(logging.INFO, "rejected extender %s: %s", verb, bounded(str(exc), 200))
            return _json_response({"Error": message}, status=400)
        except web.HTTPRequestEntityTooLarge as exc:
            limit = request.app[MAX_BODY_BYTES]
            message = f"{verb}: the request body exceeds extender.maxBodyBytes ({limit} bytes)"
            _log_rejected(logging.INFO, "rejected extender %s: body over %d bytes", verb, limit)
            return _json_response({"Error": message}, status=exc.status)
        except web.HTTPException:
            raise
        except Exception as exc:
            _log_unexpected(logging.ERROR, "unexpected error in extender %s", verb, exc_info=exc)
            return _json_response({"Error": f"{verb}: internal error; the server log has the details"}, status=500)

    return handle


def build_app(
    service: SchedulingService,
    prefix: str = DEFAULT_PREFIX,
    max_body_bytes: int = 64 * 1024 * 1024,
    *,
    bind: bool = False,
    body_timeout: float = DEFAULT_IDLE_TIMEOUT_SECONDS,
    binds: Binds | None = None,
) -> web.Application:
    """The extender's routes; ``bind`` off answers the bind verb 403, since it is the one verb that
    changes the cache. ``binds``: where a replica of a group makes its binds (the owner)."""
    extender = Extender(service)
    app = web.Application(client_max_size=max_body_bytes)
    app[MAX_BODY_BYTES] = max_body_bytes
    app[BODY_TIMEOUT] = body_timeout
    prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
    for verb, handler in (
        ("filter", extender.filter),
        ("prioritize", extender.prioritize),
        ("preempt", extender.preempt),
        ("bind", extender.bind),
    ):
        if verb == "bind" and not bind:
            handler = _bind_off
        app.router.add_post(f"{prefix}/{verb}", _route(handler, verb, service, binds))
    app.router.add_get("/healthz", _healthz)

    async def readyz(request: web.Request) -> web.Response:
        """Readiness: 200 once the cache is synced (at once without --wait-for-sync), 503 before and
        from SIGTERM on (load balancers stop sending while the calls they sent are still answered)."""
        if service.shutting_down:
            return web.Response(text="not ready: server shutting down", status=503)
        if service.replica_lost:
            return web.Response(text=f"not ready: {service.replica_lost}", status=503)
        if service.synced:
            return web.Response(text="ok")
        return web.Response(text=f"not ready: {CacheNotSyncedError()}", status=503)

    app.router.add_get("/readyz", readyz)
    return app


async def _bind_off(args: Args) -> Any:
    raise web.HTTPForbidden(
        text=msgspec.json.encode({"Error": f"bind: {BIND_DISABLED}"}).decode(), content_type="application/json"
    )


async def _healthz(request: web.Request) -> web.Response:
    """Liveness: the process answers; 200 whether or not the cache is synced."""
    return web.Response(text="ok")


async def start_extender(
    service: SchedulingService,
    host: str,
    port: int,
    *,
    prefix: str = DEFAULT_PREFIX,
    max_body_bytes: int = 64 * 1024 * 1024,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_SECONDS,
    ssl_context: ssl.SSLContext | None = None,
    bind: bool = False,
    reuse_port: bool = False,
    binds: Binds | None = None,
) -> tuple[web.AppRunner, int]:
    """Serves the extender; a connection without a request in progress (idle, or still sending its
    headers) is closed after ``idle_timeout`` seconds."""
    runner = web.AppRunner(
        build_app(service, prefix, max_body_bytes, bind=bind, body_timeout=idle_timeout, binds=binds),
        access_log=None,
        handle_signals=False,
        keepalive_timeout=idle_timeout,
        # A body the handler could not read (corrupt, or too slow) is not drained afterwards: the
        # connection closes once the answer is sent.
        lingering_time=0,
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context, reuse_address=True, reuse_port=reuse_port or None)
    await site.start()
    server = site._server
    sockets: Sequence[Any] = getattr(server, "sockets", None) or []
    bound = sockets[0].getsockname()[1] if sockets else port
    return runner, int(bound)
