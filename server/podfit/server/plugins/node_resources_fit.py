"""NodeResourcesFit: the pod's requests must fit in the node's free allocatable; nodes are scored by a
resource-allocation strategy (LeastAllocated, MostAllocated or RequestedToCapacityRatio).

The resource-allocation scorer here is shared with NodeResourcesBalancedAllocation, as upstream's
``noderesources`` package shares it.

Filter and Score are written once, over NodeTable rows. Scoring's int64 arithmetic is exact for
amounts in [0, 2**53) (products by 100 must not overflow); rows meeting larger amounts (which the API
server would hardly accept) are scored by the same code over Python-int object arrays, which never overflow.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import MAX_NODE_SCORE, Int32Array, Int64Array, IntpArray, PreFilterResult
from podfit.server.framework.profile import NODE_RESOURCES_FIT
from podfit.server.framework.status import Code, Status
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import Pod
from podfit.server.model.dra import DEVICE_CLASS_RESOURCE_PREFIX, DeviceClass, Unmodelled, UnmodelledError
from podfit.server.model.objects import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from podfit.server.plugins.helper import go_div

if TYPE_CHECKING:
    from podfit.server.cache.node_table import BoolArray, NodeTable
    from podfit.server.cache.snapshot import Snapshot

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
_STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
# Shape scores are 0..10 in the configuration and scaled to node scores.
MAX_CUSTOM_PRIORITY_SCORE = 10
_MAX_UTILIZATION = 100

REASON_TOO_MANY_PODS = "Too many pods"
_ARGS = "NodeResourcesFitArgs"

# -- resource names (core/v1 helper) ---------------------------------------------------------------

_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def is_qualified_name(value: str) -> bool:
    """apimachinery's IsQualifiedName: an optional DNS subdomain prefix, '/', and a name of at most 63 characters."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            return False
    else:
        return False
    return 0 < len(name) <= 63 and _QUALIFIED_NAME.fullmatch(name) is not None


def _is_prefixed_native(name: str) -> bool:
    return "kubernetes.io/" in name


@functools.lru_cache(maxsize=1024)
def is_extended_resource(name: str) -> bool:
    """A resource outside the kubernetes.io namespace with a valid quota name (IsExtendedResourceName)."""
    if "/" not in name or _is_prefixed_native(name) or name.startswith("requests."):
        return False
    return is_qualified_name("requests." + name)


@functools.lru_cache(maxsize=1024)
def is_scalar_resource(name: str) -> bool:
    """Resources the scheduler tracks besides cpu, memory, ephemeral-storage and pods (IsScalarResourceName)."""
    return (
        is_extended_resource(name)
        or name.startswith("hugepages-")
        or _is_prefixed_native(name)
        or name.startswith("attachable-volumes-")
    )


# -- the shared resource-allocation scorer ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    name: str
    weight: int


DEFAULT_RESOURCES = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))

# Bound on amounts for the vectorised paths: below it int64 sums and products by 100 stay exact.
EXACT_LIMIT = 1 << 53


class ResourceRows(NamedTuple):
    """One configured resource over the rows, for a row scorer: amounts are in [0, EXACT_LIMIT), and a
    row whose allocatable is 0 skips the resource, as ``ResourceAllocationScorer.score`` does."""

    position: int  # in the configured resources
    allocatable: Int64Array
    requested: Int64Array  # including the pod's request
    allocated: Int64Array  # without it (the pods already on the node)
    # Facts from one min/max that save scorers whole passes: allocatable > 0 on every row, and the
    # allocatable when every row has the same (nodes of one shape), else None.
    counts_everywhere: bool
    uniform: int | None


# The same scorer over many nodes: (resources, number of rows) -> node scores.
RowScorer = Callable[[Sequence[ResourceRows], int], Int64Array]


def in_exact_range(values: Int64Array) -> bool:
    """All values in [0, EXACT_LIMIT): one unsigned max catches negatives (they wrap) and huge amounts."""
    return not len(values) or int(values.view(np.uint64).max()) < EXACT_LIMIT


