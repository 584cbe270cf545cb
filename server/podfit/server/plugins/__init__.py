"""One module per upstream plugin, named after it; REGISTRY maps plugin names to factories."""

from __future__ import annotations

import importlib
import importlib.util

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
    "PodTopologySpread": "pod_topology_spread",
    "InterPodAffinity": "inter_pod_affinity",
    "DynamicResources": "dynamic_resources",
    "DefaultPreemption": "default_preemption",
    "NodeResourcesBalancedAllocation": "node_resources_balanced_allocation",
    "ImageLocality": "image_locality",
}


def _load() -> dict[str, PluginFactory]:
    registry: dict[str, PluginFactory] = {}
    for name, module_name in PLUGIN_MODULES.items():
        qualified = f"{__name__}.{module_name}"
        # TEMPORARY while plugins land one by one; removed once every module exists.
        if importlib.util.find_spec(qualified) is None:
            continue
        registry[name] = importlib.import_module(qualified).new
    return registry


REGISTRY: dict[str, PluginFactory] = _load()
