"""Overlays: a snapshot forked to answer "what if" without copying the cluster or touching the cache.

An overlay changes a few nodes — adds hypothetical ones, removes, cordons or re-taints existing ones,
binds or removes pods — and yields snapshots that decisions run on exactly as on the cache's own. Its
NodeTable is a copy-on-write fork of the cache's (a column is copied only when the overlay first writes
it); a changed node's NodeInfo is cloned once; the pod index is the cache's with the changed rows read
again. So the cost of an overlay grows with what it changes, and any number of overlays can exist side
by side. Like snapshots, an overlay is valid for the cache generation it was forked from: use it within
one synchronous decision or simulation, before the cache changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet

import numpy as np
import numpy.typing as npt
from podfit.server.cache.node_info import NodeInfo
from podfit.server.cache.pod_index import OverlayPodIndex, PodIndexView
from podfit.server.cache.snapshot import DraView, ImageSummary, Snapshot
from podfit.server.dra.allocator import SliceIndex, by_pool, slice_index
from podfit.server.model import Node, Pod
from podfit.server.model.dra import ResourceClaim, ResourceSlice, held_devices


class OverlayError(ValueError):
    """A change that does not apply to the overlay as it stands (unknown node, name taken, ...)."""


class _NodeMap(Mapping[str, NodeInfo]):
    """The base snapshot's name -> NodeInfo map with the overlay's nodes in front and removed ones gone."""

    __slots__ = ("_base", "_own", "_removed")

    def __init__(self, base: Mapping[str, NodeInfo], own: Mapping[str, NodeInfo], removed: set[str]) -> None:
        self._base, self._own, self._removed = base, own, removed

    def __getitem__(self, name: str) -> NodeInfo:
        info = self._own.get(name)
        if info is not None:
            return info
        if name in self._removed:
            raise KeyError(name)
        return self._base[name]

    def __iter__(self) -> Iterator[str]:
        yield from (name for name in self._base if name not in self._removed)
        yield from (name for name in self._own if name not in self._base)

    def __len__(self) -> int:
        return len(self._base) - len(self._removed) + sum(1 for name in self._own if name not in self._base)


def _held(dra: DraView) -> frozenset[tuple[str, str, str]]:
    """The devices the view's claims hold (DynamicResources' devices in use), remembered in its memo."""
    found = dra.memo.get("allocated")
    if found is None:
        found = dra.memo["allocated"] = frozenset().union(*(held_devices(c) for c in dra.claims.values()))
    held: frozenset[tuple[str, str, str]] = found if isinstance(found, frozenset) else frozenset(found)
    return held


class _InUse(Mapping[tuple[str, str], AbstractSet[str]]):
    """The base's devices in use by pool with the overlay's pools in front."""

    __slots__ = ("_base", "_own")

    def __init__(
        self, base: Mapping[tuple[str, str], AbstractSet[str]], own: Mapping[tuple[str, str], AbstractSet[str]]
    ) -> None:
        self._base, self._own = base, own

    def __getitem__(self, key: tuple[str, str]) -> AbstractSet[str]:
        found = self._own.get(key)
        return found if found is not None else self._base[key]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        yield from self._base
        yield from (key for key in self._own if key not in self._base)

    def __len__(self) -> int:
        return len(self._base) + sum(1 for key in self._own if key not in self._base)

    def __bool__(self) -> bool:
        return bool(self._own) or bool(self._base)


class _Claims(Mapping[str, ResourceClaim]):
    """The base's claims with the overlay's in front."""

    __slots__ = ("_base", "_own")

    def __init__(self, base: Mapping[str, ResourceClaim], own: Mapping[str, ResourceClaim]) -> None:
        self._base, self._own = base, own

    def __getitem__(self, key: str) -> ResourceClaim:
        found = self._own.get(key)
        return found if found is not None else self._base[key]

    def __iter__(self) -> Iterator[str]:
        yield from self._base
        yield from (key for key in self._own if key not in self._base)

    def __len__(self) -> int:
        return len(self._base) + sum(1 for key in self._own if key not in self._base)


class Overlay:
    def __init__(self, base: Snapshot) -> None:
        if base.pod_index is not None:
            raise OverlayError("fork an overlay with Overlay.fork(), not Overlay(its snapshot)")
        self.base = base
        self.table = base.table.fork()
        # The overlay's own NodeInfos (clones of changed nodes, and added nodes), by name.
        self._infos: dict[str, NodeInfo] = {}
        self._removed: set[str] = set()
        # Rows whose contents differ from the base: the overlay's NodeInfo there, or None when emptied.
        self._dirty: dict[int, NodeInfo | None] = {}
        self._nodes_changed = False
        # Nodes were added or removed, so the name order and rows differ from the base's.
        self._rows_moved = False
        # That order (names, rows), kept while nodes are only added (``_added`` are merged in on the next
        # build: the estimator adds nodes one at a time between placements) until one is removed.
        self._order: tuple[npt.NDArray[np.object_], npt.NDArray[np.intp]] | None = None
        self._added: list[str] = []
        self._snapshot: Snapshot | None = None
        # The last snapshot's NodeInfos in name order, and the nodes whose NodeInfo was swapped since (a
        # placement changes one node; copying the array and swapping those beats re-reading every row).
        self._info_array: npt.NDArray[np.object_] | None = None
        self._swapped: set[str] = set()
        # Image summaries follow the nodes, not their pods: kept until a node comes, goes or changes.
        self._image_summaries: dict[str, ImageSummary] | None = None
        # The pod index view, shared by this overlay's snapshots, and the rows changed since it was read.
        self._index: OverlayPodIndex | None = None
        self._index_pending: dict[int, NodeInfo | None] = {}
        # DRA: the slices added (hypothetical nodes' devices) and their index over the base's, the claims
        # placements changed (by "namespace/name"), the devices claims hold, and the view of all that.
        self._slice_index: SliceIndex | None = None
        self._claims: dict[str, ResourceClaim] = {}
        self._held: frozenset[tuple[str, str, str]] | None = None
        # The pools whose devices in use the overlay's claims changed: (driver, pool) -> every device in use.
        self._in_use: dict[tuple[str, str], AbstractSet[str]] = {}
        self._dra: DraView | None = None

    def fork(self) -> Overlay:
        """An independent overlay that starts from this one's changes."""
        copy = Overlay(self.base)
        copy.table = self.table.fork()
        copy._infos = {name: info.clone() for name, info in self._infos.items()}
        for info in copy._infos.values():
            copy.table.adopt(info)
        copy._removed = set(self._removed)
        copy._dirty = {row: None if info is None else copy._infos[info.name] for row, info in self._dirty.items()}
        copy._nodes_changed, copy._rows_moved, copy._order = self._nodes_changed, self._rows_moved, self._order
        copy._added = list(self._added)
        copy._info_array, copy._swapped = self._info_array, set(self._swapped) | set(copy._infos)
        copy._slice_index, copy._claims, copy._held = self._slice_index, dict(self._claims), self._held
        copy._in_use = dict(self._in_use)
        return copy

    # -- reads -----------------------------------------------------------------------------------

    def node(self, name: str) -> NodeInfo | None:
        info = self._infos.get(name)
        if info is not None or name in self._removed:
            return info
        return self.base.node_info_map.get(name)

    def __contains__(self, name: str) -> bool:
        return self.node(name) is not None

    @property
    def changed_nodes(self) -> Mapping[str, NodeInfo]:
        """The overlay's own NodeInfos: added nodes and clones of changed ones."""
        return self._infos

    # -- changes ---------------------------------------------------------------------------------

    def _own(self, name: str) -> NodeInfo:
        """The overlay's NodeInfo for ``name``, cloned from the base on first change."""
        info = self._infos.get(name)
        if info is not None:
            return info
        base = None if name in self._removed else self.base.node_info_map.get(name)
        if base is None:
            raise OverlayError(f"node {name!r} is not in the cluster")
        info = self._infos[name] = base.clone()
        self._swapped.add(name)
        self.table.adopt(info)
        return info

    def _changed(self, info: NodeInfo | None, row: int) -> None:
        self._dirty[row] = info
        self._index_pending[row] = info
        self._snapshot = None

    def add_node(self, node: Node) -> NodeInfo:
        """Adds a node that does not exist (a hypothetical one), without pods."""
        if self.node(node.name) is not None:
            raise OverlayError(f"node {node.name!r} already exists")
        info = NodeInfo(node, self.base.generation)
        self._infos[node.name] = info
        self._removed.discard(node.name)
        self._nodes_changed = self._rows_moved = True
        self._image_summaries = None
        if self._order is not None:
            self._added.append(node.name)
        self._changed(info, self.table.add(info))
        return info

    def remove_node(self, name: str) -> list[Pod]:
        """Removes a node and the pods bound to it; returns those pods (to place elsewhere, say)."""
        info = self.node(name)
        if info is None:
            raise OverlayError(f"node {name!r} is not in the cluster")
        row = self.table.row_of[name]
        self.table.remove(info)
        self._infos.pop(name, None)
        if name in self.base.node_info_map:
            self._removed.add(name)
        self._nodes_changed = self._rows_moved = True
        self._order = self._info_array = self._image_summaries = None
        self._added = []
        self._changed(None, row)
        return list(info.pods.values())

    def update_node(self, node: Node) -> NodeInfo:
        """Replaces a node's object (labels, taints, unschedulable, allocatable) and keeps its pods."""
        old = self.node(node.name)
        if old is None:
            raise OverlayError(f"node {node.name!r} is not in the cluster")
        new = old.clone()
        new.node = node
        self._infos[node.name] = new
        self._swapped.add(node.name)
        self._image_summaries = None
        self._nodes_changed = True
        self._changed(new, self.table.replace(old, new))
        return new

    def bind_pod(self, pod: Pod) -> None:
        """Binds ``pod`` to ``pod.node_name`` (replacing a pod of the same key there)."""
        if not pod.node_name:
            raise OverlayError(f"pod {pod.key} has no node")
        info = self._own(pod.node_name)
        info.add_pod(pod)
        self.table.refresh(info)
        self._changed(info, self.table.row_of[info.name])

    def add_slices(self, slices: Sequence[ResourceSlice]) -> None:
        """Adds node-local ResourceSlices (the devices of a hypothetical node): DynamicResources sees them
        as if a driver had published them."""
        if not slices:
            return
        index = self._slice_index or slice_index(self.base.dra)
        self._slice_index = index.extended(slices)
        self._dra = self._snapshot = None

    def update_claims(self, claims: Sequence[ResourceClaim]) -> None:
        """Replaces claims (by namespace and name) with ``claims``: what Reserve held for a placed pod
        (its pending claims allocated, every claim reserved for it), so later placements see the devices
        in use."""
        if not claims:
            return
        held: frozenset[tuple[str, str, str]] | None = self._held
        if held is None:
            held = _held(self.dra_view())
            self._in_use = {}
        for claim in claims:
            before = self._claims.get(claim.key) or self.base.dra.claims.get(claim.key)
            self._claims[claim.key] = claim
            if before is not None and before.allocation is not None and before.allocation != claim.allocation:
                held = None  # an allocation changed or went: another claim may still hold its devices
            elif held is not None:
                new = held_devices(claim) - held
                held = held | new
                for driver, pool, device in new:
                    key = (driver, pool)
                    self._in_use[key] = {*self._pools_in_use().get(key, ()), device}
        self._held = held
        self._dra = self._snapshot = None

    def _base_in_use(self) -> Mapping[tuple[str, str], AbstractSet[str]]:
        """The base's devices in use by pool (DynamicResources' index of them, kept in the view's memo)."""
        base = self.base.dra
        found = base.memo.get("in_use")
        if found is None:
            found = base.memo["in_use"] = by_pool(_held(base))
        in_use: Mapping[tuple[str, str], AbstractSet[str]] = found
        return in_use

    def _pools_in_use(self) -> Mapping[tuple[str, str], AbstractSet[str]]:
        """The devices in use by pool, the overlay's claims' included."""
        return _InUse(self._base_in_use(), self._in_use) if self._in_use else self._base_in_use()

    def dra_view(self) -> DraView:
        """The base's DRA objects with the overlay's slices and claims."""
        base = self.base.dra
        if self._slice_index is None and not self._claims:
            return base
        if self._dra is None:
            claims: Mapping[str, ResourceClaim] = base.claims
            if self._claims:
                claims = _Claims(base.claims, dict(self._claims))
            index = self._slice_index
            view = DraView(base.classes, base.slices if index is None else index.slices, claims)
            if index is not None:
                view.memo["index"] = index
            if self._held is not None:
                view.memo["allocated"] = self._held
                view.memo["in_use"] = _InUse(self._base_in_use(), dict(self._in_use))
            self._dra = view
        return self._dra

    def remove_pod(self, pod: Pod) -> None:
        """Removes a bound pod from its node."""
        info = self._own(pod.node_name) if pod.node_name in self else None
        if info is None or not info.remove_pod(pod):
            raise OverlayError(f"pod {pod.key} is not bound to node {pod.node_name!r}")
        self.table.refresh(info)
        self._changed(info, self.table.row_of[info.name])

    # -- the overlay as a snapshot ---------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """A snapshot of the base with this overlay's changes, reused until the next change."""
        if self._snapshot is None:
            self._snapshot = self._build()
        return self._snapshot

    def _build(self) -> Snapshot:
        base, table = self.base, self.table
        positions: dict[str, int] | None = base.name_positions
        if not self._rows_moved:
            # Same nodes, same rows: the changed NodeInfos swapped into a copy of the base array.
            names, rows = base.names, base.rows
            place: Callable[[str], int] = base.positions().__getitem__
            if self._info_array is None:
                self._info_array, self._swapped = base.info_array, set(self._infos)
        else:
            names, rows = self._ordered()
            positions = None  # built on first use; nodes are found by binary search meanwhile

            def place(name: str) -> int:
                return int(np.searchsorted(names, name))

        assert self._info_array is not None
        info_array = self._info_array.copy()
        for name in self._swapped:
            info_array[place(name)] = self._infos[name]
        self._info_array, self._swapped = info_array, set()
        if self._nodes_changed and self._image_summaries is None:
            self._image_summaries = self._images()
        return Snapshot(
            generation=base.generation,
            node_infos=info_array.tolist(),
            node_info_map=_NodeMap(base.node_info_map, dict(self._infos), set(self._removed)),
            namespaces=base.namespaces,
            pdbs=base.pdbs,
            workloads=base.workloads,
            controllers=base.controllers,
            nominated_pods=base.nominated_pods,
            images=self._image_summaries if self._image_summaries is not None else base.images,
            table=table,
            rows=rows,
            names=names,
            info_array=info_array,
            pod_index=self._pod_index,
            name_positions=positions,
            storage=base.storage,
            dra=self.dra_view(),
        )

    def _ordered(self) -> tuple[npt.NDArray[np.object_], npt.NDArray[np.intp]]:
        """The nodes' names in order and their rows, with ``_info_array`` following them."""
        table = self.table
        if self._order is None:
            removed, base = self._removed, self.base
            added = [name for name in self._infos if name not in base.node_info_map]
            ordered = sorted([*(n for n in base.names.tolist() if n not in removed), *added])
            rows = np.fromiter((table.row_of[n] for n in ordered), dtype=np.intp, count=len(ordered))
            self._order, self._added = (np.array(ordered, dtype=object), rows), []
            self._info_array = np.empty(len(ordered), dtype=object)
            self._info_array[:] = [table.infos[r] for r in rows.tolist()]
            self._swapped = set()
        elif self._added:
            names, rows = self._order
            new = sorted(self._added)
            at = np.searchsorted(names, np.array(new, dtype=object))
            infos = np.empty(len(new), dtype=object)
            infos[:] = [self._infos[n] for n in new]
            self._order = (
                np.insert(names, at, np.array(new, dtype=object)),
                np.insert(rows, at, np.array([table.row_of[n] for n in new], dtype=np.intp)),
            )
            assert self._info_array is not None
            self._info_array, self._added = np.insert(self._info_array, at, infos), []
            self._swapped -= set(new)
        return self._order

    def _pod_index(self) -> PodIndexView:
        """The cache's index with this overlay's rows read again: built on first use, then brought up to
        date with the rows changed since (like the overlay's NodeInfos, it shows the overlay as it is now)."""
        index = self._index
        if index is None or index.capacity != self.table.capacity:
            index = self._index = OverlayPodIndex(self.base.cache_index(), self.table.capacity, dict(self._dirty))
        elif self._index_pending:
            index.update(self._index_pending)
        self._index_pending = {}
        return index

    def _images(self) -> dict[str, ImageSummary]:
        """The base's image summaries with the changed nodes' images counted again."""
        counts = {name: [s.size_bytes, s.num_nodes] for name, s in self.base.images.items()}
        base_nodes = self.base.node_info_map
        for name in {*self._infos, *self._removed}:
            before = base_nodes.get(name)
            after = self._infos.get(name)
            old = before.node if before is not None else None
            new = after.node if after is not None else None
            if old is new:
                continue
            for node, delta in ((old, -1), (new, 1)):
                for image in node.images if node is not None else ():
                    for image_name in image.names:
                        entry = counts.setdefault(image_name, [image.size_bytes, 0])
                        entry[1] += delta
        return {name: ImageSummary(size, n) for name, (size, n) in counts.items() if n > 0}
