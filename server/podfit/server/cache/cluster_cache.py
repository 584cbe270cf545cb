"""The cluster cache: the objects podfit decides on, with per-node aggregates kept incrementally.

Updates arrive in batches that are converted and validated first and then applied as a whole, so a
batch either lands completely (one new generation) or not at all. Every change bumps the generation;
a decision sees exactly one generation because decisions and updates both run on the event loop and
a decision never awaits while it reads.

A reader that must not be held back by writers, nor hold them back (a what-if on another thread, a
decision worker's image), takes ``freeze()``: a snapshot of this generation that no later write touches.
Freezing copies nothing — the node table becomes the snapshot's and the cache goes on writing a
copy-on-write fork of it; each NodeInfo is cloned the first time the cache changes it after a freeze, and
the containers the snapshot holds are copied on the first write (kube-scheduler's generation-numbered
NodeInfos and cluster-autoscaler's forked snapshots, for the same reason).
"""

from __future__ import annotations

import bisect
import gc
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from podfit.server.cache.journal import Journal
from podfit.server.cache.node_info import NodeInfo
from podfit.server.cache.node_table import NodeTable
from podfit.server.cache.overlay import Overlay
from podfit.server.cache.pod_index import move_index, resync
from podfit.server.cache.snapshot import NO_DRA, NO_STORAGE, DraView, ImageSummary, NameIndex, Snapshot, StorageView
from podfit.server.model import Kind, Node, Pod, ValidationError, WorkloadSelector
from podfit.server.model.decode import ClusterObject
from podfit.server.model.dra import ResourceClaim, held_devices
from podfit.server.model.objects import CONTROLLER_KINDS, DRA_KINDS, STORAGE_KINDS, node_from_k8s
from podfit.server.model.readiness import validate_pod_update

WORKLOAD_KINDS = (Kind.SERVICE, Kind.REPLICA_SET, Kind.STATEFUL_SET, Kind.REPLICATION_CONTROLLER)


def object_key(kind: Kind, namespace: str, name: str) -> str:
    return f"{namespace or 'default'}/{name}" if kind.namespaced else name


def key_of(kind: Kind, obj: ClusterObject) -> str:
    return object_key(kind, getattr(obj, "namespace", ""), obj.name)


def _version_order(new: str, old: str) -> int:
    """-1 when ``new`` is older than ``old``, 0 when equal or incomparable, 1 when newer."""
    if not new or not old:
        return 0
    if new.isascii() and new.isdigit() and old.isascii() and old.isdigit():
        a, b = int(new), int(old)
        return (a > b) - (a < b)
    return 0 if new == old else 1


@dataclass(slots=True)
class Entry:
    obj: ClusterObject
    # The object as the caller sent it (serialized by the transport), returned by Get/List.
    source: bytes


class Outcome:
    APPLIED = "applied"
    STALE = "stale"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class Upsert:
    kind: Kind
    obj: ClusterObject
    source: bytes = b""


@dataclass(frozen=True, slots=True)
class Delete:
    kind: Kind
    namespace: str
    name: str
    resource_version: str = ""


Change = Upsert | Delete


@dataclass(slots=True)
class BatchResult:
    generation: int
    outcomes: list[str] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes if o == outcome)


class UpdateRejected(ValueError):
    """Change ``index`` of a batch breaks an update rule; nothing of the batch was applied."""

    def __init__(self, index: int, error: ValidationError) -> None:
        super().__init__(f"change {index}: {error}")
        self.index = index
        self.error = error


_FREEZE_AFTER = 10_000
_MAX_CONVERTED_NODES = 20_000


