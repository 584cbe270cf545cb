"""NodeDeclaredFeatures (a default plugin from v1.37, NodeDeclaredFeatures GA): a pod whose spec needs a
node feature (a host-network pod in a user namespace, a RestartAllContainers restart rule, volume bind
mount options) fits only nodes whose ``status.declaredFeatures`` include it. A pod that needs none is
skipped at PreFilter; a rejection is unresolvable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import Int32Array, IntpArray, PreFilterResult
from podfit.server.framework.profile import NODE_DECLARED_FEATURES
from podfit.server.framework.status import SKIP, Status, unresolvable
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import Pod

if TYPE_CHECKING:
    from podfit.server.cache.node_table import NodeTable
    from podfit.server.cache.snapshot import Snapshot

REASON_UNSATISFIED = "node(s) didn't match Pod's required features"


class NodeDeclaredFeatures:
    name = NODE_DECLARED_FEATURES

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        return None, (None if pod.required_node_features else SKIP)

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        needed = pod.required_node_features
        infos = table.infos
        missing = [
            (info := infos[row]) is not None and not needed <= info.node.declared_features for row in rows.tolist()
        ]
        return np.array(missing, dtype=np.int32), [unresolvable(REASON_UNSATISFIED)]


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> NodeDeclaredFeatures:
    return NodeDeclaredFeatures()
