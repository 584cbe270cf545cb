"""ImageLocality: favours nodes that already hold the pod's images, weighted by image size and by how
widely the image is spread (an image on every node gives no node an edge)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import MAX_NODE_SCORE, Int64Array, IntpArray
from podfit.server.framework.profile import IMAGE_LOCALITY
from podfit.server.framework.status import Status
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import Pod
from podfit.server.plugins.helper import go_div_rows

if TYPE_CHECKING:
    from podfit.server.cache.node_table import NodeTable
    from podfit.server.cache.snapshot import Snapshot

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    """Appends ":latest" only when the last path segment has no tag; digests and registries with ports
    are left alone, and no "docker.io/library/" prefix is added."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def scaled_image_score(size_bytes: int, num_nodes: int, total_nodes: int) -> int:
    spread = float(num_nodes) / float(total_nodes)
    return int(float(size_bytes) * spread)


def calculate_priority_rows(sum_scores: Int64Array, num_containers: int) -> Int64Array:
    """Upstream's calculatePriority over a column: the clamps in upstream's order (so max_threshold 0 works
    alike), then scaled to 0..100."""
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    clamped = np.where(
        sum_scores < MIN_THRESHOLD, MIN_THRESHOLD, np.where(sum_scores > max_threshold, max_threshold, sum_scores)
    ).astype(np.int64)
    return go_div_rows(MAX_NODE_SCORE * (clamped - MIN_THRESHOLD), max_threshold - MIN_THRESHOLD)


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    # Normalised image name -> (scaled score, containers using it), for images some node holds.
    images: Mapping[str, tuple[int, int]]
    num_containers: int

    def clone(self) -> _PreScoreState:
        return self


class ImageLocality:
    """Upstream has no PreScore; this one never skips and only precomputes the per-image scores,
    which need the snapshot's node count."""

    name = IMAGE_LOCALITY

    def replica_invariant(self, state: CycleState, pod: Pod) -> bool:
        """Reads only the nodes' images and how many nodes there are: pods placed change neither."""
        return True

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: IntpArray) -> Status | None:
        state.write(self.name, self._state(pod, snapshot))
        return None

    @staticmethod
    def _state(pod: Pod, snapshot: Snapshot) -> _PreScoreState:
        total_nodes = len(snapshot.node_infos)
        images: dict[str, tuple[int, int]] = {}
        for image in pod.images:
            name = normalized_image_name(image)
            summary = snapshot.images.get(name)
            if summary is None or total_nodes == 0:
                continue
            score, count = images.get(name, (scaled_image_score(summary.size_bytes, summary.num_nodes, total_nodes), 0))
            images[name] = (score, count + 1)
        return _PreScoreState(images, len(pod.images))

    def score_rows(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray) -> Int64Array:
        """Sums each wanted image's score over the table's rows holding it, then reads the pod's rows."""
        pre = state.get(self.name)
        if not isinstance(pre, _PreScoreState):
            return np.zeros(len(rows), dtype=np.int64)
        weighted = [(name, score * count) for name, (score, count) in pre.images.items()]
        if not weighted:
            # No node holds a wanted image: every row sums to 0, so every row scores what 0 scores.
            nothing = calculate_priority_rows(np.zeros(1, dtype=np.int64), pre.num_containers)
            return np.full(len(rows), nothing[0], dtype=np.int64)
        # Sums beyond int64 (absurd image sizes) are summed as Python ints; the clamp bounds them again.
        exact = sum(w for _, w in weighted) < 2**63
        totals = np.zeros(table.capacity, dtype=np.int64 if exact else object)
        for name, weight in weighted:
            totals[table.rows_with_image(name)] += weight
        return calculate_priority_rows(totals.take(rows), pre.num_containers)


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> ImageLocality:
    return ImageLocality()
