"""One module per upstream plugin, named after it; REGISTRY maps plugin names to factories."""

from __future__ import annotations

from podfit.server.framework.profile import PluginFactory
from podfit.server.plugins import (
    dynamic_resources,
    node_name,
    node_unschedulable,
    scheduling_gates,
)

REGISTRY: dict[str, PluginFactory] = {
    scheduling_gates.SchedulingGates.name: scheduling_gates.new,
    node_unschedulable.NodeUnschedulable.name: node_unschedulable.new,
    node_name.NodeName.name: node_name.new,
    dynamic_resources.DynamicResources.name: dynamic_resources.new,
}
