"""Profiles: which plugins run at each extension point, in which order, with which score weights.

The default profile is kube-scheduler's (``apis/config/v1/default_plugins.go``) of the profile's version:
one ordered multi-point list from which every extension point takes the plugins that implement it.
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
    ReservePlugin,
    ScorePlugin,
)
from podfit.server.framework.versions import DEFAULT_VERSION, VERSIONS, Features, KubeSchedulerVersion
from podfit.server.model.objects import DEFAULT_SCHEDULER_NAME

# A factory gets the plugin's arguments and the profile's Features, as upstream's plugin factories do.
PluginFactory = Callable[[Mapping[str, Any], Features], Plugin]

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
NODE_DECLARED_FEATURES = "NodeDeclaredFeatures"
DEFAULT_BINDER = "DefaultBinder"

# (plugin, score weight) in upstream's multi-point order. Weight 0 = not a score plugin. Plugins podfit
# has no model for (queue sort, binding, the other volume plugins) are absent: they never change an answer
# here. Every supported version has this list, but for where NodeName runs (see default_plugins).
DEFAULT_MULTI_POINT: tuple[tuple[str, int], ...] = (
    (SCHEDULING_GATES, 0),
    (NODE_UNSCHEDULABLE, 0),
    (NODE_NAME, 0),
    (TAINT_TOLERATION, 3),
    (NODE_AFFINITY, 2),
    (NODE_PORTS, 0),
    (NODE_RESOURCES_FIT, 1),
    (VOLUME_RESTRICTIONS, 0),
    (NODE_VOLUME_LIMITS, 0),
    (VOLUME_BINDING, 1),
    (VOLUME_ZONE, 0),
    (POD_TOPOLOGY_SPREAD, 2),
    (INTER_POD_AFFINITY, 2),
    (DYNAMIC_RESOURCES, 2),
    (DEFAULT_PREEMPTION, 0),
    (NODE_RESOURCES_BALANCED_ALLOCATION, 1),
    (IMAGE_LOCALITY, 1),
)


def default_plugins(features: Features) -> tuple[tuple[str, int], ...]:
    """The default multi-point plugins of the profile's version, from its Features: NodeName runs first
    where it restricts the candidates at PreFilter (``node_name_pre_filter``, upstream moved it in the
    same change), and upstream's applyFeatureGates appends NodeDeclaredFeatures when its gate is on."""
    plugins = DEFAULT_MULTI_POINT
    if features.node_name_pre_filter:
        plugins = ((SCHEDULING_GATES, 0), (NODE_NAME, 0), (NODE_UNSCHEDULABLE, 0), *plugins[3:])
    if features.enable_node_declared_features:
        plugins = (*plugins, (NODE_DECLARED_FEATURES, 0))
    return plugins


@dataclass(frozen=True)
class WeightedScorePlugin:
    plugin: ScorePlugin
    weight: int


@dataclass
class Profile:
    """The plugins of one scheduler name, per extension point, in execution order."""

    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    # The kube-scheduler version the profile answers as, and its resolved gates and behaviours.
    version: KubeSchedulerVersion = VERSIONS[DEFAULT_VERSION]
    features: Features = field(default_factory=Features)
    # What the profile was built from (podfit.server.config.ProfileSpec), to build it at another version.
    spec: object = None
    pre_enqueue: list[PreEnqueuePlugin] = field(default_factory=list)
    pre_filter: list[PreFilterPlugin] = field(default_factory=list)
    filter: list[FilterPlugin] = field(default_factory=list)
    post_filter: list[Plugin] = field(default_factory=list)
    pre_score: list[PreScorePlugin] = field(default_factory=list)
    score: list[WeightedScorePlugin] = field(default_factory=list)
    reserve: list[ReservePlugin] = field(default_factory=list)
    # Every plugin instance by name (one instance serves all its extension points).
    plugins: dict[str, Plugin] = field(default_factory=dict)

    def plugin(self, name: str) -> Plugin | None:
        return self.plugins.get(name)
