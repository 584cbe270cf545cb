"""Property-based fuzzing of every RPC and extender verb through a real server on loopback.

Inputs mix valid-ish Kubernetes objects with hostile ones (deep nesting, lone surrogates, huge strings,
wrong types, random protobuf bytes). Whatever comes in: no INTERNAL/UNKNOWN (no HTTP 500), the server
stays up, and afterwards the cache holds exactly what was acknowledged. Runs are derandomized and use no
example database, so CI sees the same inputs every time.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from podfit.k8s import protobuf
from podfit.k8s.convert import KIND_TO_ENUM, manifest_to_object
from podfit.server.app import RunningServer, create_server
from podfit.server.settings import Settings
from podfit.server.telemetry import Telemetry
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import scheduler_pb2 as sc
from podfit.v1 import simulation_pb2 as sim

from tests.builders import make_node, make_pod

# Responses a hostile input may get; anything else (INTERNAL, UNKNOWN, UNAVAILABLE, RESOURCE_EXHAUSTED,
# DEADLINE_EXCEEDED...) fails the run.
ALLOWED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.ABORTED,
}
FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
KINDS = ["Node", "Pod", "Namespace", "PodDisruptionBudget", "Service", "DeviceClass", "ResourceSlice", "ResourceClaim"]
CLUSTER_SCOPED = {"Node", "Namespace", "DeviceClass", "ResourceSlice"}
# Device selectors, good and bad: a CEL compile error is refused on arrival; a runtime error is the
# scheduler's answer (a framework error), never INTERNAL.
SELECTORS = st.sampled_from(
    [
        'device.driver == "gpu.example.com"',
        'device.attributes["gpu.example.com"].model == "a100"',
        'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
        'device.attributes["gpu.example.com"].v.isGreaterThan(semver("1.0.0"))',
        "1 / 0 == 1",
        'device.attributes["gpu.example.com"].model',
        'quantity("abc").isInteger()',
        "device.(",
        "true &&",
        "x" * 5000,
        '"a".matches("(")',
    ]
)


class ThreadedServer:
    """A podfit server on its own event loop thread, so synchronous hypothesis tests can call it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        telemetry = Telemetry(span_exporters=[], metric_readers=[], batch_spans=False)
        self.running: RunningServer = self._run(
            create_server(
                Settings(extender_bind=True), addr="127.0.0.1:0", extender_addr="127.0.0.1:0", telemetry=telemetry
            )
        )
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.running.port}")
        self.http = http.client.HTTPConnection("127.0.0.1", self.running.extender_port, timeout=30)

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=60)

    def stop(self) -> None:
        self.http.close()
        self.channel.close()
        self._run(self.running.stop(0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@dataclass
class Ledger:
    """What the cache must hold: every key whose write was acknowledged, per kind; and how many inputs ran."""

    keys: dict[str, set[tuple[str, str]]] = field(default_factory=lambda: {k: set() for k in KINDS})
    inputs: int = 0


@pytest.fixture(scope="module")
def server() -> Iterator[ThreadedServer]:
    running = ThreadedServer()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def ledger() -> Ledger:
    return Ledger()


def call(server: ThreadedServer, ledger: Ledger, method: str, request: Any, response: Any) -> Any:
    """One unary call; returns the response, or None when it was refused with an allowed status."""
    ledger.inputs += 1
    serialize: Callable[[Any], bytes] = (
        (lambda b: b) if isinstance(request, bytes) else (lambda m: m.SerializeToString())
    )
    stub = server.channel.unary_unary(method, request_serializer=serialize, response_deserializer=response.FromString)
    try:
        return stub(request, timeout=30)
    except grpc.RpcError as exc:
        code = exc.code()  # type: ignore[attr-defined]
        assert code in ALLOWED, f"{method}: {code} {exc.details()}"  # type: ignore[attr-defined]
        assert len(exc.details() or "") < 4096, "error text must be bounded"  # type: ignore[attr-defined]
        return None


# -- strategies ----------------------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "n1", "n2", "web-0", "x" * 63])
NAMESPACES = st.sampled_from(["default", "kube-system", "ns1"])
# Mostly valid quantities (so decisions get made), some that kube-apiserver would refuse.
QUANTITIES = st.one_of(
    st.sampled_from(["1", "100m", "2Gi", "0", "500Mi", "4", "250m", "1Gi"]),
    st.sampled_from(["1", "100m", "2Gi", "500Mi"]),
    st.sampled_from(["2", "10m", "64Mi"]),
    st.sampled_from(["3", "1500m", "8Gi"]),
    st.sampled_from(["-1", "1e3", "abc", "", "9999999999999999999Ei", "0.0001m"]),
    st.text(max_size=6),
)


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


HOSTILE_VALUES = st.one_of(
    st.integers(min_value=80, max_value=400).map(_nested),
    st.sampled_from(["\ud800", "a\udfffb", "x" * 70_000, "é" * 3000, "\x00", "[[[{"]),
    # Past Python's integer-string limit; Unicode digits; times outside years 1-9999.
    st.sampled_from(
        ["1" + "0" * 4300, "0." + "0" * 4300 + "1", "²", "①", "٣", "10000-01-01T00:00:00Z", "0000-01-01T00:00:00Z"]
    ),
    st.text(max_size=20),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    st.booleans(),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.lists(st.text(max_size=3), max_size=3),
)
HOSTILE_KEYS = st.sampled_from(
    [
        "spec",
        "status",
        "labels",
        "nodeName",
        "containers",
        "\ud800",
        "k" * 300,
        "extra",
        "resourceVersion",
        "creationTimestamp",
        "startTime",
        "cpu",
        "count",
        "expression",
    ]
)
# Keys never mutated, so the ledger knows which object an acknowledged write was about.
IDENTITY = {"kind", "name", "namespace", "apiVersion", "metadata"}
HOSTILE_BYTES = st.one_of(
    st.binary(max_size=120),
    st.sampled_from(
        [
            b"[" * 5000,
            b"{" * 3000,
            b'{"kind":"Pod","metadata":{"name":"\\ud800"}}',
            b'{"kind":"Pod","metadata":{"\\udc00":"p"}}',
            b'{"kind":"Pod"',
            b"null",
            b"[]",
            b'"Pod"',
            b"NaN",
            b'{"kind":"Pod","metadata":{"name":"p"},"spec":' + b"[" * 990 + b"]" * 990 + b"}",
        ]
    ),
    st.integers(min_value=0, max_value=3000).map(lambda n: b"[" * n + b"]" * n),
)


def _containers(value: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


@st.composite
def manifests(draw: st.DrawFn, kinds: list[str] = KINDS) -> dict[str, Any]:
    kind = draw(st.sampled_from(kinds))
    name = draw(NAMES)
    if kind == "Node":
        obj = make_node(name).capacity(cpu=draw(QUANTITIES), memory=draw(QUANTITIES), pods="110").json()
    elif kind == "Pod":
        builder = make_pod(name, draw(NAMESPACES)).req(cpu=draw(QUANTITIES))
        if draw(st.booleans()):
            builder = builder.node(draw(NAMES))
        if draw(st.booleans()):
            builder.spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": draw(NAMES)}]
        obj = builder.priority(draw(st.integers(min_value=-5, max_value=5))).json()
    elif kind == "PodDisruptionBudget":
        obj = {
            "apiVersion": "policy/v1",
            "kind": kind,
            "metadata": {"name": name, "namespace": draw(NAMESPACES)},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": draw(st.sampled_from([1, "50%"]))},
            "status": {"disruptionsAllowed": draw(st.integers(min_value=-1, max_value=3))},
        }
    elif kind == "Service":
        obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": draw(NAMESPACES)}}
    elif kind == "DeviceClass":
        selectors = [{"cel": {"expression": draw(SELECTORS)}} for _ in range(draw(st.integers(0, 2)))]
        obj = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name},
            "spec": {"selectors": selectors},
        }
    elif kind == "ResourceSlice":
        device = {
            "name": "gpu-0",
            "attributes": {
                "model": {"string": "a100"},
                "v": {"version": draw(st.sampled_from(["1.2.3", "x", "01.0.0"]))},
            },
            "capacity": {"memory": {"value": draw(QUANTITIES)}},
        }
        pool = {"name": name, "generation": draw(st.integers(-1, 2)), "resourceSliceCount": draw(st.integers(0, 2))}
        spec = {"driver": "gpu.example.com", "pool": pool, "nodeName": draw(NAMES), "devices": [device]}
        obj = {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}
    elif kind == "ResourceClaim":
        exactly = {"deviceClassName": draw(NAMES), "count": draw(st.integers(-1, 40))}
        if draw(st.booleans()):
            exactly["selectors"] = [{"cel": {"expression": draw(SELECTORS)}}]
        request = {"name": "gpu", "exactly": exactly}
        obj = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name, "namespace": draw(NAMESPACES)},
            "spec": {"devices": {"requests": [request]}},
        }
    else:
        obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}}
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        containers = _containers(obj)
        target = containers[draw(st.integers(min_value=0, max_value=len(containers) - 1))]
        key = draw(st.one_of(HOSTILE_KEYS, st.sampled_from(sorted(target) or ["extra"])))
        if key not in IDENTITY:
            target[key] = draw(HOSTILE_VALUES)
    return obj