class ResourceAllocationScorer:
    """Scores a node from (requested, allocatable) pairs of the configured resources.

    ``use_requested`` selects the pods' real requests; otherwise cpu and memory use the "non-zero"
    requests, where a container without a request counts as 100m / 200Mi.
    """

    __slots__ = ("resources", "row_scorer", "use_requested")

    def __init__(self, resources: Sequence[ResourceSpec], use_requested: bool, row_scorer: RowScorer) -> None:
        self.resources = tuple(resources)
        self.use_requested = use_requested
        self.row_scorer = row_scorer

    def pod_requests(self, pod: Pod) -> tuple[int, ...]:
        result = []
        for spec in self.resources:
            if not self.use_requested and spec.name == CPU:
                result.append(pod.non_zero_cpu)
            elif not self.use_requested and spec.name == MEMORY:
                result.append(pod.non_zero_memory)
            else:
                result.append(pod.requests.get(spec.name, 0))
        return tuple(result)

    def score_rows(self, table: NodeTable, rows: IntpArray, pod_requests: Sequence[int]) -> Int64Array:
        """Scores of the rows: per configured resource (allocatable, requested + the pod's request), where
        scalar resources count only when the pod requests them and a row with allocatable 0 skips one."""
        if not len(rows):
            return np.zeros(0, dtype=np.int64)
        columns: list[tuple[int, Int64Array, Int64Array, int]] = []
        exact = True
        # Every amount the table ever held is in range, with room for the pod's largest request: no row
        # needs checking (the common case; the checks cost more than the scoring on a row or two).
        bounded = (
            table.smallest_amount >= 0
            and min(pod_requests, default=0) >= 0
            and table.largest_amount + max(pod_requests, default=0) < EXACT_LIMIT
        )
        for i, spec in enumerate(self.resources):
            name, pod_request = spec.name, pod_requests[i]
            column = table.resources.get(name)
            counted = name in (CPU, MEMORY, EPHEMERAL_STORAGE) or (pod_request != 0 and is_scalar_resource(name))
            if column is None or not counted:
                # Without a column no node has it (allocatable 0); uncounted kinds score (0, 0) per node.
                continue
            allocatable = table.allocatable[:, column][rows]
            used: Int64Array
            if name in (CPU, MEMORY) and not self.use_requested:
                used = (table.non_zero_cpu if name == CPU else table.non_zero_memory)[rows]
            else:
                used = table.requested[:, column][rows]
            if not bounded:
                exact = exact and 0 <= pod_request < EXACT_LIMIT
                exact = exact and in_exact_range(allocatable) and in_exact_range(used)
            columns.append((i, allocatable, used, pod_request))
        inputs: list[ResourceRows] = []
        for i, allocatable, used, pod_request in columns:
            if not exact:
                # Python ints: the same operations, without int64's bounds.
                allocatable, used = allocatable.astype(object), used.astype(object)
            low, high = int(allocatable.min()), int(allocatable.max())
            if not high:
                continue
            total = used + pod_request
            if exact and not bounded and not in_exact_range(total):
                total = used.astype(object) + pod_request
            inputs.append(ResourceRows(i, allocatable, total, used, low > 0, low if low == high else None))
        return self.row_scorer(inputs, len(rows))


def _weighted_average_rows(
    resources: Sequence[ResourceSpec], per_resource: Callable[[ResourceRows], Int64Array]
) -> RowScorer:
    """``_weighted_average`` over rows; amounts are non-negative, so floor division is Go's truncation."""

    def score(inputs: Sequence[ResourceRows], n: int) -> Int64Array:
        node_score = np.zeros(n, dtype=np.int64)
        weight_sum = np.zeros(n, dtype=np.int64)
        every_row = 0
        partly = False
        for resource in inputs:
            weight = resources[resource.position].weight
            # At most 100 whatever the amounts, so int64 from here on.
            resource_score = per_resource(resource).astype(np.int64)
            if resource.counts_everywhere:
                every_row += weight
            else:
                partly = True
                counts = resource.allocatable > 0
                resource_score *= counts
                weight_sum += counts * weight
            node_score += resource_score * weight if weight != 1 else resource_score
        if not partly:
            # The common case: every resource counts on every node, so one scalar divisor.
            return node_score // every_row if every_row > 1 else node_score
        weight_sum += every_row
        return node_score // np.maximum(weight_sum, 1)

    return score


