"""A local stand-in for kube-apiserver's list/watch protocol, for testing ``podfit feed`` through the real
``kubernetes`` client (no API server can run where the tests run).

What it implements, on the real API paths of the kinds podfit holds (``/api/v1/pods``,
``/api/v1/namespaces/{ns}/pods``, ``/apis/apps/v1/replicasets``, ``/apis/policy/v1/poddisruptionbudgets``...):

* one global resourceVersion counter (etcd's revision), stamped on every write; objects get a uid and a
  creationTimestamp when added; a DELETED event carries the object's last state at a new resourceVersion;
* list: ``metadata.resourceVersion`` of the list, items without kind/apiVersion (as the real server sends
  them), ``limit``/``continue`` pagination over a consistent snapshot, with 410 Expired for a continue
  token whose snapshot was compacted away;
* watch (``watch=true``): an HTTP/1.1 chunked stream of JSON lines ``{"type", "object"}``; from
  resourceVersion N it replays the kept history after N, then live events, in order; with no
  resourceVersion (or "0") it starts with synthetic ADDED events of the current objects; ``timeoutSeconds``
  ends the stream cleanly; ``allowWatchBookmarks`` enables BOOKMARK events (sent when a test asks);
* 410 Gone when N is older than the kept history (after ``compact``): by default in band, as the real server
  does (HTTP 200, one ERROR event with a Status of code 410, end of stream), or as an HTTP 410 response;
* field selectors (``=``, ``==``, ``!=``) on metadata.name, metadata.namespace and the fields the real
  server supports for pods (status.phase, spec.nodeName, ...), 400 for any other field; label selectors
  (equality, set-based, existence); a watch turns an update that makes an object stop (start) matching into
  DELETED (ADDED), as the real server does;
* controls for tests: add/modify/delete, bookmark, compact the history, drop every open watch connection
  (the socket is cut mid-stream, no terminating chunk), answer the next watch of a kind with an HTTP status;
  every request is recorded (path and query) for assertions.

What it does not: authentication, authorisation, TLS, HTTP/2, protobuf encoding, server-side apply or any
write API (tests write through the Python controls), GET of a single object, resourceVersionMatch=Exact and
lists at an old resourceVersion (lists are always served at the newest state), watch-list
(``sendInitialEvents``), periodic bookmarks on its own, "too large resource version" waits, priority and
fairness (429s), graceful deletion (deletionTimestamp, finalizers), admission and validation of objects.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import itertools
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from podfit.k8s.selector import parse_label_selector


@dataclass(frozen=True)
class Resource:
    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


RESOURCES = {
    r.kind: r
    for r in (
        Resource("Node", "", "v1", "nodes", False),
        Resource("Namespace", "", "v1", "namespaces", False),
        Resource("Pod", "", "v1", "pods", True),
        Resource("Service", "", "v1", "services", True),
        Resource("ReplicationController", "", "v1", "replicationcontrollers", True),
        Resource("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True),
        Resource("ReplicaSet", "apps", "v1", "replicasets", True),
        Resource("StatefulSet", "apps", "v1", "statefulsets", True),
        Resource("DaemonSet", "apps", "v1", "daemonsets", True),
        Resource("Job", "batch", "v1", "jobs", True),
        Resource("PersistentVolume", "", "v1", "persistentvolumes", False),
        Resource("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", True),
        Resource("StorageClass", "storage.k8s.io", "v1", "storageclasses", False),
        Resource("CSINode", "storage.k8s.io", "v1", "csinodes", False),
        Resource("CSIDriver", "storage.k8s.io", "v1", "csidrivers", False),
        Resource("CSIStorageCapacity", "storage.k8s.io", "v1", "csistoragecapacities", True),
        Resource("VolumeAttachment", "storage.k8s.io", "v1", "volumeattachments", False),
        Resource("DeviceClass", "resource.k8s.io", "v1", "deviceclasses", False),
        Resource("ResourceSlice", "resource.k8s.io", "v1", "resourceslices", False),
        Resource("ResourceClaim", "resource.k8s.io", "v1", "resourceclaims", True),
    )
}
_BY_PATH = {(r.group, r.version, r.plural): r for r in RESOURCES.values()}

# The field selectors kube-apiserver accepts, beyond metadata.name and metadata.namespace.
_FIELDS = {
    "Pod": {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    },
    "Node": {"spec.unschedulable"},
    "Namespace": {"status.phase"},
    "ReplicationController": {"status.replicas"},
    "ReplicaSet": {"status.replicas"},
    "Job": {"status.successful"},
}


@dataclass
class _Entry:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict[str, Any]
    prev: dict[str, Any] | None


@dataclass
class _Watch:
    resource: Resource
    queue: asyncio.Queue[_Entry | str]
    bookmarks: bool
    request: web.Request


@dataclass
class _Store:
    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    log: list[_Entry] = field(default_factory=list)
    # Watches from a resourceVersion below this are 410 Gone: the history before it was compacted.
    history_start: int = 0
    fail_next_watch: list[int] = field(default_factory=list)


class SelectorError(ValueError):
    pass


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _field_selector(kind: str, text: str) -> Callable[[Mapping[str, Any]], bool]:
    terms: list[tuple[str, bool, str]] = []
    for raw in filter(None, (t.strip() for t in text.split(","))):
        op = next((o for o in ("!=", "==", "=") if o in raw), None)
        if op is None:
            raise SelectorError(f"invalid field selector term {raw!r}")
        key, value = raw.split(op, 1)
        negate = op == "!="
        key = key.strip()
        if key not in ("metadata.name", "metadata.namespace") and key not in _FIELDS.get(kind, set()):
            raise SelectorError(f'field label not supported: "{key}"')
        terms.append((key, negate, value.strip()))
    return lambda obj: all((_field_value(obj, key) == value) != negate for key, negate, value in terms)


def _true(value: str | None) -> bool:
    """A boolean query parameter as the API server parses it (Go's strconv.ParseBool): older Python clients
    send "True"."""
    return value in ("1", "t", "T", "TRUE", "true", "True")


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata", {})
    return str(meta.get("namespace", "")), str(meta["name"])


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class FakeApiServer:
    """``async with FakeApiServer() as api: api.add("Node", {...}); api.write_kubeconfig(path)``."""

    def __init__(self, *, gone_as_http: bool = False) -> None:
        # True: a too-old watch is refused with HTTP 410; False: HTTP 200 and an ERROR event (the real server).
        self.gone_as_http = gone_as_http
        self.rv = 1
        self.stores = {kind: _Store() for kind in RESOURCES}
        self.watches: list[_Watch] = []
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._snapshots: dict[str, tuple[int, list[dict[str, Any]]]] = {}
        self._snapshot_ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> FakeApiServer:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, handler_cancellation=True, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        self.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> FakeApiServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig for the real ``kubernetes`` client: plain HTTP, no credentials."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "current-context": "fake",
        }
        path.write_text(json.dumps(config))
        return path

    # -- controls ----------------------------------------------------------------------------------

    def add(self, kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        resource = RESOURCES[kind]
        data = copy.deepcopy(dict(obj))
        data["kind"], data["apiVersion"] = kind, resource.api_version
        meta = data.setdefault("metadata", {})
        if resource.namespaced:
            meta.setdefault("namespace", "default")
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", "2024-01-01T00:00:00Z")
        key = _key(data)
        if key in self.stores[kind].objects:
            raise ValueError(f"{kind} {key} exists")
        return self._write(kind, "ADDED", data, None)

    def modify(self, kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        resource = RESOURCES[kind]
        data = copy.deepcopy(dict(obj))
        data["kind"], data["apiVersion"] = kind, resource.api_version
        meta = data.setdefault("metadata", {})
        if resource.namespaced:
            meta.setdefault("namespace", "default")
        prev = self.stores[kind].objects[_key(data)]
        meta["uid"] = prev["metadata"]["uid"]
        meta["creationTimestamp"] = prev["metadata"]["creationTimestamp"]
        return self._write(kind, "MODIFIED", data, prev)

    def delete(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        if RESOURCES[kind].namespaced:
            namespace = namespace or "default"
        prev = self.stores[kind].objects[(namespace, name)]
        return self._write(kind, "DELETED", copy.deepcopy(prev), prev)

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        if RESOURCES[kind].namespaced:
            namespace = namespace or "default"
        return copy.deepcopy(self.stores[kind].objects[(namespace, name)])

    def bookmark(self, kind: str | None = None) -> int:
        """A BOOKMARK at the current resourceVersion on every open watch (of ``kind``) that asked for them."""
        sent = 0
        for watch in self.watches:
            if watch.bookmarks and (kind is None or watch.resource.kind == kind):
                watch.queue.put_nowait("BOOKMARK")
                sent += 1
        return sent

    def compact(self, kind: str | None = None) -> None:
        """Forgets the history: watches from an older resourceVersion get 410 Gone, continue tokens expire."""
        for name in [kind] if kind else list(self.stores):
            self.stores[name].log.clear()
            self.stores[name].history_start = self.rv
        self._snapshots.clear()

    def drop_watches(self, kind: str | None = None) -> int:
        """Cuts every open watch connection (of ``kind``) mid-stream, as a dying server or proxy would."""
        dropped = 0
        for watch in list(self.watches):
            if kind is None or watch.resource.kind == kind:
                watch.queue.put_nowait("DROP")
                dropped += 1
        return dropped

    def fail_next_watch(self, kind: str, status: int) -> None:
        """The next watch request of ``kind`` is answered with this HTTP status (and a Status body)."""
        self.stores[kind].fail_next_watch.append(status)

    def open_watches(self, kind: str | None = None) -> int:
        return sum(1 for w in self.watches if kind is None or w.resource.kind == kind)

    def watch_requests(self, kind: str) -> list[dict[str, str]]:
        path_end = "/" + RESOURCES[kind].plural
        return [q for p, q in self.requests if p.endswith(path_end) and _true(q.get("watch"))]

    # -- internals ---------------------------------------------------------------------------------

    def _write(self, kind: str, type_: str, data: dict[str, Any], prev: dict[str, Any] | None) -> dict[str, Any]:
        store = self.stores[kind]
        self.rv += 1
        data["metadata"]["resourceVersion"] = str(self.rv)
        key = _key(data)
        if type_ == "DELETED":
            del store.objects[key]
        else:
            store.objects[key] = data
        entry = _Entry(self.rv, type_, data, prev)
        store.log.append(entry)
        for watch in self.watches:
            if watch.resource.kind == kind:
                watch.queue.put_nowait(entry)
        return copy.deepcopy(data)

    def _route(self, path: str) -> tuple[Resource, str] | None:
        parts = [p for p in path.split("/") if p]
        namespace = ""
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        if len(rest) == 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if len(rest) != 1:
            return None
        resource = _BY_PATH.get((group, version, rest[0]))
        if resource is None or (namespace and not resource.namespaced):
            return None
        return resource, namespace

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        self.requests.append((request.path, query))
        routed = self._route(request.path)
        if routed is None:
            return web.json_response(_status(404, "NotFound", f"the server could not find {request.path}"), status=404)
        resource, namespace = routed
        try:
            labels = parse_label_selector(query.get("labelSelector", ""))
            fields = _field_selector(resource.kind, query.get("fieldSelector", ""))
        except (SelectorError, ValueError) as exc:
            return web.json_response(_status(400, "BadRequest", str(exc)), status=400)

        def matches(obj: Mapping[str, Any] | None) -> bool:
            if obj is None:
                return False
            meta = obj.get("metadata", {})
            if namespace and meta.get("namespace") != namespace:
                return False
            return labels(meta.get("labels") or {}) and fields(obj)

        if _true(query.get("watch")):
            return await self._watch(request, resource, matches, query)
        return self._list(resource, matches, query)

    def _list(
        self, resource: Resource, matches: Callable[[Mapping[str, Any] | None], bool], query: dict[str, str]
    ) -> web.Response:
        token = query.get("continue")
        if token:
            try:
                decoded = json.loads(base64.urlsafe_b64decode(token))
                snapshot_id, start = str(decoded["id"]), int(decoded["start"])
            except (ValueError, KeyError, TypeError):
                return web.json_response(_status(400, "BadRequest", "invalid continue token"), status=400)
            if snapshot_id not in self._snapshots:
                message = "The provided continue parameter is too old to display a consistent list result."
                return web.json_response(_status(410, "Expired", message), status=410)
            rv, items = self._snapshots[snapshot_id]
        else:
            rv = self.rv
            items = [
                {k: v for k, v in copy.deepcopy(obj).items() if k not in ("kind", "apiVersion")}
                for _, obj in sorted(self.stores[resource.kind].objects.items())
                if matches(obj)
            ]
            snapshot_id, start = str(next(self._snapshot_ids)), 0
        limit = int(query.get("limit") or 0)
        end = start + limit if limit > 0 else len(items)
        metadata: dict[str, Any] = {"resourceVersion": str(rv)}
        if end < len(items):
            self._snapshots[snapshot_id] = (rv, items)
            metadata["continue"] = base64.urlsafe_b64encode(
                json.dumps({"id": snapshot_id, "start": end}).encode()
            ).decode()
            metadata["remainingItemCount"] = len(items) - end
        body = {
            "kind": f"{resource.kind}List",
            "apiVersion": resource.api_version,
            "metadata": metadata,
            "items": items[start:end],
        }
        return web.json_response(body)

    async def _watch(
        self,
        request: web.Request,
        resource: Resource,
        matches: Callable[[Mapping[str, Any] | None], bool],
        query: dict[str, str],
    ) -> web.StreamResponse:
        store = self.stores[resource.kind]
        if store.fail_next_watch:
            status = store.fail_next_watch.pop(0)
            return web.json_response(
                _status(status, "Expired" if status == 410 else "InternalError", "injected"), status=status
            )
        requested = query.get("resourceVersion", "")
        since = int(requested) if requested.isdigit() and requested != "0" else None
        gone = since is not None and since < store.history_start
        if gone and self.gone_as_http:
            message = f"too old resource version: {since} ({store.history_start})"
            return web.json_response(_status(410, "Expired", message), status=410)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)

        async def send(type_: str, obj: Mapping[str, Any]) -> None:
            await response.write(json.dumps({"type": type_, "object": obj}).encode() + b"\n")

        if gone:
            await send("ERROR", _status(410, "Expired", f"too old resource version: {since} ({store.history_start})"))
            await response.write_eof()
            return response
        watch = _Watch(resource, asyncio.Queue(), _true(query.get("allowWatchBookmarks")), request)
        # Registered before the history is read, with no await in between: nothing is missed or doubled.
        self.watches.append(watch)
        if since is None:
            backlog = [
                _Entry(int(o["metadata"]["resourceVersion"]), "ADDED", o, None)
                for _, o in sorted(store.objects.items())
            ]
        else:
            backlog = [e for e in store.log if e.rv > since]
        timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        try:
            for entry in backlog:
                await self._send_entry(send, entry, matches)
            while True:
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    break
                try:
                    item = await asyncio.wait_for(watch.queue.get(), remaining)
                except TimeoutError:
                    break
                if item == "DROP":
                    transport = request.transport
                    if transport is not None:
                        transport.abort()
                    raise ConnectionResetError("watch dropped by the test")
                if item == "BOOKMARK":
                    bookmark = {
                        "kind": resource.kind,
                        "apiVersion": resource.api_version,
                        "metadata": {"resourceVersion": str(self.rv)},
                    }
                    await send("BOOKMARK", bookmark)
                    continue
                assert isinstance(item, _Entry)
                await self._send_entry(send, item, matches)
            await response.write_eof()
        except ConnectionResetError:
            pass
        finally:
            self.watches.remove(watch)
        return response

    @staticmethod
    async def _send_entry(
        send: Callable[[str, Mapping[str, Any]], Any],
        entry: _Entry,
        matches: Callable[[Mapping[str, Any] | None], bool],
    ) -> None:
        now, before = matches(entry.obj), matches(entry.prev)
        if entry.type == "ADDED" and now:
            await send("ADDED", entry.obj)
        elif entry.type == "DELETED" and now:
            await send("DELETED", entry.obj)
        elif entry.type == "MODIFIED":
            if now and before:
                await send("MODIFIED", entry.obj)
            elif now:
                await send("ADDED", entry.obj)
            elif before:
                await send("DELETED", entry.obj)