def key_of(manifest: dict[str, Any]) -> tuple[str, str, str]:
    kind, meta = manifest["kind"], manifest["metadata"]
    return kind, "" if kind in CLUSTER_SCOPED else meta.get("namespace") or "default", meta["name"]


def _encode(manifest: dict[str, Any], form: str) -> cc.ClusterObject:
    if form == "typed":
        try:
            return manifest_to_object(manifest)
        except Exception:
            form = "json"
    if form == "protobuf":
        try:
            data = protobuf.encode(manifest)
        except Exception:
            form = "json"
        else:
            return cc.ClusterObject(kubernetes_protobuf=cc.KubernetesProtobuf(kind=manifest["kind"], data=data))
    try:
        raw = json.dumps(manifest).encode()
    except (ValueError, RecursionError):
        raw = b"[" * 5000
    return cc.ClusterObject(kubernetes_json=raw)


@st.composite
def known_objects(draw: st.DrawFn, kinds: list[str] = KINDS) -> tuple[cc.ClusterObject, tuple[str, str, str] | None]:
    """An object and its key; the key is None for hostile bytes, which must never be accepted."""
    if draw(st.integers(min_value=0, max_value=4)) == 0:
        return cc.ClusterObject(kubernetes_json=draw(HOSTILE_BYTES)), None
    manifest = draw(manifests(kinds))
    obj = _encode(manifest, draw(st.sampled_from(["json", "typed", "protobuf"])))
    which = obj.WhichOneof("object")
    if which not in ("kubernetes_json", "kubernetes_protobuf") and draw(st.integers(0, 3)) == 0:
        # A typed object with a Timestamp outside years 1-9999 (or negative nanos), which JSON cannot say.
        stamp = getattr(obj, which).metadata.creation_timestamp
        stamp.seconds, stamp.nanos = draw(st.sampled_from([(253402300800, 0), (-62135596801, 0), (0, -1)]))
    return obj, key_of(manifest)


