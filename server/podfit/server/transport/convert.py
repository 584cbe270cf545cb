"""podfit.v1 messages <-> domain records and decisions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from google.protobuf import json_format
from podfit.k8s.convert import ENUM_TO_KIND, KINDS, ConversionError, object_kind_and_message
from podfit.server.cache.cluster_cache import Change, Delete, Upsert
from podfit.server.cycle import ScheduleResult
from podfit.server.engine import Decision, UnknownProfileError
from podfit.server.framework.interfaces import PreemptionResult
from podfit.server.framework.status import Code
from podfit.server.model import Kind, Node, Pod, Taint, ValidationError
from podfit.server.model.decode import object_from_k8s
from podfit.server.model.dra import ResourceSlice, check_template_slices
from podfit.server.model.objects import (
    CPU,
    DEFAULT_NAMESPACE,
    OwnerReference,
    SpecFieldsMemo,
    pod_spec_fields,
    preempted_by_scheduler,
    resource_version,
)
from podfit.server.service import (
    CachedPod,
    GivenPod,
    NodeAllocation,
    NotFoundError,
    PodInput,
    PodRejected,
    StalePodError,
)
from podfit.server.simulation.drain import BlockingPod, DrainOptions
from podfit.server.simulation.estimator import Estimate
from podfit.server.simulation.node_removal import Destinations, RemovalSimulation
from podfit.server.simulation.scenario import Scenario, SimulationResult
from podfit.server.simulation.templates import NodeTemplate
from podfit.server.transport.errors import LocatedProfileError
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import objects_pb2 as ob
from podfit.v1 import scheduler_pb2 as sc
from podfit.v1 import simulation_pb2 as sim

STATUS_CODES = {
    Code.SUCCESS: sc.STATUS_CODE_SUCCESS,
    Code.UNSCHEDULABLE: sc.STATUS_CODE_UNSCHEDULABLE,
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: sc.STATUS_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE,
    Code.ERROR: sc.STATUS_CODE_ERROR,
}


def located(exc: ValidationError | ConversionError, prefix: str) -> ValidationError:
    return ValidationError(f"{prefix}.{exc.field}" if exc.field else prefix, exc.message)


# Specs received as protobuf, by their bytes without nodeName (replicas differ in nothing else).
_SPECS = SpecFieldsMemo()


def _spec_fields(spec: ob.PodSpec, path: str) -> dict[str, Any]:
    node_name = spec.node_name
    spec.ClearField("node_name")
    try:
        key = spec.SerializeToString(deterministic=True)
        return _SPECS.fields(key, lambda: pod_spec_fields(json_format.MessageToDict(spec), path))
    finally:
        spec.node_name = node_name


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _seconds(message: Any, field: str, path: str) -> float | None:
    """A Timestamp field in seconds, exactly as the Kubernetes JSON path parses its RFC 3339 text
    (microsecond precision); None when unset."""
    if not message.HasField(field):
        return None
    stamp = getattr(message, field)
    try:
        return (_EPOCH + timedelta(seconds=stamp.seconds, microseconds=stamp.nanos // 1000)).timestamp()
    except OverflowError:
        raise ValidationError(path, "must be an RFC 3339 time between years 1 and 9999") from None


# google.protobuf.Timestamp's valid range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z.
_MIN_SECONDS, _MAX_SECONDS = -62135596800, 253402300799
_TIMESTAMP = "google.protobuf.Timestamp"


def check_timestamps(message: Any, path: str) -> None:
    """Refuses a Timestamp anywhere in ``message`` outside protobuf's range (years 1 to 9999, nanos in
    [0, 1e9)), at its field path: JSON conversion and time arithmetic would fail on it later."""
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        where = f"{path}.{field.json_name}"
        if field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.type == value_field.TYPE_MESSAGE:
                for key, item in value.items():
                    _check_one(item, f"{where}.{key}")
        elif field.is_repeated:
            for i, item in enumerate(value):
                _check_one(item, f"{where}[{i}]")
        else:
            _check_one(value, where)


def _check_one(message: Any, path: str) -> None:
    if message.DESCRIPTOR.full_name == _TIMESTAMP:
        if not (_MIN_SECONDS <= message.seconds <= _MAX_SECONDS and 0 <= message.nanos < 1_000_000_000):
            raise ValidationError(path, "must be an RFC 3339 time between years 1 and 9999")
    else:
        check_timestamps(message, path)


def optional_time(message: Any, field: str) -> float | None:
    """A request's Timestamp field in seconds (None when unset), refused at ``field`` when out of range."""
    if not message.HasField(field):
        return None
    stamp = getattr(message, field)
    _check_one(stamp, field)
    seconds: float = stamp.ToNanoseconds() / 1e9
    return seconds


