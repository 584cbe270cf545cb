"""NodeDeclaredFeatures (a default plugin whenever its gate is on: beta in v1.36, GA in v1.37): a pod whose
spec needs a node feature fits only nodes whose ``status.declaredFeatures`` include it. Which needs a
version infers is its ``node_features_inferred`` (a RestartAllContainers restart rule from v1.35; a
host-network pod in a user namespace from v1.36; volume bind mount options from v1.37). A pod that needs
none of them is skipped at PreFilter; a rejection is unresolvable.
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

    def __init__(self, inferred: frozenset[str]) -> None:
        self.inferred = inferred

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        return None, (None if pod.required_node_features & self.inferred else SKIP)

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        needed = pod.required_node_features & self.inferred
        infos = table.infos
        missing = [
            (info := infos[row]) is not None and not needed <= info.node.declared_features for row in rows.tolist()
        ]
        return np.array(missing, dtype=np.int32), [unresolvable(REASON_UNSATISFIED)]


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> NodeDeclaredFeatures:
    return NodeDeclaredFeatures(features.node_features_inferred)
