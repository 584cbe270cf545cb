"""Scheduling-relevant Kubernetes objects as frozen, slotted records.

Each record is built once from the object's Kubernetes JSON (a ``dict`` as decoded from JSON, or the
proto3 JSON mapping of the podfit.v1 messages, which is the same shape). Everything a plugin needs per
decision is derived here, at ingestion: a pod's effective requests, its host ports, its image names.
Resources are integers in the units kube-scheduler compares: cpu in millicores, everything else in
whole units (bytes for memory and storage, a count for pods and extended resources).
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Any

from podfit.k8s.limits import echo
from podfit.k8s.quantity import QuantityError, milli_value, parse_quantity, whole_value
from podfit.server.model.errors import ValidationError

Labels = Mapping[str, str]
Resources = Mapping[str, int]

DEFAULT_NAMESPACE = "default"
DEFAULT_SCHEDULER_NAME = "default-scheduler"
CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
# kube-scheduler's stand-ins for containers without cpu/memory requests, used only when scoring.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
_POD_LEVEL_RESOURCES = (CPU, MEMORY)


class Kind(enum.Enum):
    """The kinds the cache holds, by their Kubernetes ``kind``."""

    NODE = "Node"
    POD = "Pod"
    NAMESPACE = "Namespace"
    POD_DISRUPTION_BUDGET = "PodDisruptionBudget"
    SERVICE = "Service"
    REPLICA_SET = "ReplicaSet"
    STATEFUL_SET = "StatefulSet"
    REPLICATION_CONTROLLER = "ReplicationController"
    JOB = "Job"
    DAEMON_SET = "DaemonSet"
    STORAGE_CLASS = "StorageClass"
    PERSISTENT_VOLUME = "PersistentVolume"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    CSI_NODE = "CSINode"
    CSI_DRIVER = "CSIDriver"
    CSI_STORAGE_CAPACITY = "CSIStorageCapacity"
    VOLUME_ATTACHMENT = "VolumeAttachment"
    DEVICE_CLASS = "DeviceClass"
    RESOURCE_SLICE = "ResourceSlice"
    RESOURCE_CLAIM = "ResourceClaim"

    @property
    def namespaced(self) -> bool:
        return self not in _CLUSTER_SCOPED


_CLUSTER_SCOPED = frozenset(
    {
        Kind.NODE,
        Kind.NAMESPACE,
        Kind.STORAGE_CLASS,
        Kind.PERSISTENT_VOLUME,
        Kind.CSI_NODE,
        Kind.CSI_DRIVER,
        Kind.VOLUME_ATTACHMENT,
        Kind.DEVICE_CLASS,
        Kind.RESOURCE_SLICE,
    }
)
# The kinds the volume plugins read (podfit.server.model.storage).
STORAGE_KINDS = (
    Kind.STORAGE_CLASS,
    Kind.PERSISTENT_VOLUME,
    Kind.PERSISTENT_VOLUME_CLAIM,
    Kind.CSI_NODE,
    Kind.CSI_DRIVER,
    Kind.CSI_STORAGE_CAPACITY,
    Kind.VOLUME_ATTACHMENT,
)
# The kinds DynamicResources reads (podfit.server.model.dra).
DRA_KINDS = (Kind.DEVICE_CLASS, Kind.RESOURCE_SLICE, Kind.RESOURCE_CLAIM)


# --------------------------------------------------------------------------------------------------
# Selectors


@dataclass(frozen=True, slots=True)
class LabelSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Labels) -> bool:
        op = self.operator
        if op == "In":
            return self.key in labels and labels[self.key] in self.values
        if op == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector. An empty selector matches everything (absent ones are ``None``)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: Labels) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(req.matches(labels) for req in self.match_expressions)

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    weight: int
    preference: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    label_selector: LabelSelector | None
    topology_key: str
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """core/v1 Toleration.ToleratesTaint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: LabelSelector | None
    min_domains: int | None = None
    node_affinity_policy: str = ""
    node_taints_policy: str = ""
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ContainerPort:
    host_port: int
    container_port: int
    protocol: str = "TCP"
    host_ip: str = ""


@dataclass(frozen=True, slots=True)
class OwnerReference:
    api_version: str
    kind: str
    name: str
    uid: str = ""
    controller: bool = False


@dataclass(frozen=True, slots=True)
class Volume:
    """A pod volume, reduced to what the drain rules and the volume plugins ask of it."""

    name: str
    host_path: bool = False
    # emptyDir's medium ("" is node disk, "Memory" is tmpfs); None when the volume is not an emptyDir.
    empty_dir_medium: str | None = None
    # persistentVolumeClaim.claimName; "" when the volume is not a claim.
    claim_name: str = ""
    # A generic ephemeral volume (its claim is "<pod>-<volume>"); the template's class, "" for none.
    ephemeral: bool = False
    # In-tree sources, by identity: gcePersistentDisk.pdName, awsElasticBlockStore.volumeID,
    # iscsi.iqn, rbd (monitors, pool, image); read_only is the source's readOnly.
    gce_pd_name: str = ""
    aws_volume_id: str = ""
    iscsi_iqn: str = ""
    rbd: tuple[tuple[str, ...], str, str] | None = None
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """One spec.resourceClaims entry: a claim by name, or one made from a template."""

    name: str
    claim_name: str | None = None
    template_name: str | None = None


@dataclass(frozen=True, slots=True)
class ImageState:
    names: tuple[str, ...]
    size_bytes: int


