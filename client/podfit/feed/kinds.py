"""The kinds the feeder lists and watches: which typed method of the official ``kubernetes`` client serves
each, and how ``--namespace``, the label selector and the pod phase field selector scope them.

The typed ``list_*`` methods are called with ``_preload_content=False`` and the raw JSON is decoded here:
it is exact (no round trip through the client's models) and the raw-response contract is the same from
kubernetes 28 to today's generator.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from podfit.k8s.convert import KINDS, canonical_kind

# Finished pods hold no resources and cannot be scheduled: the API server leaves them out (and a watch
# sends DELETED when a pod finishes), so podfit never sees them.
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"


@dataclass(frozen=True)
class KindSpec:
    kind: str
    # kubernetes.client API class and the snake_case resource in its method names.
    api_class: str
    resource: str
    namespaced: bool
    # The REST path of the collection across all namespaces (for logs and the docs).
    path: str
    field_selector: str = ""

    def list_method(self, api: Any, namespace: str | None) -> tuple[Any, dict[str, Any]]:
        """The bound ``list_*`` method and its fixed arguments (the namespace of a namespaced list)."""
        from kubernetes import client

        typed = getattr(client, self.api_class)(api)
        if not self.namespaced:
            return getattr(typed, f"list_{self.resource}"), {}
        if namespace:
            return getattr(typed, f"list_namespaced_{self.resource}"), {"namespace": namespace}
        return getattr(typed, f"list_{self.resource}_for_all_namespaces"), {}


ALL_KINDS: tuple[KindSpec, ...] = (
    KindSpec("Namespace", "CoreV1Api", "namespace", False, "/api/v1/namespaces"),
    KindSpec("Node", "CoreV1Api", "node", False, "/api/v1/nodes"),
    KindSpec("Pod", "CoreV1Api", "pod", True, "/api/v1/pods", POD_FIELD_SELECTOR),
    KindSpec("Service", "CoreV1Api", "service", True, "/api/v1/services"),
    KindSpec("ReplicationController", "CoreV1Api", "replication_controller", True, "/api/v1/replicationcontrollers"),
    KindSpec(
        "PodDisruptionBudget", "PolicyV1Api", "pod_disruption_budget", True, "/apis/policy/v1/poddisruptionbudgets"
    ),
    KindSpec("ReplicaSet", "AppsV1Api", "replica_set", True, "/apis/apps/v1/replicasets"),
    KindSpec("StatefulSet", "AppsV1Api", "stateful_set", True, "/apis/apps/v1/statefulsets"),
    KindSpec("DaemonSet", "AppsV1Api", "daemon_set", True, "/apis/apps/v1/daemonsets"),
    KindSpec("Job", "BatchV1Api", "job", True, "/apis/batch/v1/jobs"),
    KindSpec("StorageClass", "StorageV1Api", "storage_class", False, "/apis/storage.k8s.io/v1/storageclasses"),
    KindSpec("PersistentVolume", "CoreV1Api", "persistent_volume", False, "/api/v1/persistentvolumes"),
    KindSpec("PersistentVolumeClaim", "CoreV1Api", "persistent_volume_claim", True, "/api/v1/persistentvolumeclaims"),
    KindSpec("CSINode", "StorageV1Api", "csi_node", False, "/apis/storage.k8s.io/v1/csinodes"),
    KindSpec("CSIDriver", "StorageV1Api", "csi_driver", False, "/apis/storage.k8s.io/v1/csidrivers"),
    KindSpec(
        "CSIStorageCapacity",
        "StorageV1Api",
        "csi_storage_capacity",
        True,
        "/apis/storage.k8s.io/v1/csistoragecapacities",
    ),
    KindSpec(
        "VolumeAttachment", "StorageV1Api", "volume_attachment", False, "/apis/storage.k8s.io/v1/volumeattachments"
    ),
    KindSpec("DeviceClass", "ResourceV1Api", "device_class", False, "/apis/resource.k8s.io/v1/deviceclasses"),
    KindSpec("ResourceSlice", "ResourceV1Api", "resource_slice", False, "/apis/resource.k8s.io/v1/resourceslices"),
    KindSpec("ResourceClaim", "ResourceV1Api", "resource_claim", True, "/apis/resource.k8s.io/v1/resourceclaims"),
)
assert {k.kind for k in ALL_KINDS} == set(KINDS)


def select_kinds(names: Iterable[str]) -> tuple[KindSpec, ...]:
    """Kinds by name or kubectl alias ("pods", "po", "pdb"...), in ALL_KINDS order; ConversionError if unknown."""
    wanted = {canonical_kind(name.strip()) for name in names if name.strip()}
    return tuple(k for k in ALL_KINDS if k.kind in wanted)


@dataclass(frozen=True)
class Scope:
    """What one feeder sees. ``namespace`` limits the namespaced kinds to one namespace and the Namespace
    kind to that namespace object; nodes are always listed in full (pods are placed on all of them).
    ``label_selector`` applies to the namespaced kinds only, for the same reason."""

    namespace: str | None = None
    label_selector: str | None = None

    def call(self, api: Any, spec: KindSpec) -> tuple[Callable[..., Any], dict[str, Any]]:
        """The list method of ``spec`` and its scoping arguments (namespace, selectors)."""
        method, kwargs = spec.list_method(api, self.namespace)
        return method, {**kwargs, **self.selectors(spec)}

    def selectors(self, spec: KindSpec) -> dict[str, str]:
        fields = [spec.field_selector] if spec.field_selector else []
        if spec.kind == "Namespace" and self.namespace:
            fields.append(f"metadata.name={self.namespace}")
        result = {"field_selector": ",".join(fields)} if fields else {}
        if spec.namespaced and self.label_selector:
            result["label_selector"] = self.label_selector
        return result


def watch_timeout(base: int) -> int:
    """A server-side watch timeout in [base, 2*base), as client-go's reflector spreads its re-watches."""
    return base + random.randrange(max(base, 1))
