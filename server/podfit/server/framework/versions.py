"""kube-scheduler versions podfit answers as, and their feature gates, as data.

Kubernetes' gate registry is versioned (each gate lists its default per minor version); kube-scheduler
resolves it once into ``feature.Features`` and hands that to every plugin factory. podfit does the same:
a version (from the server default, a profile, or a request) plus ``--feature-gates`` overrides resolve
once into ``Features``, which plugin factories read. Nothing else asks which version is answering.

Besides gates, a release changes code that no gate guards (a scoring formula, a status text). Those
changes are listed per version as ``behaviours`` and reach the plugins through the same ``Features``,
named after what the code does, so a plugin branches on a behaviour, never on a version number.

A gate podfit does not honour in a version (see ``GateSpec.honoured``) is answered at that version's
default; setting it to its other value is a ValidationError naming it, raised when a profile is built at
that version (at start, or for a request asking for another version), never a setting silently ignored.
A gate locked in a version is checked the same way, against that version only: a kube-scheduler binary
refuses only gates locked in its own version, so ``NodeDeclaredFeatures=false`` (locked on in v1.37)
is accepted by a v1.36 server, whose requests asking for v1.37 are then refused.
A gate absent from a version's registry is refused the same way, for that version: a v1.37
kube-scheduler refuses ``CSIMigrationPortworx`` (v1.35 only) as an unrecognized gate, so does a v1.37
server, and a v1.35 server given it refuses requests asking for v1.36 or v1.37.

Adding a minor version: add its gate specs (honoured only where a Features field makes both values answer
as that version does) and its ``VERSIONS`` entry with its behaviours here, its corpora under tests, and
run the conformance suite for it (README, "Adding a minor version"). Nothing else names a version.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from podfit.server.model import ValidationError
from podfit.server.model.objects import (
    RESTART_ALL_CONTAINERS,
    USER_NAMESPACES_HOST_NETWORK,
    VOLUME_BIND_MOUNT_OPTIONS,
)


@dataclass(frozen=True, slots=True)
class GateSpec:
    """One gate in one version: its default, stage and lock, and whether podfit honours it there.

    A locked gate cannot be set to anything else (kube-scheduler refuses it at start). A gate podfit
    honours answers as kube-scheduler does with either value (or refuses, naming the field, a question
    it cannot model); any other gate is answered at the version's default, and setting it to its other
    value is refused at start, naming it, since podfit would silently answer as the default."""

    default: bool
    stage: str  # ALPHA, BETA or GA
    locked: bool = False
    honoured: bool = False


def _alpha(honoured: bool = False) -> GateSpec:
    return GateSpec(False, "ALPHA", honoured=honoured)


def _beta(default: bool = True, honoured: bool = False) -> GateSpec:
    return GateSpec(default, "BETA", honoured=honoured)


def _ga(locked: bool = False, honoured: bool = False) -> GateSpec:
    return GateSpec(True, "GA", locked, honoured)


@dataclass(frozen=True, slots=True)
class Gate:
    """A gate kube-scheduler reads: its spec per version, and the ``Features`` field (if any) that carries
    it to the podfit code that reads it (``reader``)."""

    versions: Mapping[str, GateSpec]
    field: str = ""
    reader: str = ""


# The gates kube-scheduler reads, per gate and version (``pkg/features/kube_features.go`` and the staging
# feature files, each version's spec being the last ``VersionedSpecs`` entry at or below its own minor,
# as kube-scheduler resolves it at its own version). A gate absent from a version does not exist there.
# ``honoured=True`` only where a Features field makes the code answer both values as kube-scheduler does.
# DRADeviceTaints: every version's default DRA gates pick the incubating allocator, which supports
# DeviceTaints, so the gate only turns its taint check on or off (k8s.io/dynamic-resource-allocation
# v0.35.4, v0.36.3 and v0.37.2). DRAExtendedResource is read, but honoured in none: with it on, pods that
# would use the feature are refused, and v1.35's alpha code is not modelled.
GATES: dict[str, Gate] = {
    "StorageCapacityScoring": Gate(
        {"v1.35": _alpha(honoured=True), "v1.36": _alpha(honoured=True), "v1.37": _beta(honoured=True)},
        "enable_storage_capacity_scoring",
        "VolumeBinding scores",
    ),
    "NodeDeclaredFeatures": Gate(
        {"v1.35": _alpha(honoured=True), "v1.36": _beta(honoured=True), "v1.37": _ga(locked=True, honoured=True)},
        "enable_node_declared_features",
        "the default plugins include NodeDeclaredFeatures",
    ),
    "VolumeLimitScaling": Gate(
        {"v1.35": _alpha(honoured=True), "v1.36": _alpha(honoured=True), "v1.37": _beta(honoured=True)},
        "enable_volume_limit_scaling",
        "NodeVolumeLimits checks preventPodSchedulingIfMissing",
    ),
    "DRADeviceTaints": Gate(
        {"v1.35": _alpha(honoured=True), "v1.36": _beta(honoured=True), "v1.37": _ga(honoured=True)},
        "enable_dra_device_taints",
        "the DRA allocator skips devices with untolerated NoSchedule/NoExecute taints",
    ),
    "DRAExtendedResource": Gate(
        {"v1.35": _alpha(), "v1.36": _beta(), "v1.37": _ga(locked=True)},
        "enable_dra_extended_resource",
        "DynamicResources refuses pods that request an extended resource a DeviceClass backs",
    ),
    "InPlacePodLevelResourcesVerticalScaling": Gate({"v1.35": _alpha(), "v1.36": _beta(), "v1.37": _beta()}),
    "DRAConsumableCapacity": Gate({"v1.35": _alpha(), "v1.36": _beta(), "v1.37": _beta()}),
    "DRADeviceBindingConditions": Gate({"v1.35": _alpha(), "v1.36": _beta(), "v1.37": _beta()}),
    "DRADeviceTaintRules": Gate({"v1.35": _alpha(), "v1.36": _beta(default=False), "v1.37": _ga()}),
    "DRAPartitionableDevices": Gate({"v1.35": _alpha(), "v1.36": _beta(), "v1.37": _beta()}),
    "DRAAdminAccess": Gate({"v1.35": _beta(), "v1.36": _ga(locked=True), "v1.37": _ga(locked=True)}),
    "DRAPrioritizedList": Gate({"v1.35": _beta(), "v1.36": _ga(), "v1.37": _ga(locked=True)}),
    "DRAResourceClaimDeviceStatus": Gate({"v1.35": _beta(), "v1.36": _beta(), "v1.37": _ga(locked=True)}),
    "DRAFractionalCapacityRange": Gate({"v1.37": _beta(default=False)}),
    "DRAWorkloadResourceClaims": Gate({"v1.36": _alpha(), "v1.37": _beta(default=False)}),
    "DRAListTypeAttributes": Gate({"v1.36": _alpha(), "v1.37": _alpha()}),
    "DRANodeAllocatableResources": Gate({"v1.36": _alpha(), "v1.37": _alpha()}),
    "DRAOptionalNodeOperations": Gate({"v1.37": _alpha()}),
    "DRADerivedAttributes": Gate({"v1.37": _alpha()}),
    "DRADeviceCompatibilityGroups": Gate({"v1.37": _alpha()}),
    "GangScheduling": Gate({"v1.35": _alpha(), "v1.36": _alpha()}),
    "GenericWorkload": Gate({"v1.35": _alpha(), "v1.36": _alpha(), "v1.37": _beta(default=False)}),
    "WorkloadAwarePreemption": Gate({"v1.36": _alpha()}),
    "CompositePodGroup": Gate({"v1.37": _alpha()}),
    "PodGroupPreemptionPolicy": Gate({"v1.37": _alpha()}),
    "TopologyAwareWorkloadScheduling": Gate({"v1.36": _alpha(), "v1.37": _alpha()}),
    "InPlacePodVerticalScalingSchedulerPreemption": Gate({"v1.37": _alpha()}),
    "InterPodAffinityHostnameFastPath": Gate({"v1.37": _alpha()}),
    "SchedulerPreQueueingHints": Gate({"v1.37": _alpha()}),
    "SchedulerQueueingHints": Gate({"v1.35": _ga(locked=True), "v1.36": _ga(locked=True)}),
    "SidecarContainers": Gate({"v1.35": _ga(locked=True), "v1.36": _ga(locked=True)}),
    "CSIMigrationPortworx": Gate({"v1.35": _ga(locked=True)}),
    "VolumeAttributesClass": Gate({"v1.35": _ga(), "v1.36": _ga(locked=True), "v1.37": _ga(locked=True)}),
    # The same in every version.
    **{
        name: Gate(dict.fromkeys(("v1.35", "v1.36", "v1.37"), spec))
        for name, spec in (
            ("DynamicResourceAllocation", _ga(locked=True)),
            ("SchedulerAsyncPreemption", _beta()),
            ("OpportunisticBatching", _beta()),
            ("PodLevelResources", _beta()),
            ("NodeInclusionPolicyInPodTopologySpread", _ga(locked=True)),
            # Beta since v1.27 and never promoted in these versions (so not locked).
            ("MatchLabelKeysInPodTopologySpread", _beta()),
            ("DRASchedulerFilterTimeout", _beta()),
            ("InPlacePodVerticalScaling", _ga(locked=True)),
            ("SchedulerPopFromBackoffQ", _beta()),
            ("SchedulerAsyncAPICalls", _beta(default=False)),
            ("TaintTolerationComparisonOperators", _alpha()),
        )
    },
}


def honoured_gates(version: str) -> list[str]:
    """The gates podfit honours in ``version`` (both values answered as kube-scheduler does)."""
    return [name for name, gate in GATES.items() if version in gate.versions and gate.versions[version].honoured]


@dataclass(frozen=True)
class Features:
    """What the plugins of one profile read, resolved once (kube-scheduler's ``feature.Features``).

    The ``enable_*`` fields are gates. The others are the version's own code, which no gate guards: each
    names what the code does, so a plugin factory picks its behaviour without knowing version numbers.
    """

    # Gates.
    enable_storage_capacity_scoring: bool = False
    enable_node_declared_features: bool = False
    enable_volume_limit_scaling: bool = False
    enable_dra_device_taints: bool = False
    # Read to refuse pods that would use the feature (DRA-backed extended resources are not modelled).
    enable_dra_extended_resource: bool = False
    # Behaviours. BalancedAllocation scores how the pod changes the node's balance, not the
    # balance with the pod.
    balanced_allocation_scores_change: bool = False
    # NodeName restricts the candidates at PreFilter (the framework's "didn't satisfy plugin(s)" text).
    node_name_pre_filter: bool = False
    # DynamicResources' PostFilter rejects without a reason when it deallocated nothing (v1.35: "no new
    # claims to deallocate", "still not schedulable").
    dynamic_resources_silent_post_filter: bool = False
    # ResourceClaim ownership text says "Pod" (v1.35: "pod").
    dra_owner_text_capitalised: bool = False
    # DynamicResources scores an allocated claim from its status (v1.35 paired every claim with this
    # cycle's allocations by position and failed when both kinds were present).
    dra_score_allocated_from_status: bool = False
    # The allocator's CEL runtime errors name the device; the device limit is checked per request.
    dra_cel_errors_name_device: bool = False
    dra_claim_limit_per_request: bool = False
    # DefaultPreemption's successful PostFilter says where it nominated the pod and how many it evicts.
    preemption_success_message: bool = False
    # The node features NodeDeclaredFeatures infers a pod needs (component-helpers' registry of the
    # version: the features whose InferForScheduling can be true); a pod's other needs are not checked.
    node_features_inferred: frozenset[str] = frozenset({RESTART_ALL_CONTAINERS})
    # Every gate of the version, after overrides (shown in Stats and the README).
    gates: Mapping[str, bool] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class KubeSchedulerVersion:
    """A supported minor version: its name (``v1.37``), the release podfit reproduces (``v1.37.2``),
    and its behaviours (Features fields that are code changes rather than gates; a field it does not
    name keeps the Features default, which is v1.35's code)."""

    name: str
    release: str
    behaviours: Mapping[str, bool | frozenset[str]]

    def gate_defaults(self) -> dict[str, bool]:
        return {name: gate.versions[self.name].default for name, gate in GATES.items() if self.name in gate.versions}

    def features(self, overrides: Mapping[str, bool] | None = None) -> Features:
        """This version's Features with ``overrides`` (``--feature-gates``) applied. A gate this version's
        registry does not have (it exists only in another supported version) is a ValidationError naming
        it and the version, as this version's kube-scheduler refuses it at start ("unrecognized feature
        gate"). So is a gate locked in this version and set to its other value (a gate locked only in
        another version is settable here), and a gate podfit does not honour in this version, set to
        anything but its default."""
        gates = self.gate_defaults()
        for name, value in (overrides or {}).items():
            if name not in gates:
                elsewhere = ", ".join(VERSIONS[v].release for v in GATES[name].versions) if name in GATES else ""
                raise ValidationError(
                    f"featureGates.{name}",
                    f"unrecognized feature gate: {name} (kube-scheduler {self.release} does not have it"
                    + (f"; it exists only in {elsewhere})" if elsewhere else ")"),
                )
            spec = GATES[name].versions[self.name]
            if spec.locked and value != spec.default:
                raise ValidationError(
                    f"featureGates.{name}",
                    f"cannot set feature gate {name} to {str(value).lower()}, feature is locked to "
                    f"{str(spec.default).lower()} in {self.release}",
                )
            if value != gates[name] and not spec.honoured:
                raise ValidationError(
                    f"featureGates.{name}",
                    f"feature gate {name}={str(value).lower()} is not modelled by podfit (it answers with the "
                    f"{self.name} default, {str(gates[name]).lower()}); podfit honours "
                    f"{', '.join(honoured_gates(self.name))}",
                )
            gates[name] = value
        # Fields of two types (gate booleans; behaviours, booleans or sets), so typed Any here.
        values: dict[str, Any] = {gate.field: gates[n] for n, gate in GATES.items() if gate.field and n in gates}
        values.update(self.behaviours)
        return Features(**values, gates=gates)


# Each version's behaviours, as its source has them (VERSIONS.md of each corpus lists them). v1.36 takes
# the BalancedAllocation formula and the DynamicResources ownership text and scoring fix from v1.37, and
# keeps v1.35's NodeName Filter, PostFilter texts and DRA allocator texts.
_V136_BEHAVIOURS: dict[str, bool | frozenset[str]] = {
    "balanced_allocation_scores_change": True,
    "dra_owner_text_capitalised": True,
    "dra_score_allocated_from_status": True,
    "node_features_inferred": frozenset({RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK}),
}
_V137_BEHAVIOURS: dict[str, bool | frozenset[str]] = {
    **_V136_BEHAVIOURS,
    "node_name_pre_filter": True,
    "dynamic_resources_silent_post_filter": True,
    "dra_cel_errors_name_device": True,
    "dra_claim_limit_per_request": True,
    "preemption_success_message": True,
    "node_features_inferred": frozenset(
        {RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK, VOLUME_BIND_MOUNT_OPTIONS}
    ),
}

# Oldest first: Stats lists the releases in this order.
VERSIONS: dict[str, KubeSchedulerVersion] = {
    "v1.35": KubeSchedulerVersion("v1.35", "v1.35.4", {}),
    "v1.36": KubeSchedulerVersion("v1.36", "v1.36.3", _V136_BEHAVIOURS),
    "v1.37": KubeSchedulerVersion("v1.37", "v1.37.2", _V137_BEHAVIOURS),
}
DEFAULT_VERSION = "v1.37"

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.\d+)?")


def supported() -> str:
    return ", ".join(f"{v.name} ({v.release})" for v in VERSIONS.values())


def parse_version(text: str, field_path: str = "kube_scheduler_version") -> KubeSchedulerVersion:
    """``v1.37``, ``v1.37.2``, ``1.37`` ... -> the supported minor version; ValidationError otherwise.

    A patch release answers as the release podfit reproduces for its minor version."""
    match = _VERSION.fullmatch(text.strip())
    version = VERSIONS.get(f"v{int(match[1])}.{int(match[2])}") if match else None
    if version is None:
        raise ValidationError(
            field_path, f"kube-scheduler version {text!r} is not supported (supported: {supported()})"
        )
    return version


def parse_feature_gates(value: str | Mapping[str, object], field_path: str = "featureGates") -> dict[str, bool]:
    """``A=true,B=false`` (kube-scheduler's ``--feature-gates``) or a mapping -> overrides. A gate no
    supported version has, or a value that is not a boolean, is an error. Locks, and gates missing from
    one version's registry, are not checked here: a gate locked in one version is settable in another,
    so ``KubeSchedulerVersion.features`` checks both for the version a profile answers as (at start for
    the server's profiles, per request for another version), as a kube-scheduler binary checks only its
    own registry."""
    pairs: list[tuple[object, object]]
    if isinstance(value, str):
        pairs = []
        for item in (part.strip() for part in value.split(",")):
            if not item:
                continue
            gate, sep, text = item.partition("=")
            if not sep:
                raise ValidationError(field_path, f"missing bool value for {gate!r}")
            pairs.append((gate.strip(), text.strip()))
    elif isinstance(value, Mapping):
        pairs = list(value.items())
    else:
        raise ValidationError(field_path, "must be A=true,B=false or a mapping of gate names to booleans")
    result: dict[str, bool] = {}
    for key, raw in pairs:
        name = str(key)
        if name not in GATES:
            raise ValidationError(f"{field_path}.{name}", f"unrecognized feature gate: {name}")
        if isinstance(raw, bool):
            flag = raw
        elif isinstance(raw, str) and raw.lower() in ("true", "false"):
            flag = raw.lower() == "true"
        else:
            raise ValidationError(f"{field_path}.{name}", f"invalid value of {name}={raw}, err: must be true or false")
        result[name] = flag
    return result


# No gate on and no version behaviour: what a plugin factory assumes when given no Features.
BASE_FEATURES = Features()
