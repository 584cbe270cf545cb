"""Runs a profile's plugins for one pod: kube-scheduler's frameworkImpl, minus the queueing and binding.

The results keep upstream's observable details: the first rejecting Filter plugin per node, PreFilter
rejections applied to every node, PreFilter node restrictions, skipped PreFilter/PreScore plugins,
and filtering "with nominated pods" (pods nominated to a node with at least the incoming pod's priority
reserve their room there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from podfit.server.cache.node_info import NodeInfo
from podfit.server.cache.snapshot import Snapshot
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import PreFilterExtensions, PreFilterResult
from podfit.server.framework.profile import Profile
from podfit.server.framework.status import Code, Status
from podfit.server.model import Pod


@dataclass
class FilterOutcome:
    # One status per evaluated node: None when the node fits.
    statuses: dict[str, Status | None] = field(default_factory=dict)
    feasible: list[NodeInfo] = field(default_factory=list)
    # Set when PreFilter rejected the pod as a whole (then no Filter plugin ran).
    pre_filter_status: Status | None = None


@dataclass
class NodeScores:
    node_name: str
    total: int
    # Plugin -> weighted, normalised score, in profile order.
    plugins: dict[str, int]


class Framework:
    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        # Resolved once: protocol isinstance checks are slow, and preemption calls these per victim.
        self._extensions = [p for p in profile.pre_filter if isinstance(p, PreFilterExtensions)]

    # -- PreEnqueue ------------------------------------------------------------------------------

    def run_pre_enqueue(self, pod: Pod) -> Status | None:
        for plugin in self.profile.pre_enqueue:
            status = plugin.pre_enqueue(pod)
            if status is not None and status.code is not Code.SUCCESS:
                return status.with_plugin(plugin.name)
        return None

    # -- PreFilter / Filter ----------------------------------------------------------------------

    def run_pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None, tuple[str, ...]]:
        """(merged node restriction, rejection, plugins that restricted the nodes).

        As upstream: an UnschedulableAndUnresolvable PreFilter ends the phase at once, while an
        Unschedulable one lets the remaining PreFilters run (preemption needs their state) and is
        reported at the end.
        """
        result: PreFilterResult | None = None
        restricting: list[str] = []
        rejection: Status | None = None
        for plugin in self.profile.pre_filter:
            plugin_result, status = plugin.pre_filter(state, pod, snapshot)
            if status is not None:
                if status.code is Code.SKIP:
                    state.skip_filter.add(plugin.name)
                    continue
                if status.code is Code.UNSCHEDULABLE:
                    rejection = rejection or status.with_plugin(plugin.name)
                    continue
                if status.code is not Code.SUCCESS:
                    return None, status.with_plugin(plugin.name), ()
            if plugin_result is not None and plugin_result.node_names is not None:
                restricting.append(plugin.name)
                if result is None or result.node_names is None:
                    result = plugin_result
                else:
                    result = PreFilterResult(result.node_names & plugin_result.node_names)
        if rejection is not None:
            return None, rejection, ()
        return result, None, tuple(restricting)

    def run_filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        skip = state.skip_filter
        for plugin in self.profile.filter:
            if plugin.name in skip:
                continue
            status = plugin.filter(state, pod, node_info)
            if status is not None and status.code is not Code.SUCCESS:
                return status.with_plugin(plugin.name)
        return None

    def run_filter_with_nominated_pods(
        self, state: CycleState, pod: Pod, node_info: NodeInfo, snapshot: Snapshot
    ) -> Status | None:
        """Filters once with the higher-or-equal priority pods nominated to the node added, then
        (if that passed) once without them, so the pod fits either way."""
        nominated = [
            p
            for p in snapshot.nominated_pods.get(node_info.name, ())
            if p.priority >= pod.priority and not _same_pod(p, pod)
        ]
        if not nominated:
            return self.run_filter(state, pod, node_info)
        state_with = state.clone()
        info_with = node_info.clone()
        for nominated_pod in nominated:
            info_with.add_pod(nominated_pod)
            self.run_add_pod(state_with, pod, nominated_pod, info_with, snapshot)
        status = self.run_filter(state_with, pod, info_with)
        if status is not None:
            return status
        return self.run_filter(state, pod, node_info)

    def run_add_pod(
        self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo, snapshot: Snapshot
    ) -> None:
        for plugin in self._extensions:
            if plugin.name not in state.skip_filter:
                plugin.add_pod(state, pod, pod_to_add, node_info, snapshot)

    def run_remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo, snapshot: Snapshot
    ) -> None:
        for plugin in self._extensions:
            if plugin.name not in state.skip_filter:
                plugin.remove_pod(state, pod, pod_to_remove, node_info, snapshot)

    def find_nodes_that_fit(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]
    ) -> FilterOutcome:
        outcome = FilterOutcome()
        result, status, restricting = self.run_pre_filter(state, pod, snapshot)
        if status is not None:
            outcome.pre_filter_status = status
            for info in nodes:
                outcome.statuses[info.name] = status
            return outcome
        allowed = result.node_names if result is not None else None
        rejected_by_prefilter: Status | None = None
        if allowed is not None:
            names = ",".join(restricting)
            rejected_by_prefilter = Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                (f"node(s) didn't satisfy plugin(s) [{names}]",),
                names,
            )
        for info in nodes:
            if allowed is not None and info.name not in allowed:
                outcome.statuses[info.name] = rejected_by_prefilter
                continue
            verdict = self.run_filter_with_nominated_pods(state, pod, info, snapshot)
            outcome.statuses[info.name] = verdict
            if verdict is None:
                outcome.feasible.append(info)
        return outcome

    # -- PreScore / Score ------------------------------------------------------------------------

    def run_pre_score(self, state: CycleState, pod: Pod, feasible: Sequence[NodeInfo], snapshot: Snapshot) -> None:
        for plugin in self.profile.pre_score:
            status = plugin.pre_score(state, pod, feasible, snapshot)
            if status is not None and status.code is Code.SKIP:
                state.skip_score.add(plugin.name)

    def run_score(self, state: CycleState, pod: Pod, feasible: Sequence[NodeInfo]) -> list[NodeScores]:
        results = [NodeScores(info.name, 0, {}) for info in feasible]
        for weighted in self.profile.score:
            plugin = weighted.plugin
            if plugin.name in state.skip_score:
                continue
            scores = [plugin.score(state, pod, info) for info in feasible]
            normalizer = weighted.normalizer
            if normalizer is not None:
                normalizer.normalize_score(state, pod, scores)
            for result, raw in zip(results, scores, strict=True):
                value = raw * weighted.weight
                result.plugins[plugin.name] = value
                result.total += value
        return results


def _same_pod(a: Pod, b: Pod) -> bool:
    if a.uid and b.uid:
        return a.uid == b.uid
    return a.key == b.key
