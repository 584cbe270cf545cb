"""Row-independence checks for the single, columnar implementation of each plugin.

A plugin's Filter/Score over many rows at once must answer for each row exactly what it answers for that
row alone: the per-distinct-value kernels (taint sets, label combinations, pair counts) and their
whichever-is-cheaper branches must not depend on which other rows are present. Filter is compared with
the node alone in a one-row scratch table (how preemption's dry runs and nominated pods see a node);
Score with a one-row slice of the same table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from podfit.server.cache.cluster_cache import ClusterCache
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import FilterPlugin, NormalizeScorePlugin, ScorePlugin
from podfit.server.framework.status import Code
from podfit.server.model import Pod

from tests.plugins.harness import filter_one, filter_rows

PluginFactory = Callable[[Mapping[str, Any]], Any]


def assert_filter_equivalent(plugin: Any, pod: Pod, cache: ClusterCache, label: str = "") -> int:
    """Runs PreFilter once, then filter_rows over all rows and over each node alone; returns nodes compared."""
    assert isinstance(plugin, FilterPlugin), f"{plugin.name} has no filter_rows"
    snapshot = cache.snapshot()
    state = CycleState()
    if hasattr(plugin, "pre_filter"):
        _, status = plugin.pre_filter(state, pod, snapshot)
        if status is not None and status.code is not Code.SUCCESS:
            return 0
    together = filter_rows(plugin, state, pod, snapshot.table, snapshot.rows)
    for info, got in zip(snapshot.node_infos, together, strict=True):
        alone = filter_one(plugin, state, pod, info, like=snapshot)
        assert got == alone, f"{label} {plugin.name} node {info.name}: with all rows {got} != alone {alone}"
    return len(snapshot.node_infos)


def assert_score_equivalent(plugin: Any, pod: Pod, cache: ClusterCache, label: str = "") -> int:
    """PreScore over all nodes, then score_rows over all rows vs each row alone; normalised scores must
    keep the column's length and stay within 0..100."""
    snapshot = cache.snapshot()
    state = CycleState()
    if hasattr(plugin, "pre_filter"):
        plugin.pre_filter(state, pod, snapshot)
    if hasattr(plugin, "pre_score"):
        status = plugin.pre_score(state, pod, snapshot, snapshot.rows)
        if status is not None and status.code is Code.SKIP:
            return 0
    assert isinstance(plugin, ScorePlugin)
    together = plugin.score_rows(state, pod, snapshot.table, snapshot.rows)
    assert together.dtype == np.int64 and len(together) == len(snapshot.rows)
    alone = [
        int(plugin.score_rows(state, pod, snapshot.table, snapshot.rows[i : i + 1])[0]) for i in range(len(together))
    ]
    assert together.tolist() == alone, f"{label} {plugin.name}: raw scores differ with other rows present"
    if isinstance(plugin, NormalizeScorePlugin):
        normalised = plugin.normalize_rows(state, pod, together)
        assert len(normalised) == len(together)
        assert ((normalised >= 0) & (normalised <= 100)).all(), f"{label} {plugin.name}: {normalised}"
    return len(together)
