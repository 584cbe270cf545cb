"""DynamicResources: the pod's ResourceClaims must be allocatable (or, when allocated, usable) on the node.

PreEnqueue gates a pod whose claims are not there yet: a missing or deleting claim, a template's claim not
created yet or not owned by the pod. PreFilter splits the claims into allocated ones (their allocation's
node selector restricts the pod) and pending ones (their DeviceClasses must exist), and builds the
allocator over the devices in use. Filter runs the allocator on each node, then checks the allocated
claims' node selectors. Every rejection is UnschedulableAndUnresolvable, so preemption never counts on
devices: removing pods frees none in the same cycle (the plugin has no AddPod/RemovePod). An allocator
error (a CEL runtime error, an "All" request meeting a pool being updated) aborts the attempt.

Score favours the earliest alternatives of prioritized lists (8 - position, normalised). v1.35.4 pairs the
allocations with every claim by position and fails when one claim was already allocated and another was
not; v1.37 reads an allocated claim's choice from its status. PostFilter deallocates one allocated claim
that kept the pod off some node when nobody else holds it; when PreFilter never ran (an earlier PreFilter
rejected the pod) it fails with "not found", which ends PostFilter before DefaultPreemption, as upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from podfit.server.dra.allocator import (
    AllocationError,
    Allocator,
    AllocatorBehaviour,
    ClaimAllocation,
    InvalidPools,
    by_pool,
    slice_index,
)
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.interfaces import Int32Array, Int64Array, IntpArray, PreemptionResult, PreFilterResult
from podfit.server.framework.profile import DYNAMIC_RESOURCES
from podfit.server.framework.status import SKIP, Code, PluginError, Status, unresolvable
from podfit.server.framework.versions import BASE_FEATURES, Features
from podfit.server.model import NodeSelectorTerm, Pod
from podfit.server.model.dra import ResourceClaim, UnmodelledError
from podfit.server.model.node_selectors import terms_match
from podfit.server.plugins.node_resources_fit import refuse_dra_extended_resources

if TYPE_CHECKING:
    from podfit.server.cache.node_table import NodeTable
    from podfit.server.cache.snapshot import DraView, Snapshot

REASON_NO_CLAIMS = "no new claims to deallocate"
REASON_STILL_UNSCHEDULABLE = "still not schedulable"
REASON_DEALLOCATED = "deallocation of ResourceClaim completed"
REASON_STATE_MISSING = "not found"
REASON_CANNOT_ALLOCATE = "cannot allocate all claims"
REASON_NOT_AVAILABLE = "resourceclaim not available on the node"
# FirstAvailableDeviceRequestMaxSize: an alternative at position i scores MAX - i.
MAX_ALTERNATIVES = 8
_MAX_SCORE = 100


class ClaimLookupError(Exception):
    """A claim the pod names cannot be used (PreEnqueue gates the pod, PreFilter rejects it)."""


def pod_claims(pod: Pod, dra: DraView, owner_text_capitalised: bool) -> list[ResourceClaim]:
    """The claims the pod uses, in spec order (upstream's foreachPodResourceClaim); an entry whose
    template's claim is recorded as unnamed needs no claim."""
    claims = []
    for entry in pod.resource_claims:
        owned = False
        if entry.claim_name is not None:
            name: str | None = entry.claim_name
        else:
            status = next((s for s in pod.resource_claim_statuses if s[0] == entry.name), None)
            if status is None:
                raise ClaimLookupError(f'pod "{pod.key}": ResourceClaim not created yet')
            name, owned = status[1], True
        if name is None:
            continue
        claim = dra.claims.get(f"{pod.namespace}/{name}")
        if claim is None:
            raise ClaimLookupError(f'could not find ResourceClaim "{pod.namespace}/{name}"')
        if claim.being_deleted:
            raise ClaimLookupError(f'resourceclaim "{name}" is being deleted')
        if owned and not any(ref.controller and ref.uid == pod.uid for ref in claim.owner_references):
            pod_word = "Pod" if owner_text_capitalised else "pod"
            raise ClaimLookupError(
                f"ResourceClaim {claim.key} was not created for {pod_word} {pod.key} ({pod_word} is not owner)"
            )
        claims.append(claim)
    return claims


def allocated_devices(dra: DraView) -> AbstractSet[tuple[str, str, str]]:
    """Every device an allocated claim holds, except those allocated for admin access (the cache's view
    keeps them as claims change; another view's are gathered once)."""
    found = dra.memo.get("allocated")
    if found is None:
        found = dra.memo["allocated"] = frozenset(
            result.device_id
            for claim in dra.claims.values()
            if claim.allocation is not None
            for result in claim.allocation
            if not result.admin_access
        )
    return found


@dataclass
class _State:
    # Set at the end of a PreFilter that accepted the pod (empty when PreFilter rejected it or it has none).
    claims: tuple[ResourceClaim, ...] = ()
    # The claims still to allocate, and the allocated ones whose node selector restricts the pod (by
    # position in claims): what Filter reads per node, sorted out once.
    pending: tuple[ResourceClaim, ...] = ()
    pinned: tuple[tuple[int, tuple[NodeSelectorTerm, ...]], ...] = ()
    allocator: Allocator | None = None
    # Node name -> the pending claims' device results, in claim order.
    allocations: dict[str, list[ClaimAllocation]] = field(default_factory=dict)
    # Positions (in claims) of allocated claims whose node selector excluded some node.
    unavailable: set[int] = field(default_factory=set)

    def clone(self) -> _State:
        # Upstream's stateData.Clone returns the same object: preemption's dry runs share it.
        return self


class DynamicResources:
    name = DYNAMIC_RESOURCES

    def __init__(self, features: Features) -> None:
        self.silent_post_filter = features.dynamic_resources_silent_post_filter
        self.owner_text_capitalised = features.dra_owner_text_capitalised
        self.score_allocated_from_status = features.dra_score_allocated_from_status
        self.behaviour = AllocatorBehaviour(
            cel_errors_name_device=features.dra_cel_errors_name_device,
            claim_limit_per_request=features.dra_claim_limit_per_request,
            device_taints=features.enable_dra_device_taints,
        )
        self.dra_extended_resource = features.enable_dra_extended_resource

    # -- PreEnqueue --------------------------------------------------------------------------------

    def pre_enqueue(self, pod: Pod, snapshot: Snapshot) -> Status | None:
        if not pod.resource_claims:
            return None
        try:
            pod_claims(pod, snapshot.dra, self.owner_text_capitalised)
        except ClaimLookupError as exc:
            return unresolvable(str(exc))
        return None

    def replica_invariant(self, state: CycleState, pod: Pod) -> bool:
        """A pod without claims (PreFilter skipped) allocates and reserves nothing, and its replicas neither."""
        return self.name in state.skip_filter

    # -- PreFilter ---------------------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        data = _State()
        state.write(self.name, data)
        dra = snapshot.dra
        if self.dra_extended_resource:
            refuse_dra_extended_resources(pod, dra.classes)
        if not pod.resource_claims:
            return None, SKIP
        try:
            claims = pod_claims(pod, dra, self.owner_text_capitalised)
        except ClaimLookupError as exc:
            return None, unresolvable(str(exc))
        if not claims:
            return None, SKIP
        pending = False
        for claim in claims:
            if claim.allocated:
                continue
            pending = True
            for request in claim.requests:
                alternatives = (request.exactly,) if request.exactly is not None else request.first_available
                for sub in alternatives:
                    assert sub is not None
                    if sub.class_name not in dra.classes:
                        return None, unresolvable(f"request {sub.name}: device class {sub.class_name} does not exist")
        for claim in claims:
            # Allocating a claim reads its whole spec; using an allocated one reads its allocation.
            unmodelled = claim.unmodelled_allocation if claim.allocated else claim.unmodelled
            if unmodelled is not None:
                why = "the pod uses this allocated claim" if claim.allocated else "the pod's claim must be allocated"
                raise UnmodelledError(f"resourceClaim({claim.key})", unmodelled, why)
        if pending:
            allocated = allocated_devices(dra)
            in_use = dra.memo.get("in_use")
            if in_use is None:
                in_use = dra.memo["in_use"] = by_pool(allocated)
            data.allocator = Allocator(dra.classes, slice_index(dra), allocated, self.behaviour, in_use)
        data.claims = tuple(claims)
        data.pending = tuple(claim for claim in claims if not claim.allocated)
        data.pinned = tuple(
            (c, claim.allocation_node_selector)
            for c, claim in enumerate(claims)
            if claim.allocation_node_selector is not None
        )
        return None, None

    # -- Filter ------------------------------------------------------------------------------------

    def filter_rows(
        self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray
    ) -> tuple[Int32Array, list[Status]]:
        data = state.read(self.name, _State)
        codes = np.zeros(len(rows), dtype=np.int32)
        statuses: list[Status] = []
        known: dict[str, int] = {}
        infos = table.infos
        for i, row in enumerate(rows.tolist()):
            info = infos[row]
            if info is None:
                continue
            node = info.node
            unavailable = [c for c, terms in data.pinned if not terms_match(terms, node)]
            reason = ""
            if data.allocator is not None:
                try:
                    results = data.allocator.allocate(node, data.pending)
                except InvalidPools as exc:
                    reason = str(exc)
                except AllocationError as exc:
                    raise PluginError(str(exc)) from None
                else:
                    if results is None:
                        reason = REASON_CANNOT_ALLOCATE
                    elif not unavailable:
                        data.allocations[node.name] = results
            if not reason and unavailable:
                data.unavailable.update(unavailable)
                reason = REASON_NOT_AVAILABLE
            if reason:
                if reason not in known:
                    statuses.append(unresolvable(reason))
                    known[reason] = len(statuses)
                codes[i] = known[reason]
        return codes, statuses

    # -- Score -------------------------------------------------------------------------------------

    def score_rows(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntpArray) -> Int64Array:
        data = state.read(self.name, _State)
        scores = np.zeros(len(rows), dtype=np.int64)
        if not data.claims or data.allocator is None:
            return scores
        infos = table.infos
        # Nodes of one form share their allocation object (Allocator.allocate): score each once.
        known: dict[int, int] = {}
        for i, row in enumerate(rows.tolist()):
            info = infos[row]
            results = data.allocations.get(info.name) if info is not None else None
            if results is not None:
                score = known.get(id(results))
                if score is None:
                    score = known[id(results)] = self._score(data.claims, results)
                scores[i] = score
        return scores

    def _score(self, claims: tuple[ResourceClaim, ...], results: list[ClaimAllocation]) -> int:
        score = 0
        pending = 0
        for i, claim in enumerate(claims):
            if self.score_allocated_from_status and claim.allocation is not None:
                allocation = claim.allocation
            else:
                index = pending if self.score_allocated_from_status else i
                if index >= len(results):
                    needing = " needing allocation" if self.score_allocated_from_status else ""
                    raise PluginError(f"number of allocations {len(results)} is smaller than number of claims{needing}")
                allocation = results[index].devices
                pending += 1
            picked = {r.request for r in allocation if r.request.count("/") == 1}
            for request in claim.requests:
                for j, sub in enumerate(request.first_available):
                    if sub.name in picked:
                        score += MAX_ALTERNATIVES - j
        return score

    def normalize_rows(self, state: CycleState, pod: Pod, scores: Int64Array) -> Int64Array:
        top = int(scores.max()) if len(scores) else 0
        if top == 0:
            return scores
        return scores * _MAX_SCORE // top

    # -- Reserve / PreBind --------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Pod, node_name: str, snapshot: Snapshot) -> list[ResourceClaim]:
        """Reserve and PreBind: the pod's claims as placing it on ``node_name`` leaves them: each pending
        claim allocated with the devices the allocator chose there, and every claim reserved for the pod.
        The cycle's Filter answer for that node is reused when ``state`` holds it. Empty when the pod uses
        no claim or its claims cannot be had on that node (then only the pod is reserved, as
        kube-scheduler would not have chosen the node)."""
        if not pod.resource_claims:
            return []
        data = state.get(self.name)
        if not isinstance(data, _State) or node_name not in data.allocations:
            state = CycleState()
            _, status = self.pre_filter(state, pod, snapshot)
            row = snapshot.table.row_of.get(node_name)
            if status is not None or row is None:
                return []
            try:
                codes, _ = self.filter_rows(state, pod, snapshot.table, np.array([row], dtype=np.intp))
            except PluginError:
                return []
            if codes[0]:
                return []
            data = state.read(self.name, _State)
        chosen = iter(data.allocations.get(node_name, ()))
        updated = []
        for claim in data.claims:
            allocation, selector = claim.allocation, claim.allocation_node_selector
            if allocation is None:
                result = next(chosen)
                allocation, selector = result.devices, result.node_selector
            reserved = claim.reserved_for
            if not any(uid == pod.uid for _, _, uid in reserved):
                reserved = (*reserved, ("pods", pod.name, pod.uid))
            updated.append(
                replace(claim, allocation=allocation, allocation_node_selector=selector, reserved_for=reserved)
            )
        return updated

    # -- PostFilter --------------------------------------------------------------------------------

    def post_filter(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        framework: Any,
        statuses: Mapping[str, Status | None],
    ) -> PreemptionResult:
        data = state.get(self.name)
        if not isinstance(data, _State):
            return PreemptionResult("", (), 0, (), REASON_STATE_MISSING, Code.ERROR.value)
        unschedulable = Code.UNSCHEDULABLE.value
        if not data.claims:
            reason = "" if self.silent_post_filter else REASON_NO_CLAIMS
            return PreemptionResult("", (), 0, (), reason, unschedulable)
        for index in sorted(data.unavailable):
            reserved = data.claims[index].reserved_for
            if not reserved or (len(reserved) == 1 and reserved[0][2] == pod.uid):
                # Upstream writes the deallocation to the API server; the cycle's state is unchanged.
                return PreemptionResult("", (), 0, (), REASON_DEALLOCATED, unschedulable)
        reason = "" if self.silent_post_filter else REASON_STILL_UNSCHEDULABLE
        return PreemptionResult("", (), 0, (), reason, unschedulable)


def new(args: Mapping[str, Any], features: Features = BASE_FEATURES) -> DynamicResources:
    return DynamicResources(features)
