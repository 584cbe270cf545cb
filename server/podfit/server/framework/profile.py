"""Profiles: which plugins run at each extension point, in which order, with which score weights.

The default profile is kube-scheduler v1.35's (``apis/config/v1/default_plugins.go``): one ordered
multi-point list from which every extension point takes the plugins that implement it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from podfit.server.framework.interfaces import (
    FilterPlugin,
    Plugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
)
from podfit.server.model.objects import DEFAULT_SCHEDULER_NAME

PluginFactory = Callable[[Mapping[str, Any]], Plugin]

# Names exactly as upstream's plugins/names/names.go.
SCHEDULING_GATES = "SchedulingGates"
PRIORITY_SORT = "PrioritySort"
NODE_UNSCHEDULABLE = "NodeUnschedulable"
NODE_NAME = "NodeName"
TAINT_TOLERATION = "TaintToleration"
NODE_AFFINITY = "NodeAffinity"
NODE_PORTS = "NodePorts"
NODE_RESOURCES_FIT = "NodeResourcesFit"
VOLUME_RESTRICTIONS = "VolumeRestrictions"
NODE_VOLUME_LIMITS = "NodeVolumeLimits"
VOLUME_BINDING = "VolumeBinding"
VOLUME_ZONE = "VolumeZone"
POD_TOPOLOGY_SPREAD = "PodTopologySpread"
INTER_POD_AFFINITY = "InterPodAffinity"
DYNAMIC_RESOURCES = "DynamicResources"
DEFAULT_PREEMPTION = "DefaultPreemption"
NODE_RESOURCES_BALANCED_ALLOCATION = "NodeResourcesBalancedAllocation"
IMAGE_LOCALITY = "ImageLocality"
DEFAULT_BINDER = "DefaultBinder"

# (plugin, score weight) in upstream's multi-point order. Weight 0 = not a score plugin. Plugins podfit
# has no model for (volumes, queue sort, binding) are absent: they never change an answer here.
DEFAULT_MULTI_POINT: tuple[tuple[str, int], ...] = (
    (SCHEDULING_GATES, 0),
    (NODE_UNSCHEDULABLE, 0),
    (NODE_NAME, 0),
    (TAINT_TOLERATION, 3),
    (NODE_AFFINITY, 2),
    (NODE_PORTS, 0),
    (NODE_RESOURCES_FIT, 1),
    (POD_TOPOLOGY_SPREAD, 2),
    (INTER_POD_AFFINITY, 2),
    (DYNAMIC_RESOURCES, 2),
    (DEFAULT_PREEMPTION, 0),
    (NODE_RESOURCES_BALANCED_ALLOCATION, 1),
    (IMAGE_LOCALITY, 1),
)


@dataclass(frozen=True)
class WeightedScorePlugin:
    plugin: ScorePlugin
    weight: int


@dataclass
class Profile:
    """The plugins of one scheduler name, per extension point, in execution order."""

    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    pre_enqueue: list[PreEnqueuePlugin] = field(default_factory=list)
    pre_filter: list[PreFilterPlugin] = field(default_factory=list)
    filter: list[FilterPlugin] = field(default_factory=list)
    post_filter: list[Plugin] = field(default_factory=list)
    pre_score: list[PreScorePlugin] = field(default_factory=list)
    score: list[WeightedScorePlugin] = field(default_factory=list)
    # Every plugin instance by name (one instance serves all its extension points).
    plugins: dict[str, Plugin] = field(default_factory=dict)

    def plugin(self, name: str) -> Plugin | None:
        return self.plugins.get(name)