# --------------------------------------------------------------------------------------------------
# Objects


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    uid: str = ""
    resource_version: str = ""
    labels: Labels = field(default_factory=dict)
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    allocatable: Resources = field(default_factory=dict)
    images: tuple[ImageState, ...] = ()
    # status.declaredFeatures: the node features the kubelet declares (NodeDeclaredFeatures).
    declared_features: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod with its scheduling directives and its precomputed resource footprint."""

    name: str
    namespace: str = DEFAULT_NAMESPACE
    uid: str = ""
    resource_version: str = ""
    labels: Labels = field(default_factory=dict)
    # Read by cluster-autoscaler's drain rules (safe-to-evict, mirror and daemonset-pod markers).
    annotations: Labels = field(default_factory=dict)
    owner_references: tuple[OwnerReference, ...] = ()
    # Seconds since the epoch; None unless the pod is being deleted.
    deletion_timestamp: float | None = None
    deletion_grace_period_seconds: int | None = None
    node_name: str = ""
    node_selector: Labels = field(default_factory=dict)
    # None when the pod has no required node affinity (an empty tuple would match nothing).
    required_node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    preferred_node_affinity: tuple[PreferredSchedulingTerm, ...] = ()
    required_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    required_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    scheduling_gates: tuple[str, ...] = ()
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    priority: int = 0
    # Whether spec.priority is set: cluster-autoscaler never counts a pod without one as expendable.
    has_priority: bool = False
    preemption_policy: str = "PreemptLowerPriority"
    phase: str = ""
    nominated_node_name: str = ""
    # status.conditions: the first DisruptionTarget condition is True with reason PreemptionByScheduler
    # (kube-scheduler's preemption is evicting the pod; DefaultPreemption's podTerminatingByPreemption).
    preempted_by_scheduler: bool = False
    # Seconds since the epoch; None when the pod has not started.
    start_time: float | None = None
    # One entry per container then per init container ("" when a container names no image).
    images: tuple[str, ...] = ()
    host_ports: tuple[ContainerPort, ...] = ()
    # Effective requests (containers, sidecars, init containers, overhead), as NodeResourcesFit sees them.
    requests: Resources = field(default_factory=dict)
    # cpu/memory with kube-scheduler's non-zero defaults for containers without requests (scoring only).
    non_zero_cpu: int = 0
    non_zero_memory: int = 0
    # Drain simulation only: cluster-autoscaler judges terminal pods by restart policy, long-terminating
    # ones by spec.terminationGracePeriodSeconds (None: unset), local storage by volumes.
    restart_policy: str = ""
    termination_grace_period_seconds: int | None = None
    volumes: tuple[Volume, ...] = ()
    # spec.resourceClaims, and status.resourceClaimStatuses as (entry name, claim name or None).
    resource_claims: tuple[PodResourceClaim, ...] = ()
    resource_claim_statuses: tuple[tuple[str, str | None], ...] = ()
    # The node features the spec needs (component-helpers' nodedeclaredfeatures inference).
    required_node_features: frozenset[str] = frozenset()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        """Succeeded and Failed pods hold no resources; kube-scheduler's cache never sees them."""
        return self.phase in ("Succeeded", "Failed")

    @property
    def controller_ref(self) -> OwnerReference | None:
        """metav1.GetControllerOf: the first owner reference flagged as the controller."""
        return next((ref for ref in self.owner_references if ref.controller), None)

    @property
    def has_affinity(self) -> bool:
        return bool(
            self.required_affinity
            or self.preferred_affinity
            or self.required_anti_affinity
            or self.preferred_anti_affinity
        )

    @property
    def has_required_anti_affinity(self) -> bool:
        return bool(self.required_anti_affinity)


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    labels: Labels = field(default_factory=dict)
    uid: str = ""
    resource_version: str = ""


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    name: str
    namespace: str = DEFAULT_NAMESPACE
    # None matches nothing; so does an empty selector (policy/v1 semantics in kube-scheduler).
    selector: LabelSelector | None = None
    disruptions_allowed: int = 0
    # status.disruptedPods: names of the pods whose eviction the API server has already admitted (and
    # charged to the budget); preemption does not charge them again.
    disrupted_pods: frozenset[str] = frozenset()
    min_available: str | None = None
    max_unavailable: str | None = None
    uid: str = ""
    resource_version: str = ""


@dataclass(frozen=True, slots=True)
class WorkloadSelector:
    """A Service or a pod controller (ReplicaSet, StatefulSet, ReplicationController, Job, DaemonSet):
    its pod selector, for the cluster-default topology spread constraints, and what cluster-autoscaler's
    drain rules look up by kind, namespace and name."""

    kind: Kind
    name: str
    namespace: str = DEFAULT_NAMESPACE
    # None when the object has no selector.
    selector: LabelSelector | None = None
    uid: str = ""
    resource_version: str = ""
    # spec.replicas of a ReplicaSet, StatefulSet or ReplicationController; None when unset (the drain
    # rules then skip their minimum-replicas check) and for the other kinds.
    replicas: int | None = None


# The kinds that own pods, as ownerReferences name them.
CONTROLLER_KINDS = (Kind.REPLICA_SET, Kind.STATEFUL_SET, Kind.REPLICATION_CONTROLLER, Kind.JOB, Kind.DAEMON_SET)
_REPLICATED = (Kind.REPLICA_SET, Kind.STATEFUL_SET, Kind.REPLICATION_CONTROLLER)


# Storage and DRA objects (podfit.server.model.storage and .dra, which build on this module) are cluster
# objects too.


# --------------------------------------------------------------------------------------------------
# Conversion from Kubernetes JSON


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(path, f"must be an object, not {type(value).__name__}")
    return value


def _sequence(value: Any, path: str) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise ValidationError(path, f"must be a list, not {type(value).__name__}")
    return value