@st.composite
def any_objects(draw: st.DrawFn) -> cc.ClusterObject:
    """Anything: known objects, hostile JSON, or random Kubernetes protobuf bytes of some kind."""
    choice = draw(st.integers(min_value=0, max_value=5))
    if choice == 0:
        kind = draw(st.sampled_from([*KINDS, "", "Bogus"]))
        data = draw(st.one_of(st.binary(max_size=80), st.just(b"k8s\x00" + bytes(20))))
        return cc.ClusterObject(kubernetes_protobuf=cc.KubernetesProtobuf(kind=kind, data=data))
    return draw(known_objects())[0]


@st.composite
def pod_refs(draw: st.DrawFn) -> sc.PodReference:
    choice = draw(st.integers(min_value=0, max_value=5))
    if choice == 0:
        return sc.PodReference(
            cached=cc.ObjectKey(kind=cc.OBJECT_KIND_POD, namespace=draw(NAMESPACES), name=draw(NAMES))
        )
    if choice == 1:
        return sc.PodReference(kubernetes_json=draw(HOSTILE_BYTES))
    if choice == 2:
        return sc.PodReference(kubernetes_protobuf=draw(st.binary(max_size=80)))
    if choice == 3:
        return sc.PodReference()
    manifest = draw(manifests(["Pod"]))
    obj = _encode(manifest, draw(st.sampled_from(["json", "typed"])))
    return sc.PodReference(pod=obj.pod) if obj.HasField("pod") else sc.PodReference(kubernetes_json=obj.kubernetes_json)


NODE_NAMES = st.lists(st.one_of(NAMES, st.text(max_size=4)), max_size=4)
SCHEDULER_NAMES = st.sampled_from(["", "default-scheduler", "nope", "\x00"])
RANDOM_BYTES = st.binary(max_size=64)


