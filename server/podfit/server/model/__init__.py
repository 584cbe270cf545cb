"""The domain model: immutable, slotted records converted once from Kubernetes JSON at the edge.

Layering: transport -> framework -> plugins -> cache -> model. Nothing here imports upward.
"""

from podfit.server.model.errors import ValidationError
from podfit.server.model.objects import (
    ContainerPort,
    ImageState,
    Kind,
    LabelSelector,
    LabelSelectorRequirement,
    Namespace,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerReference,
    Pod,
    PodAffinityTerm,
    PodDisruptionBudget,
    PreferredSchedulingTerm,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    Volume,
    WeightedPodAffinityTerm,
    WorkloadSelector,
)

__all__ = [
    "ContainerPort",
    "ImageState",
    "Kind",
    "LabelSelector",
    "LabelSelectorRequirement",
    "Namespace",
    "Node",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "OwnerReference",
    "Pod",
    "PodAffinityTerm",
    "PodDisruptionBudget",
    "PreferredSchedulingTerm",
    "Taint",
    "Toleration",
    "TopologySpreadConstraint",
    "ValidationError",
    "Volume",
    "WeightedPodAffinityTerm",
    "WorkloadSelector",
]