def divide_rows(numerator: Int64Array, resource: ResourceRows) -> Int64Array:
    """numerator // allocatable, reading an allocatable of 0 as 1 (such rows skip the resource anyway).

    Dividing by one scalar is several times faster than element-wise division.
    """
    if resource.uniform is not None:
        return numerator // max(resource.uniform, 1)
    return numerator // np.maximum(resource.allocatable, 1)


def _least_requested_rows(resource: ResourceRows) -> Int64Array:
    # A request over capacity scores 0: clamping the free room at 0 gives that.
    free = np.maximum(resource.allocatable - resource.requested, 0)
    return divide_rows(free * MAX_NODE_SCORE, resource)


def _most_requested_rows(resource: ResourceRows) -> Int64Array:
    return divide_rows(np.minimum(resource.requested, resource.allocatable) * MAX_NODE_SCORE, resource)


def broken_linear(shape: Sequence[tuple[int, int]]) -> Callable[[int], int]:
    """Piecewise-linear interpolation over (utilization, score) points, flat outside them."""

    def value(p: int) -> int:
        for i, (utilization, score) in enumerate(shape):
            if p <= utilization:
                if i == 0:
                    return score
                prev_u, prev_s = shape[i - 1]
                return prev_s + go_div((score - prev_s) * (p - prev_u), utilization - prev_u)
        return shape[-1][1]

    return value


def _requested_to_capacity_ratio_rows(resources: Sequence[ResourceSpec], shape: Sequence[tuple[int, int]]) -> RowScorer:
    """``_requested_to_capacity_ratio`` over rows, with the shape tabulated at utilisations 0..100.

    Utilisation is requested * 100 // capacity, at most 100 while the request fits, and over
    capacity the shape's value at 100 applies, so clipping at 100 covers both.
    """
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    raw = broken_linear([(u, s * scale) for u, s in shape])
    table = np.array([raw(p) for p in range(_MAX_UTILIZATION + 1)], dtype=np.int64)

    def score(inputs: Sequence[ResourceRows], n: int) -> Int64Array:
        node_score = np.zeros(n, dtype=np.int64)
        weight_sum = np.zeros(n, dtype=np.int64)
        for resource in inputs:
            weight = resources[resource.position].weight
            utilization = np.minimum(
                divide_rows(resource.requested * _MAX_UTILIZATION, resource), _MAX_UTILIZATION
            ).astype(np.int64)
            resource_score = table[utilization]
            counts = resource_score > 0
            if not resource.counts_everywhere:
                counts &= resource.allocatable > 0
            node_score += resource_score * counts * weight
            weight_sum += counts * weight
        # Go's math.Round of a non-negative quotient; rows without a counting resource have 0 / 1.
        quotient = node_score.astype(np.float64) / np.maximum(weight_sum, 1).astype(np.float64)
        whole = np.trunc(quotient)
        return (whole + (quotient - whole >= 0.5)).astype(np.int64)

    return score


def refuse_dra_extended_resources(pod: Pod, classes: Mapping[str, DeviceClass]) -> None:
    """With DRAExtendedResource on (v1.37), an extended resource a DeviceClass backs (its
    ``extendedResourceName``, or ``deviceclass.resource.kubernetes.io/<class>``) may be satisfied by
    devices instead of node allocatable: NodeResourcesFit and DynamicResources both change. podfit does
    not model that, so a decision about a pod requesting one is refused (UnmodelledError), naming it."""
    names = sorted(
        name
        for name, amount in pod.requests.items()
        if amount and (is_extended_resource(name) or name.startswith(DEVICE_CLASS_RESOURCE_PREFIX))
    )
    if not names:
        return
    backed = {c.extended_resource_name: c for c in classes.values() if c.extended_resource_name}
    for name in names:
        found = backed.get(name)
        if found is None and name.startswith(DEVICE_CLASS_RESOURCE_PREFIX):
            found = classes.get(name.removeprefix(DEVICE_CLASS_RESOURCE_PREFIX))
        if found is not None:
            raise UnmodelledError(
                f"pod({pod.key})",
                Unmodelled(f"requests.{name}", "DRA extended resources (DRAExtendedResource)"),
                f"DeviceClass {found.name} backs the extended resource {name} the pod requests",
            )