def _record_pod_write(ledger: Ledger, ref: sc.PodReference) -> None:
    """A given pod that was assumed is now in the cache."""
    which = ref.WhichOneof("source")
    if which == "pod":
        ledger.keys["Pod"].add((ref.pod.metadata.namespace or "default", ref.pod.metadata.name))
    elif which == "kubernetes_json":
        meta = json.loads(ref.kubernetes_json)["metadata"]
        ledger.keys["Pod"].add((meta.get("namespace") or "default", meta["name"]))


# -- ClusterCache --------------------------------------------------------------------------------------

KIND_NAMES = {enum: kind for kind, enum in KIND_TO_ENUM.items()}


DELETES = st.builds(
    lambda kind, ns, name: cc.Update(delete=cc.ObjectKey(kind=KIND_TO_ENUM[kind], namespace=ns, name=name)),
    st.sampled_from(KINDS),
    NAMESPACES,
    NAMES,
)
# Mostly objects that may well be valid; now and then hostile bytes, random protobuf or an empty update.
UPDATES = st.one_of(
    known_objects().map(lambda pair: cc.Update(upsert=pair[0])),
    known_objects().map(lambda pair: cc.Update(upsert=pair[0])),
    DELETES,
    st.integers(min_value=0, max_value=9).flatmap(
        lambda n: any_objects().map(lambda o: cc.Update(upsert=o)) if n else st.just(cc.Update())
    ),
)