def _string(value: Any, path: str, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise ValidationError(path, f"must be a string, not {type(value).__name__}")
    return value


def _integer(value: Any, path: str, default: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, bool):
        raise ValidationError(path, "must be an integer, not a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ValidationError(path, f"must be an integer, not {echo(value)}")


def _boolean(value: Any, path: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ValidationError(path, f"must be a boolean, not {type(value).__name__}")
    return value


def _optional_integer(value: Any, path: str) -> int | None:
    return None if value is None else _integer(value, path)


def _string_map(value: Any, path: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for key, item in _mapping(value, path).items():
        result[str(key)] = _string(item, f"{path}.{key}")
    return result


def _strings(value: Any, path: str) -> tuple[str, ...]:
    return tuple(_string(item, f"{path}[{i}]") for i, item in enumerate(_sequence(value, path)))


def _time(value: Any, path: str) -> float | None:
    if value is None or value == "":
        return None
    text = _string(value, path)
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError as exc:
        raise ValidationError(path, f"must be an RFC 3339 time: {echo(text)}") from exc


def _quantities(value: Any, path: str) -> dict[str, Fraction]:
    result: dict[str, Fraction] = {}
    for name, text in _mapping(value, path).items():
        try:
            amount = parse_quantity(text)
        except QuantityError as exc:
            raise ValidationError(f"{path}.{name}", str(exc)) from exc
        if amount < 0:
            raise ValidationError(f"{path}.{name}", f"must be greater than or equal to 0, not {echo(text)}")
        if canonical_amount(str(name), amount) >= 2**63:
            # Kubernetes' int64 scale: larger amounts cannot be compared the way kube-scheduler does.
            raise ValidationError(f"{path}.{name}", f"{echo(text)} is too large (at most 2^63-1 in scheduler units)")
        result[str(name)] = amount
    return result


def parse_go_int(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64), as label selectors' Gt/Lt use it; None when it would fail."""
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def canonical_amount(resource: str, value: Fraction) -> int:
    """The integer kube-scheduler compares for a resource: millicores for cpu, units otherwise."""
    return milli_value(value) if resource == CPU else whole_value(value)


def parse_label_selector(value: Any, path: str) -> LabelSelector | None:
    if value is None:
        return None
    data = _mapping(value, path)
    labels = _string_map(data.get("matchLabels"), f"{path}.matchLabels")
    expressions = []
    for i, item in enumerate(_sequence(data.get("matchExpressions"), f"{path}.matchExpressions")):
        where = f"{path}.matchExpressions[{i}]"
        req = _mapping(item, where)
        operator = _string(req.get("operator"), f"{where}.operator")
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValidationError(f"{where}.operator", f"{echo(operator)} is not a valid label selector operator")
        expressions.append(
            LabelSelectorRequirement(
                key=_string(req.get("key"), f"{where}.key"),
                operator=operator,
                values=_strings(req.get("values"), f"{where}.values"),
            )
        )
    return LabelSelector(match_labels=tuple(sorted(labels.items())), match_expressions=tuple(expressions))


def _node_selector_requirements(value: Any, path: str) -> tuple[NodeSelectorRequirement, ...]:
    result = []
    for i, item in enumerate(_sequence(value, path)):
        req = _mapping(item, f"{path}[{i}]")
        operator = _string(req.get("operator"), f"{path}[{i}].operator")
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
            raise ValidationError(f"{path}[{i}].operator", f"{echo(operator)} is not a valid node selector operator")
        result.append(
            NodeSelectorRequirement(
                key=_string(req.get("key"), f"{path}[{i}].key"),
                operator=operator,
                values=_strings(req.get("values"), f"{path}[{i}].values"),
            )
        )
    return tuple(result)


def _node_selector_term(value: Any, path: str) -> NodeSelectorTerm:
    data = _mapping(value, path)
    return NodeSelectorTerm(
        match_expressions=_node_selector_requirements(data.get("matchExpressions"), f"{path}.matchExpressions"),
        match_fields=_node_selector_requirements(data.get("matchFields"), f"{path}.matchFields"),
    )


def node_selector(value: Any, path: str) -> tuple[NodeSelectorTerm, ...] | None:
    """A core/v1 NodeSelector (at ``path``) as its ORed terms; None when absent."""
    if value is None:
        return None
    where = f"{path}.nodeSelectorTerms"
    return tuple(
        _node_selector_term(term, f"{where}[{i}]")
        for i, term in enumerate(_sequence(_mapping(value, path).get("nodeSelectorTerms"), where))
    )


def _pod_affinity_term(value: Any, path: str) -> PodAffinityTerm:
    data = _mapping(value, path)
    return PodAffinityTerm(
        label_selector=parse_label_selector(data.get("labelSelector"), f"{path}.labelSelector"),
        topology_key=_string(data.get("topologyKey"), f"{path}.topologyKey"),
        namespaces=_strings(data.get("namespaces"), f"{path}.namespaces"),
        namespace_selector=parse_label_selector(data.get("namespaceSelector"), f"{path}.namespaceSelector"),
        match_label_keys=_strings(data.get("matchLabelKeys"), f"{path}.matchLabelKeys"),
        mismatch_label_keys=_strings(data.get("mismatchLabelKeys"), f"{path}.mismatchLabelKeys"),
    )


def _weighted_terms(value: Any, path: str) -> tuple[WeightedPodAffinityTerm, ...]:
    result = []
    for i, item in enumerate(_sequence(value, path)):
        data = _mapping(item, f"{path}[{i}]")
        result.append(
            WeightedPodAffinityTerm(
                weight=_integer(data.get("weight"), f"{path}[{i}].weight"),
                term=_pod_affinity_term(data.get("podAffinityTerm"), f"{path}[{i}].podAffinityTerm"),
            )
        )
    return tuple(result)


def resource_version(value: Any, path: str) -> str:
    """metadata.resourceVersion: opaque, but what the API server writes is ASCII; other text (Unicode
    digits such as "²" among it) is refused rather than compared."""
    text = _string(value, path)
    if not text.isascii():
        raise ValidationError(path, f"must be ASCII text (a version the API server wrote), not {echo(text)}")
    return text


def _meta(data: Mapping[str, Any], path: str) -> Mapping[str, Any]:
    meta = _mapping(data.get("metadata"), f"{path}.metadata")
    if not _string(meta.get("name"), f"{path}.metadata.name"):
        raise ValidationError(f"{path}.metadata.name", "is required")
    return meta


def _add(total: dict[str, Fraction], extra: Mapping[str, Fraction]) -> None:
    for name, amount in extra.items():
        total[name] = total.get(name, Fraction(0)) + amount


def _maximise(total: dict[str, Fraction], other: Mapping[str, Fraction]) -> None:
    for name, amount in other.items():
        if name not in total or amount > total[name]:
            total[name] = amount


def effective_requests(
    containers: Sequence[Mapping[str, Fraction]],
    init_containers: Sequence[tuple[Mapping[str, Fraction], bool]],
    overhead: Mapping[str, Fraction],
    pod_level: Mapping[str, Fraction],
    non_missing: Mapping[str, Fraction] | None = None,
) -> dict[str, Fraction]:
    """component-helpers' PodRequests: max(app containers + sidecars, each init container with the
    sidecars started before it), pod-level cpu/memory when set, plus overhead. ``non_missing`` fills
    in requests that a container does not state (kube-scheduler's scoring defaults)."""

    def with_defaults(requests: Mapping[str, Fraction]) -> Mapping[str, Fraction]:
        if not non_missing:
            return requests
        filled = dict(requests)
        for name, amount in non_missing.items():
            filled.setdefault(name, amount)
        return filled

    total: dict[str, Fraction] = {}
    for requests in containers:
        _add(total, with_defaults(requests))
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for requests, sidecar in init_containers:
        filled = with_defaults(requests)
        if sidecar:
            _add(total, filled)
            _add(sidecars, filled)
            _maximise(init_peak, sidecars)
        else:
            running = dict(filled)
            _add(running, sidecars)
            _maximise(init_peak, running)
    _maximise(total, init_peak)
    for name in _POD_LEVEL_RESOURCES:
        if name in pod_level:
            total[name] = pod_level[name]
    _add(total, overhead)
    return total


def pod_from_k8s(data: Mapping[str, Any], path: str = "pod", spec_key: bytes = b"") -> Pod:
    """Builds a Pod from its Kubernetes JSON; raises ValidationError naming the offending field.

    ``spec_key``: the spec's bytes as received, when the caller has them: replicas send the same spec, so
    its fields are derived once (``SPEC_FIELDS``)."""
    data = _mapping(data, path)
    meta = _meta(data, path)
    spec = _mapping(data.get("spec"), f"{path}.spec")
    status = _mapping(data.get("status"), f"{path}.status")
    node_name = _string(spec.get("nodeName"), f"{path}.spec.nodeName")
    sp = f"{path}.spec"
    fields = SPEC_FIELDS.fields(spec_key, lambda: pod_spec_fields(spec, sp)) if spec_key else pod_spec_fields(spec, sp)
    return pod_from_parts(meta, fields, node_name, status, path)


class SpecFieldsMemo:
    """A pod spec's bytes (in whatever form it arrived) -> the Pod fields derived from it. Replicas of a
    workload share their spec, so converting them derives one spec's fields instead of thousands; the
    fields are immutable, so every replica's Pod shares them."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._fields: OrderedDict[bytes, dict[str, Any]] = OrderedDict()

    def fields(self, key: bytes, derive: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        found = self._fields.get(key)
        if found is not None:
            self._fields.move_to_end(key)
            return found
        fields = derive()  # raises ValidationError before anything is remembered
        self._fields[key] = fields
        if len(self._fields) > self._size:
            self._fields.popitem(last=False)
        return fields


# Specs received as JSON (the extender's Pod), by their bytes.
SPEC_FIELDS = SpecFieldsMemo()


def pod_from_parts(
    meta: Mapping[str, Any], spec_fields: Mapping[str, Any], node_name: str, status: Mapping[str, Any], path: str
) -> Pod:
    """A Pod from its metadata and status JSON and the fields ``pod_spec_fields`` derived from its spec.

    Replicas share their spec except for ``nodeName``, so callers may reuse one spec's fields."""
    return Pod(
        name=_string(meta.get("name"), f"{path}.metadata.name"),
        namespace=_string(meta.get("namespace"), f"{path}.metadata.namespace") or DEFAULT_NAMESPACE,
        uid=_string(meta.get("uid"), f"{path}.metadata.uid"),
        resource_version=resource_version(meta.get("resourceVersion"), f"{path}.metadata.resourceVersion"),
        labels=_string_map(meta.get("labels"), f"{path}.metadata.labels"),
        annotations=_string_map(meta.get("annotations"), f"{path}.metadata.annotations"),
        owner_references=_owner_references(meta.get("ownerReferences"), f"{path}.metadata.ownerReferences"),
        deletion_timestamp=_time(meta.get("deletionTimestamp"), f"{path}.metadata.deletionTimestamp"),
        deletion_grace_period_seconds=_optional_integer(
            meta.get("deletionGracePeriodSeconds"), f"{path}.metadata.deletionGracePeriodSeconds"
        ),
        node_name=node_name,
        phase=_string(status.get("phase"), f"{path}.status.phase"),
        nominated_node_name=_string(status.get("nominatedNodeName"), f"{path}.status.nominatedNodeName"),
        preempted_by_scheduler=preempted_by_scheduler(
            _conditions(status.get("conditions"), f"{path}.status.conditions")
        ),
        start_time=_time(status.get("startTime"), f"{path}.status.startTime"),
        resource_claim_statuses=resource_claim_statuses(
            _sequence(status.get("resourceClaimStatuses"), f"{path}.status.resourceClaimStatuses"),
            f"{path}.status.resourceClaimStatuses",
        ),
        **spec_fields,
    )


def resource_claim_statuses(value: Sequence[Any], path: str) -> tuple[tuple[str, str | None], ...]:
    """status.resourceClaimStatuses as (entry name, claim name or None: no claim needed)."""
    result = []
    for i, item in enumerate(value):
        entry = _mapping(item, f"{path}[{i}]")
        claim = entry.get("resourceClaimName")
        result.append(
            (
                _string(entry.get("name"), f"{path}[{i}].name"),
                None if claim is None else _string(claim, f"{path}[{i}].resourceClaimName"),
            )
        )
    return tuple(result)


def _resource_claims(value: Any, path: str) -> tuple[PodResourceClaim, ...]:
    claims = []
    names = set()
    for i, item in enumerate(_sequence(value, path)):
        where = f"{path}[{i}]"
        entry = _mapping(item, where)
        name = _string(entry.get("name"), f"{where}.name")
        if not name:
            raise ValidationError(f"{where}.name", "is required")
        if name in names:
            raise ValidationError(f"{where}.name", f"Duplicate value: {echo(name)}")
        names.add(name)
        claim = entry.get("resourceClaimName")
        template = entry.get("resourceClaimTemplateName")
        if (claim is None) == (template is None):
            raise ValidationError(where, "must set exactly one of resourceClaimName and resourceClaimTemplateName")
        claims.append(
            PodResourceClaim(
                name=name,
                claim_name=None if claim is None else _string(claim, f"{where}.resourceClaimName"),
                template_name=None if template is None else _string(template, f"{where}.resourceClaimTemplateName"),
            )
        )
    return tuple(claims)


def preempted_by_scheduler(conditions: Iterable[tuple[str, str, str]]) -> bool:
    """podTerminatingByPreemption's condition test over (type, status, reason): the first DisruptionTarget
    condition decides. Both converters (Kubernetes JSON, typed messages) call it."""
    for kind, status, reason in conditions:
        if kind == "DisruptionTarget":
            return status == "True" and reason == "PreemptionByScheduler"
    return False


def _conditions(value: Any, path: str) -> list[tuple[str, str, str]]:
    """status.conditions as (type, status, reason), validated."""
    conditions = []
    for i, item in enumerate(_sequence(value, path)):
        condition = _mapping(item, f"{path}[{i}]")
        conditions.append(
            (
                _string(condition.get("type"), f"{path}[{i}].type"),
                _string(condition.get("status"), f"{path}[{i}].status"),
                _string(condition.get("reason"), f"{path}[{i}].reason"),
            )
        )
    return conditions


def _disrupted_pods(value: Any, path: str) -> frozenset[str]:
    """status.disruptedPods: pod name -> the time its eviction was admitted (validated, not kept)."""
    names = []
    for name, when in _mapping(value, path).items():
        _time(when, f"{path}.{name}")
        names.append(str(name))
    return frozenset(names)


def pod_spec_fields(spec: Mapping[str, Any], sp: str) -> dict[str, Any]:
    """Every Pod field that follows from ``spec`` alone (all but nodeName), validated."""

    container_requests: list[dict[str, Fraction]] = []
    images: list[str] = []
    host_ports: list[ContainerPort] = []
    for i, item in enumerate(_sequence(spec.get("containers"), f"{sp}.containers")):
        where = f"{sp}.containers[{i}]"
        container = _mapping(item, where)
        resources = _mapping(container.get("resources"), f"{where}.resources")
        container_requests.append(_quantities(resources.get("requests"), f"{where}.resources.requests"))
        _quantities(resources.get("limits"), f"{where}.resources.limits")
        images.append(_string(container.get("image"), f"{where}.image"))
        host_ports.extend(_host_ports(container.get("ports"), f"{where}.ports"))
    init_requests: list[tuple[dict[str, Fraction], bool]] = []
    for i, item in enumerate(_sequence(spec.get("initContainers"), f"{sp}.initContainers")):
        where = f"{sp}.initContainers[{i}]"
        container = _mapping(item, where)
        resources = _mapping(container.get("resources"), f"{where}.resources")
        sidecar = _string(container.get("restartPolicy"), f"{where}.restartPolicy") == "Always"
        init_requests.append((_quantities(resources.get("requests"), f"{where}.resources.requests"), sidecar))
        _quantities(resources.get("limits"), f"{where}.resources.limits")
        images.append(_string(container.get("image"), f"{where}.image"))
        # Only sidecars run beside the app containers, so only their host ports stay in use
        # (schedutil.GetHostPorts); other init containers' ports are still validated.
        ports = _host_ports(container.get("ports"), f"{where}.ports")
        if sidecar:
            host_ports.extend(ports)
    overhead = _quantities(spec.get("overhead"), f"{sp}.overhead")
    pod_resources = _mapping(spec.get("resources"), f"{sp}.resources")
    pod_level = _quantities(pod_resources.get("requests"), f"{sp}.resources.requests")
    pod_level = {k: v for k, v in pod_level.items() if k in _POD_LEVEL_RESOURCES or k.startswith("hugepages-")}

    exact = effective_requests(container_requests, init_requests, overhead, pod_level)
    requests = {name: canonical_amount(name, amount) for name, amount in exact.items()}
    defaults: dict[str, Fraction] = {}
    if not pod_level:
        defaults = {CPU: Fraction(DEFAULT_MILLI_CPU_REQUEST, 1000), MEMORY: Fraction(DEFAULT_MEMORY_REQUEST)}
    else:
        if CPU not in exact:
            defaults[CPU] = Fraction(DEFAULT_MILLI_CPU_REQUEST, 1000)
        if MEMORY not in exact:
            defaults[MEMORY] = Fraction(DEFAULT_MEMORY_REQUEST)
    non_zero = (
        effective_requests(container_requests, init_requests, overhead, pod_level, defaults) if defaults else exact
    )

    affinity = _mapping(spec.get("affinity"), f"{sp}.affinity")
    ap = f"{sp}.affinity"
    node_affinity = _mapping(affinity.get("nodeAffinity"), f"{ap}.nodeAffinity")
    required_node_affinity = node_selector(
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"),
        f"{ap}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
    )
    pref_path = f"{ap}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    preferred_node_affinity = tuple(
        PreferredSchedulingTerm(
            weight=_integer(_mapping(item, f"{pref_path}[{i}]").get("weight"), f"{pref_path}[{i}].weight"),
            preference=_node_selector_term(item.get("preference"), f"{pref_path}[{i}].preference"),
        )
        for i, item in enumerate(
            _sequence(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), pref_path)
        )
    )
    pod_affinity = _mapping(affinity.get("podAffinity"), f"{ap}.podAffinity")
    anti_affinity = _mapping(affinity.get("podAntiAffinity"), f"{ap}.podAntiAffinity")

    def required_terms(section: Mapping[str, Any], where: str) -> tuple[PodAffinityTerm, ...]:
        where = f"{where}.requiredDuringSchedulingIgnoredDuringExecution"
        raw = section.get("requiredDuringSchedulingIgnoredDuringExecution")
        return tuple(_pod_affinity_term(term, f"{where}[{i}]") for i, term in enumerate(_sequence(raw, where)))

    tolerations = []
    for i, item in enumerate(_sequence(spec.get("tolerations"), f"{sp}.tolerations")):
        where = f"{sp}.tolerations[{i}]"
        tol = _mapping(item, where)
        seconds = tol.get("tolerationSeconds")
        tolerations.append(
            Toleration(
                key=_string(tol.get("key"), f"{where}.key"),
                operator=_string(tol.get("operator"), f"{where}.operator"),
                value=_string(tol.get("value"), f"{where}.value"),
                effect=_string(tol.get("effect"), f"{where}.effect"),
                toleration_seconds=None if seconds is None else _integer(seconds, f"{where}.tolerationSeconds"),
            )
        )

    constraints = []
    for i, item in enumerate(_sequence(spec.get("topologySpreadConstraints"), f"{sp}.topologySpreadConstraints")):
        where = f"{sp}.topologySpreadConstraints[{i}]"
        tsc = _mapping(item, where)
        max_skew = _integer(tsc.get("maxSkew"), f"{where}.maxSkew")
        if max_skew < 1:
            raise ValidationError(f"{where}.maxSkew", "must be greater than zero")
        when = _string(tsc.get("whenUnsatisfiable"), f"{where}.whenUnsatisfiable")
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            raise ValidationError(f"{where}.whenUnsatisfiable", f"{echo(when)} must be DoNotSchedule or ScheduleAnyway")
        min_domains = tsc.get("minDomains")
        constraints.append(
            TopologySpreadConstraint(
                max_skew=max_skew,
                topology_key=_string(tsc.get("topologyKey"), f"{where}.topologyKey"),
                when_unsatisfiable=when,
                label_selector=parse_label_selector(tsc.get("labelSelector"), f"{where}.labelSelector"),
                min_domains=None if min_domains is None else _integer(min_domains, f"{where}.minDomains"),
                node_affinity_policy=_string(tsc.get("nodeAffinityPolicy"), f"{where}.nodeAffinityPolicy"),
                node_taints_policy=_string(tsc.get("nodeTaintsPolicy"), f"{where}.nodeTaintsPolicy"),
                match_label_keys=_strings(tsc.get("matchLabelKeys"), f"{where}.matchLabelKeys"),
            )
        )

    gates = tuple(
        _string(_mapping(gate, f"{sp}.schedulingGates[{i}]").get("name"), f"{sp}.schedulingGates[{i}].name")
        for i, gate in enumerate(_sequence(spec.get("schedulingGates"), f"{sp}.schedulingGates"))
    )
    return {
        "node_selector": _string_map(spec.get("nodeSelector"), f"{sp}.nodeSelector"),
        "required_node_affinity": required_node_affinity,
        "preferred_node_affinity": preferred_node_affinity,
        "required_affinity": required_terms(pod_affinity, f"{ap}.podAffinity"),
        "preferred_affinity": _weighted_terms(
            pod_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"),
            f"{ap}.podAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        ),
        "required_anti_affinity": required_terms(anti_affinity, f"{ap}.podAntiAffinity"),
        "preferred_anti_affinity": _weighted_terms(
            anti_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"),
            f"{ap}.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        ),
        "tolerations": tuple(tolerations),
        "topology_spread_constraints": tuple(constraints),
        "scheduling_gates": gates,
        "scheduler_name": _string(spec.get("schedulerName"), f"{sp}.schedulerName") or DEFAULT_SCHEDULER_NAME,
        "priority": _integer(spec.get("priority"), f"{sp}.priority"),
        "has_priority": spec.get("priority") is not None,
        "preemption_policy": _string(spec.get("preemptionPolicy"), f"{sp}.preemptionPolicy") or "PreemptLowerPriority",
        "images": tuple(images),
        "host_ports": tuple(host_ports),
        "requests": requests,
        "non_zero_cpu": milli_value(non_zero.get(CPU, Fraction(0))),
        "non_zero_memory": whole_value(non_zero.get(MEMORY, Fraction(0))),
        "restart_policy": _string(spec.get("restartPolicy"), f"{sp}.restartPolicy"),
        "termination_grace_period_seconds": _optional_integer(
            spec.get("terminationGracePeriodSeconds"), f"{sp}.terminationGracePeriodSeconds"
        ),
        "volumes": _volumes(spec.get("volumes"), f"{sp}.volumes"),
        "resource_claims": _resource_claims(spec.get("resourceClaims"), f"{sp}.resourceClaims"),
        "required_node_features": _required_node_features(spec, sp),
    }


# Node-declared features a pod spec needs, as component-helpers' nodedeclaredfeatures infers them for
# scheduling (the features whose InferForScheduling can be true).
USER_NAMESPACES_HOST_NETWORK = "UserNamespacesHostNetworkSupport"
RESTART_ALL_CONTAINERS = "RestartAllContainersOnContainerExits"
VOLUME_BIND_MOUNT_OPTIONS = "VolumeBindMountOptions"


def _required_node_features(spec: Mapping[str, Any], sp: str) -> frozenset[str]:
    features = set()
    host_users = spec.get("hostUsers")
    if host_users is not None and not _boolean(host_users, f"{sp}.hostUsers") and spec.get("hostNetwork") is True:
        features.add(USER_NAMESPACES_HOST_NETWORK)
    groups = (("containers", True), ("initContainers", True), ("ephemeralContainers", False))
    for key, restart_rules in groups:
        for i, item in enumerate(_sequence(spec.get(key), f"{sp}.{key}")):
            where = f"{sp}.{key}[{i}]"
            container = _mapping(item, where)
            if restart_rules:
                for j, rule in enumerate(_sequence(container.get("restartPolicyRules"), f"{where}.restartPolicyRules")):
                    action = _mapping(rule, f"{where}.restartPolicyRules[{j}]").get("action")
                    if action == "RestartAllContainers":
                        features.add(RESTART_ALL_CONTAINERS)
            for j, mount in enumerate(_sequence(container.get("volumeMounts"), f"{where}.volumeMounts")):
                options = _mapping(mount, f"{where}.volumeMounts[{j}]").get("bindMountOptions")
                if _sequence(options, f"{where}.volumeMounts[{j}].bindMountOptions"):
                    features.add(VOLUME_BIND_MOUNT_OPTIONS)
    return frozenset(features)


def _volumes(value: Any, path: str) -> tuple[Volume, ...]:
    volumes = []
    for i, item in enumerate(_sequence(value, path)):
        where = f"{path}[{i}]"
        volume = _mapping(item, where)
        name = _string(volume.get("name"), f"{where}.name")
        if not name:
            raise ValidationError(f"{where}.name", "is required")
        host_path = volume.get("hostPath")
        if host_path is not None:
            _string(_mapping(host_path, f"{where}.hostPath").get("path"), f"{where}.hostPath.path")
        empty_dir = volume.get("emptyDir")
        medium = None
        if empty_dir is not None:
            medium = _string(_mapping(empty_dir, f"{where}.emptyDir").get("medium"), f"{where}.emptyDir.medium")
        claim = _mapping(volume.get("persistentVolumeClaim"), f"{where}.persistentVolumeClaim")
        gce = _mapping(volume.get("gcePersistentDisk"), f"{where}.gcePersistentDisk")
        aws = _mapping(volume.get("awsElasticBlockStore"), f"{where}.awsElasticBlockStore")
        iscsi = _mapping(volume.get("iscsi"), f"{where}.iscsi")
        rbd = _mapping(volume.get("rbd"), f"{where}.rbd")
        source = claim or gce or aws or iscsi or rbd
        volumes.append(
            Volume(
                name=name,
                host_path=host_path is not None,
                empty_dir_medium=medium,
                claim_name=_string(claim.get("claimName"), f"{where}.persistentVolumeClaim.claimName"),
                ephemeral=volume.get("ephemeral") is not None,
                gce_pd_name=_string(gce.get("pdName"), f"{where}.gcePersistentDisk.pdName"),
                aws_volume_id=_string(aws.get("volumeID"), f"{where}.awsElasticBlockStore.volumeID"),
                iscsi_iqn=_string(iscsi.get("iqn"), f"{where}.iscsi.iqn"),
                rbd=(
                    (
                        _strings(rbd.get("monitors"), f"{where}.rbd.monitors"),
                        _string(rbd.get("pool"), f"{where}.rbd.pool", "rbd"),
                        _string(rbd.get("image"), f"{where}.rbd.image"),
                    )
                    if rbd
                    else None
                ),
                read_only=_boolean(source.get("readOnly"), f"{where}.readOnly") if source else False,
            )
        )
    return tuple(volumes)


def _host_ports(value: Any, path: str) -> list[ContainerPort]:
    ports = []
    for i, item in enumerate(_sequence(value, path)):
        port = _mapping(item, f"{path}[{i}]")
        host_port = _integer(port.get("hostPort"), f"{path}[{i}].hostPort")
        if host_port < 0 or host_port > 65535:
            raise ValidationError(f"{path}[{i}].hostPort", "must be between 0 and 65535")
        if host_port <= 0:
            continue
        ports.append(
            ContainerPort(
                host_port=host_port,
                container_port=_integer(port.get("containerPort"), f"{path}[{i}].containerPort"),
                protocol=_string(port.get("protocol"), f"{path}[{i}].protocol") or "TCP",
                host_ip=_string(port.get("hostIP"), f"{path}[{i}].hostIP"),
            )
        )
    return ports


def _owner_references(value: Any, path: str) -> tuple[OwnerReference, ...]:
    owners = []
    for i, item in enumerate(_sequence(value, path)):
        ref = _mapping(item, f"{path}[{i}]")
        owners.append(
            OwnerReference(
                api_version=_string(ref.get("apiVersion"), f"{path}[{i}].apiVersion"),
                kind=_string(ref.get("kind"), f"{path}[{i}].kind"),
                name=_string(ref.get("name"), f"{path}[{i}].name"),
                uid=_string(ref.get("uid"), f"{path}[{i}].uid"),
                controller=_boolean(ref.get("controller"), f"{path}[{i}].controller"),
            )
        )
    return tuple(owners)


def node_from_k8s(data: Mapping[str, Any], path: str = "node") -> Node:
    data = _mapping(data, path)
    meta = _meta(data, path)
    spec = _mapping(data.get("spec"), f"{path}.spec")
    status = _mapping(data.get("status"), f"{path}.status")
    taints = []
    for i, item in enumerate(_sequence(spec.get("taints"), f"{path}.spec.taints")):
        where = f"{path}.spec.taints[{i}]"
        taint = _mapping(item, where)
        effect = _string(taint.get("effect"), f"{where}.effect")
        if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise ValidationError(
                f"{where}.effect", f"{echo(effect)} must be NoSchedule, PreferNoSchedule or NoExecute"
            )
        taints.append(
            Taint(_string(taint.get("key"), f"{where}.key"), _string(taint.get("value"), f"{where}.value"), effect)
        )
    allocatable = {
        name: canonical_amount(name, amount)
        for name, amount in _quantities(status.get("allocatable"), f"{path}.status.allocatable").items()
    }
    _quantities(status.get("capacity"), f"{path}.status.capacity")
    images = []
    for i, item in enumerate(_sequence(status.get("images"), f"{path}.status.images")):
        image = _mapping(item, f"{path}.status.images[{i}]")
        images.append(
            ImageState(
                names=_strings(image.get("names"), f"{path}.status.images[{i}].names"),
                size_bytes=_integer(image.get("sizeBytes"), f"{path}.status.images[{i}].sizeBytes"),
            )
        )
    return Node(
        name=_string(meta.get("name"), f"{path}.metadata.name"),
        uid=_string(meta.get("uid"), f"{path}.metadata.uid"),
        resource_version=resource_version(meta.get("resourceVersion"), f"{path}.metadata.resourceVersion"),
        labels=_string_map(meta.get("labels"), f"{path}.metadata.labels"),
        unschedulable=bool(spec.get("unschedulable")),
        taints=tuple(taints),
        allocatable=allocatable,
        images=tuple(images),
        declared_features=frozenset(_strings(status.get("declaredFeatures"), f"{path}.status.declaredFeatures")),
    )


def namespace_from_k8s(data: Mapping[str, Any], path: str = "namespace") -> Namespace:
    data = _mapping(data, path)
    meta = _meta(data, path)
    return Namespace(
        name=_string(meta.get("name"), f"{path}.metadata.name"),
        labels=_string_map(meta.get("labels"), f"{path}.metadata.labels"),
        uid=_string(meta.get("uid"), f"{path}.metadata.uid"),
        resource_version=resource_version(meta.get("resourceVersion"), f"{path}.metadata.resourceVersion"),
    )


def _int_or_string(value: Any, path: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValidationError(path, "must be an integer or a percentage string")
    if isinstance(value, int):
        return str(value)
    text = _string(value, path)
    digits = text[:-1] if text.endswith("%") else text
    if not digits.isdigit():
        raise ValidationError(path, f"must be an integer or a percentage, not {echo(text)}")
    return text


def pdb_from_k8s(data: Mapping[str, Any], path: str = "podDisruptionBudget") -> PodDisruptionBudget:
    data = _mapping(data, path)
    meta = _meta(data, path)
    spec = _mapping(data.get("spec"), f"{path}.spec")
    status = _mapping(data.get("status"), f"{path}.status")
    return PodDisruptionBudget(
        name=_string(meta.get("name"), f"{path}.metadata.name"),
        namespace=_string(meta.get("namespace"), f"{path}.metadata.namespace") or DEFAULT_NAMESPACE,
        selector=parse_label_selector(spec.get("selector"), f"{path}.spec.selector"),
        disruptions_allowed=_integer(status.get("disruptionsAllowed"), f"{path}.status.disruptionsAllowed"),
        disrupted_pods=_disrupted_pods(status.get("disruptedPods"), f"{path}.status.disruptedPods"),
        min_available=_int_or_string(spec.get("minAvailable"), f"{path}.spec.minAvailable"),
        max_unavailable=_int_or_string(spec.get("maxUnavailable"), f"{path}.spec.maxUnavailable"),
        uid=_string(meta.get("uid"), f"{path}.metadata.uid"),
        resource_version=resource_version(meta.get("resourceVersion"), f"{path}.metadata.resourceVersion"),
    )


def workload_from_k8s(kind: Kind, data: Mapping[str, Any], path: str) -> WorkloadSelector:
    data = _mapping(data, path)
    meta = _meta(data, path)
    spec = _mapping(data.get("spec"), f"{path}.spec")
    selector: LabelSelector | None
    if kind in (Kind.SERVICE, Kind.REPLICATION_CONTROLLER):
        labels = _string_map(spec.get("selector"), f"{path}.spec.selector")
        selector = LabelSelector(match_labels=tuple(sorted(labels.items()))) if labels else None
    else:
        selector = parse_label_selector(spec.get("selector"), f"{path}.spec.selector")
    replicas = None
    if kind in _REPLICATED:
        replicas = _optional_integer(spec.get("replicas"), f"{path}.spec.replicas")
        if replicas is not None and replicas < 0:
            raise ValidationError(f"{path}.spec.replicas", "must be greater than or equal to 0")
    return WorkloadSelector(
        kind=kind,
        name=_string(meta.get("name"), f"{path}.metadata.name"),
        namespace=_string(meta.get("namespace"), f"{path}.metadata.namespace") or DEFAULT_NAMESPACE,
        selector=selector,
        uid=_string(meta.get("uid"), f"{path}.metadata.uid"),
        resource_version=resource_version(meta.get("resourceVersion"), f"{path}.metadata.resourceVersion"),
        replicas=replicas,
    )
