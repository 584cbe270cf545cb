"""A consistent, read-only view of the cache for one decision.

Decisions run synchronously on the event loop (plugins never await), so no update can interleave
with a decision and the view needs no copy: it references the cache's structures at one generation.
Preemption clones the few NodeInfos it mutates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from podfit.server.cache.node_info import NodeInfo
from podfit.server.cache.node_table import NodeTable
from podfit.server.model import Namespace, Pod, PodDisruptionBudget, WorkloadSelector


@dataclass(frozen=True, slots=True)
class ImageSummary:
    size_bytes: int
    num_nodes: int


@dataclass(slots=True)
class Snapshot:
    generation: int
    # Every node, ordered by name.
    node_infos: Sequence[NodeInfo]
    node_info_map: Mapping[str, NodeInfo]
    namespaces: Mapping[str, Namespace]
    pdbs: Sequence[PodDisruptionBudget]
    # Services, ReplicaSets, StatefulSets and ReplicationControllers, for default spreading.
    workloads: Sequence[WorkloadSelector]
    # Pending pods with status.nominatedNodeName, by node name.
    nominated_pods: Mapping[str, Sequence[Pod]]
    # Image name -> size and how many nodes hold it (ImageLocality's spread factor).
    images: Mapping[str, ImageSummary]
    # Columns over the nodes and each node_infos entry's row in them; None for overlay snapshots
    # (caller-supplied nodes), which plugins then evaluate node by node.
    table: NodeTable | None = None
    rows: np.ndarray | None = None
    # node_infos' names and the NodeInfos themselves as object arrays, for cheap fancy indexing.
    names: np.ndarray | None = None
    info_array: np.ndarray | None = None

    def get(self, node_name: str) -> NodeInfo | None:
        return self.node_info_map.get(node_name)
