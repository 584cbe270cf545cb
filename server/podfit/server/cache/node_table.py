"""Columns over all nodes, kept in step with the NodeInfos, so plugins can filter and score every node
with a few numpy operations instead of a Python call per node.

One row per node (rows are reused after removals). Resources are int64 columns in scheduler units;
labels are dictionary-encoded per key (-1 = absent); taints are interned per distinct taint list,
so plugins evaluate a toleration once per distinct list and broadcast.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
from podfit.server.cache.node_info import NodeInfo
from podfit.server.model import Taint
from podfit.server.model.objects import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, parse_go_int

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
BASE_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)
_INT64_MAX = 2**63 - 1


class LabelColumn:
    """One label key over all rows: value codes (-1 = the node lacks the key).

    The value dictionary (``values``/``names``) only grows, so a fork or scratch table shares it with
    its base (and so keeps the base's code-indexed vectors valid) until it needs a value the base has
    not seen; ``codes`` are shared until a row is written. Either is copied on that first write.
    """

    __slots__ = ("_codes_shared", "_ints", "_values_shared", "codes", "names", "values")

    def __init__(self, capacity: int) -> None:
        self.codes: npt.NDArray[np.int32] = np.full(capacity, -1, dtype=np.int32)
        self.values: dict[str, int] = {}
        self.names: list[str] = []
        self._ints: tuple[BoolArray, IntArray] | None = None
        self._codes_shared = False
        self._values_shared = False

    def shared(self, codes: npt.NDArray[np.int32] | None = None) -> LabelColumn:
        """A column over the same dictionary: with these codes (a scratch table), or this column's
        codes, copied on first write (a fork)."""
        column = LabelColumn.__new__(LabelColumn)
        column.values, column.names, column._ints = self.values, self.names, self._ints
        column._values_shared = True
        column.codes = self.codes if codes is None else codes
        column._codes_shared = codes is None
        return column

    def code(self, value: str) -> int:
        code = self.values.get(value)
        if code is None:
            if self._values_shared:
                self.values, self.names, self._values_shared = dict(self.values), list(self.names), False
            code = self.values[value] = len(self.names)
            self.names.append(value)
            self._ints = None
        return code

    def set(self, row: int, code: int) -> None:
        if self._codes_shared:
            self.codes, self._codes_shared = self.codes.copy(), False
        self.codes[row] = code

    def grow(self, by: int) -> None:
        self.codes = np.concatenate([self.codes, np.full(by, -1, dtype=np.int32)])
        self._codes_shared = False

    def integer_values(self) -> tuple[BoolArray, IntArray]:
        """Per value code: (parses as a Go int64, its value), for Gt/Lt."""
        if self._ints is None or len(self._ints[0]) != len(self.names):
            parsed = [parse_go_int(v) for v in self.names]
            valid = np.array([p is not None for p in parsed], dtype=bool)
            ints = np.array([p if p is not None else 0 for p in parsed], dtype=np.int64)
            self._ints = (valid, ints)
        return self._ints


# Per-row columns, copied together on a fork's first write.
_ROW_ARRAYS = (
    "allocatable",
    "requested",
    "non_zero_cpu",
    "non_zero_memory",
    "pod_count",
    "unschedulable",
    "has_ports",
    "taint_set",
    "row_generation",
    "node_generation",
    "live",
)


class NodeTable:
    """Rows of nodes as columns. ``fork()`` gives a copy-on-write table that a what-if overlay may change
    without touching this one; ``scratch()`` an empty small table over the same dictionaries, for a
    node or two whose pods a preemption dry run rearranges. Plugins cannot tell them apart."""

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        # Shared by this table and its forks: one cache's tables across freezes (see framework's _RowMemo).
        self.lineage = object()
        self.resources: dict[str, int] = {name: i for i, name in enumerate(BASE_RESOURCES)}
        self.allocatable: IntArray = np.zeros((capacity, len(BASE_RESOURCES)), dtype=np.int64)
        self.requested: IntArray = np.zeros((capacity, len(BASE_RESOURCES)), dtype=np.int64)
        self.non_zero_cpu: IntArray = np.zeros(capacity, dtype=np.int64)
        self.non_zero_memory: IntArray = np.zeros(capacity, dtype=np.int64)
        self.pod_count: IntArray = np.zeros(capacity, dtype=np.int64)
        self.unschedulable: BoolArray = np.zeros(capacity, dtype=bool)
        self.has_ports: BoolArray = np.zeros(capacity, dtype=bool)
        self.taint_set: npt.NDArray[np.int32] = np.zeros(capacity, dtype=np.int32)
        # Each row's NodeInfo.generation when last refreshed: lets indexes find changed rows at once.
        self.row_generation: IntArray = np.zeros(capacity, dtype=np.int64)
        # Each row's NodeInfo.generation when its Node was put there: at most its row generation, and
        # what readers of the Node alone (not its pods) compare against.
        self.node_generation: IntArray = np.zeros(capacity, dtype=np.int64)
        # Rows holding a node (others are free).
        self.live: BoolArray = np.zeros(capacity, dtype=bool)
        # Interned taint lists; index 0 is "no taints".
        self.taint_sets: list[tuple[Taint, ...]] = [()]
        self._taint_index: dict[tuple[Taint, ...], int] = {(): 0}
        self.labels: dict[str, LabelColumn] = {}
        # Image name -> rows of the nodes reporting it (ImageLocality), with the rows as arrays on demand.
        self.image_rows: dict[str, set[int]] = {}
        self._image_arrays: dict[str, npt.NDArray[np.intp]] = {}
        self.infos: list[NodeInfo | None] = [None] * capacity
        self.row_of: dict[str, int] = {}
        self._free: list[int] = list(range(capacity - 1, -1, -1))
        # Attributes still shared with the table this one was forked from (copied before a write).
        self._shared: set[str] = set()
        # Bumped when the cache undoes batches and so issues generation numbers again: state derived from
        # the rows and keyed by generation must then not trust a number it saw before.
        self.epoch = 0
        # Bumped by every write to a row's generation or liveness: equal counts on the same table mean
        # the same changed rows (readers reuse what they derived from them).
        self.writes = 0
        # Bumped by every removal: with an equal count, the rows live before are still live.
        self.removals = 0
        # Bounds of every amount ever written to allocatable, requested and the non-zero requests (never
        # lowered): scorers skip per-row range checks when these already prove every row in range.
        self.largest_amount = 0
        self.smallest_amount = 0

    # -- forks -----------------------------------------------------------------------------------

    def fork(self) -> NodeTable:
        """A table equal to this one that shares every column until it writes it. The base must not
        change while the fork is in use (forks live within one synchronous decision or simulation)."""
        fork = NodeTable.__new__(NodeTable)
        fork.__dict__.update(self.__dict__)
        fork.labels = {key: column.shared() for key, column in self.labels.items()}
        fork._image_arrays = dict(self._image_arrays)
        fork._shared = {*_ROW_ARRAYS, "resources", "taints", "image_rows", "infos", "row_of", "_free"}
        return fork

    def scratch(self) -> NodeTable:
        """An empty table whose label, taint and resource dictionaries are this table's (copied on first
        addition), so vectors a plugin keyed by value code apply to its rows unchanged."""
        table = NodeTable(capacity=4)
        table.resources = self.resources
        width = len(self.resources)
        table.allocatable = np.zeros((4, width), dtype=np.int64)
        table.requested = np.zeros((4, width), dtype=np.int64)
        table.taint_sets, table._taint_index = self.taint_sets, self._taint_index
        table.labels = {key: column.shared(np.full(4, -1, dtype=np.int32)) for key, column in self.labels.items()}
        table._shared = {"resources", "taints"}
        return table

    def subset(self, rows: npt.NDArray[np.intp]) -> NodeTable:
        """A table of copies of some rows (row i of it is ``rows[i]`` here), over the same dictionaries and
        NodeInfos: for changing the rows' pod aggregates in bulk, as a preemption dry run of many nodes does."""
        table = NodeTable.__new__(NodeTable)
        table.capacity = len(rows)
        table.epoch = table.writes = table.removals = 0
        table.largest_amount, table.smallest_amount = self.largest_amount, self.smallest_amount
        for name in _ROW_ARRAYS:
            setattr(table, name, getattr(self, name)[rows])
        table.resources = self.resources
        table.taint_sets, table._taint_index = self.taint_sets, self._taint_index
        table.labels = {key: column.shared(column.codes[rows]) for key, column in self.labels.items()}
        table.infos = [self.infos[row] for row in rows.tolist()]
        table.row_of = {info.name: i for i, info in enumerate(table.infos) if info is not None}
        table.image_rows = {}
        for i, info in enumerate(table.infos):
            for image in info.node.images if info is not None else ():
                for name in image.names:
                    table.image_rows.setdefault(name, set()).add(i)
        table._image_arrays = {}
        table._free = []
        table._shared = {"resources", "taints"}
        return table

    def _own(self, name: str) -> None:
        """Copies a shared attribute before its first write."""
        if name not in self._shared:
            return
        self._shared.discard(name)
        if name == "taints":
            self.taint_sets, self._taint_index = list(self.taint_sets), dict(self._taint_index)
        elif name == "image_rows":
            self.image_rows = {image: set(rows) for image, rows in self.image_rows.items()}
        else:
            value = getattr(self, name)
            setattr(self, name, value.copy())

    # -- structure -------------------------------------------------------------------------------

    def _grow(self) -> None:
        old, new = self.capacity, self.capacity * 2
        for name in _ROW_ARRAYS:
            self._shared.discard(name)
            column = getattr(self, name)
            setattr(self, name, np.concatenate([column, np.zeros_like(column)]))
        for label in self.labels.values():
            label.grow(old)
        self._own("infos")
        self._own("_free")
        self.infos.extend([None] * old)
        self._free.extend(range(new - 1, old - 1, -1))
        self.capacity = new

    def resource_column(self, name: str) -> int:
        """The column of a resource, added (zero everywhere) the first time it is seen."""
        index = self.resources.get(name)
        if index is None:
            self._own("resources")
            index = self.resources[name] = len(self.resources)
        width = len(self.resources)
        if self.allocatable.shape[1] < width:
            # Another table sharing the dictionary added resources: widen to match.
            pad = np.zeros((self.capacity, width - self.allocatable.shape[1]), dtype=np.int64)
            self._shared.discard("allocatable")
            self._shared.discard("requested")
            self.allocatable = np.hstack([self.allocatable, pad])
            self.requested = np.hstack([self.requested, pad.copy()])
        return index

    def _own_rows(self) -> None:
        if self._shared:
            for name in _ROW_ARRAYS:
                self._own(name)

    def add(self, info: NodeInfo) -> int:
        self._own("_free")
        if not self._free:
            self._grow()
        self._own_rows()
        self._own("infos")
        self._own("row_of")
        row = self._free.pop()
        self.live[row] = True
        self.infos[row] = info
        self.row_of[info.name] = row
        node = info.node
        columns = [(self.resource_column(name), amount) for name, amount in node.allocatable.items()]
        self.allocatable[row] = 0
        for column, amount in columns:
            self.allocatable[row, column] = amount
        self._bound(amount for _, amount in columns)
        self.unschedulable[row] = node.unschedulable
        taints = tuple(node.taints)
        index = self._taint_index.get(taints)
        if index is None:
            self._own("taints")
            index = self._taint_index[taints] = len(self.taint_sets)
            self.taint_sets.append(taints)
        self.taint_set[row] = index
        for key, value in node.labels.items():
            label = self.labels.get(key)
            if label is None:
                label = self.labels[key] = LabelColumn(self.capacity)
            label.set(row, label.code(value))
        if node.images:
            self._own("image_rows")
            for image in node.images:
                for name in image.names:
                    self.image_rows.setdefault(name, set()).add(row)
                    self._image_arrays.pop(name, None)
        self.node_generation[row] = info.generation
        self.refresh(info)
        return row

    def remove(self, info: NodeInfo) -> None:
        self._own_rows()
        self._own("infos")
        self._own("row_of")
        self._own("_free")
        row = self.row_of.pop(info.name)
        self.live[row] = False
        self.writes += 1
        self.removals += 1
        self.infos[row] = None
        for key in info.node.labels:
            self.labels[key].set(row, -1)
        if info.node.images:
            self._own("image_rows")
            for image in info.node.images:
                for name in image.names:
                    holders = self.image_rows.get(name)
                    if holders is not None:
                        holders.discard(row)
                        if not holders:
                            del self.image_rows[name]
                    self._image_arrays.pop(name, None)
        self.allocatable[row] = 0
        self.requested[row] = 0
        self._free.append(row)

    def replace(self, old: NodeInfo, new: NodeInfo) -> int:
        """Puts ``new`` (same name) in ``old``'s row: node fields and pod aggregates both re-read."""
        self.remove(old)
        return self.add(new)

    def adopt(self, info: NodeInfo) -> None:
        """Puts ``info``, a clone of the NodeInfo in its node's row, in its place; pod changes to the
        clone then reach this table through ``refresh`` while the original stays untouched."""
        self._own("infos")
        self.infos[self.row_of[info.name]] = info

    def refresh(self, info: NodeInfo) -> None:
        """Re-reads a node's pod aggregates after pods were added or removed."""
        row = self.row_of.get(info.name)
        if row is None or self.infos[row] is not info:
            return
        self._own_rows()
        # Sums of many pods could pass int64 only with absurd requests; saturate rather than fail mid-update.
        columns = [(self.resource_column(name), min(amount, _INT64_MAX)) for name, amount in info.requested.items()]
        requested = self.requested[row]
        requested[:] = 0
        for column, amount in columns:
            requested[column] = amount
        requested[self.resources[PODS]] = len(info.pods)
        self.pod_count[row] = len(info.pods)
        self.non_zero_cpu[row] = min(info.non_zero_cpu, _INT64_MAX)
        self.non_zero_memory[row] = min(info.non_zero_memory, _INT64_MAX)
        self.has_ports[row] = len(info.used_ports) > 0
        self._bound((*(amount for _, amount in columns), len(info.pods), info.non_zero_cpu, info.non_zero_memory))
        self.row_generation[row] = info.generation
        self.writes += 1

    def _bound(self, amounts: Iterable[int]) -> None:
        for amount in amounts:
            if amount > self.largest_amount:
                self.largest_amount = amount
            elif amount < self.smallest_amount:
                self.smallest_amount = amount

    # -- reads -----------------------------------------------------------------------------------

    def rows_with_image(self, name: str) -> npt.NDArray[np.intp]:
        """Rows of the nodes that report the image name (kept until a node with it is added or removed)."""
        rows = self._image_arrays.get(name)
        if rows is None:
            rows = self._image_arrays[name] = np.fromiter(self.image_rows.get(name, ()), dtype=np.intp)
        return rows

    def label_codes(self, key: str, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.int32]:
        column = self.labels.get(key)
        if column is None:
            return np.full(len(rows), -1, dtype=np.int32)
        return column.codes[rows]
