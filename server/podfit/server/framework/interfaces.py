"""The extension points: tiny protocols a plugin implements a subset of (kube-scheduler's framework).

Plugins are synchronous and pure over a snapshot: no awaits inside per-node loops. PreFilter and
PreScore compute once per pod what Filter and Score need for every node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.status import Status
from podfit.server.model import Pod

if TYPE_CHECKING:
    from podfit.server.cache.node_info import NodeInfo
    from podfit.server.cache.node_table import NodeTable
    from podfit.server.cache.snapshot import Snapshot

IntpArray = npt.NDArray[np.intp]
Int32Array = npt.NDArray[np.int32]
Int64Array = npt.NDArray[np.int64]

MAX_NODE_SCORE = 100


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """Restricts the candidate nodes (None = all nodes)."""

    node_names: frozenset[str] | None = None


class Plugin(Protocol):
    name: str


@runtime_checkable
class PreEnqueuePlugin(Protocol):
    name: str

    def pre_enqueue(self, pod: Pod) -> Status | None: ...


@runtime_checkable
class PreFilterPlugin(Protocol):
    name: str

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]: ...


@runtime_checkable
class PreFilterExtensions(Protocol):
    """Lets preemption update a plugin's PreFilter state as pods are removed or re-added."""

    name: str

    def add_pod(
        self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo, snapshot: Snapshot
    ) -> None: ...

    def remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo, snapshot: Snapshot
    ) -> None: ...


@runtime_checkable
class FilterPlugin(Protocol):
    name: str

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None: ...


@runtime_checkable
class PreScorePlugin(Protocol):
    name: str

    def pre_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], snapshot: Snapshot
    ) -> Status | None: ...


@runtime_checkable
class ScorePlugin(Protocol):
    name: str

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int: ...


@runtime_checkable
class NormalizeScorePlugin(Protocol):
    """Score plugins that rescale their raw scores over all feasible nodes, in place."""

    name: str

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[int]) -> None: ...


# -- vectorised variants -----------------------------------------------------------------------------
# A plugin may also evaluate many nodes at once over the cache's NodeTable columns. The runtime uses
# these when the snapshot has a table and falls back to the per-node methods otherwise (preemption's
# cloned NodeInfos, caller-supplied nodes). Both must give identical answers; the tests check it.


@runtime_checkable
class VectorFilterPlugin(Protocol):
    name: str

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        """For each row: 0 when the node passes, else k when it fails with ``statuses[k - 1]``."""
        ...


@runtime_checkable
class VectorScorePlugin(Protocol):
    name: str

    def score_rows(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray) -> Int64Array:
        """Raw (not yet normalised) scores of the rows."""
        ...


@runtime_checkable
class VectorNormalizeScorePlugin(Protocol):
    name: str

    def normalize_rows(self, state: CycleState, pod: Pod, scores: Int64Array) -> Int64Array: ...
