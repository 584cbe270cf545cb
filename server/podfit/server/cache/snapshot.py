"""A consistent, read-only view of the cache for one decision.

Decisions run synchronously on the event loop (plugins never await), so no update can interleave
with a decision and the view needs no copy: it references the cache's structures at one generation.
``Overlay(snapshot)`` (cache/overlay.py) forks one into a view that changes a few nodes and pods
without copying the cluster or touching the cache (caller-supplied nodes, what-if simulation).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from podfit.server.cache.node_info import NodeInfo
from podfit.server.cache.node_table import NodeTable
from podfit.server.cache.pod_index import PodIndex, PodIndexView, index_of
from podfit.server.model import Namespace, Pod, PodDisruptionBudget, WorkloadSelector
from podfit.server.model.dra import DeviceClass, ResourceClaim, ResourceSlice
from podfit.server.model.storage import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    VolumeAttachment,
)


@dataclass(frozen=True, slots=True)
class ImageSummary:
    size_bytes: int
    num_nodes: int


@dataclass(frozen=True, slots=True)
class StorageView:
    """The volume objects, for the volume plugins' lookups (upstream's listers)."""

    classes: Mapping[str, StorageClass]
    volumes: Mapping[str, PersistentVolume]
    # By "namespace/name".
    claims: Mapping[str, PersistentVolumeClaim]
    # By node name.
    csi_nodes: Mapping[str, CSINode]
    csi_drivers: Mapping[str, CSIDriver]
    capacities: Sequence[CSIStorageCapacity]
    attachments: Sequence[VolumeAttachment]

    @property
    def empty(self) -> bool:
        return not (
            self.classes
            or self.volumes
            or self.claims
            or self.csi_nodes
            or self.csi_drivers
            or self.capacities
            or self.attachments
        )


NO_STORAGE = StorageView({}, {}, {}, {}, {}, (), ())


@dataclass(frozen=True, slots=True)
class DraView:
    """The DRA objects, for DynamicResources (upstream's DRA manager: claim cache, slice tracker and
    DeviceClass lister)."""

    classes: Mapping[str, DeviceClass]
    slices: Sequence[ResourceSlice]
    # By "namespace/name".
    claims: Mapping[str, ResourceClaim]
    # What DynamicResources derives from these objects once: "allocated" (the devices claims hold) and
    # "in_use" (them by pool), which the cache keeps as claims change and an overlay extends with its own;
    # "index", an overlay's slice index. A new view is made whenever one of the objects changes.
    memo: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def empty(self) -> bool:
        return not (self.classes or self.slices or self.claims)


NO_DRA = DraView({}, (), {})


class NameIndex:
    """A snapshot's node names, in its (name) order, as one array of UTF-8 byte strings: finding the few
    hundred names an extender call sends is then a binary search in contiguous memory, where a dict lookup
    per name misses the CPU cache at each of them. Built on first use, shared by the snapshots of one set
    of nodes."""

    def __init__(self, names: npt.NDArray[np.object_]) -> None:
        self._names = names
        self._encoded: npt.NDArray[np.bytes_] | None = None

    def find(self, wanted: npt.NDArray[np.bytes_]) -> npt.NDArray[np.intp] | None:
        """The positions of ``wanted`` (UTF-8 names); None when one is no node, or the names cannot be
        searched this way (the caller then looks each name up)."""
        encoded = self._encoded
        if encoded is None:
            encoded = self._encoded = _encoded_names(self._names.tolist())
        if not len(encoded) or not len(wanted):
            return None
        at = np.searchsorted(encoded, wanted)
        np.minimum(at, len(encoded) - 1, out=at)
        if not bool((encoded[at] == wanted).all()):
            return None
        return at.astype(np.intp, copy=False)


def _encoded_names(names: list[str]) -> npt.NDArray[np.bytes_]:
    """The names as byte strings, or an empty array when that would not find exactly them: numpy drops a
    byte string's trailing NULs, and a name that is no valid UTF-8 cannot be sent as JSON text."""
    try:
        encoded = [name.encode() for name in names]
    except UnicodeEncodeError:
        return np.empty(0, dtype=np.bytes_)
    if any(name.endswith(b"\x00") for name in encoded):
        return np.empty(0, dtype=np.bytes_)
    array = np.array(encoded, dtype=np.bytes_)
    # Byte order of UTF-8 is code point order, the names' own; anything else cannot be searched.
    if len(array) > 1 and not bool((array[1:] > array[:-1]).all()):
        return np.empty(0, dtype=np.bytes_)
    return array


@dataclass(slots=True, weakref_slot=True)
class Snapshot:
    generation: int
    # Every node, ordered by name.
    node_infos: Sequence[NodeInfo]
    node_info_map: Mapping[str, NodeInfo]
    namespaces: Mapping[str, Namespace]
    pdbs: Sequence[PodDisruptionBudget]
    # Services, ReplicaSets, StatefulSets and ReplicationControllers, for default spreading.
    workloads: Sequence[WorkloadSelector]
    # Pod controllers (ReplicaSets, StatefulSets, ReplicationControllers, Jobs, DaemonSets) by
    # (kind, namespace, name), as the drain rules look up a pod's owner.
    controllers: Mapping[tuple[str, str, str], WorkloadSelector]
    # Pending pods with status.nominatedNodeName, by node name.
    nominated_pods: Mapping[str, Sequence[Pod]]
    # Image name -> size and how many nodes hold it (ImageLocality's spread factor).
    images: Mapping[str, ImageSummary]
    # Columns over the nodes, and each node_infos entry's row in them.
    table: NodeTable
    rows: npt.NDArray[np.intp]
    # node_infos' names and the NodeInfos themselves as object arrays, for cheap fancy indexing.
    names: npt.NDArray[np.object_]
    info_array: npt.NDArray[np.object_]
    # Set on an overlay's snapshot: its view of the pod index (the cache's own index otherwise).
    pod_index: Callable[[], PodIndexView] | None = None
    # Name -> position in ``names``; built on first use (the cache hands every snapshot the same one).
    name_positions: dict[str, int] | None = None
    # The same names for finding them by their bytes (built on first use; shared like name_positions).
    name_index: NameIndex | None = None
    # PersistentVolumes, claims, StorageClasses and the CSI objects.
    storage: StorageView = NO_STORAGE
    # DeviceClasses, ResourceSlices and ResourceClaims.
    dra: DraView = NO_DRA

    def get(self, node_name: str) -> NodeInfo | None:
        return self.node_info_map.get(node_name)

    def positions(self) -> dict[str, int]:
        """Each node's position in ``names`` (and ``node_infos``), by name."""
        if self.name_positions is None:
            self.name_positions = {name: i for i, name in enumerate(self.names.tolist())}
        return self.name_positions

    def names_index(self) -> NameIndex:
        if self.name_index is None:
            self.name_index = NameIndex(self.names)
        return self.name_index

    def index(self) -> PodIndexView:
        """The bound pods indexed per row: an overlay's view, or the cache's index synced to this snapshot."""
        return self.pod_index() if self.pod_index is not None else self.cache_index()

    def cache_index(self) -> PodIndex:
        """The index over the cache's own table (for a snapshot of the cache, not of an overlay)."""
        return index_of(self.table, self.node_infos, self.rows, self.generation)
