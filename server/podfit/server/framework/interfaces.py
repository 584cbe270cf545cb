"""The extension points: tiny protocols a plugin implements a subset of (kube-scheduler's framework).

Plugins are synchronous and pure over a snapshot: no awaits inside per-node loops. PreFilter and
PreScore compute once per pod what Filter and Score need for every node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

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
# Node names as UTF-8 byte strings (an extender call's, found by NameIndex).
BytesArray = npt.NDArray[np.bytes_]

MAX_NODE_SCORE = 100


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """Restricts the candidate nodes (None = all nodes)."""

    node_names: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class PreemptionResult:
    """A PostFilter answer: one plugin's, or the phase's (every plugin's reasons joined). ``code`` and
    ``message`` are the status; ``code`` is "" when PostFilter does not run at all (no nodes, no
    PostFilter plugin). A nomination comes from DefaultPreemption only."""

    nominated_node: str
    victims: tuple[Pod, ...]
    num_pdb_violations: int
    node_ties: tuple[str, ...]
    message: str
    code: str

    @property
    def postfilter(self) -> str:
        """``"<code>: <message>"`` as the conformance corpora record it; "" when PostFilter did not run."""
        return f"{self.code}: {self.message}" if self.code else ""


# PostFilter did not run: the pod is gated, some node fits, or the cluster has no nodes.
NO_POST_FILTER = PreemptionResult("", (), 0, (), "", "")


class Plugin(Protocol):
    name: str


@runtime_checkable
class PreEnqueuePlugin(Protocol):
    name: str

    def pre_enqueue(self, pod: Pod, snapshot: Snapshot) -> Status | None: ...


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


# Filter and Score are written once, over rows of a NodeTable: the snapshot's (every candidate at
# once), an overlay's, or a scratch table holding one cloned node (preemption's dry runs, a node with
# nominated pods added). A single node is a one-row table, never a second code path.


@runtime_checkable
class FilterPlugin(Protocol):
    name: str

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        """For each row: 0 when the node passes, else k when it fails with ``statuses[k - 1]``."""
        ...


@runtime_checkable
class PostFilterPlugin(Protocol):
    """Runs when no node fits; ``framework`` is the profile's runtime (for dry runs of Filter)."""

    name: str

    def post_filter(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        framework: Any,
        statuses: Mapping[str, Status | None],
    ) -> PreemptionResult: ...


@runtime_checkable
class PreScorePlugin(Protocol):
    name: str

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: IntpArray) -> Status | None:
        """``rows``: the feasible nodes' rows in the snapshot's table."""
        ...


@runtime_checkable
class ScorePlugin(Protocol):
    name: str

    def score_rows(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray) -> Int64Array:
        """Raw (not yet normalised) scores of the rows."""
        ...


@runtime_checkable
class NormalizeScorePlugin(Protocol):
    """Score plugins that rescale their raw scores over all feasible nodes."""

    name: str

    def normalize_rows(self, state: CycleState, pod: Pod, scores: Int64Array) -> Int64Array: ...


@runtime_checkable
class ReservePlugin(Protocol):
    """Reserve: what placing ``pod`` on ``node_name`` holds besides the pod itself, as the records to write
    with it (DynamicResources: its claims, allocated and reserved for the pod). ``state`` is the cycle's
    own, so a plugin reuses what its Filter found on that node; a memoised decision brings a fresh one."""

    name: str

    def reserve(self, state: CycleState, pod: Pod, node_name: str, snapshot: Snapshot) -> Sequence[object]: ...


@runtime_checkable
class VictimSelector(Protocol):
    """A PostFilter plugin that can name the victims preemption would evict on one node (what an
    extender's preempt verb is asked to confirm)."""

    name: str

    def select_victims_on_node(
        self,
        state: CycleState,
        pod: Pod,
        node_info: NodeInfo,
        snapshot: Snapshot,
        framework: Any,
        pdbs: Any,
        now: float,
    ) -> tuple[list[Pod], int, Status | None]: ...
