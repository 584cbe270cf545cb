"""DRA feature gates at values other than their defaults are never answered at the defaults silently: each
is either honoured (the Features the plugins read change with it) or refused at start, naming the gate.
And every DRA gate kube-scheduler reads is in podfit's table, so none can be set without podfit knowing."""

from __future__ import annotations

import dataclasses

import pytest
from podfit.server.framework.versions import GATES, VERSIONS
from podfit.server.model import ValidationError

# The DRA gates pkg/scheduler/framework/plugins/feature/feature.go reads in each release podfit reproduces
# (k8s.io/kubernetes v1.35.4, v1.36.3, v1.37.2).
READ_BY_KUBE_SCHEDULER = {
    "v1.35": {
        "DRAAdminAccess",
        "DRAConsumableCapacity",
        "DRADeviceBindingConditions",
        "DRADeviceTaints",
        "DRAExtendedResource",
        "DRAPartitionableDevices",
        "DRAPrioritizedList",
        "DRAResourceClaimDeviceStatus",
        "DRASchedulerFilterTimeout",
        "DynamicResourceAllocation",
    },
}
READ_BY_KUBE_SCHEDULER["v1.36"] = READ_BY_KUBE_SCHEDULER["v1.35"] | {
    "DRAListTypeAttributes",
    "DRANodeAllocatableResources",
    "DRAWorkloadResourceClaims",
}
READ_BY_KUBE_SCHEDULER["v1.37"] = READ_BY_KUBE_SCHEDULER["v1.36"] | {
    "DRADerivedAttributes",
    "DRADeviceCompatibilityGroups",
    "DRAFractionalCapacityRange",
    "DRAOptionalNodeOperations",
}


@pytest.mark.parametrize("version", sorted(READ_BY_KUBE_SCHEDULER))
def test_every_dra_gate_kube_scheduler_reads_is_in_the_table(version: str) -> None:
    known = {name for name, gate in GATES.items() if version in gate.versions}
    assert READ_BY_KUBE_SCHEDULER[version] - known == set()


def _dra_gates() -> list[object]:
    cases = []
    for name, gate in sorted(GATES.items()):
        if not (name.startswith("DRA") or name == "DynamicResourceAllocation"):
            continue
        for version, spec in sorted(gate.versions.items()):
            value = not spec.default
            cases.append(pytest.param(version, name, value, id=f"{version} {name}={str(value).lower()}"))
    return cases


@pytest.mark.parametrize(("version", "gate", "value"), _dra_gates())
def test_a_dra_gate_off_its_default_is_honoured_or_refused_by_name(version: str, gate: str, value: bool) -> None:
    target = VERSIONS[version]
    defaults = target.features()
    spec = GATES[gate].versions[version]
    if spec.honoured:
        changed = target.features({gate: value})
        field = GATES[gate].field
        assert getattr(changed, field) == value != getattr(defaults, field)
        assert dataclasses.replace(changed, **{field: not value}) == defaults
        return
    with pytest.raises(ValidationError) as refused:
        target.features({gate: value})
    assert refused.value.field == f"featureGates.{gate}"
    assert gate in str(refused.value)
