"""Template nodes: what a node group's new nodes are copies of, with the devices a driver would publish.

A template is a Node and, optionally, the ResourceSlices of one such node (cluster-autoscaler's template
NodeInfo and its local slices). Each copy added to an overlay is the node renamed (its hostname label
too) and its own copies of the slices: named ``<slice>-<suffix>`` in pool ``<pool>-<suffix>`` on the
copy, where the copy is named ``<template>-<suffix>`` — so every new node has pools of its own, as a
driver publishes them on each node it runs on, and DeviceClasses, claims and devices in use apply to
them as to any node's (``podfit.server.model.dra.template_copies``).

Placing a pod on an overlay goes through Reserve as on the cache: its claims allocated on the node's
devices and reserved for it, written into the overlay (``place``), so the next pod of a simulation sees
those devices in use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from podfit.server.cache.overlay import Overlay
from podfit.server.engine import Engine
from podfit.server.framework.cycle_state import CycleState
from podfit.server.model import Node, Pod
from podfit.server.model.dra import ResourceClaim, ResourceSlice, template_copies

HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True)
class NodeTemplate:
    node: Node
    # Node-local slices (checked where they arrive: podfit.server.model.dra.check_template_slices).
    slices: tuple[ResourceSlice, ...] = ()

    @property
    def name(self) -> str:
        return self.node.name

    def add_copy(self, overlay: Overlay, suffix: str) -> Node:
        """Adds the copy named ``<template>-<suffix>`` and its slices to ``overlay``; returns the node."""
        name = f"{self.node.name}-{suffix}"
        node = dataclasses.replace(self.node, name=name, uid="", labels={**self.node.labels, HOSTNAME: name})
        overlay.add_node(node)
        overlay.add_slices(template_copies(self.slices, name, suffix))
        return node


def template_of(template: Node | NodeTemplate) -> NodeTemplate:
    return template if isinstance(template, NodeTemplate) else NodeTemplate(template)


def place(
    engine: Engine,
    overlay: Overlay,
    pod: Pod,
    node_name: str,
    scheduler_name: str = "",
    state: CycleState | None = None,
) -> None:
    """Binds ``pod`` to ``node_name`` in ``overlay`` with what the profile's Reserve plugins hold for it
    there (DynamicResources' claims), as an assume writes them into the cache. ``state`` is the cycle
    that chose the node, when there was one (its Filter answer is reused)."""
    held: Sequence[object] = ()
    if pod.resource_claims:
        framework = engine.framework_for(pod, scheduler_name)
        held = framework.run_reserve(state or CycleState(), pod, node_name, overlay.snapshot())
    overlay.bind_pod(dataclasses.replace(pod, node_name=node_name, nominated_node_name=""))
    overlay.update_claims([record for record in held if isinstance(record, ResourceClaim)])