def pod_from_message(message: ob.Pod, path: str) -> Pod:
    """A Pod from its typed message: metadata and status are read field by field (every value is
    already typed, so only presence rules remain to check); the spec goes through the Kubernetes JSON
    validation once per distinct spec (``_SPECS``), which replicas share."""
    meta = message.metadata
    if not meta.name:
        raise ValidationError(f"{path}.metadata.name", "is required")
    check_timestamps(meta, f"{path}.metadata")
    check_timestamps(message.status, f"{path}.status")
    fields = _spec_fields(message.spec, f"{path}.spec")
    status = message.status
    return Pod(
        name=meta.name,
        namespace=meta.namespace or DEFAULT_NAMESPACE,
        uid=meta.uid,
        resource_version=resource_version(meta.resource_version, f"{path}.metadata.resourceVersion"),
        labels=dict(meta.labels),
        annotations=dict(meta.annotations),
        owner_references=tuple(
            OwnerReference(api_version=r.api_version, kind=r.kind, name=r.name, uid=r.uid, controller=r.controller)
            for r in meta.owner_references
        ),
        node_name=message.spec.node_name,
        phase=status.phase,
        nominated_node_name=status.nominated_node_name,
        start_time=_seconds(status, "start_time", f"{path}.status.startTime"),
        preempted_by_scheduler=preempted_by_scheduler((c.type, c.status, c.reason) for c in status.conditions),
        resource_claim_statuses=tuple(
            (s.name, s.resource_claim_name if s.HasField("resource_claim_name") else None)
            for s in status.resource_claim_statuses
        ),
        deletion_timestamp=_seconds(meta, "deletion_timestamp", f"{path}.metadata.deletionTimestamp"),
        deletion_grace_period_seconds=(
            meta.deletion_grace_period_seconds if meta.HasField("deletion_grace_period_seconds") else None
        ),
        **fields,
    )


def upsert_from_object(obj: cc.ClusterObject, path: str, expected_kind: Kind | None = None) -> Upsert:
    """Converts one ClusterObject; the typed message is what Get/List later return."""
    try:
        kind_name, message = object_kind_and_message(obj)
    except ConversionError as exc:
        raise located(exc, path) from exc
    kind = Kind(kind_name)
    if expected_kind is not None and kind is not expected_kind:
        raise ValidationError(path, f"is a {kind.value}, but this request is about {expected_kind.value} objects")
    domain: Any
    if isinstance(message, ob.Pod):
        domain = pod_from_message(message, f"{path}.pod")
    else:
        check_timestamps(message, f"{path}.{KINDS[kind.value][0]}")
        manifest: dict[str, Any] = json_format.MessageToDict(message)
        domain = object_from_k8s(kind, manifest, f"{path}.{KINDS[kind.value][0]}")
    typed = cc.ClusterObject()
    getattr(typed, KINDS[kind.value][0]).CopyFrom(message)
    return Upsert(kind, domain, typed.SerializeToString(deterministic=True))


def kind_from_enum(value: int, path: str) -> Kind:
    name = ENUM_TO_KIND.get(value)
    if name is None:
        raise ValidationError(path, "must name a kind (OBJECT_KIND_NODE, OBJECT_KIND_POD, ...)")
    return Kind(name)