# -- the plugin ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _PodResource:
    """The requests Filter compares: scalar resources in a fixed order (upstream iterates a map)."""

    milli_cpu: int
    memory: int
    ephemeral_storage: int
    scalars: tuple[tuple[str, int], ...]

    @property
    def empty(self) -> bool:
        return not (self.milli_cpu or self.memory or self.ephemeral_storage or self.scalars)

    def clone(self) -> _PodResource:
        return self


def pod_resource(pod: Pod) -> _PodResource:
    requests = pod.requests
    return _PodResource(
        milli_cpu=requests.get(CPU, 0),
        memory=requests.get(MEMORY, 0),
        ephemeral_storage=requests.get(EPHEMERAL_STORAGE, 0),
        scalars=tuple(sorted((name, amount) for name, amount in requests.items() if is_scalar_resource(name))),
    )


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    pod_requests: tuple[int, ...]

    def clone(self) -> _PreScoreState:
        return self


# filter_rows packs each node's verdict in an int: bit 0 = unresolvable, bit 1 = too many pods, bit
# 2 + j = the pod's j-th checked resource is insufficient. Up to this many bits a lookup table finds
# the distinct verdicts; beyond, np.unique sorts.
_LOOKUP_BITS = 12
_MAX_FILTER_BITS = 63


def distinct_verdicts(keys: Int64Array, bits: int) -> tuple[Int32Array, Int64Array]:
    """(1-based code per key, the distinct keys in code order) for keys in [1, 2**bits)."""
    if bits <= _LOOKUP_BITS:
        seen = np.zeros(1 << bits, dtype=bool)
        seen[keys] = True
        distinct = np.flatnonzero(seen)
        lookup = np.zeros(1 << bits, dtype=np.int32)
        lookup[distinct] = np.arange(1, len(distinct) + 1, dtype=np.int32)
        return lookup[keys], distinct.astype(np.int64)
    distinct, inverse = np.unique(keys, return_inverse=True)
    return (inverse + 1).astype(np.int32), distinct