def test_cache_writes_and_reads(server: ThreadedServer, ledger: Ledger) -> None:
    """Apply / Replace / Stream / Get / List / Stats / MarkSynced, checking the ledger against List."""

    @settings(FUZZ, max_examples=500)
    @given(
        op=st.sampled_from(["apply", "apply", "apply", "replace", "stream", "get", "list", "stats", "sync", "raw"]),
        data=st.data(),
    )
    def run(op: str, data: st.DataObject) -> None:
        if op == "apply":
            request = cc.ApplyRequest(updates=data.draw(st.lists(UPDATES, max_size=4)))
            response = call(server, ledger, "/podfit.v1.ClusterCache/Apply", request, cc.ApplyResponse)
            if response is not None:
                for change, result in zip(request.updates, response.results, strict=True):
                    kind = KIND_NAMES[result.key.kind]
                    key = (result.key.namespace, result.key.name)
                    if change.WhichOneof("operation") == "delete":
                        ledger.keys[kind].discard(key)
                    else:
                        ledger.keys[kind].add(key)
        elif op == "replace":
            kind = data.draw(st.sampled_from(KINDS))
            objects = data.draw(st.lists(known_objects([kind]), max_size=3))
            request = cc.ReplaceRequest(kind=KIND_TO_ENUM[kind], objects=[o for o, _ in objects])
            if call(server, ledger, "/podfit.v1.ClusterCache/Replace", request, cc.ReplaceResponse) is not None:
                assert all(k is not None for _, k in objects), "hostile bytes were accepted"
                ledger.keys[kind] = {k[1:] for _, k in objects if k is not None}
        elif op == "stream":
            stream_batches(data)
        elif op == "get":
            key = cc.ObjectKey(
                kind=data.draw(st.sampled_from([*KIND_TO_ENUM.values(), 0, 999])),
                namespace=data.draw(NAMESPACES),
                name=data.draw(st.one_of(NAMES, st.text(max_size=3))),
            )
            call(server, ledger, "/podfit.v1.ClusterCache/Get", cc.GetRequest(key=key), cc.GetResponse)
        elif op == "list":
            request = cc.ListRequest(
                kind=data.draw(st.sampled_from([*KIND_TO_ENUM.values(), 0, 77])),
                namespace=data.draw(st.one_of(NAMESPACES, st.just(""))),
                label_selector=data.draw(st.sampled_from(["", "app=web", "a in (b", "!x", "\x00", "=" * 300])),
                pod_filter=data.draw(st.sampled_from([0, 1, 2, 9])),
                limit=data.draw(st.sampled_from([0, 1, 2, -1, 2**31 - 1])),
                continue_token=data.draw(st.sampled_from(["", "garbage", "eyJ2IjoxfQ", "e30", "=" * 5])),
            )
            page = call(server, ledger, "/podfit.v1.ClusterCache/List", request, cc.ListResponse)
            if page is not None and page.continue_token:  # the next page, with the token the server gave
                request.continue_token = page.continue_token
                call(server, ledger, "/podfit.v1.ClusterCache/List", request, cc.ListResponse)
        elif op == "stats":
            call(server, ledger, "/podfit.v1.ClusterCache/Stats", cc.StatsRequest(), cc.StatsResponse)
        elif op == "sync":
            feeder = data.draw(st.sampled_from(["", "fuzz", "\ud800", "f" * 5000]))
            call(
                server,
                ledger,
                "/podfit.v1.ClusterCache/MarkSynced",
                _safe(cc.MarkSyncedRequest, feeder=feeder),
                cc.MarkSyncedResponse,
            )
        else:
            method = data.draw(st.sampled_from(["Apply", "Replace", "Get", "List", "Stats", "MarkSynced"]))
            call(server, ledger, f"/podfit.v1.ClusterCache/{method}", data.draw(RANDOM_BYTES), cc.StatsResponse)

    def stream_batches(data: st.DataObject) -> None:
        requests: list[bytes] = []
        expected: list[list[tuple[str, tuple[str, str, str] | None, bool]]] = []
        for sequence in range(1, data.draw(st.integers(min_value=1, max_value=4)) + 1):
            if data.draw(st.integers(min_value=0, max_value=5)) == 0:
                requests.append(b"\x08" + bytes([sequence]) + data.draw(RANDOM_BYTES))
                expected.append([("raw", None, False)])
                continue
            batch = data.draw(st.lists(known_objects(), max_size=3))
            deletes = data.draw(st.lists(st.tuples(st.sampled_from(KINDS), NAMESPACES, NAMES), max_size=1))
            update_list = [cc.Update(upsert=o) for o, _ in batch]
            update_list += [
                cc.Update(delete=cc.ObjectKey(kind=KIND_TO_ENUM[k], namespace=ns, name=n)) for k, ns, n in deletes
            ]
            plan = [("upsert", k, True) for _, k in batch]
            plan += [("delete", (k, "" if k in CLUSTER_SCOPED else ns, n), True) for k, ns, n in deletes]
            requests.append(cc.StreamRequest(sequence=sequence, updates=update_list).SerializeToString())
            expected.append(plan)
        ledger.inputs += len(requests)
        stream = server.channel.stream_stream(
            "/podfit.v1.ClusterCache/Stream",
            request_serializer=None,
            response_deserializer=cc.StreamResponse.FromString,
        )
        acks = list(stream(iter(requests), timeout=30))
        assert len(acks) == len(requests), "every batch is acknowledged, refused ones included"
        for ack, plan in zip(acks, expected, strict=True):
            if ack.error:
                assert ack.generation == 0
                continue
            for operation, key, _ in plan:
                if operation == "raw":
                    _record_raw_batch(ledger, requests[ack.sequence - 1])
                    continue
                assert key is not None, "hostile bytes were accepted"
                kind, namespace, name = key
                if operation == "upsert":
                    ledger.keys[kind].add((namespace, name))
                else:
                    ledger.keys[kind].discard((namespace, name))

    run()
    assert_cache_matches(server, ledger)


def _record_raw_batch(ledger: Ledger, raw: bytes) -> None:
    """Random bytes that happened to decode and were acknowledged: only deletes can have made it through."""
    request = cc.StreamRequest.FromString(raw)
    for update in request.updates:
        assert update.WhichOneof("operation") == "delete", "random bytes were accepted as an object"
        key = update.delete
        kind = KIND_NAMES[key.kind]
        ledger.keys[kind].discard(("" if kind in CLUSTER_SCOPED else key.namespace or "default", key.name))


def _safe(message_type: Any, **fields: str) -> Any:
    """A request with string fields that protobuf can serialize (lone surrogates cannot be)."""
    return message_type(**{k: v.encode("utf-8", "replace").decode() for k, v in fields.items()})


def assert_cache_matches(server: ThreadedServer, ledger: Ledger) -> None:
    for kind in KINDS:
        response = call(
            server, ledger, "/podfit.v1.ClusterCache/List", cc.ListRequest(kind=KIND_TO_ENUM[kind]), cc.ListResponse
        )
        assert response is not None
        listed = set()
        for obj in response.objects:
            meta = getattr(obj, obj.WhichOneof("object")).metadata
            listed.add(("" if kind in CLUSTER_SCOPED else meta.namespace or "default", meta.name))
        assert listed == ledger.keys[kind], f"{kind}: the cache differs from what was acknowledged"


