"""TaintToleration: NoSchedule/NoExecute taints the pod does not tolerate keep it off a node; untolerated
PreferNoSchedule taints lower the node's score."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from podfit.server.cache.node_info import NodeInfo
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import MAX_NODE_SCORE
from podfit.server.framework.profile import TAINT_TOLERATION
from podfit.server.framework.status import Status, unresolvable
from podfit.server.model import Pod, Toleration
from podfit.server.plugins.helper import default_normalize_score, do_not_schedule_taints, find_untolerated_taint

if TYPE_CHECKING:
    from podfit.server.cache.snapshot import Snapshot

REASON_UNTOLERATED = "node(s) had untolerated taint(s)"
_PRE_SCORE_KEY = "PreScore" + TAINT_TOLERATION


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    # Only tolerations that can tolerate a PreferNoSchedule taint (that effect, or any effect).
    tolerations: tuple[Toleration, ...]

    def clone(self) -> _PreScoreState:
        return self


def _prefer_no_schedule_tolerations(pod: Pod) -> tuple[Toleration, ...]:
    return tuple(t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule"))


class TaintToleration:
    name = TAINT_TOLERATION

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if find_untolerated_taint(node_info.node.taints, pod.tolerations, do_not_schedule_taints) is None:
            return None
        return unresolvable(REASON_UNTOLERATED)

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], snapshot: Snapshot) -> Status | None:
        # Never skips: every feasible node gets a score, even when no node has a PreferNoSchedule taint.
        state.write(_PRE_SCORE_KEY, _PreScoreState(_prefer_no_schedule_tolerations(pod)))
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        """The number of untolerated PreferNoSchedule taints (fewer is better after normalising)."""
        pre = state.get(_PRE_SCORE_KEY)
        tolerations = pre.tolerations if isinstance(pre, _PreScoreState) else _prefer_no_schedule_tolerations(pod)
        count = 0
        for taint in node_info.node.taints:
            if taint.effect == "PreferNoSchedule" and not any(t.tolerates(taint) for t in tolerations):
                count += 1
        return count

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[int]) -> None:
        default_normalize_score(MAX_NODE_SCORE, True, scores)


def new(args: Mapping[str, Any]) -> TaintToleration:
    return TaintToleration()
