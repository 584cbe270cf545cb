"""Runs one plugin's extension points as the framework would: over table rows, the only implementation.

A single node is a one-row scratch table (``filter_one``/``score_one``), exactly as preemption's dry runs
evaluate a cloned node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from podfit.server.cache.node_info import NodeInfo
from podfit.server.cache.node_table import NodeTable
from podfit.server.cache.snapshot import Snapshot
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.status import Status
from podfit.server.model import Pod

from tests.builders import PodBuilder, make_cache

PluginFactory = Callable[[Mapping[str, Any]], Any]


def filter_rows(plugin: Any, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> list[Status | None]:
    """filter_rows' verdicts as a list: None where a row passes."""
    codes, statuses = plugin.filter_rows(state, pod, table, rows)
    assert codes.dtype == np.int32 and len(codes) == len(rows)
    return [None if code == 0 else statuses[code - 1] for code in codes.tolist()]


def one_row(info: NodeInfo, like: Snapshot | None = None) -> tuple[NodeTable, np.ndarray]:
    """A scratch table holding ``info`` (sharing ``like``'s label dictionaries when given)."""
    table = like.table.scratch() if like is not None else NodeTable(capacity=4)
    return table, np.array([table.add(info)], dtype=np.intp)


def filter_one(plugin: Any, state: CycleState, pod: Pod, info: NodeInfo, like: Snapshot | None = None) -> Status | None:
    table, rows = one_row(info, like)
    return filter_rows(plugin, state, pod, table, rows)[0]


def score_one(plugin: Any, state: CycleState, pod: Pod, info: NodeInfo, like: Snapshot | None = None) -> int:
    """The raw (not normalised) score of one node."""
    table, rows = one_row(info, like)
    return int(plugin.score_rows(state, pod, table, rows)[0])


def filter_snapshot(plugin: Any, state: CycleState, pod: Pod, snapshot: Snapshot) -> dict[str, Status | None]:
    """Filter over every node of the snapshot, by name."""
    verdicts = filter_rows(plugin, state, pod, snapshot.table, snapshot.rows)
    return dict(zip(snapshot.names.tolist(), verdicts, strict=True))


def score_snapshot(
    plugin: Any, state: CycleState, pod: Pod, snapshot: Snapshot, names: Sequence[str] = ()
) -> dict[str, int]:
    """Score (normalised when the plugin normalises) of the named nodes, or of every node."""
    rows = np.array([snapshot.table.row_of[n] for n in names], dtype=np.intp) if names else snapshot.rows
    scores = plugin.score_rows(state, pod, snapshot.table, rows)
    if hasattr(plugin, "normalize_rows"):
        scores = plugin.normalize_rows(state, pod, scores)
    wanted = list(names) if names else snapshot.names.tolist()
    return dict(zip(wanted, scores.tolist(), strict=True))


def run_filter(factory: PluginFactory, pod: PodBuilder, objects: Sequence[Any], args: Mapping[str, Any] | None) -> Any:
    """PreFilter's status when it does not succeed, else Filter's status per node."""
    plugin = factory(args or {})
    snapshot = make_cache(*objects).snapshot()
    state, incoming = CycleState(), pod.obj()
    _, status = plugin.pre_filter(state, incoming, snapshot)
    if status is not None:
        return status
    return filter_snapshot(plugin, state, incoming, snapshot)


def run_score(
    factory: PluginFactory,
    pod: PodBuilder,
    objects: Sequence[Any],
    args: Mapping[str, Any] | None,
    feasible: Sequence[str] = (),
) -> Any:
    """PreScore's status when it does not succeed, else normalised scores of the feasible nodes."""
    plugin = factory(args or {})
    snapshot = make_cache(*objects).snapshot()
    names = list(feasible) if feasible else snapshot.names.tolist()
    rows = np.array([snapshot.table.row_of[n] for n in names], dtype=np.intp)
    state, incoming = CycleState(), pod.obj()
    status = plugin.pre_score(state, incoming, snapshot, rows)
    if status is not None:
        return status
    return score_snapshot(plugin, state, incoming, snapshot, names)