# -- Scheduler and Simulation --------------------------------------------------------------------------


def test_decisions_and_simulations(server: ThreadedServer, ledger: Ledger) -> None:
    """Filter / Score / Schedule (assume) / ScheduleStream / ScheduleBatch / Preempt / Simulate /
    EstimateScaleUp / SimulateDrain; assumed pods join the ledger."""

    @settings(FUZZ, max_examples=700)
    @given(
        op=st.sampled_from(
            ["filter", "score", "schedule", "stream", "batch", "preempt", "simulate", "estimate", "drain", "raw"]
        ),
        data=st.data(),
    )
    def run(op: str, data: st.DataObject) -> None:
        pod = data.draw(pod_refs())
        nodes = _safe_list(data.draw(NODE_NAMES))
        scheduler = _safe_text(data.draw(SCHEDULER_NAMES))
        view = data.draw(st.sampled_from([0, 1, 2, 7]))
        if op == "filter":
            request = sc.FilterRequest(pod=pod, node_names=nodes, scheduler_name=scheduler, view=view)
            call(server, ledger, "/podfit.v1.Scheduler/Filter", request, sc.FilterResponse)
        elif op == "score":
            request = sc.ScoreRequest(pod=pod, node_names=nodes, scheduler_name=scheduler, view=view)
            call(server, ledger, "/podfit.v1.Scheduler/Score", request, sc.ScoreResponse)
        elif op == "schedule":
            assume = data.draw(st.booleans())
            request = sc.ScheduleRequest(pod=pod, node_names=nodes, scheduler_name=scheduler, view=view, assume=assume)
            response = call(server, ledger, "/podfit.v1.Scheduler/Schedule", request, sc.ScheduleResponse)
            if response is not None and response.assumed_generation:
                _record_pod_write(ledger, pod)
        elif op == "stream":
            requests = [
                data.draw(
                    st.one_of(
                        st.builds(lambda ref: sc.ScheduleRequest(pod=ref, view=view).SerializeToString(), pod_refs()),
                        RANDOM_BYTES,
                    )
                )
                for _ in range(3)
            ]
            ledger.inputs += len(requests)
            stream = server.channel.stream_stream(
                "/podfit.v1.Scheduler/ScheduleStream",
                request_serializer=None,
                response_deserializer=sc.ScheduleResponse.FromString,
            )
            try:
                list(stream(iter(requests), timeout=30))
            except grpc.RpcError as exc:
                assert exc.code() in ALLOWED, exc.details()  # type: ignore[attr-defined]
        elif op == "batch":
            pods = [data.draw(pod_refs()) for _ in range(data.draw(st.integers(min_value=0, max_value=3)))]
            request = sc.ScheduleBatchRequest(
                pods=pods, node_names=nodes, all_or_nothing=data.draw(st.booleans()), view=view
            )
            response = call(server, ledger, "/podfit.v1.Scheduler/ScheduleBatch", request, sc.ScheduleBatchResponse)
            if response is not None:
                for ref, result in zip(pods, response.results, strict=True):
                    if result.assumed_generation:
                        _record_pod_write(ledger, ref)
        elif op == "preempt":
            request = sc.PreemptRequest(pod=pod, node_names=nodes, scheduler_name=scheduler)
            call(server, ledger, "/podfit.v1.Scheduler/Preempt", request, sc.PreemptResponse)
        elif op == "simulate":
            template = data.draw(st.one_of(known_objects(["Node"]).map(lambda pair: pair[0]), any_objects()))
            scenario = sim.Scenario(
                remove_nodes=nodes,
                cordon_nodes=_safe_list(data.draw(NODE_NAMES)),
                add_nodes=[sim.HypotheticalNodes(template=template, count=data.draw(st.integers(-1, 3)))],
                add_pods=[data.draw(pod_refs())],
            )
            request = sim.SimulateRequest(scenario=scenario, pods=[pod], scheduler_name=scheduler)
            call(server, ledger, "/podfit.v1.Simulation/Simulate", request, sim.SimulateResponse)
        elif op == "estimate":
            group = sim.NodeGroup(
                id=data.draw(st.sampled_from(["", "g1"])),
                template=data.draw(st.one_of(known_objects(["Node"]).map(lambda pair: pair[0]), any_objects())),
                max_size=data.draw(st.integers(-1, 5)),
                current_size=data.draw(st.integers(-1, 5)),
            )
            request = sim.EstimateScaleUpRequest(groups=[sim.PodGroup(pods=[pod])], node_groups=[group])
            call(server, ledger, "/podfit.v1.Simulation/EstimateScaleUp", request, sim.EstimateScaleUpResponse)
        elif op == "drain":
            options = sim.DrainOptions(min_replica_count=data.draw(st.integers(-3, 3)))
            request = sim.SimulateDrainRequest(node_names=nodes, options=options)
            call(server, ledger, "/podfit.v1.Simulation/SimulateDrain", request, sim.SimulateDrainResponse)
        else:
            method = data.draw(
                st.sampled_from(
                    [
                        "Scheduler/Filter",
                        "Scheduler/Score",
                        "Scheduler/Schedule",
                        "Scheduler/ScheduleBatch",
                        "Scheduler/Preempt",
                        "Simulation/Simulate",
                        "Simulation/EstimateScaleUp",
                        "Simulation/SimulateDrain",
                    ]
                )
            )
            call(server, ledger, f"/podfit.v1.{method}", data.draw(RANDOM_BYTES), cc.StatsResponse)

    run()
    assert_cache_matches(server, ledger)


