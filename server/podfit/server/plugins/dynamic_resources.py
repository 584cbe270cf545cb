"""DynamicResources: podfit does not model ResourceClaims yet, so for the pods it accepts (no claims) the
plugin does what kube-scheduler does for claim-less pods: PreFilter records that the pod has no claims
and skips Filter, Score gives 0, and PostFilter has nothing to deallocate.

PostFilter reads the state PreFilter wrote; when an earlier PreFilter plugin rejected the pod as
UnschedulableAndUnresolvable, this PreFilter never ran and PostFilter fails with "not found", which
ends the PostFilter phase before DefaultPreemption (as upstream's does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import Int64Array, IntpArray, PreemptionResult, PreFilterResult
from podfit.server.framework.profile import DYNAMIC_RESOURCES
from podfit.server.framework.status import SKIP, Code, Status
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import Pod

if TYPE_CHECKING:
    from podfit.server.cache.node_table import NodeTable
    from podfit.server.cache.snapshot import Snapshot

# v1.35's PostFilter reason for a pod without claims; v1.37 rejects without a reason.
REASON_NO_CLAIMS = "no new claims to deallocate"
# Reading the cycle state PreFilter never wrote.
REASON_STATE_MISSING = "not found"


class _NoClaims:
    """The PreFilter state of a pod without claims."""

    def clone(self) -> _NoClaims:
        return self


_NO_CLAIMS = _NoClaims()


class DynamicResources:
    # Filter and Score of a row read only that row: results survive until the row's generation moves.
    row_local = True
    name = DYNAMIC_RESOURCES

    def __init__(self, silent_post_filter: bool = False) -> None:
        self.post_filter_reason = "" if silent_post_filter else REASON_NO_CLAIMS

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        state.write(self.name, _NO_CLAIMS)
        return None, SKIP

    def score_rows(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray) -> Int64Array:
        return np.zeros(len(rows), dtype=np.int64)

    def post_filter(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        framework: Any,
        statuses: Mapping[str, Status | None],
    ) -> PreemptionResult:
        if state.get(self.name) is None:
            return PreemptionResult("", (), 0, (), REASON_STATE_MISSING, Code.ERROR.value)
        return PreemptionResult("", (), 0, (), self.post_filter_reason, Code.UNSCHEDULABLE.value)


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> DynamicResources:
    return DynamicResources(features.dynamic_resources_silent_post_filter)
