"""The structured-parameters allocator, as kube-scheduler's DynamicResources runs it per node
(k8s.io/dynamic-resource-allocation, structured/internal/incubating: the implementation both supported
versions pick with their default gates).

For one node, the pools whose slices reach the node are gathered (newest generation only; a pool missing
some of its slices is incomplete, one with a duplicate device name invalid) and the pod's pending claims
are satisfied depth-first: claims in order, requests in order, each device slot from the first candidate
(pools by driver and name, slices by name, devices in order), a prioritized list's alternatives in order,
backtracking until the first complete answer. Devices other claims hold are in use unless their
allocation was for admin access; an admin-access request may take devices in use.

Upstream walked pools in Go map order until v1.37 sorted them; podfit uses the sorted order for both
versions, which is the only deterministic choice (and v1.35.4's answer whenever one pool can serve).

Device taints (DRADeviceTaints, when the gate is on): a device with a NoSchedule or NoExecute taint the
request does not tolerate is skipped, checked where upstream checks it (after "in use", before the
constraints).

Unmodelled features (partitionable devices, consumable capacity, binding conditions) are gathered like
any other (a per-device-node-selection slice reaches every node), and the search refuses with
``UnmodelledError`` (a ValidationError naming the field) when it reaches them: a pool whose reach or
place in the order depends on them (per-device node selection; binding conditions, which upstream
sorts last) before looking at any of its devices, and a device that uses them (counters it consumes,
capacity sharing, binding conditions) before checking whether it is in use. Up to that point podfit's
search is upstream's (pools in the same order, every device looked at modelled), so the first answer
found without reaching one is upstream's; a search that would have to look further is refused instead
of answered without the feature.

Outcomes: a list of device results per claim; None when the node cannot serve the claims;
``InvalidPools`` when it cannot and an invalid pool was seen; ``AllocationError`` (a framework error that
aborts the scheduling attempt) for what upstream reports as errors — CEL runtime errors, an "All" request
meeting a pool being updated, claims over the device limit.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from podfit.server.model import Node, NodeSelectorRequirement, NodeSelectorTerm
from podfit.server.model.cel import CelError, CompileError, compile_selector, device_value
from podfit.server.model.dra import (
    ALL,
    AllocatedDevice,
    Device,
    DeviceClass,
    DeviceSubRequest,
    ResourceClaim,
    ResourceSlice,
    UnmodelledError,
)
from podfit.server.model.node_selectors import terms_match

if TYPE_CHECKING:
    from podfit.server.cache.snapshot import DraView

# AllocationResultsMaxSize: devices per claim.
MAX_DEVICES_PER_CLAIM = 32
NO_SUCH_KEY_HINT = (
    ". consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
    "for optional fields"
)

DeviceID = tuple[str, str, str]


class AllocationError(Exception):
    """Upstream's allocator error: the scheduling attempt fails with it."""


class InvalidPools(Exception):
    """Nothing could be allocated and some pool was invalid (ErrFailedAllocationOnNode)."""


@dataclass(frozen=True)
class AllocatorBehaviour:
    """What differs between the versions' allocators for the inputs podfit models."""

    # v1.37: CEL runtime errors name the device and hint at optional chaining for a missing key.
    cel_errors_name_device: bool = False
    # v1.37: the device limit is checked per request ("adding n devices exceeds ..."), not per claim.
    claim_limit_per_request: bool = False
    # DRADeviceTaints: untolerated NoSchedule/NoExecute taints keep a device from a request.
    device_taints: bool = False


@dataclass(frozen=True)
class ClaimAllocation:
    """One claim's allocation on a node: its devices, and the nodes it restricts pods to (None: any)."""

    devices: tuple[AllocatedDevice, ...]
    node_selector: tuple[NodeSelectorTerm, ...] | None