def delete_from_key(key: cc.ObjectKey, path: str) -> Delete:
    kind = kind_from_enum(key.kind, f"{path}.kind")
    if not key.name:
        raise ValidationError(f"{path}.name", "is required")
    version = resource_version(key.resource_version, f"{path}.resource_version")
    return Delete(kind, key.namespace if kind.namespaced else "", key.name, version)


def changes_from_updates(updates: Any, path: str = "updates") -> list[Change]:
    """Converts every update first, so a bad one rejects the whole batch before anything is applied."""
    changes: list[Change] = []
    for i, update in enumerate(updates):
        which = update.WhichOneof("operation")
        where = f"{path}[{i}]"
        if which == "upsert":
            changes.append(upsert_from_object(update.upsert, f"{where}.upsert"))
        elif which == "delete":
            changes.append(delete_from_key(update.delete, f"{where}.delete"))
        else:
            raise ValidationError(where, "must set upsert or delete")
    return changes


def object_from_source(source: bytes) -> cc.ClusterObject:
    obj = cc.ClusterObject()
    obj.ParseFromString(source)
    return obj


def _quantity(resource: str, amount: int) -> str:
    """A canonical amount as a Kubernetes quantity string: millicores for cpu, plain units otherwise."""
    if resource != CPU:
        return str(amount)
    return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"


def node_allocation(allocation: NodeAllocation) -> cc.NodeAllocation:
    return cc.NodeAllocation(
        node_name=allocation.node_name,
        requested={name: _quantity(name, amount) for name, amount in allocation.requested.items()},
        pod_count=allocation.pod_count,
    )


def pod_input(ref: sc.PodReference, path: str = "pod", *, with_source: bool = False) -> PodInput:
    """The pod a request is about: converted when given (with its stored form when ``with_source``, which
    assuming it needs), or a reference the service resolves."""
    which = ref.WhichOneof("source")
    if which == "cached":
        if not ref.cached.name:
            raise ValidationError(f"{path}.cached.name", "is required")
        return CachedPod(ref.cached.namespace, ref.cached.name)
    if which == "pod":
        message = ref.pod
        pod = pod_from_message(message, f"{path}.pod")
    elif which in ("kubernetes_json", "kubernetes_protobuf"):
        if which == "kubernetes_json":
            wrapper = cc.ClusterObject(kubernetes_json=ref.kubernetes_json)
        else:
            wrapper = cc.ClusterObject(
                kubernetes_protobuf=cc.KubernetesProtobuf(kind="Pod", data=ref.kubernetes_protobuf)
            )
        try:
            kind, converted = object_kind_and_message(wrapper)
        except ConversionError as exc:
            raise located(exc, path) from exc
        if kind != "Pod":
            raise ValidationError(f"{path}.{which}.kind", f"must be Pod, not {kind}")
        assert isinstance(converted, ob.Pod)
        message = converted
        pod = pod_from_message(message, f"{path}.{which}")
    else:
        raise ValidationError(path, "must set pod, kubernetes_json, kubernetes_protobuf or cached")
    if not with_source:
        return pod
    return GivenPod(pod, cc.ClusterObject(pod=message).SerializeToString(deterministic=True))


def add_verdicts(field: Any, decision: Decision) -> None:
    """Appends every candidate's verdict to a repeated NodeVerdict field, straight from the decision's
    columns (``add`` builds each message in place: constructing and copying them costs 4x more)."""
    outcome = decision.outcome
    if outcome is None:
        return
    rejected = [
        (status.plugin, list(status.reasons), STATUS_CODES.get(status.code, sc.STATUS_CODE_ERROR))
        for status in outcome.status_table
    ]
    success = sc.STATUS_CODE_SUCCESS
    for name, code in zip(outcome.names.tolist(), outcome.codes.tolist(), strict=True):
        if code == 0:
            field.add(node_name=name, fits=True, code=success)
        else:
            plugin, reasons, status_code = rejected[code - 1]
            field.add(node_name=name, fits=False, plugin=plugin, reasons=reasons, code=status_code)


