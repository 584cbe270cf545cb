"""cluster-autoscaler's gRPC expander (``/grpcplugin.Expander/BestOptions``): wire format only.

Pods and template nodes arrive as Kubernetes protobuf; they are decoded to their Kubernetes JSON and
converted by the same model code as every other object, so an option's pods are judged exactly like
pods sent any other way. Which options are best is decided in ``podfit.server.simulation.expander``.
"""

from __future__ import annotations

import json

import grpc
from grpcplugin import expander_pb2 as ex
from grpcplugin import expander_pb2_grpc as ex_grpc
from podfit.k8s import protobuf
from podfit.k8s.convert import ConversionError
from podfit.server.model import Kind, Node, Pod, ValidationError
from podfit.server.model.decode import ClusterObject, object_from_k8s
from podfit.server.model.dra import ResourceSlice, check_template_slices
from podfit.server.service import SchedulingService
from podfit.server.simulation.expander import ExpansionOption
from podfit.server.simulation.templates import NodeTemplate
from podfit.server.telemetry import annotate
from podfit.server.transport.convert import located
from podfit.server.transport.errors import heavy, unary_errors
from podfit.server.transport.what_if import WhatIfLink, what_if


def _decoded(kind: Kind, data: bytes, path: str) -> ClusterObject:
    """Kubernetes protobuf bytes (or, for podfit's own fields, Kubernetes JSON: bytes starting with "{")
    through the model's one converter, faults located at ``path``."""
    try:
        if kind is Kind.RESOURCE_SLICE and data.lstrip()[:1] == b"{":
            try:
                manifest = json.loads(data)
            except ValueError as exc:
                raise ValidationError(path, f"is not Kubernetes JSON: {exc}") from None
            return object_from_k8s(kind, manifest, path)
        return object_from_k8s(kind, protobuf.decode(kind.value, data), path)
    except ConversionError as exc:
        raise located(exc, path) from None


def _slices(request: ex.BestOptionsRequest, group: str) -> tuple[ResourceSlice, ...]:
    """The group's template ResourceSlices (podfit's templateResourceSlices), node-local."""
    if group not in request.templateResourceSlices:
        return ()
    path = f"templateResourceSlices[{group!r}].items"
    slices = []
    for j, data in enumerate(request.templateResourceSlices[group].items):
        item = _decoded(Kind.RESOURCE_SLICE, data, f"{path}[{j}]")
        assert isinstance(item, ResourceSlice)
        slices.append(item)
    check_template_slices(slices, path)
    return tuple(slices)


def _pod(data: bytes, path: str) -> Pod:
    pod = _decoded(Kind.POD, data, path)
    assert isinstance(pod, Pod)
    return pod


def _node(data: bytes, path: str) -> Node:
    node = _decoded(Kind.NODE, data, path)
    assert isinstance(node, Node)
    return node


EXPANDER = f"/{ex.DESCRIPTOR.services_by_name['Expander'].full_name}/"


class ExpanderServicer(ex_grpc.ExpanderServicer):
    """cluster-autoscaler's gRPC expander; answered by the what-if process where there is one."""

    def __init__(self, service: SchedulingService, what_if: WhatIfLink | None = None) -> None:
        self.service = service
        self.what_if = what_if

    @what_if(EXPANDER + "BestOptions", ex.BestOptionsResponse)
    @unary_errors
    @heavy
    async def BestOptions(
        self, request: ex.BestOptionsRequest, context: grpc.aio.ServicerContext
    ) -> ex.BestOptionsResponse:
        # Before decoding anything: an unsynced cache (--wait-for-sync) is FAILED_PRECONDITION.
        self.service.require_synced()
        # Limits before decoding: 100,000 options of pod bytes would take seconds to decode.
        limits = self.service.limits
        limits.check_options(len(request.options))
        # Autoscalers predating podBytes/nodeBytesMap send the same bytes in the typed fields pod/nodeMap.
        pod_field = {i: "podBytes" if option.podBytes else "pod" for i, option in enumerate(request.options)}
        for i, option in enumerate(request.options):
            count = len(getattr(option, pod_field[i]))
            limits.check_option_pods(f"options[{i}].{pod_field[i]}", count)
        node_field = "nodeBytesMap" if request.nodeBytesMap else "nodeMap"
        node_bytes = getattr(request, node_field)
        templates: dict[str, NodeTemplate] = {}
        options = []
        for i, option in enumerate(request.options):
            group = option.nodeGroupId
            if group not in templates:
                if group not in node_bytes:
                    raise ValidationError(f"nodeBytesMap[{group!r}]", f"missing: the template node of options[{i}]")
                node = _node(node_bytes[group], f"{node_field}[{group!r}]")
                templates[group] = NodeTemplate(node, _slices(request, group))
            field = pod_field[i]
            pods = [_pod(data, f"options[{i}].{field}[{j}]") for j, data in enumerate(getattr(option, field))]
            options.append(ExpansionOption(group, option.nodeCount, pods, templates[group]))
        best, _ = await self.service.gate.run_heavy(
            self.service.what_if.best_expansion_options, options, exclusive=False, prepare=self.service.what_if.freeze
        )
        annotate(options=len(options), best=len(best))
        return ex.BestOptionsResponse(options=[request.options[i] for i in best])
