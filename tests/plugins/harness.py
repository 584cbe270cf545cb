"""Runs one plugin's extension points over a cache built from builders, as the framework would."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from podfit.server.framework.cycle_state import CycleState

from tests.builders import PodBuilder, make_cache

PluginFactory = Callable[[Mapping[str, Any]], Any]


def run_filter(factory: PluginFactory, pod: PodBuilder, objects: Sequence[Any], args: Mapping[str, Any] | None) -> Any:
    """PreFilter's status when it does not succeed, else Filter's status per node."""
    plugin = factory(args or {})
    snapshot = make_cache(*objects).snapshot()
    state, incoming = CycleState(), pod.obj()
    _, status = plugin.pre_filter(state, incoming, snapshot)
    if status is not None:
        return status
    return {info.name: plugin.filter(state, incoming, info) for info in snapshot.node_infos}


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
    nodes = [snapshot.node_info_map[n] for n in feasible] if feasible else list(snapshot.node_infos)
    state, incoming = CycleState(), pod.obj()
    status = plugin.pre_score(state, incoming, nodes, snapshot)
    if status is not None:
        return status
    scores = [plugin.score(state, incoming, info) for info in nodes]
    plugin.normalize_score(state, incoming, scores)
    return {info.name: score for info, score in zip(nodes, scores, strict=True)}