def _safe_text(text: str) -> str:
    return text.encode("utf-8", "replace").decode()


def _safe_list(texts: list[str]) -> list[str]:
    return [_safe_text(t) for t in texts]


# -- the extender --------------------------------------------------------------------------------------


@st.composite
def extender_bodies(draw: st.DrawFn) -> bytes:
    choice = draw(st.integers(min_value=0, max_value=6))
    if choice == 0:
        return draw(HOSTILE_BYTES)
    pod: Any = draw(st.one_of(manifests(["Pod"]), HOSTILE_VALUES))
    body: dict[str, Any] = {"Pod": pod}
    if draw(st.booleans()):
        body["NodeNames"] = draw(st.one_of(NODE_NAMES, HOSTILE_VALUES))
    else:
        nodes = [draw(manifests(["Node"])) for _ in range(draw(st.integers(0, 2)))]
        body["Nodes"] = draw(st.one_of(st.just({"items": nodes}), HOSTILE_VALUES))
    if draw(st.booleans()):
        body["NodeNameToVictims"] = draw(
            st.one_of(st.dictionaries(NAMES, st.just({"Pods": [], "NumPDBViolations": 0}), max_size=2), HOSTILE_VALUES)
        )
    for key in ("PodName", "PodNamespace", "PodUID", "Node"):
        if draw(st.booleans()):
            body[key] = draw(st.one_of(NAMES, HOSTILE_VALUES))
    try:
        return json.dumps(body).encode()
    except (ValueError, RecursionError):
        return b'{"Pod":' + b"[" * 5000 + b"}"


def test_extender_verbs(server: ThreadedServer, ledger: Ledger) -> None:
    """filter / prioritize / preempt / bind: never 500, always JSON, 400s carry an Error."""

    @settings(FUZZ, max_examples=900)
    @given(verb=st.sampled_from(["filter", "prioritize", "preempt", "bind"]), body=extender_bodies())
    def run(verb: str, body: bytes) -> None:
        ledger.inputs += 1
        server.http.request("POST", f"/scheduler/{verb}", body=body, headers={"Content-Type": "application/json"})
        response = server.http.getresponse()
        payload = response.read()
        assert response.status in (200, 400), f"{verb}: {response.status} {payload[:300]!r}"
        answer = json.loads(payload)
        if response.status == 400:
            assert answer["Error"].startswith(f"{verb}: ")
            assert len(answer["Error"]) < 4096

    run()
    assert_cache_matches(server, ledger)


def test_the_run_was_big_enough_and_the_server_is_up(server: ThreadedServer, ledger: Ledger) -> None:
    """Runs last: the inputs above add up to at least 2,000, and the server still answers."""
    assert ledger.inputs >= 2000, ledger.inputs
    assert call(server, ledger, "/podfit.v1.ClusterCache/Stats", cc.StatsRequest(), cc.StatsResponse) is not None