def add_scores(field: Any, decision: Decision, only: set[str] | None = None) -> None:
    """Appends the feasible nodes' scores, best first (total descending, then name), to a repeated
    NodeScore field; ``only`` keeps the named nodes.

    Nodes with equal per-plugin scores share one serialized PluginScore list, merged into each node's
    message: building the ~35,000 PluginScore messages of a 5,000-node answer one by one took 10 ms."""
    table = decision.score_table
    if table is None:
        return
    names, totals = table.names.tolist(), table.totals.tolist()
    plugins = list(table.plugins)
    rows = np.stack(list(table.plugins.values()), axis=1).tolist() if plugins else [[] for _ in names]
    encoded: dict[tuple[int, ...], bytes] = {}
    prototype = sc.NodeScore()
    # Candidates are in name order, so a stable sort by total keeps names ascending among ties.
    for i in np.argsort(-table.totals, kind="stable").tolist():
        if only is not None and names[i] not in only:
            continue
        key = tuple(rows[i])
        scores = encoded.get(key)
        if scores is None:
            prototype.Clear()
            for plugin, score in zip(plugins, key, strict=True):
                prototype.plugins.add(plugin=plugin, score=score)
            scores = encoded[key] = prototype.SerializeToString()
        field.add(node_name=names[i], total=totals[i]).MergeFromString(scores)


def preempt_response(
    result: PreemptionResult, generation: int, epoch: str = "", version: str = ""
) -> sc.PreemptResponse:
    """A Preempt answer; ``epoch`` is the server's (SchedulingService.epoch), as on every response, and
    ``version`` the kube-scheduler release that answered."""
    return sc.PreemptResponse(
        generation=generation,
        server_epoch=epoch,
        kube_scheduler_version=version,
        nominated_node=result.nominated_node,
        victims=[
            sc.Victim(namespace=v.namespace, name=v.name, uid=v.uid, priority=v.priority)
            for v in sorted(result.victims, key=lambda v: v.key)
        ],
        num_pdb_violations=result.num_pdb_violations,
        node_ties=list(result.node_ties),
        message=result.message,
        code=STATUS_CODES[Code(result.code)] if result.code else sc.STATUS_CODE_UNSPECIFIED,
    )


def schedule_response(result: ScheduleResult, *, full: bool, epoch: str = "") -> sc.ScheduleResponse:
    """A Schedule answer; ``full`` (VIEW_FULL) adds every node's verdict, scores and the tie set."""
    decision = result.decision if full else None
    response = sc.ScheduleResponse(
        generation=result.generation,
        server_epoch=epoch,
        gated=result.gated,
        message=result.message,
        selected_node=result.selected,
        best_count=result.best_count,
        feasible_count=result.feasible_count,
        assumed_generation=result.assumed_generation,
        unschedulable_message=result.unschedulable_message,
        kube_scheduler_version=result.kube_scheduler_version,
    )
    if decision is not None:
        response.best_nodes.extend(decision.best)
        add_verdicts(response.nodes, decision)
        add_scores(response.scores, decision)
    if result.preemption is not None:
        response.preemption.CopyFrom(
            preempt_response(result.preemption, result.generation, epoch, result.kube_scheduler_version)
        )
    return response


def located_pod_error(exc: PodRejected, scheduler_name: str, path: str = "pods") -> Exception:
    """The request-level error for a batch's rejected pod, at its field path ``pods[i]...``."""
    where = f"{path}[{exc.index}]"
    error = exc.error
    if isinstance(error, ValidationError):
        return located(error, where)
    if isinstance(error, UnknownProfileError):
        # The request's scheduler_name chose the profile, or else this pod's own schedulerName did.
        return error if scheduler_name else LocatedProfileError(where, str(error))
    if isinstance(error, NotFoundError):
        return NotFoundError(f"{where}: {error}")
    if isinstance(error, StalePodError):
        return StalePodError(f"{where}: {error}")
    return error


