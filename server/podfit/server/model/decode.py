"""Any cached kind from its Kubernetes JSON: the one place that knows every kind's converter, so the
modules that define the kinds need not know each other (objects.py is what storage.py and dra.py build on)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from podfit.server.model.dra import DraObject, dra_object_from_k8s
from podfit.server.model.objects import (
    DRA_KINDS,
    STORAGE_KINDS,
    Kind,
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    WorkloadSelector,
    namespace_from_k8s,
    node_from_k8s,
    pdb_from_k8s,
    pod_from_k8s,
    workload_from_k8s,
)
from podfit.server.model.storage import StorageObject, storage_object_from_k8s

# Any record the cache holds.
ClusterObject = Node | Pod | Namespace | PodDisruptionBudget | WorkloadSelector | StorageObject | DraObject


def object_from_k8s(kind: Kind, data: Mapping[str, Any], path: str) -> ClusterObject:
    """Converts the Kubernetes JSON of any cached kind."""
    if kind in STORAGE_KINDS:
        return storage_object_from_k8s(kind, data, path)
    if kind in DRA_KINDS:
        return dra_object_from_k8s(kind, data, path)
    if kind is Kind.NODE:
        return node_from_k8s(data, path)
    if kind is Kind.POD:
        return pod_from_k8s(data, path)
    if kind is Kind.NAMESPACE:
        return namespace_from_k8s(data, path)
    if kind is Kind.POD_DISRUPTION_BUDGET:
        return pdb_from_k8s(data, path)
    return workload_from_k8s(kind, data, path)