class ClusterCache:
    def __init__(self) -> None:
        self.generation = 0
        self._objects: dict[Kind, dict[str, Entry]] = {kind: {} for kind in Kind}
        self._node_infos: dict[str, NodeInfo] = {}
        self._node_names: list[str] = []
        self._node_list: list[NodeInfo] | None = None
        self._node_rows: np.ndarray | None = None
        self._node_name_array: np.ndarray = np.empty(0, dtype=object)
        self._node_positions: dict[str, int] = {}
        self._node_name_index = NameIndex(self._node_name_array)
        self._node_info_array: np.ndarray = np.empty(0, dtype=object)
        self.table = NodeTable()
        # Bound pods whose node is not (yet) in the cache, by node name.
        self._orphans: dict[str, dict[str, Pod]] = {}
        self._pending: dict[str, Pod] = {}
        # Every bound pod by node name, terminal ones too (no NodeInfo holds those), in the order received
        # (an update counts as received again): what cluster-autoscaler's drain rules walk.
        self._bound: dict[str, dict[str, Pod]] = {}
        self._nominated: dict[str, dict[str, Pod]] = {}
        # Image name -> node name -> size.
        self._images: dict[str, dict[str, int]] = {}
        self._image_summaries: dict[str, ImageSummary] | None = None
        # Read-only views handed to every snapshot, rebuilt only after their objects changed
        # (namespaces, PDBs, workload selectors and nominated pods change far less often than decisions run).
        self._views: dict[str, Any] = {}
        # Objects applied since the cyclic garbage collector last set the cache's objects aside.
        self._unfrozen = 0
        # The ResourceSlices as one list, kept (the same object) until a slice changes: what DynamicResources
        # derives from the slices (pools per node) is kept as long as the list is.
        self._slices: list[Any] | None = None
        # The DRA view's claims, and what DynamicResources derives from them, kept as claims come and go
        # rather than rebuilt from every claim on each change (an assume writes one): how many claims hold
        # each device (allocated, not for admin access) and the devices in use by pool. A view shares
        # these dicts; the next change copies them first (``_dra_shared``), so a view never changes.
        self._dra_claims: dict[str, ResourceClaim] = {}
        self._dra_holders: dict[tuple[str, str, str], int] = {}
        self._dra_in_use: dict[tuple[str, str], frozenset[str]] = {}
        self._dra_shared = False
        # Caller-sent Nodes converted before, by (name, uid, resourceVersion).
        self._converted_nodes: dict[tuple[str, str, str], Node] = {}
        # The owner's record of its writes, for decision workers (podfit.server.transport.workers); None elsewhere.
        self.journal: Journal | None = None
        # Nodes whose NodeInfo was made or cloned since the last freeze (changed in place); any other is
        # held by a frozen snapshot and cloned before its first change.
        self._owned: set[str] = set()
        # Whether _node_infos, _node_list and _node_info_array are a frozen snapshot's too (copied first).
        self._lists_frozen = False
        # Objects added or removed so far, and the last frozen snapshot with that count when it was taken:
        # while nothing changed and a reader still holds it, the next reader gets it too (with its pod
        # index, built once).
        self._changes = 0
        self._last_frozen: tuple[int, weakref.ref[Snapshot]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        """The cache as a decision worker's image: its state without the owner's journal."""
        state = dict(self.__dict__)
        state["journal"] = None
        return state

    def freeze(self) -> Snapshot:
        """A snapshot of this generation that stays as it is, whatever the cache is written afterwards,
        for readers on other threads. O(1): see the module's docstring."""
        if self._last_frozen is not None and self._last_frozen[0] == self._changes:
            last = self._last_frozen[1]()
            if last is not None:
                return last
        snapshot = self.snapshot()
        frozen = self.table
        self.table = frozen.fork()
        move_index(frozen, self.table)
        self._owned = set()
        self._lists_frozen = True
        self._last_frozen = (self._changes, weakref.ref(snapshot))
        return snapshot

    def image(self) -> dict[str, Any]:
        """The cache's state at this generation, as a decision worker loads it (``restore_image``): frozen
        like a snapshot, with every container copied one level deep (pointer copies, on the loop), so it
        can be pickled on another thread while writes go on."""
        table = self.freeze().table
        state = dict(self.__dict__)
        for name, value in state.items():
            if isinstance(value, dict):
                state[name] = {k: dict(v) if isinstance(v, dict) else v for k, v in value.items()}
            elif isinstance(value, list | set):
                state[name] = type(value)(value)
            elif isinstance(value, np.ndarray):
                state[name] = value.copy()
        # Views and summaries are rebuilt on first use: a DraView's memo grows under decisions meanwhile.
        state.update(journal=None, table=table, _owned=set(), _lists_frozen=False, _views={}, _last_frozen=None)
        state.update(_image_summaries=None, _slices=None, _converted_nodes={})
        return state

    def restore_image(self, image: dict[str, Any]) -> None:
        """Becomes ``image`` (the owner's ``image()``, unpickled), keeping this object: the engine and the
        metrics hold it."""
        journal = self.journal
        self.__dict__.update(image)
        self.journal = journal
        # Every record is new to this process's collector: set them aside, as apply does (see there).
        gc.freeze()
        self._unfrozen = 0

    # ---------------------------------------------------------------------------------------------
    # Reads

    def snapshot(self) -> Snapshot:
        if self._node_list is None or self._node_rows is None:
            self._node_list = [self._node_infos[name] for name in self._node_names]
            self._node_rows = np.array([self.table.row_of[name] for name in self._node_names], dtype=np.intp)
            self._node_name_array = np.array(self._node_names, dtype=object)
            self._node_positions = {name: i for i, name in enumerate(self._node_names)}
            self._node_name_index = NameIndex(self._node_name_array)
            self._node_info_array = np.empty(len(self._node_list), dtype=object)
            self._node_info_array[:] = self._node_list
        if self._image_summaries is None:
            # Like kube-scheduler's cache, an image's size is what the node that first reported it said.
            self._image_summaries = {
                image: ImageSummary(size_bytes=next(iter(nodes.values())), num_nodes=len(nodes))
                for image, nodes in self._images.items()
            }
        views = self._views
        if "namespaces" not in views:
            workloads: list[WorkloadSelector] = []
            for kind in WORKLOAD_KINDS:
                workloads.extend(e.obj for e in self._objects[kind].values())  # type: ignore[misc]
            views["namespaces"] = {k: e.obj for k, e in self._objects[Kind.NAMESPACE].items()}
            views["pdbs"] = [e.obj for e in self._objects[Kind.POD_DISRUPTION_BUDGET].values()]
            views["workloads"] = workloads
            views["controllers"] = {
                (kind.value, e.obj.namespace, e.obj.name): e.obj  # type: ignore[union-attr]
                for kind in CONTROLLER_KINDS
                for e in self._objects[kind].values()
            }
            views["nominated"] = {node: list(pods.values()) for node, pods in self._nominated.items() if pods}
            views["storage"] = self._storage_view()
        if "dra" not in views:
            views["dra"] = self._dra_view()
        return Snapshot(
            generation=self.generation,
            node_infos=self._node_list,
            node_info_map=self._node_infos,
            namespaces=views["namespaces"],
            pdbs=views["pdbs"],
            workloads=views["workloads"],
            controllers=views["controllers"],
            nominated_pods=views["nominated"],
            images=self._image_summaries,
            table=self.table,
            rows=self._node_rows,
            names=self._node_name_array,
            info_array=self._node_info_array,
            name_positions=self._node_positions,
            name_index=self._node_name_index,
            storage=views["storage"],
            dra=views["dra"],
        )

    def _storage_view(self) -> StorageView:
        objects = self._objects
        if not any(objects[kind] for kind in STORAGE_KINDS):
            return NO_STORAGE

        def by_key(kind: Kind) -> dict[str, Any]:
            return {key: entry.obj for key, entry in objects[kind].items()}

        return StorageView(
            classes=by_key(Kind.STORAGE_CLASS),
            volumes=by_key(Kind.PERSISTENT_VOLUME),
            claims=by_key(Kind.PERSISTENT_VOLUME_CLAIM),
            csi_nodes=by_key(Kind.CSI_NODE),
            csi_drivers=by_key(Kind.CSI_DRIVER),
            capacities=[e.obj for e in objects[Kind.CSI_STORAGE_CAPACITY].values()],  # type: ignore[misc]
            attachments=[e.obj for e in objects[Kind.VOLUME_ATTACHMENT].values()],  # type: ignore[misc]
        )

    def _dra_view(self) -> DraView:
        objects = self._objects
        if not any(objects[kind] for kind in DRA_KINDS):
            return NO_DRA
        if self._slices is None:
            self._slices = [e.obj for e in objects[Kind.RESOURCE_SLICE].values()]
        self._dra_shared = True
        view = DraView(
            classes={key: entry.obj for key, entry in objects[Kind.DEVICE_CLASS].items()},  # type: ignore[misc]
            slices=self._slices,
            claims=self._dra_claims,
        )
        view.memo["allocated"] = self._dra_holders.keys()
        view.memo["in_use"] = self._dra_in_use
        return view

    def _dra_claim(self, claim: ResourceClaim, delta: int) -> None:
        """A claim added (``delta`` 1) or removed (-1): the DRA view's claims and devices in use follow."""
        if self._dra_shared:
            self._dra_claims = dict(self._dra_claims)
            self._dra_holders = dict(self._dra_holders)
            self._dra_in_use = dict(self._dra_in_use)
            self._dra_shared = False
        if delta > 0:
            self._dra_claims[claim.key] = claim
        else:
            self._dra_claims.pop(claim.key, None)
        holders, in_use = self._dra_holders, self._dra_in_use
        for device in held_devices(claim):
            count = holders.get(device, 0) + delta
            pool = device[:2]
            if count > 0:
                holders[device] = count
                if count == 1 and delta > 0:
                    in_use[pool] = in_use.get(pool, frozenset()) | {device[2]}
            else:
                holders.pop(device, None)
                left = in_use.get(pool, frozenset()) - {device[2]}
                if left:
                    in_use[pool] = left
                else:
                    in_use.pop(pool, None)

    def snapshot_with_nodes(self, nodes: Sequence[Node], base: Snapshot | None = None) -> Snapshot:
        """``base`` (the current snapshot when None) with ``nodes`` standing in for the cached objects of
        the same names (added when unknown), each carrying the pods it holds for them. Serves callers that
        send their own Node objects (the extender without nodeCacheCapable). Nodes equal to the cached ones
        change nothing, so the usual case costs no overlay at all."""
        base = base or self.snapshot()
        infos = base.node_info_map
        changed = [
            n for n in nodes if (cached := infos.get(n.name)) is None or (cached.node is not n and cached.node != n)
        ]
        if not changed:
            return base
        overlay = Overlay(base)
        for node in changed:
            if node.name in overlay:
                overlay.update_node(node)
                continue
            overlay.add_node(node)
            for pod in self._orphans.get(node.name, {}).values():
                overlay.bind_pod(pod)
        return overlay.snapshot()

    def node_from_k8s(
        self,
        source: Any,
        path: str,
        name: str = "",
        uid: str = "",
        version: str = "",
        load: Callable[[Any], Any] = lambda data: data,
    ) -> Node:
        """A caller-sent Kubernetes Node as a record; ``load(source)`` gives the whole object (``source``
        itself by default). When its ``uid`` and resourceVersion (``version``) are those of the cached
        node it is that node (nothing converted, and decisions see no change); other conversions are kept
        by (name, uid, resourceVersion) — a Node object with a given resourceVersion never changes — so a
        scheduler resending the same 500 Nodes per call converts each once."""
        if not (name and uid and version):
            return node_from_k8s(load(source), path)
        cached = self._node_infos.get(name)
        if cached is not None and cached.node.uid == uid and cached.node.resource_version == version:
            return cached.node
        key = (name, uid, version)
        node = self._converted_nodes.get(key)
        if node is None:
            node = node_from_k8s(load(source), path)
            if (node.name, node.uid, node.resource_version) != key:
                return node  # the object disagrees with what the caller said of it: not worth keeping
            if len(self._converted_nodes) >= _MAX_CONVERTED_NODES:
                self._converted_nodes.clear()
            self._converted_nodes[key] = node
        return node

    def get(self, kind: Kind, namespace: str, name: str) -> Entry | None:
        return self._objects[kind].get(object_key(kind, namespace, name))

    def newer_version(self, kind: Kind, obj: ClusterObject) -> str | None:
        """The cached copy's resourceVersion when it is newer than ``obj``'s (an upsert of ``obj`` would be
        STALE), else None."""
        entry = self.get(kind, getattr(obj, "namespace", ""), obj.name)
        cached = getattr(entry.obj, "resource_version", "") if entry is not None else ""
        return cached if _version_order(getattr(obj, "resource_version", ""), cached) < 0 else None

    def get_by_key(self, kind: Kind, key: str) -> Entry | None:
        return self._objects[kind].get(key)

    def entries(self, kind: Kind) -> Iterator[Entry]:
        return iter(self._objects[kind].values())

    def count(self, kind: Kind) -> int:
        return len(self._objects[kind])

    @property
    def has_nominated_pods(self) -> bool:
        return bool(self._nominated)

    @property
    def pending_pods(self) -> Sequence[Pod]:
        return list(self._pending.values())

    def memory_estimate(self) -> int:
        """Bytes: the sources held plus a per-object allowance for the decoded records and indexes."""
        total = 0
        for objects in self._objects.values():
            for entry in objects.values():
                total += len(entry.source) + 1200
        return total + 800 * len(self._node_infos)

    # ---------------------------------------------------------------------------------------------
    # Writes

    def apply(self, changes: Iterable[Change]) -> BatchResult:
        """Applies a batch atomically; one generation step for the whole batch.

        Update rules (pod scheduling readiness) are checked for every change first, against the
        cache as the earlier changes of the same batch would leave it, so a refused batch changes nothing.
        """
        changes = list(changes)
        self.check(changes)
        outcomes = [self._apply_one(change) for change in changes]
        if any(o == Outcome.APPLIED for o in outcomes):
            self.generation += 1
            if self.journal is not None:
                self.journal.record(("apply", changes))
        self._unfrozen += len(changes)
        if self._unfrozen >= _FREEZE_AFTER:
            # The cache's records live until replaced and form no cycles: moving them out of the
            # collector's generations spares every later collection a walk over the whole cluster
            # (tens of ms per collection at 20,000 pods, paid inside decisions).
            gc.freeze()
            self._unfrozen = 0
        return BatchResult(self.generation, outcomes)

    def replace(self, kind: Kind, objects: Sequence[Upsert]) -> tuple[int, int, int, int]:
        """Makes ``objects`` the whole set of ``kind``: (generation, upserted, deleted, unchanged)."""
        wanted = {key_of(kind, u.obj) for u in objects}
        deletes = [
            Delete(kind, getattr(e.obj, "namespace", ""), e.obj.name)
            for key, e in self._objects[kind].items()
            if key not in wanted
        ]
        result = self.apply([*objects, *deletes])
        upserted = sum(1 for o in result.outcomes[: len(objects)] if o == Outcome.APPLIED)
        deleted = sum(1 for o in result.outcomes[len(objects) :] if o == Outcome.APPLIED)
        unchanged = sum(1 for o in result.outcomes[: len(objects)] if o != Outcome.APPLIED)
        return result.generation, upserted, deleted, unchanged

    def tentative(self) -> Tentative:
        """Starts a set of batches that can be undone as a whole (see Tentative)."""
        return Tentative(self)

    def _restore(self, generation: int, before: dict[tuple[Kind, str], Entry | None]) -> None:
        """Puts back the entries ``before`` held and the generation ``generation``.

        Derived state keyed by generation must not believe it is current: the NodeInfos touched here are
        stamped above every generation issued so far (``self.generation`` still counts the undone
        batches), and the pod index is re-synced to ``generation`` at once, so it re-reads those rows and
        any later change is again a step above what it last saw.
        """
        for (kind, key), entry in before.items():
            current = self._objects[kind].get(key)
            if current is entry:
                continue
            if current is not None:
                self._on_remove(kind, current.obj)
            if entry is None:
                del self._objects[kind][key]
            else:
                self._objects[kind][key] = entry
                self._on_add(kind, entry.obj)
        self.generation = generation
        self.table.epoch += 1
        snapshot = self.snapshot()
        resync(snapshot.table, snapshot.node_infos, snapshot.rows, snapshot.generation)

    def check(self, changes: Sequence[Change]) -> None:
        """Raises UpdateRejected for the first pod update that kube-apiserver would refuse."""
        pending: dict[str, Pod | None] = {}
        for index, change in enumerate(changes):
            if change.kind is not Kind.POD:
                continue
            if isinstance(change, Delete):
                pending[object_key(Kind.POD, change.namespace, change.name)] = None
                continue
            new = change.obj
            assert isinstance(new, Pod)
            key = key_of(Kind.POD, new)
            if key in pending:
                old = pending[key]
            else:
                entry = self._objects[Kind.POD].get(key)
                old = entry.obj if entry is not None else None  # type: ignore[assignment]
            pending[key] = new
            if old is None or (old.uid and new.uid and old.uid != new.uid):
                continue  # a new pod (or a re-created one): creation rules only
            if _version_order(new.resource_version, old.resource_version) < 0:
                continue  # stale: ignored, not refused
            try:
                validate_pod_update(old, new)
            except ValidationError as exc:
                raise UpdateRejected(index, exc) from None

    def _apply_one(self, change: Change) -> str:
        if isinstance(change, Delete):
            key = object_key(change.kind, change.namespace, change.name)
            existing = self._objects[change.kind].get(key)
            if existing is None:
                return Outcome.UNCHANGED
            if _version_order(change.resource_version, getattr(existing.obj, "resource_version", "")) < 0:
                return Outcome.STALE
            del self._objects[change.kind][key]
            self._on_remove(change.kind, existing.obj)
            return Outcome.APPLIED
        kind, obj = change.kind, change.obj
        key = key_of(kind, obj)
        existing = self._objects[kind].get(key)
        if existing is not None:
            order = _version_order(getattr(obj, "resource_version", ""), getattr(existing.obj, "resource_version", ""))
            if order < 0:
                return Outcome.STALE
            if existing.source == change.source and existing.obj == obj:
                return Outcome.UNCHANGED
            self._on_remove(kind, existing.obj)
        self._objects[kind][key] = Entry(obj, change.source)
        self._on_add(kind, obj)
        return Outcome.APPLIED

    # ---------------------------------------------------------------------------------------------
    # Index maintenance

    def _on_add(self, kind: Kind, obj: ClusterObject) -> None:
        self._changes += 1
        if isinstance(obj, Pod):
            self._add_pod(obj)
        elif isinstance(obj, Node):
            self._add_node(obj)
        elif kind in DRA_KINDS:
            self._dra_changed(kind, obj, 1)
        else:
            self._views.clear()

    def _dra_changed(self, kind: Kind, obj: ClusterObject, delta: int) -> None:
        """A DRA object came (``delta`` 1) or went (-1): only the DRA view is made again, from state kept
        as the objects change (the slices' list, the claims and the devices they hold)."""
        self._views.pop("dra", None)
        if kind is Kind.RESOURCE_SLICE:
            self._slices = None
        elif isinstance(obj, ResourceClaim):
            self._dra_claim(obj, delta)

    def _on_remove(self, kind: Kind, obj: ClusterObject) -> None:
        self._changes += 1
        if isinstance(obj, Pod):
            self._remove_pod(obj)
        elif isinstance(obj, Node):
            self._remove_node(obj)
        elif kind in DRA_KINDS:
            self._dra_changed(kind, obj, -1)
        else:
            self._views.clear()

    def bound_pods(self, node_name: str) -> list[Pod]:
        """The pods bound to a node, terminal ones included, in the order the cache received them."""
        return list(self._bound.get(node_name, {}).values())

    def _unfreeze_lists(self) -> None:
        """Copies the node containers a frozen snapshot holds before the first change after a freeze."""
        if self._lists_frozen:
            self._node_infos = dict(self._node_infos)
            if self._node_list is not None:
                self._node_list = list(self._node_list)
                self._node_info_array = self._node_info_array.copy()
            self._lists_frozen = False

    def _writable(self, info: NodeInfo) -> NodeInfo:
        """``info``, or its clone put in its place when a frozen snapshot holds it."""
        name = info.name
        if name in self._owned:
            return info
        self._unfreeze_lists()
        clone = info.clone()
        self._node_infos[name] = clone
        self.table.adopt(clone)
        if self._node_list is not None:
            position = self._node_positions[name]
            self._node_list[position] = clone
            self._node_info_array[position] = clone
        self._owned.add(name)
        return clone

    def _add_pod(self, pod: Pod) -> None:
        if pod.node_name:
            self._bound.setdefault(pod.node_name, {})[pod.key] = pod
        if pod.terminal:
            return
        if not pod.node_name:
            self._pending[pod.key] = pod
            if pod.nominated_node_name:
                self._nominated.setdefault(pod.nominated_node_name, {})[pod.key] = pod
                self._views.clear()
            return
        info = self._node_infos.get(pod.node_name)
        if info is None:
            self._orphans.setdefault(pod.node_name, {})[pod.key] = pod
        else:
            info = self._writable(info)
            info.add_pod(pod)
            info.generation = self.generation + 1
            self.table.refresh(info)

    def _remove_pod(self, pod: Pod) -> None:
        bound = self._bound.get(pod.node_name) if pod.node_name else None
        if bound is not None:
            bound.pop(pod.key, None)
            if not bound:
                del self._bound[pod.node_name]
        if pod.terminal:
            return
        if not pod.node_name:
            self._pending.pop(pod.key, None)
            if pod.nominated_node_name:
                self._views.clear()
                nominated = self._nominated.get(pod.nominated_node_name)
                if nominated is not None:
                    nominated.pop(pod.key, None)
                    if not nominated:
                        del self._nominated[pod.nominated_node_name]
            return
        info = self._node_infos.get(pod.node_name)
        if info is None:
            orphans = self._orphans.get(pod.node_name)
            if orphans is not None:
                orphans.pop(pod.key, None)
                if not orphans:
                    del self._orphans[pod.node_name]
        else:
            info = self._writable(info)
            info.remove_pod(pod)
            info.generation = self.generation + 1
            self.table.refresh(info)

    def _add_node(self, node: Node) -> None:
        info = NodeInfo(node, self.generation + 1)
        for pod in self._orphans.pop(node.name, {}).values():
            info.add_pod(pod)
        self._unfreeze_lists()
        self._owned.add(node.name)
        self._node_infos[node.name] = info
        self.table.add(info)
        bisect.insort(self._node_names, node.name)
        self._node_list = None
        for image in node.images:
            for name in image.names:
                self._images.setdefault(name, {})[node.name] = image.size_bytes
        self._image_summaries = None

    def _remove_node(self, node: Node) -> None:
        self._unfreeze_lists()
        self._owned.discard(node.name)
        info = self._node_infos.pop(node.name)
        self.table.remove(info)
        if info.pods:
            self._orphans[node.name] = dict(info.pods)
        index = bisect.bisect_left(self._node_names, node.name)
        del self._node_names[index]
        self._node_list = None
        for image in node.images:
            for name in image.names:
                nodes = self._images.get(name)
                if nodes is not None:
                    nodes.pop(node.name, None)
                    if not nodes:
                        del self._images[name]
        self._image_summaries = None


class Tentative:
    """Batches applied through ``apply`` land in the cache as usual (decisions see them, each is a
    generation step) until ``rollback`` undoes them all: every touched object's entry and the generation
    are exactly as before, as if none of it happened. Both run without awaiting, so on the event loop
    nobody observes the undone generations."""

    def __init__(self, cache: ClusterCache) -> None:
        self._cache = cache
        self.generation = cache.generation
        self._before: dict[tuple[Kind, str], Entry | None] = {}
        self._journal_mark = cache.journal.mark() if cache.journal is not None else 0

    def before(self, kind: Kind, namespace: str, name: str) -> Entry | Literal[False] | None:
        """The entry an object had before these batches changed it (None: absent); False if unchanged."""
        return self._before.get((kind, object_key(kind, namespace, name)), False)

    def apply(self, changes: Iterable[Change]) -> BatchResult:
        changes = list(changes)
        for change in changes:
            if isinstance(change, Delete):
                key = object_key(change.kind, change.namespace, change.name)
            else:
                key = key_of(change.kind, change.obj)
            self._before.setdefault((change.kind, key), self._cache.get_by_key(change.kind, key))
        return self._cache.apply(changes)

    def rollback(self) -> None:
        if self._before:
            self._cache._restore(self.generation, self._before)
            if self._cache.journal is not None:
                self._cache.journal.discard(self._journal_mark)
        self._before = {}