# -- what-if -----------------------------------------------------------------------------------------


def _node(obj: cc.ClusterObject, path: str) -> Node:
    node = upsert_from_object(obj, path, expected_kind=Kind.NODE).obj
    assert isinstance(node, Node)
    return node


def template_slices(objects: Sequence[cc.ClusterObject], path: str) -> tuple[ResourceSlice, ...]:
    """A template node's ResourceSlices (typed or Kubernetes JSON), which must be node-local."""
    slices = []
    for i, obj in enumerate(objects):
        item = upsert_from_object(obj, f"{path}[{i}]", expected_kind=Kind.RESOURCE_SLICE).obj
        assert isinstance(item, ResourceSlice)
        slices.append(item)
    check_template_slices(slices, path)
    return tuple(slices)


def _template(obj: cc.ClusterObject, slices: Sequence[cc.ClusterObject], path: str, slices_path: str) -> NodeTemplate:
    return NodeTemplate(_node(obj, path), template_slices(slices, slices_path))


def scenario_from_message(message: sim.Scenario, path: str) -> Scenario:
    add_nodes: list[tuple[Node | NodeTemplate, int]] = []
    for i, group in enumerate(message.add_nodes):
        if group.count < 0:
            raise ValidationError(f"{path}.add_nodes[{i}].count", "must not be negative")
        where = f"{path}.add_nodes[{i}]"
        template = _template(group.template, group.resource_slices, f"{where}.template", f"{where}.resource_slices")
        add_nodes.append((template, group.count))
    taints = []
    for i, entry in enumerate(message.taint_nodes):
        where = f"{path}.taint_nodes[{i}].taint"
        if entry.taint.effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise ValidationError(f"{where}.effect", "must be NoSchedule, PreferNoSchedule or NoExecute")
        taints.append((entry.node_name, Taint(entry.taint.key, entry.taint.value, entry.taint.effect)))
    add_pods = []
    for i, ref in enumerate(message.add_pods):
        pod = pod_input(ref, f"{path}.add_pods[{i}]")
        if not isinstance(pod, Pod):
            raise ValidationError(f"{path}.add_pods[{i}]", "must be a pod given by value (pod or kubernetes_json)")
        if not pod.node_name:
            raise ValidationError(
                f"{path}.add_pods[{i}].spec.nodeName", "is required: the pod is bound in the scenario"
            )
        add_pods.append(pod)
    return Scenario(
        remove_nodes=list(message.remove_nodes),
        add_nodes=add_nodes,
        cordon_nodes=list(message.cordon_nodes),
        taint_nodes=taints,
        remove_pods=[(key.namespace, key.name) for key in message.remove_pods],
        add_pods=add_pods,
    )


def simulate_response(result: SimulationResult, epoch: str = "") -> sim.SimulateResponse:
    response = sim.SimulateResponse(base_generation=result.base_generation, server_epoch=epoch)
    for placement in result.placements:
        entry = response.placements.add(
            namespace=placement.pod.namespace,
            name=placement.pod.name,
            node_name=placement.node_name,
            message=placement.message,
        )
        if placement.decision is not None:
            add_verdicts(entry.rejections, placement.decision)
    for node in result.hypothetical_nodes:
        response.hypothetical_nodes.add(
            node_name=node.node_name, pods=node.pods, cpu=node.cpu, memory=node.memory, pods_fraction=node.pods_fraction
        )
    return response


def node_group(message: sim.NodeGroup, path: str) -> tuple[str, NodeTemplate, int]:
    """(id, template and its slices, how many nodes may be added: max_size - current_size)."""
    if not message.id:
        raise ValidationError(f"{path}.id", "is required")
    if message.max_size < 0 or message.current_size < 0:
        raise ValidationError(f"{path}.max_size", "sizes must not be negative")
    template = _template(
        message.template, message.template_resource_slices, f"{path}.template", f"{path}.template_resource_slices"
    )
    return message.id, template, message.max_size - message.current_size