class NodeResourcesFit:
    # Filter and Score of a row read only that row: results survive until the row's generation moves.
    row_local = True
    name = NODE_RESOURCES_FIT
    _pre_filter_key = "PreFilter" + NODE_RESOURCES_FIT
    _pre_score_key = "PreScore" + NODE_RESOURCES_FIT

    def __init__(
        self,
        scorer: ResourceAllocationScorer,
        ignored_resources: frozenset[str] = frozenset(),
        ignored_resource_groups: frozenset[str] = frozenset(),
        dra_extended_resource: bool = False,
    ) -> None:
        self.scorer = scorer
        self.ignored_resources = ignored_resources
        self.ignored_resource_groups = ignored_resource_groups
        self.dra_extended_resource = dra_extended_resource

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        if self.dra_extended_resource:
            refuse_dra_extended_resources(pod, snapshot.dra.classes)
        # Never skips: even a pod requesting nothing must respect the node's pod count.
        state.write(self._pre_filter_key, pod_resource(pod))
        return None, None

    def _ignored(self, name: str) -> bool:
        if not is_extended_resource(name):
            return False
        if name in self.ignored_resources:
            return True
        return bool(self.ignored_resource_groups) and name.split("/")[0] in self.ignored_resource_groups

    def _checks(self, request: _PodResource) -> list[tuple[str, int]]:
        """The (resource, amount) pairs Filter compares besides the pod count, in its reason order."""
        if request.empty:
            return []
        checks = [
            (name, amount)
            for name, amount in (
                (CPU, request.milli_cpu),
                (MEMORY, request.memory),
                (EPHEMERAL_STORAGE, request.ephemeral_storage),
            )
            if amount > 0
        ]
        checks.extend((name, amount) for name, amount in request.scalars if amount != 0 and not self._ignored(name))
        return checks

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        """``filter`` over rows: a fail mask per check, then, for the failing rows only, a bitmask of their
        reasons, and one Status per distinct bitmask."""
        request = state.get(self._pre_filter_key)
        if not isinstance(request, _PodResource):
            request = pod_resource(pod)
        checks = self._checks(request)
        n = len(rows)
        bits = len(checks) + 2
        if not n:
            return np.zeros(0, dtype=np.int32), []
        # Beyond 63 bits (pods checking dozens of extended resources) the bitmasks are Python ints.
        key_type: type = np.int64 if bits <= _MAX_FILTER_BITS else object
        allocatable, requested = table.allocatable, table.requested
        fails: list[BoolArray] = [table.pod_count[rows] + 1 > allocatable[:, table.resources[PODS]][rows]]
        capacities: list[Int64Array | None] = []
        # Resources no node has fail (and exceed the allocatable of) every node: one bitmask for all rows.
        everywhere = 0
        for bit, (name, amount) in enumerate(checks, start=2):
            column = table.resources.get(name)
            if column is None:
                capacities.append(None)
                fails.append(np.zeros(n, dtype=bool))
                if amount > 0:
                    everywhere |= (1 << bit) | 1
                continue
            capacity = allocatable[:, column][rows]
            # Amounts are non-negative int64 (refused otherwise at conversion): capacity - used cannot overflow.
            used = requested[:, column][rows]
            capacities.append(capacity)
            fails.append(amount > capacity - used)
        codes = np.zeros(n, dtype=np.int32)
        if everywhere:
            failing = np.arange(n)
        else:
            any_fail = fails[0].copy()
            for fail in fails[1:]:
                any_fail |= fail
            failing = np.flatnonzero(any_fail)
            if not len(failing):
                return codes, []
        every_row = len(failing) == n
        keys: Int64Array = np.full(len(failing), everywhere, dtype=key_type)
        for bit, fail in enumerate(fails, start=1):
            keys |= (fail if every_row else fail[failing]).astype(key_type) << bit
        # Unresolvable (bit 0): some failed request exceeds the node's whole allocatable.
        for bit, whole in enumerate(capacities, start=2):
            if whole is not None:
                amount = checks[bit - 2][1]
                keys |= (keys >> bit) & (amount > (whole if every_row else whole[failing]))
        codes[failing], distinct = distinct_verdicts(keys, bits)
        reasons = [REASON_TOO_MANY_PODS, *(f"Insufficient {name}" for name, _ in checks)]
        statuses = []
        for key in distinct.tolist():
            code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if key & 1 else Code.UNSCHEDULABLE
            statuses.append(Status(code, tuple(r for b, r in enumerate(reasons, start=1) if key >> b & 1)))
        return codes, statuses

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: IntpArray) -> Status | None:
        state.write(self._pre_score_key, _PreScoreState(self.scorer.pod_requests(pod)))
        return None

    def _pod_requests(self, state: CycleState, pod: Pod) -> tuple[int, ...]:
        pre = state.get(self._pre_score_key)
        return pre.pod_requests if isinstance(pre, _PreScoreState) else self.scorer.pod_requests(pod)

    def score_rows(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray) -> Int64Array:
        return self.scorer.score_rows(table, rows, self._pod_requests(state, pod))


# -- arguments -------------------------------------------------------------------------------------


def check_fields(data: Mapping[str, Any], path: str, known: Sequence[str]) -> None:
    """Strict decoding, as kube-scheduler's configuration loader does (apiVersion/kind are allowed)."""
    for key in data:
        if key not in known and key not in ("apiVersion", "kind"):
            raise ValueError(f'{path}: unknown field "{key}"')


