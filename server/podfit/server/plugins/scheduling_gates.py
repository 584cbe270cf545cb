"""SchedulingGates (PreEnqueue): a pod with scheduling gates is not scheduled until they are removed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from podfit.server.framework.profile import SCHEDULING_GATES
from podfit.server.framework.status import Status, unresolvable
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import Pod

if TYPE_CHECKING:
    from podfit.server.cache.snapshot import Snapshot


class SchedulingGates:
    name = SCHEDULING_GATES

    def pre_enqueue(self, pod: Pod, snapshot: Snapshot) -> Status | None:
        if not pod.scheduling_gates:
            return None
        return unresolvable(f"waiting for scheduling gates: [{' '.join(pod.scheduling_gates)}]")


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> SchedulingGates:
    return SchedulingGates()