def estimate_response(
    generation: int, estimates: Sequence[tuple[str, Estimate]], epoch: str = ""
) -> sim.EstimateScaleUpResponse:
    response = sim.EstimateScaleUpResponse(base_generation=generation, server_epoch=epoch)
    for group_id, result in estimates:
        response.estimates.add(
            node_group_id=group_id,
            node_count=result.node_count,
            scheduled=[p.key for p in result.scheduled],
            unscheduled=[p.key for p in result.unscheduled],
            group_order=result.group_order,
            scheduled_per_group=result.scheduled_per_group,
        )
    return response


def drain_options(message: sim.DrainOptions, path: str) -> DrainOptions:
    """cluster-autoscaler's flags; unset booleans take its defaults (true), an unset cutoff its -10."""
    if message.min_replica_count < 0:
        raise ValidationError(f"{path}.min_replica_count", "must not be negative")
    m = message
    return DrainOptions(
        skip_nodes_with_system_pods=m.skip_nodes_with_system_pods
        if m.HasField("skip_nodes_with_system_pods")
        else True,
        skip_nodes_with_local_storage=(
            m.skip_nodes_with_local_storage if m.HasField("skip_nodes_with_local_storage") else True
        ),
        skip_nodes_with_custom_controller_pods=(
            m.skip_nodes_with_custom_controller_pods if m.HasField("skip_nodes_with_custom_controller_pods") else True
        ),
        min_replica_count=m.min_replica_count,
        expendable_pods_priority_cutoff=(
            m.expendable_pods_priority_cutoff if m.HasField("expendable_pods_priority_cutoff") else -10
        ),
        skip_terminal_pods=m.skip_terminal_pods if m.HasField("skip_terminal_pods") else True,
    )


_DESTINATIONS = {
    sim.DRAIN_DESTINATIONS_UNSPECIFIED: Destinations.OTHER_NODES,
    sim.DRAIN_DESTINATIONS_OTHER_NODES: Destinations.OTHER_NODES,
    sim.DRAIN_DESTINATIONS_ALL_BUT_REMOVED: Destinations.ALL_BUT_REMOVED,
}


def drain_destinations(value: sim.DrainDestinations.ValueType, path: str) -> Destinations:
    """The SimulateDrainRequest.destinations rule; an unknown value is INVALID_ARGUMENT."""
    rule = _DESTINATIONS.get(value)
    if rule is None:
        raise ValidationError(path, f"unknown DrainDestinations value {value}")
    return rule


def _blocking_pod(blocking: BlockingPod) -> sim.BlockingPod:
    pod = blocking.pod
    return sim.BlockingPod(
        namespace=pod.namespace, name=pod.name, reason=blocking.reason.value, message=blocking.message
    )


def drain_response(result: RemovalSimulation, epoch: str = "") -> sim.SimulateDrainResponse:
    response = sim.SimulateDrainResponse(base_generation=result.base_generation, server_epoch=epoch)
    for removal in result.nodes:
        entry = response.nodes.add(
            node_name=removal.node_name,
            removable=removal.removable,
            unremovable_reason=removal.unremovable_reason,
            daemonset_pods=[p.key for p in removal.drain.daemonset_pods],
            unplaced_pod=removal.unplaced.key if removal.unplaced is not None else "",
        )
        if removal.drain.blocking is not None:
            entry.blocking_pod.CopyFrom(_blocking_pod(removal.drain.blocking))
        for pod in removal.drain.pods_to_move:
            entry.pods_to_move.add(
                namespace=pod.namespace, name=pod.name, node_name=removal.destinations.get(pod.key, "")
            )
        pdb = removal.drain.pdb
        if pdb is not None:
            entry.pdb.CopyFrom(sim.PdbCheck(can_remove=pdb.can_remove, in_parallel=pdb.in_parallel))
            if pdb.blocking is not None:
                entry.pdb.blocking_pod.CopyFrom(_blocking_pod(pdb.blocking))
    return response
