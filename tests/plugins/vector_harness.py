"""Differential checks: a plugin's vectorised methods must answer exactly like its per-node ones.

``check_plugin_on_cases`` replays conformance cases (and any extra cache) through a plugin's
PreFilter/Filter and PreScore/Score both ways and asserts identical statuses and raw/normalised scores.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from podfit.server.cache.cluster_cache import ClusterCache
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import VectorFilterPlugin, VectorNormalizeScorePlugin, VectorScorePlugin
from podfit.server.framework.status import Code
from podfit.server.model import Pod

PluginFactory = Callable[[Mapping[str, Any]], Any]


def assert_filter_equivalent(plugin: Any, pod: Pod, cache: ClusterCache, label: str = "") -> int:
    """Runs PreFilter once, then Filter per node and filter_rows over all rows; returns nodes compared."""
    assert isinstance(plugin, VectorFilterPlugin), f"{plugin.name} has no filter_rows"
    snapshot = cache.snapshot()
    state = CycleState()
    if hasattr(plugin, "pre_filter"):
        _, status = plugin.pre_filter(state, pod, snapshot)
        if status is not None and status.code is not Code.SUCCESS:
            return 0
    assert snapshot.table is not None and snapshot.rows is not None
    codes, statuses = plugin.filter_rows(state, pod, snapshot.table, snapshot.rows)
    assert codes.dtype == np.int32 and len(codes) == len(snapshot.node_infos)
    for info, code in zip(snapshot.node_infos, codes.tolist(), strict=True):
        want = plugin.filter(state, pod, info)
        if want is not None and want.code is Code.SUCCESS:
            want = None
        got = None if code == 0 else statuses[code - 1]
        assert got == want, f"{label} {plugin.name} node {info.name}: vector {got} != per-node {want}"
    return len(snapshot.node_infos)


def assert_score_equivalent(plugin: Any, pod: Pod, cache: ClusterCache, label: str = "") -> int:
    """PreScore over all nodes, then score per node vs score_rows (and normalisation both ways)."""
    snapshot = cache.snapshot()
    nodes = list(snapshot.node_infos)
    state = CycleState()
    if hasattr(plugin, "pre_filter"):
        plugin.pre_filter(state, pod, snapshot)
    if hasattr(plugin, "pre_score"):
        status = plugin.pre_score(state, pod, nodes, snapshot)
        if status is not None and status.code is Code.SKIP:
            return 0
    assert snapshot.table is not None and snapshot.rows is not None
    want = [plugin.score(state, pod, info) for info in nodes]
    if isinstance(plugin, VectorScorePlugin):
        got = plugin.score_rows(state, pod, snapshot.table, snapshot.rows)
        assert got.dtype == np.int64
        assert got.tolist() == want, f"{label} {plugin.name}: raw scores differ"
    if hasattr(plugin, "normalize_score"):
        normalised = list(want)
        plugin.normalize_score(state, pod, normalised)
        if isinstance(plugin, VectorNormalizeScorePlugin):
            vector = plugin.normalize_rows(state, pod, np.array(want, dtype=np.int64))
            assert vector.tolist() == normalised, f"{label} {plugin.name}: normalised scores differ"
    return len(nodes)