def as_mapping(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{path}: must be an object")
    return value


def as_list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise ValueError(f"{path}: must be a list")
    return list(value)


def as_int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{path}: must be an integer, not {value!r}")
    return value


def parse_resources(value: Any, path: str) -> list[ResourceSpec]:
    """ResourceSpecs with upstream's defaulting: a missing or zero weight means 1."""
    specs = []
    for i, item in enumerate(as_list(value, path)):
        where = f"{path}[{i}]"
        data = as_mapping(item, where)
        check_fields(data, where, ("name", "weight"))
        name = data.get("name", "")
        if not isinstance(name, str):
            raise ValueError(f"{where}.name: must be a string")
        weight = as_int(data.get("weight", 0), f"{where}.weight")
        specs.append(ResourceSpec(name, weight or 1))
    return specs


def _parse_shape(value: Any, path: str) -> list[tuple[int, int]]:
    points = []
    for i, item in enumerate(as_list(value, path)):
        data = as_mapping(item, f"{path}[{i}]")
        check_fields(data, f"{path}[{i}]", ("utilization", "score"))
        points.append(
            (
                as_int(data.get("utilization", 0), f"{path}[{i}].utilization"),
                as_int(data.get("score", 0), f"{path}[{i}].score"),
            )
        )
    if not points:
        raise ValueError(f"{path}: Required value: at least one point must be specified")
    for i in range(1, len(points)):
        if points[i - 1][0] >= points[i][0]:
            raise ValueError(
                f"{path}[{i}].utilization: Invalid value: {points[i][0]}: values must be sorted in increasing order"
            )
    for i, (utilization, score) in enumerate(points):
        if not 0 <= utilization <= _MAX_UTILIZATION:
            raise ValueError(f"{path}[{i}].utilization: Invalid value: {utilization}: not in valid range [0, 100]")
        if not 0 <= score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise ValueError(f"{path}[{i}].score: Invalid value: {score}: not in valid range [0, 10]")
    return points


def _parse_names(value: Any, path: str, groups: bool) -> frozenset[str]:
    names = []
    for i, item in enumerate(as_list(value, path)):
        if not isinstance(item, str):
            raise ValueError(f"{path}[{i}]: must be a string")
        if groups and "/" in item:
            raise ValueError(f"{path}[{i}]: Invalid value: {item!r}: resource group name can't contain '/'")
        if not is_qualified_name(item):
            raise ValueError(f"{path}[{i}]: Invalid value: {item!r}: must be a qualified name")
        names.append(item)
    return frozenset(names)


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> NodeResourcesFit:
    check_fields(args, _ARGS, ("ignoredResources", "ignoredResourceGroups", "scoringStrategy"))
    ignored = _parse_names(args.get("ignoredResources"), f"{_ARGS}.ignoredResources", groups=False)
    groups = _parse_names(args.get("ignoredResourceGroups"), f"{_ARGS}.ignoredResourceGroups", groups=True)
    path = f"{_ARGS}.scoringStrategy"
    strategy = args.get("scoringStrategy")
    if strategy is None:
        kind, resources, shape = LEAST_ALLOCATED, list(DEFAULT_RESOURCES), None
    else:
        data = as_mapping(strategy, path)
        check_fields(data, path, ("type", "resources", "requestedToCapacityRatio"))
        kind = data.get("type", "")
        if kind not in _STRATEGIES:
            raise ValueError(f'{path}.type: Unsupported value: "{kind}": supported values: {", ".join(_STRATEGIES)}')
        resources = parse_resources(data.get("resources"), f"{path}.resources") or list(DEFAULT_RESOURCES)
        for i, spec in enumerate(resources):
            if not 0 < spec.weight <= 100:
                raise ValueError(
                    f"{path}.resources[{i}].weight: Invalid value: {spec.weight}: "
                    f"resource weight of {spec.name} not in valid range (0, 100]"
                )
        shape = None
        ratio = data.get("requestedToCapacityRatio")
        if ratio is not None:
            ratio_path = f"{path}.requestedToCapacityRatio"
            ratio_data = as_mapping(ratio, ratio_path)
            check_fields(ratio_data, ratio_path, ("shape",))
            shape = _parse_shape(ratio_data.get("shape"), f"{ratio_path}.shape")
    row_scorer: RowScorer
    if kind == LEAST_ALLOCATED:
        row_scorer = _weighted_average_rows(resources, _least_requested_rows)
    elif kind == MOST_ALLOCATED:
        row_scorer = _weighted_average_rows(resources, _most_requested_rows)
    else:
        if shape is None:
            raise ValueError(f"{path}.requestedToCapacityRatio.shape: Required value: needed by {kind}")
        row_scorer = _requested_to_capacity_ratio_rows(resources, shape)
    return NodeResourcesFit(
        ResourceAllocationScorer(resources, use_requested=False, row_scorer=row_scorer),
        ignored,
        groups,
        features.enable_dra_extended_resource,
    )
