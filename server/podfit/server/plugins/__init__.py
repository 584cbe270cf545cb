"""One module per upstream plugin, named after it; REGISTRY maps plugin names to factories."""

from __future__ import annotations

import importlib

from podfit.server.framework.profile import PluginFactory

# plugin name -> module under podfit.server.plugins. Each module exposes ``new(args) -> plugin``.
PLUGIN_MODULES: dict[str, str] = {
    "SchedulingGates": "scheduling_gates",
    "NodeUnschedulable": "node_unschedulable",
    "NodeName": "node_name",
    "TaintToleration": "taint_toleration",
    "NodeAffinity": "node_affinity",
    "NodePorts": "node_ports",
    "NodeResourcesFit": "node_resources_fit",
    "VolumeRestrictions": "volume_restrictions",
    "NodeVolumeLimits": "node_volume_limits",
    "VolumeBinding": "volume_binding",
    "VolumeZone": "volume_zone",
    "PodTopologySpread": "pod_topology_spread",
    "InterPodAffinity": "inter_pod_affinity",
    "DynamicResources": "dynamic_resources",
    "DefaultPreemption": "default_preemption",
    "NodeResourcesBalancedAllocation": "node_resources_balanced_allocation",
    "ImageLocality": "image_locality",
    "NodeDeclaredFeatures": "node_declared_features",
}


def _load() -> dict[str, PluginFactory]:
    registry: dict[str, PluginFactory] = {}
    for name, module_name in PLUGIN_MODULES.items():
        registry[name] = importlib.import_module(f"{__name__}.{module_name}").new
    return registry


REGISTRY: dict[str, PluginFactory] = _load()