def allocation_node_selector(node: Node, slices: Sequence[ResourceSlice]) -> tuple[NodeSelectorTerm, ...] | None:
    """The allocation's node selector from the slices of its devices, in result order: a node-local slice
    pins it to the node by name; single-term slice selectors are merged into one term; allNodes adds
    nothing."""
    fields: list[NodeSelectorRequirement] = []
    expressions: list[NodeSelectorRequirement] = []
    for item in slices:
        if item.node_name is not None:
            return (NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", (node.name,)),)),)
        if item.node_selector is not None and len(item.node_selector) == 1:
            term = item.node_selector[0]
            for source, target in ((term.match_fields, fields), (term.match_expressions, expressions)):
                for requirement in source:
                    if not any(_same_requirement(requirement, seen) for seen in target):
                        target.append(requirement)
    if not fields and not expressions:
        return None
    return (NodeSelectorTerm(match_expressions=tuple(expressions), match_fields=tuple(fields)),)


def _same_requirement(a: NodeSelectorRequirement, b: NodeSelectorRequirement) -> bool:
    return a.key == b.key and a.operator == b.operator and set(a.values) == set(b.values)


@dataclass
class _Pool:
    driver: str
    name: str
    slices: list[ResourceSlice]
    incomplete: bool = False
    invalid: bool = False
    # The first of its slices that uses a feature podfit does not model: the search refuses to go there.
    unmodelled: ResourceSlice | None = None
    # The last set of its devices in use seen and which of its devices it marks, by position: the set
    # of a pool no claim changed is the same object from one decision to the next.
    used: tuple[AbstractSet[str] | None, tuple[bool, ...]] = (None, ())

    def in_use(self, names: AbstractSet[str]) -> tuple[bool, ...]:
        seen, marks = self.used
        if seen is not names:
            marks = tuple(d.name in names for item in self.slices for d in item.devices)
            self.used = (names, marks)
        return marks

    def refuse(self) -> None:
        """Raises UnmodelledError when the pool uses a feature podfit does not model."""
        if self.unmodelled is not None and self.unmodelled.unmodelled is not None:
            raise UnmodelledError(
                f"resourceSlice({self.unmodelled.name})",
                self.unmodelled.unmodelled,
                f"allocating the pod's claims would reach pool {self.driver}/{self.name}",
            )


@dataclass
class _Request:
    claim: int
    sub: DeviceSubRequest
    device_class: DeviceClass
    # Whether this is an alternative of a prioritized list.
    alternative: bool
    num_devices: int = 0
    all_devices: list[tuple[_Pool, ResourceSlice, Device]] = field(default_factory=list)

    @property
    def own_name(self) -> str:
        return self.sub.name.rpartition("/")[2]


class _MatchAttribute:
    """A matchAttribute constraint over the devices of the requests it names (all when none)."""

    __slots__ = ("attribute", "count", "requests", "value")

    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute
        self.value: tuple[str, Any] | None = None
        self.count = 0

    def applies(self, request: str) -> bool:
        base = request.partition("/")[0]
        return not self.requests or base in self.requests or request in self.requests

    def add(self, request: str, driver: str, device: Device) -> bool:
        if not self.applies(request):
            return True
        value = _lookup_attribute(device, driver, self.attribute)
        if value is None:
            return False
        if self.count == 0:
            self.value = value
        elif value != self.value:
            return False
        self.count += 1
        return True

    def remove(self, request: str) -> None:
        if self.applies(request):
            self.count -= 1


def _lookup_attribute(device: Device, driver: str, qualified: str) -> tuple[str, Any] | None:
    found = device.attributes.get(qualified)
    if found is not None:
        return found
    domain, _, name = qualified.partition("/")
    return device.attributes.get(name) if domain == driver else None


class Selectors:
    """Selector answers per device content (driver, name, attributes, capacity) and expression: a node's
    eight identical GPUs and the cluster's thousands of identical nodes cost one evaluation each, and
    claims coming and going (every scheduled pod's) cost none. Devices are immutable, so a device's content
    key is computed once while it lives."""

    # Distinct (content, expression) answers kept before the memo starts over.
    LIMIT = 200_000

    def __init__(self) -> None:
        self._keys: weakref.WeakKeyDictionary[Device, tuple[Any, ...]] = weakref.WeakKeyDictionary()
        self._answers: dict[tuple[tuple[Any, ...], str], bool | str] = {}

    def content(self, driver: str, device: Device) -> tuple[Any, ...]:
        key = self._keys.get(device)
        if key is None:
            key = self._keys[device] = (
                driver,
                device.name,
                tuple(sorted(device.attributes.items())),
                tuple(sorted(device.capacity.items())),
                device.taints,
                device.unmodelled is not None,
            )
        return key

    def matches(self, expression: str, driver: str, device: Device) -> bool:
        """True/False, or raises CelError (runtime) / CompileError."""
        key = (self.content(driver, device), expression)
        answer = self._answers.get(key)
        if answer is None:
            try:
                answer = compile_selector(expression).matches(device_value(driver, device))
            except CelError as exc:
                answer = str(exc)
            if len(self._answers) >= self.LIMIT:
                self._answers.clear()
            self._answers[key] = answer
        if isinstance(answer, str):
            raise CelError(answer)
        return answer


# One memo for the process: answers depend on nothing but the device and the expression.
SELECTORS = Selectors()


class SliceIndex:
    """The slices grouped for per-node pool gathering, and each node's pools once gathered (they change
    only with the slices, which is when a new index is made, or an extended one: ``extended``)."""

    def __init__(self, slices: Sequence[ResourceSlice], selectors: Selectors) -> None:
        self.slices = slices
        self.selectors = selectors
        self._by_node: dict[str, list[ResourceSlice]] = {}
        self._shared: list[ResourceSlice] = []
        # (driver, pool) -> generation -> number of slices, over every slice of the cluster.
        self._generations: dict[tuple[str, str], dict[int, int]] = {}
        for item in slices:
            if item.node_name is not None:
                self._by_node.setdefault(item.node_name, []).append(item)
            else:
                self._shared.append(item)
            counts = self._generations.setdefault((item.driver, item.pool), {})
            counts[item.generation] = counts.get(item.generation, 0) + 1
        self._selected = any(item.node_selector is not None for item in self._shared)
        # Node (name, and labels when some slice selects nodes by label) -> its pools and their form.
        self._nodes: dict[Any, tuple[list[_Pool], int]] = {}
        # Pool forms (see ``pools``), numbered; shared with the indexes extended from this one, so that a
        # form has one number whichever index found it.
        self._forms: dict[tuple[Any, ...], int] = {}

    def extended(self, added: Sequence[ResourceSlice]) -> SliceIndex:
        """This index with ``added`` node-local slices (a what-if's copies of a template node's), made in
        time proportional to the slices added: the nodes they do not reach keep their pools from this
        index. When an added slice joins a pool the cluster already has (its pool and driver are taken),
        the pools of other nodes could change too, and the index is built again over every slice."""
        if not added:
            return self
        return _Extended(self, (), {}).extended(added)

    def pools(self, node: Node) -> tuple[list[_Pool], int]:
        """The node's pools, in allocation order, and the number of their form: what an allocation on them
        depends on besides the devices in use, without the pools' names."""
        key: Any = (node.name, tuple(sorted(node.labels.items()))) if self._selected else node.name
        found = self._nodes.get(key)
        if found is None:
            found = self._nodes[key] = self._form(self._gather(node))
        return found

    def _form(self, pools: list[_Pool]) -> tuple[list[_Pool], int]:
        content = self.selectors.content
        form = tuple(
            (
                pool.driver,
                pool.incomplete,
                pool.invalid,
                pool.unmodelled is not None,
                tuple(content(pool.driver, device) for item in pool.slices for device in item.devices),
            )
            for pool in pools
        )
        return pools, self._forms.setdefault(form, len(self._forms))

    def _gather(self, node: Node) -> list[_Pool]:
        return _gather(node, [*self._by_node.get(node.name, ()), *self._shared], self._generations.__getitem__)


class _Extended(SliceIndex):
    """A cluster's index (``root``) with node-local slices added whose pools the cluster does not have:
    only the nodes those slices name gather their pools here; every other node's come from the root."""

    def __init__(
        self,
        root: SliceIndex,
        added: tuple[ResourceSlice, ...],
        nodes: dict[Any, tuple[list[_Pool], int]],
    ) -> None:
        self.root = root
        self.added = added
        self.slices = _Concatenated(root.slices, added)
        self.selectors = root.selectors
        self._by_node = {}
        for item in added:
            assert item.node_name is not None
            self._by_node.setdefault(item.node_name, []).append(item)
        self._shared = root._shared
        self._generations = {}
        for item in added:
            counts = self._generations.setdefault((item.driver, item.pool), {})
            counts[item.generation] = counts.get(item.generation, 0) + 1
        self._selected = root._selected
        self._nodes = nodes
        self._forms = root._forms

    def extended(self, added: Sequence[ResourceSlice]) -> SliceIndex:
        if not added:
            return self
        root = self.root
        if any(item.node_name is None for item in added) or any(
            (item.driver, item.pool) in root._generations or (item.driver, item.pool) in self._generations
            for item in added
        ):
            return SliceIndex([*self.slices], self.selectors)
        names = {item.node_name for item in added}
        kept = {key: found for key, found in self._nodes.items() if _node_name(key) not in names}
        return _Extended(root, (*self.added, *added), kept)

    def pools(self, node: Node) -> tuple[list[_Pool], int]:
        if node.name not in self._by_node:
            return self.root.pools(node)
        return super().pools(node)

    def _gather(self, node: Node) -> list[_Pool]:
        root, own = self.root, self._generations

        def generations(key: tuple[str, str]) -> dict[int, int]:
            found = own.get(key)
            return found if found is not None else root._generations[key]

        candidates = [*root._by_node.get(node.name, ()), *self._by_node.get(node.name, ()), *root._shared]
        return _gather(node, candidates, generations)


def _node_name(key: Any) -> str:
    return key[0] if isinstance(key, tuple) else str(key)


class _Concatenated(Sequence[ResourceSlice]):
    """Two sequences of slices read as one, without copying the first (the cluster's)."""

    __slots__ = ("_first", "_second")

    def __init__(self, first: Sequence[ResourceSlice], second: Sequence[ResourceSlice]) -> None:
        self._first, self._second = first, second

    def __len__(self) -> int:
        return len(self._first) + len(self._second)

    def __getitem__(self, index: Any) -> Any:
        return [*self._first, *self._second][index]

    def __iter__(self) -> Any:
        yield from self._first
        yield from self._second


def _gather(
    node: Node, candidates: Sequence[ResourceSlice], generations: Callable[[tuple[str, str]], dict[int, int]]
) -> list[_Pool]:
    """The pools whose newest slices reach ``node`` among ``candidates``; ``generations`` gives, per
    (driver, pool), how many slices of the cluster each generation has."""
    newest: dict[tuple[str, str], list[ResourceSlice]] = {}
    for item in candidates:
        # A slice whose devices each say which nodes reach them may reach any node (not modelled: its pool
        # is refused when reached).
        reaches = item.all_nodes or item.per_device_node_selection or item.node_name == node.name
        if not (reaches or _selects(item, node)):
            continue
        key = (item.driver, item.pool)
        found = newest.get(key)
        if found is None or item.generation > found[0].generation:
            newest[key] = [item]
        elif item.generation == found[0].generation:
            found.append(item)
    pools = []
    for (driver, name), members in newest.items():
        generation = members[0].generation
        wanted = members[0].slice_count
        if len(members) != wanted:
            counts = generations((driver, name))
            if any(g > generation for g in counts):
                continue  # an obsolete generation
            if counts.get(generation, 0) != wanted:
                pools.append(_Pool(driver, name, [], incomplete=True, unmodelled=_unmodelled(members)))
                continue
        members.sort(key=lambda s: s.name)
        seen: set[str] = set()
        invalid = False
        for item in members:
            for device in item.devices:
                invalid = invalid or device.name in seen
                seen.add(device.name)
        pools.append(_Pool(driver, name, members, invalid=invalid, unmodelled=_unmodelled(members)))
    pools.sort(key=lambda p: (p.driver, p.name))
    return pools


def _unmodelled(members: Sequence[ResourceSlice]) -> ResourceSlice | None:
    return next((item for item in members if item.unmodelled is not None), None)


# The last slice list indexed and its index, swapped as one tuple: decisions on the event loop and
# what-ifs on the heavy-call thread read it, so a reader never pairs one list with another's index.
_INDEX: tuple[Any, SliceIndex | None] = (None, None)


def slice_index(dra: DraView) -> SliceIndex:
    """The view's index: the one an overlay made for it or an earlier decision found (``memo["index"]``),
    or the index of its slices, kept while the cache hands out the same list (until a slice changes)."""
    global _INDEX
    index = dra.memo.get("index")
    if isinstance(index, SliceIndex):
        return index
    slices = dra.slices
    indexed, found = _INDEX
    if indexed is not slices or found is None:
        found = SliceIndex(slices, SELECTORS)
        _INDEX = (slices, found)
    dra.memo["index"] = found
    return found


def by_pool(allocated: AbstractSet[DeviceID]) -> dict[tuple[str, str], AbstractSet[str]]:
    """The devices in use grouped by pool: (driver, pool) -> device names."""
    pools: dict[tuple[str, str], set[str]] = {}
    for driver, pool, device in allocated:
        pools.setdefault((driver, pool), set()).add(device)
    return dict(pools)


class Allocator:
    """Allocates one pod's pending claims on one node at a time, over fixed DRA objects and in-use set."""

    def __init__(
        self,
        classes: Mapping[str, DeviceClass],
        index: SliceIndex,
        allocated: AbstractSet[DeviceID],
        behaviour: AllocatorBehaviour,
        in_use: Mapping[tuple[str, str], AbstractSet[str]] | None = None,
    ) -> None:
        """``in_use``, when given, is ``by_pool(allocated)`` (kept by the DRA view, so that a decision does
        not index every device in use again)."""
        self.classes = classes
        self.index = index
        self.allocated = allocated
        self.selectors = index.selectors
        self.behaviour = behaviour
        # Pools with devices in use, and which: (driver, pool) -> device names.
        self._in_use: Mapping[tuple[str, str], AbstractSet[str]] = in_use if in_use is not None else by_pool(allocated)
        # (claims, form, devices in use) -> the answer of the first node of that form.
        self._by_form: dict[tuple[Any, ...], list[ClaimAllocation] | InvalidPools | None] = {}

    # -- selectors ---------------------------------------------------------------------------------

    def _selectable(self, request: _Request, claim: ResourceClaim, pool: _Pool, device: Device) -> bool:
        groups = (
            (request.device_class.selectors, f"class {request.device_class.name}"),
            (request.sub.selectors, f"claim {claim.key}"),
        )
        for expressions, owner in groups:
            for i, expression in enumerate(expressions):
                try:
                    if not self.selectors.matches(expression, pool.driver, device):
                        return False
                except CompileError as exc:
                    raise AllocationError(f"{owner}: selector #{i}: CEL compile error: {exc}") from None
                except CelError as exc:
                    text = str(exc)
                    if self.behaviour.cel_errors_name_device:
                        where = f"selector #{i} on device {pool.driver}/{pool.name}/{device.name}"
                        hint = NO_SUCH_KEY_HINT if "no such key:" in text else ""
                        raise AllocationError(f"{owner}: {where}: CEL runtime error: {text}{hint}") from None
                    raise AllocationError(f"{owner}: selector #{i}: CEL runtime error: {text}") from None
        return True

    # -- allocation --------------------------------------------------------------------------------

    def _used(self, pools: list[_Pool]) -> tuple[Any, ...]:
        """Which devices of the pools are in use, by position (most pools have none)."""
        in_use = self._in_use
        if not in_use:
            return ()
        used = []
        for i, pool in enumerate(pools):
            names = in_use.get((pool.driver, pool.name))
            if names:
                used.append((i, pool.in_use(names)))
        return tuple(used)

    def allocate(self, node: Node, claims: Sequence[ResourceClaim]) -> list[ClaimAllocation] | None:
        """The claims' allocation on ``node``. Nodes of one form (the same device contents in the same
        pool order, the same ones in use) share the answer computed for the first of them, whose devices
        it names: only which alternatives were chosen and whether the claims fit are read from it (Reserve
        allocates on the chosen node itself). An error is raised by the first node of its form, as
        upstream raises it at the first node that meets it."""
        pools, form_id = self.index.pools(node)
        form = (tuple(claim.key for claim in claims), form_id, self._used(pools))
        if form in self._by_form:
            found = self._by_form[form]
            if isinstance(found, InvalidPools):
                raise found
            return found
        try:
            result = self._allocate(node, claims, pools)
        except InvalidPools as exc:
            self._by_form[form] = exc
            raise
        self._by_form[form] = result
        return result

    def _allocate(
        self, node: Node, claims: Sequence[ResourceClaim], pools: list[_Pool]
    ) -> list[ClaimAllocation] | None:
        requests: dict[tuple[int, int, int], _Request] = {}
        constraints: list[list[_MatchAttribute]] = []
        for c, claim in enumerate(claims):
            total = 0
            for r, request in enumerate(claim.requests):
                alternatives = (request.exactly,) if request.exactly is not None else request.first_available
                fewest = None
                for s, sub in enumerate(alternatives):
                    assert sub is not None
                    data = self._validate(c, claim, sub, request.exactly is None, pools)
                    requests[(c, r, s)] = data
                    fewest = data.num_devices if fewest is None else min(fewest, data.num_devices)
                count = fewest or 0
                if self.behaviour.claim_limit_per_request and total + count > MAX_DEVICES_PER_CLAIM:
                    raise AllocationError(
                        f"claim {claim.key}, request {request.name}: adding {count} devices exceeds the claim "
                        f"limit of {MAX_DEVICES_PER_CLAIM}, with {total} already accounted for"
                    )
                total += count
            if total > MAX_DEVICES_PER_CLAIM:
                raise AllocationError(
                    f"claim {claim.key}: number of requested devices {total} exceeds the claim limit of "
                    f"{MAX_DEVICES_PER_CLAIM}"
                )
            matches = []
            for i, constraint in enumerate(claim.constraints):
                if not constraint.match_attribute:
                    raise AllocationError(
                        f"claim {claim.key}, constraint #{i}: empty constraint (unsupported constraint type?)"
                    )
                matches.append(_MatchAttribute(constraint.requests, constraint.match_attribute))
            constraints.append(matches)
        search = _Search(self, pools, claims, requests, constraints)
        if search.one(0, 0, 0, 0, False):
            return [
                ClaimAllocation(tuple(result), allocation_node_selector(node, slices))
                for result, slices in zip(search.results, search.slices, strict=True)
            ]
        if any(pool.invalid for pool in pools):
            raise InvalidPools("invalid resource pools were encountered")
        return None

    def _validate(
        self, c: int, claim: ResourceClaim, sub: DeviceSubRequest, alternative: bool, pools: list[_Pool]
    ) -> _Request:
        own = sub.name.rpartition("/")[2]
        device_class = self.classes.get(sub.class_name)
        if device_class is None:
            raise AllocationError(
                f"claim {claim.key}, request {own}: could not retrieve device class {sub.class_name}: "
                f'deviceclass.resource.k8s.io "{sub.class_name}" not found'
            )
        data = _Request(c, sub, device_class, alternative)
        if sub.mode != ALL:
            data.num_devices = sub.count
            return data
        for pool in pools:
            if pool.unmodelled is not None:
                pool.refuse()
            if pool.incomplete:
                raise AllocationError(
                    f"claim {claim.key}, request {own}: asks for all devices, but resource pool "
                    f"{pool.driver}/{pool.name} is currently being updated"
                )
            if pool.invalid:
                raise AllocationError(
                    f"claim {claim.key}, request {own}: asks for all devices, but resource pool "
                    f"{pool.driver}/{pool.name} is currently invalid"
                )
            for item in pool.slices:
                for device in item.devices:
                    if device.unmodelled is not None:
                        _refuse(item, device)
                    if self._selectable(data, claim, pool, device):
                        data.all_devices.append((pool, item, device))
        data.num_devices = len(data.all_devices)
        return data


def _refuse(item: ResourceSlice, device: Device) -> None:
    """Raises UnmodelledError when allocating ``device`` would read a field podfit does not model."""
    if device.unmodelled is not None:
        raise UnmodelledError(
            f"resourceSlice({item.name})",
            device.unmodelled,
            f"allocating the pod's claims would consider device {device.name}",
        )


def _selects(item: ResourceSlice, node: Node) -> bool:
    return item.node_selector is not None and terms_match(item.node_selector, node)


class _Search:
    """One depth-first search over device slots (upstream's allocateOne)."""

    def __init__(
        self,
        allocator: Allocator,
        pools: list[_Pool],
        claims: Sequence[ResourceClaim],
        requests: dict[tuple[int, int, int], _Request],
        constraints: list[list[_MatchAttribute]],
    ) -> None:
        self.allocator = allocator
        self.pools = pools
        self.claims = claims
        self.requests = requests
        self.constraints = constraints
        self.results: list[list[AllocatedDevice]] = [[] for _ in claims]
        # The slice of each result's device.
        self.slices: list[list[ResourceSlice]] = [[] for _ in claims]
        # Devices picked in this search, by the claims that picked them.
        self.allocating: dict[DeviceID, set[int]] = {}

    def _in_use(self, device: DeviceID) -> bool:
        return device in self.allocator.allocated or bool(self.allocating.get(device))

    def one(self, c: int, r: int, s: int, d: int, in_alternative: bool) -> bool:
        if c == len(self.claims):
            return True
        claim = self.claims[c]
        if r == len(claim.requests):
            return self.one(c + 1, 0, 0, 0, False)
        data = self.requests[(c, r, s)]
        if not in_alternative and data.alternative:
            k = 0
            while (c, r, k) in self.requests:
                if self.one(c, r, k, d, True):
                    return True
                k += 1
            return False
        if data.sub.mode == ALL and not data.all_devices:
            return False
        if d >= data.num_devices:
            return self.one(c, r + 1, 0, 0, False)
        if len(self.results[c]) + data.num_devices - d > MAX_DEVICES_PER_CLAIM:
            return False
        if data.sub.mode == ALL:
            pool, item, device = data.all_devices[d]
            undo = self._take(data, pool, item, device, must=True)
            if undo is None:
                return False
            if self.one(c, r, s, d + 1, in_alternative):
                return True
            undo()
            return False
        admin = data.sub.admin_access
        for pool in self.pools:
            if pool.unmodelled is not None:
                pool.refuse()
            if pool.incomplete or pool.invalid:
                continue
            for item in pool.slices:
                for device in item.devices:
                    if device.unmodelled is not None:
                        _refuse(item, device)
                    key = (pool.driver, pool.name, device.name)
                    if admin:
                        if c in self.allocating.get(key, ()):
                            continue
                    elif self._in_use(key):
                        continue
                    if not self.allocator._selectable(data, claim, pool, device):
                        continue
                    undo = self._take(data, pool, item, device, must=False)
                    if undo is None:
                        continue
                    if self.one(c, r, s, d + 1, in_alternative):
                        return True
                    undo()
        return False

    def _take(self, data: _Request, pool: _Pool, item: ResourceSlice, device: Device, must: bool) -> Any:
        """Adds the device to the claim's result (and its constraints); the undo, or None when it cannot."""
        c = data.claim
        key = (pool.driver, pool.name, device.name)
        if data.sub.admin_access:
            if c in self.allocating.get(key, ()):
                return None
        elif self._in_use(key):
            return None
        if device.taints and self.allocator.behaviour.device_taints and not data.sub.tolerates(device.taints):
            return None
        name = data.sub.name
        added: list[_MatchAttribute] = []
        for constraint in self.constraints[c]:
            if not constraint.add(name, pool.driver, device):
                if must:
                    raise AllocationError(
                        f"claim {self.claims[c].key}, request {data.own_name}: cannot add device "
                        f"{pool.driver}/{pool.name}/{device.name} because a claim constraint would not be "
                        "satisfied"
                    )
                for done in added:
                    done.remove(name)
                return None
            added.append(constraint)
        self.allocating.setdefault(key, set()).add(c)
        result = self.results[c]
        result.append(AllocatedDevice(name, pool.driver, pool.name, device.name, data.sub.admin_access))
        slices = self.slices[c]
        slices.append(item)
        size = len(result) - 1

        def undo() -> None:
            for done in added:
                done.remove(name)
            self.allocating[key].discard(c)
            del result[size:]
            del slices[size:]

        return undo
