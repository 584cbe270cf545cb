"""KubeSchedulerConfiguration profiles and server settings: merging, expansion, refusal with the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from podfit.server.config import ConfigError, default_profile, profiles_from_configuration
from podfit.server.settings import SettingsError, resolve

# Each version's default profile as upstream's getDefaultPlugins lists it (podfit's plugins only).
_VOLUMES = ["VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone"]
_V135_FILTER = [
    "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
    *_VOLUMES, "PodTopologySpread", "InterPodAffinity", "DynamicResources",
]  # fmt: skip
DEFAULT_FILTER = {
    "v1.35": _V135_FILTER,
    "v1.36": [*_V135_FILTER, "NodeDeclaredFeatures"],
    "v1.37": ["NodeName", "NodeUnschedulable", *_V135_FILTER[2:], "NodeDeclaredFeatures"],
}
_PRE_FILTER = [
    "NodeAffinity", "NodePorts", "NodeResourcesFit", *_VOLUMES, "PodTopologySpread", "InterPodAffinity",
    "DynamicResources",
]  # fmt: skip
DEFAULT_PRE_FILTER = {
    "v1.35": _PRE_FILTER,
    "v1.36": [*_PRE_FILTER, "NodeDeclaredFeatures"],
    "v1.37": ["NodeName", *_PRE_FILTER, "NodeDeclaredFeatures"],
}
DEFAULT_SCORE = [
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodeResourcesFit", 1), ("VolumeBinding", 1),
    ("PodTopologySpread", 2), ("InterPodAffinity", 2), ("DynamicResources", 2),
    ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1),
]  # fmt: skip


def config(*profiles: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": list(profiles),
    }


@pytest.mark.parametrize("version", ["v1.35", "v1.36", "v1.37"])
def test_default_profile_matches_kube_scheduler(version: str) -> None:
    profile = default_profile(version=version)
    assert [p.name for p in profile.filter] == DEFAULT_FILTER[version]
    assert [(s.plugin.name, s.weight) for s in profile.score] == DEFAULT_SCORE
    assert [p.name for p in profile.pre_filter] == DEFAULT_PRE_FILTER[version]
    assert [p.name for p in profile.pre_enqueue] == ["SchedulingGates", "DynamicResources"]
    assert [p.name for p in profile.post_filter] == ["DynamicResources", "DefaultPreemption"]
    assert profile.version.name == version


def test_the_default_version_is_v137() -> None:
    assert default_profile().version.release == "v1.37.2"
    assert profiles_from_configuration(None)["default-scheduler"].version.release == "v1.37.2"


@pytest.mark.parametrize(
    ("version", "gates", "scored"),
    [
        pytest.param("v1.35", {}, False, id="v1.35: StorageCapacityScoring is alpha, VolumeBinding skips"),
        pytest.param("v1.37", {}, True, id="v1.37: StorageCapacityScoring is beta and on, VolumeBinding scores"),
        pytest.param("v1.37", {"StorageCapacityScoring": False}, False, id="v1.37 with the gate turned off"),
        pytest.param("v1.35", {"StorageCapacityScoring": True}, True, id="v1.35 with the gate turned on"),
        pytest.param("v1.36", {}, False, id="v1.36: StorageCapacityScoring is still alpha, VolumeBinding skips"),
        pytest.param("v1.36", {"StorageCapacityScoring": True}, True, id="v1.36 with the gate turned on"),
    ],
)
def test_feature_gates_reach_the_plugins(version: str, gates: dict[str, bool], scored: bool) -> None:
    profile = profiles_from_configuration(None, version, gates)["default-scheduler"]
    assert profile.features.enable_storage_capacity_scoring is scored
    assert profile.features.gates["StorageCapacityScoring"] is scored
    volume_binding = profile.plugin("VolumeBinding")
    assert getattr(volume_binding, "capacity_scoring", None) is scored


def test_profiles_answer_as_their_own_versions() -> None:
    profiles = profiles_from_configuration(
        config({"schedulerName": "default-scheduler"}, {"schedulerName": "legacy"}, {"schedulerName": "current"}),
        "v1.37",
        profile_versions={"legacy": "v1.35.4", "current": "v1.36.1"},
    )
    assert {name: p.version.release for name, p in profiles.items()} == {
        "default-scheduler": "v1.37.2",
        "legacy": "v1.35.4",
        "current": "v1.36.3",
    }


@pytest.mark.parametrize(
    ("version", "gates", "profile_versions", "message"),
    [
        pytest.param("v1.34", {}, {}, "kubeSchedulerVersion: kube-scheduler version 'v1.34' is not supported "
                     "(supported: v1.35 (v1.35.4), v1.36 (v1.36.3), v1.37 (v1.37.2))",
                     id="an unsupported server version"),
        pytest.param("v1.38.0", {}, {}, "kubeSchedulerVersion: kube-scheduler version 'v1.38.0' is not supported",
                     id="a minor podfit does not answer as yet"),
        pytest.param("v1.37", {}, {"nobody": "v1.35"}, "profileVersions.nobody: no profile", id="an unknown profile"),
        pytest.param("v1.37", {}, {"default-scheduler": "1.2"}, "profileVersions.default-scheduler: kube-scheduler "
                     "version '1.2' is not supported", id="an unsupported profile version"),
    ],
)  # fmt: skip
def test_bad_versions_are_refused_with_the_field(
    version: str, gates: dict[str, bool], profile_versions: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as error:
        profiles_from_configuration(None, version, gates, profile_versions)
    assert str(error.value).startswith(message)


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        pytest.param("NoSuchGate=true", "featureGates.NoSuchGate: unrecognized feature gate: NoSuchGate",
                     id="an unknown gate"),
        pytest.param("StorageCapacityScoring", "featureGates: missing bool value", id="a gate without a value"),
        pytest.param("StorageCapacityScoring=maybe", "featureGates.StorageCapacityScoring: invalid value",
                     id="a value that is not a boolean"),
        pytest.param("NodeDeclaredFeatures=false", "featureGates.NodeDeclaredFeatures: cannot set feature gate "
                     "NodeDeclaredFeatures to false, feature is locked to true in v1.37.2 (profile "
                     "'default-scheduler' answers as v1.37.2)", id="a gate locked in the server's version, v1.37"),
        pytest.param("CSIMigrationPortworx=false", "featureGates.CSIMigrationPortworx: unrecognized feature gate: "
                     "CSIMigrationPortworx (kube-scheduler v1.37.2 does not have it; it exists only in v1.35.4) "
                     "(profile 'default-scheduler' answers as v1.37.2)",
                     id="a gate only another version has (v1.35), not the server's, v1.37"),
    ],
)  # fmt: skip
def test_bad_feature_gates_are_refused_at_start(flag: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    from podfit.server.app import main

    assert main(["--feature-gates", flag], {}) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"podfit-server: {message}") and "Traceback" not in err


def test_version_and_gates_from_flags_file_and_environment(tmp_path: Path) -> None:
    path = tmp_path / "podfit.yaml"
    path.write_text(
        "kind: PodfitConfiguration\nkubeSchedulerVersion: v1.35\n"
        "featureGates: {StorageCapacityScoring: true}\nprofileVersions: {default-scheduler: v1.37}\n"
    )
    from_file = resolve(["--config", str(path)], environ={})
    assert (from_file.kube_scheduler_version, from_file.feature_gate_overrides) == (
        "v1.35",
        {"StorageCapacityScoring": True},
    )
    assert from_file.profile_versions == {"default-scheduler": "v1.37"}
    from_env = resolve(["--config", str(path)], environ={"PODFIT_KUBE_SCHEDULER_VERSION": "v1.37.2"})
    assert from_env.kube_scheduler_version == "v1.37.2"
    from_flag = resolve(["--kube-scheduler-version", "v1.35.4"], environ={"PODFIT_KUBE_SCHEDULER_VERSION": "v1.37"})
    assert from_flag.kube_scheduler_version == "v1.35.4"
    with pytest.raises(SettingsError, match=r"kubeSchedulerVersion: kube-scheduler version 'v2\.0' is not supported"):
        resolve(["--kube-scheduler-version", "v2.0"], environ={})


def test_profiles_by_scheduler_name_with_weights_and_disabled_plugins() -> None:
    profiles = profiles_from_configuration(
        config(
            {"schedulerName": "default-scheduler"},
            {
                "schedulerName": "bin-packing",
                "plugins": {
                    "score": {
                        "enabled": [{"name": "NodeResourcesFit", "weight": 5}],
                        "disabled": [{"name": "NodeResourcesBalancedAllocation"}, {"name": "ImageLocality"}],
                    },
                    "filter": {"disabled": [{"name": "NodePorts"}]},
                },
                "pluginConfig": [
                    {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}},
                ],
            },
        )
    )
    assert sorted(profiles) == ["bin-packing", "default-scheduler"]
    packing = profiles["bin-packing"]
    weights = {s.plugin.name: s.weight for s in packing.score}
    assert weights["NodeResourcesFit"] == 5
    assert "NodeResourcesBalancedAllocation" not in weights and "ImageLocality" not in weights
    assert "NodePorts" not in [p.name for p in packing.filter]
    assert "NodePorts" in [p.name for p in packing.pre_filter]


def test_star_disables_every_default_at_a_point() -> None:
    profiles = profiles_from_configuration(
        config(
            {"plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "ImageLocality", "weight": 4}]}}}
        )
    )
    assert [(s.plugin.name, s.weight) for s in profiles["default-scheduler"].score] == [("ImageLocality", 4)]


def test_queue_and_binding_plugins_are_accepted_as_inert() -> None:
    profiles = profiles_from_configuration(
        config({"plugins": {"multiPoint": {"disabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"}]}}})
    )
    assert [p.name for p in profiles["default-scheduler"].filter] == DEFAULT_FILTER["v1.37"]


def test_a_volume_plugin_can_be_disabled_at_one_point() -> None:
    profiles = profiles_from_configuration(config({"plugins": {"filter": {"disabled": [{"name": "VolumeZone"}]}}}))
    profile = profiles["default-scheduler"]
    assert [p.name for p in profile.filter] == [n for n in DEFAULT_FILTER["v1.37"] if n != "VolumeZone"]
    assert "VolumeZone" in [p.name for p in profile.pre_filter]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param({"apiVersion": "v1beta9", "profiles": []}, "apiVersion", id="wrong apiVersion"),
        pytest.param(config({"schedulerName": "a"}, {"schedulerName": "a"}), "profiles[1].schedulerName: Duplicate",
                     id="duplicate scheduler names"),
        pytest.param(config({"plugins": {"filter": {"enabled": [{"name": "NoSuchPlugin"}]}}}),
                     "profiles[0].plugins.filter.enabled[0].name", id="an unknown plugin"),
        pytest.param(config({"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": -1}]}}}),
                     "profiles[0].plugins.score.enabled[0].weight", id="a negative weight"),
        pytest.param(config({"plugins": {"filter": {"enabled": [{"name": "ImageLocality"}]}}}),
                     "does not extend filter", id="a plugin at a point it does not implement"),
        pytest.param(config({"pluginConfig": [{"name": "NodeResourcesFit",
                                               "args": {"scoringStrategy": {"type": "Cheapest"}}}]}),
                     "profiles[0].pluginConfig[0].args", id="invalid plugin args"),
        pytest.param(config({"pluginConfig": [{"name": "Nope", "args": {}}]}), "profiles[0].pluginConfig[0].name",
                     id="args for an unknown plugin"),
        pytest.param(config({"plugins": {"sideways": {}}}), "profiles[0].plugins.sideways", id="an unknown point"),
    ],
)  # fmt: skip
def test_invalid_configuration_is_refused_naming_the_field(document: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        profiles_from_configuration(document)
    assert message in str(info.value)


def test_settings_precedence_flags_over_env_over_file(tmp_path: Path) -> None:
    path = tmp_path / "podfit.yaml"
    path.write_text("kind: PodfitConfiguration\ngrpcAddr: 127.0.0.1:1111\nmaxMessageBytes: 2048\nlog: {level: DEBUG}\n")
    settings = resolve(["--config", str(path)], {})
    assert (settings.grpc_addr, settings.max_message_bytes, settings.log_level) == ("127.0.0.1:1111", 2048, "DEBUG")
    settings = resolve(["--config", str(path)], {"PODFIT_GRPC_ADDR": "127.0.0.1:2222"})
    assert settings.grpc_addr == "127.0.0.1:2222"
    settings = resolve(["--config", str(path), "--grpc-addr", "127.0.0.1:3333"], {"PODFIT_GRPC_ADDR": "127.0.0.1:2222"})
    assert settings.grpc_addr == "127.0.0.1:3333"


def test_the_config_file_may_carry_scheduler_profiles(tmp_path: Path) -> None:
    path = tmp_path / "podfit.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- schedulerName: packer\n"
    )
    settings = resolve(["--config", str(path)], {})
    assert sorted(profiles_from_configuration(settings.scheduler_configuration)) == ["packer"]


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        pytest.param("kind: PodfitConfiguration\ngrpcAddr: nowhere\n", {}, "grpcAddr", id="an address without a port"),
        pytest.param("kind: PodfitConfiguration\nmaxMessageBytes: lots\n", {}, "maxMessageBytes", id="a non-number"),
        pytest.param("kind: PodfitConfiguration\ncolour: blue\n", {}, "colour", id="an unknown field"),
        pytest.param("kind: PodfitConfiguration\ntls: {certFile: a.pem}\n", {}, "tls", id="a cert without a key"),
        pytest.param("kind: Pod\n", {}, "kind must be", id="another kind of document"),
        pytest.param("{", {}, "not valid YAML", id="broken YAML"),
        pytest.param("kind: PodfitConfiguration\n", {"PODFIT_LOG_LEVEL": "LOUD"}, "log.level", id="a bad env value"),
    ],
)
def test_invalid_settings_are_refused(tmp_path: Path, text: str, env: dict[str, str], message: str) -> None:
    path = tmp_path / "podfit.yaml"
    path.write_text(text)
    with pytest.raises(SettingsError) as info:
        resolve(["--config", str(path)], env)
    assert message in str(info.value)


def test_server_refuses_to_start_on_invalid_configuration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from podfit.server.app import main

    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- plugins: {score: {enabled: [{name: Bogus}]}}\n"
    )
    assert main(["--config", str(path)], {}) == 2
    err = capsys.readouterr().err
    assert "profiles[0].plugins.score.enabled[0].name" in err and "Traceback" not in err


def test_the_shipped_bin_packing_profile_loads() -> None:
    path = Path(__file__).resolve().parents[1] / "deploy" / "bin-packing-profile.yaml"
    settings = resolve(["--config", str(path)], {})
    profiles = profiles_from_configuration(settings.scheduler_configuration)
    packing = {s.plugin.name: s.weight for s in profiles["bin-packing"].score}
    assert packing["NodeResourcesFit"] == 5 and "ImageLocality" not in packing


def test_the_shipped_kubernetes_podfit_config_loads() -> None:
    path = Path(__file__).resolve().parents[1] / "deploy" / "kubernetes" / "podfit-config.yaml"
    settings = resolve(["--config", str(path)], {})
    # In the cluster the extender listens on the pod's address, behind the podfit Service.
    assert (settings.extender_addr, settings.extender_url_prefix) == ("0.0.0.0:8888", "/scheduler")
    assert settings.auth_tokens_file == "/var/run/secrets/podfit/auth/tokens.csv"
    assert settings.tls_client_ca_file == "/var/run/secrets/podfit/tls/ca.crt"


# -- gates podfit does not honour (issue 35: settings that silently do nothing) ---------------------------


def _profiles_at_start(version: str, flag: str, profile_versions: dict[str, str] | None = None) -> dict[str, Any]:
    """What the server builds at start from --kube-scheduler-version, --feature-gates and profileVersions."""
    settings = resolve(["--kube-scheduler-version", version, "--feature-gates", flag], environ={})
    names = {"default-scheduler", *(profile_versions or {})}
    document = config(*({"schedulerName": name} for name in sorted(names))) if profile_versions else None
    return profiles_from_configuration(document, version, settings.feature_gate_overrides, profile_versions)


@pytest.mark.parametrize(
    ("version", "flag", "message"),
    [
        pytest.param("v1.37", "PodLevelResources=false", "featureGates.PodLevelResources: feature gate "
                     "PodLevelResources=false is not modelled by podfit (it answers with the v1.37 default, true)",
                     id="v1.37 PodLevelResources=false"),
        pytest.param("v1.35", "PodLevelResources=false", "featureGates.PodLevelResources: feature gate "
                     "PodLevelResources=false is not modelled by podfit (it answers with the v1.35 default, true)",
                     id="v1.35 PodLevelResources=false"),
        pytest.param("v1.37", "DRAPrioritizedList=false", "featureGates.DRAPrioritizedList: cannot set feature "
                     "gate DRAPrioritizedList to false, feature is locked to true in v1.37.2",
                     id="v1.37 DRAPrioritizedList=false: locked in v1.37"),
        pytest.param("v1.35", "DRAPrioritizedList=false", "featureGates.DRAPrioritizedList: feature gate "
                     "DRAPrioritizedList=false is not modelled by podfit (it answers with the v1.35 default, true)",
                     id="v1.35 DRAPrioritizedList=false: beta in v1.35 (locked only in v1.37), not modelled"),
        pytest.param("v1.37", "DRAPartitionableDevices=false", "featureGates.DRAPartitionableDevices: feature gate "
                     "DRAPartitionableDevices=false is not modelled", id="v1.37 DRAPartitionableDevices=false"),
        pytest.param("v1.37", "DRAConsumableCapacity=false", "featureGates.DRAConsumableCapacity: feature gate "
                     "DRAConsumableCapacity=false is not modelled", id="v1.37 DRAConsumableCapacity=false"),
        pytest.param("v1.35", "DRAConsumableCapacity=true", "featureGates.DRAConsumableCapacity: feature gate "
                     "DRAConsumableCapacity=true is not modelled by podfit (it answers with the v1.35 default, "
                     "false)", id="v1.35 DRAConsumableCapacity=true"),
        pytest.param("v1.35", "DRAExtendedResource=true", "featureGates.DRAExtendedResource: feature gate "
                     "DRAExtendedResource=true is not modelled", id="v1.35 DRAExtendedResource=true"),
        pytest.param("v1.36", "DRAAdminAccess=false", "featureGates.DRAAdminAccess: cannot set feature gate "
                     "DRAAdminAccess to false, feature is locked to true in v1.36.3",
                     id="v1.36 DRAAdminAccess=false: locked from v1.36"),
        pytest.param("v1.35", "DRAAdminAccess=false", "featureGates.DRAAdminAccess: feature gate "
                     "DRAAdminAccess=false is not modelled", id="v1.35 DRAAdminAccess=false: beta in v1.35"),
        pytest.param("v1.37", "OpportunisticBatching=false", "featureGates.OpportunisticBatching: feature gate "
                     "OpportunisticBatching=false is not modelled", id="v1.37 OpportunisticBatching=false"),
        pytest.param("v1.37", "SchedulerAsyncAPICalls=true", "featureGates.SchedulerAsyncAPICalls: feature gate "
                     "SchedulerAsyncAPICalls=true is not modelled", id="v1.37 SchedulerAsyncAPICalls=true"),
        pytest.param("v1.35", "GangScheduling=true", "featureGates.GangScheduling: feature gate "
                     "GangScheduling=true is not modelled", id="v1.35 GangScheduling=true"),
        pytest.param("v1.37", "DRASchedulerFilterTimeout=false", "featureGates.DRASchedulerFilterTimeout: feature "
                     "gate DRASchedulerFilterTimeout=false is not modelled",
                     id="v1.37 DRASchedulerFilterTimeout=false"),
        pytest.param("v1.36", "PodLevelResources=false", "featureGates.PodLevelResources: feature gate "
                     "PodLevelResources=false is not modelled by podfit (it answers with the v1.36 default, true); "
                     "podfit honours StorageCapacityScoring, NodeDeclaredFeatures, VolumeLimitScaling, DRADeviceTaints",
                     id="v1.36 PodLevelResources=false, naming the gates v1.36 honours"),
        pytest.param("v1.36", "DRADeviceTaintRules=true", "featureGates.DRADeviceTaintRules: feature gate "
                     "DRADeviceTaintRules=true is not modelled by podfit (it answers with the v1.36 default, false)",
                     id="v1.36 DRADeviceTaintRules=true (beta, off in v1.36)"),
        pytest.param("v1.36", "DRAConsumableCapacity=false", "featureGates.DRAConsumableCapacity: feature gate "
                     "DRAConsumableCapacity=false is not modelled by podfit (it answers with the v1.36 default, true)",
                     id="v1.36 DRAConsumableCapacity=false (beta, on in v1.36)"),
        pytest.param("v1.36", "WorkloadAwarePreemption=true", "featureGates.WorkloadAwarePreemption: feature gate "
                     "WorkloadAwarePreemption=true is not modelled", id="v1.36 a gate only v1.36 has"),
        pytest.param("v1.36", "VolumeAttributesClass=false", "featureGates.VolumeAttributesClass: cannot set "
                     "feature gate VolumeAttributesClass to false, feature is locked to true in v1.36.3",
                     id="VolumeAttributesClass=false is locked from v1.36"),
        pytest.param("v1.36", "DRAExtendedResource=false", "featureGates.DRAExtendedResource: feature gate "
                     "DRAExtendedResource=false is not modelled by podfit (it answers with the v1.36 default, true)",
                     id="v1.36 DRAExtendedResource=false: not locked in v1.36 (only in v1.37), but not modelled"),
        pytest.param("v1.36", "MatchLabelKeysInPodTopologySpread=false", "featureGates."
                     "MatchLabelKeysInPodTopologySpread: feature gate MatchLabelKeysInPodTopologySpread=false is not "
                     "modelled", id="MatchLabelKeysInPodTopologySpread=false: beta in every version, not locked"),
    ],
)  # fmt: skip
def test_a_gate_podfit_does_not_honour_is_refused_at_start_naming_it(version: str, flag: str, message: str) -> None:
    with pytest.raises((ConfigError, SettingsError)) as error:
        _profiles_at_start(version, flag)
    assert str(error.value).startswith(message)


@pytest.mark.parametrize(
    ("version", "flag", "features"),
    [
        pytest.param("v1.37", "PodLevelResources=true", {}, id="v1.37 a gate at its default"),
        pytest.param("v1.35", "DRAConsumableCapacity=false,DRAPrioritizedList=true", {},
                     id="v1.35 DRA gates at their defaults"),
        pytest.param("v1.37", "DRAConsumableCapacity=true,DRAExtendedResource=true",
                     {"enable_dra_extended_resource": True}, id="v1.37 DRA gates at their defaults"),
        pytest.param("v1.37", "DRADeviceTaints=false", {"enable_dra_device_taints": False},
                     id="v1.37 DRADeviceTaints=false is honoured"),
        pytest.param("v1.35", "DRADeviceTaints=true", {"enable_dra_device_taints": True},
                     id="v1.35 DRADeviceTaints=true is honoured"),
        pytest.param("v1.35", "StorageCapacityScoring=true,VolumeLimitScaling=true",
                     {"enable_storage_capacity_scoring": True, "enable_volume_limit_scaling": True},
                     id="v1.35 storage gates are honoured"),
        pytest.param("v1.35", "NodeDeclaredFeatures=true", {"enable_node_declared_features": True},
                     id="v1.35 NodeDeclaredFeatures=true is honoured"),
        pytest.param("v1.36", "DRADeviceTaints=false", {"enable_dra_device_taints": False},
                     id="v1.36 DRADeviceTaints=false is honoured"),
        pytest.param("v1.36", "StorageCapacityScoring=true,VolumeLimitScaling=true",
                     {"enable_storage_capacity_scoring": True, "enable_volume_limit_scaling": True},
                     id="v1.36 storage gates are honoured"),
        pytest.param("v1.36", "DRAConsumableCapacity=true,DRADeviceTaintRules=false,DRAPrioritizedList=true",
                     {"enable_dra_extended_resource": True, "enable_dra_device_taints": True},
                     id="v1.36 DRA gates at their defaults"),
    ],
)  # fmt: skip
def test_a_gate_at_its_default_or_honoured_is_accepted(version: str, flag: str, features: dict[str, bool]) -> None:
    profile = _profiles_at_start(version, flag)["default-scheduler"]
    for name, value in features.items():
        assert getattr(profile.features, name) is value


def test_a_profile_at_another_version_refuses_a_gate_it_does_not_honour() -> None:
    # DRAConsumableCapacity=true is v1.37's default, but the legacy profile answers as v1.35.
    _profiles_at_start("v1.37", "DRAConsumableCapacity=true")
    with pytest.raises(ConfigError, match=r"^featureGates\.DRAConsumableCapacity: feature gate DRAConsumableCapacity"
                       r"=true is not modelled by podfit \(it answers with the v1\.35 default, false\).*"
                       r"\(profile 'legacy' answers as v1\.35\.4\)$"):  # fmt: skip
        _profiles_at_start("v1.37", "DRAConsumableCapacity=true", {"legacy": "v1.35"})


def test_a_request_for_a_version_that_does_not_honour_the_servers_gates_is_refused() -> None:
    from podfit.server.cache.cluster_cache import ClusterCache
    from podfit.server.engine import Engine
    from podfit.server.model import ValidationError

    engine = Engine(ClusterCache(), _profiles_at_start("v1.37", "DRAConsumableCapacity=true"))
    assert engine.at_version("v1.37") is not None
    assert engine.at_version("v1.36") is not None  # beta and on in v1.36 too
    with pytest.raises(ValidationError) as error:
        engine.at_version("v1.35")
    assert error.value.field == "kube_scheduler_version"
    assert "feature gate DRAConsumableCapacity=true is not modelled by podfit" in error.value.message


# -- a locked gate is checked against the versions the profiles answer as, as kube-scheduler of that version
# checks it (NodeDeclaredFeatures: alpha off in v1.35, beta on in v1.36, GA and locked on in v1.37) ----------

NDF_LOCKED_IN_V137 = (
    "featureGates.NodeDeclaredFeatures: cannot set feature gate NodeDeclaredFeatures to false, feature is locked "
    "to true in v1.37.2"
)


@pytest.mark.parametrize(
    ("version", "flag", "profile_versions", "refused_at_start", "refused_requests"),
    [
        pytest.param("v1.36", "NodeDeclaredFeatures=false", {}, "", ["v1.37"],
                     id="v1.36 server: starts without the plugin; a request asking for v1.37 is refused"),
        pytest.param("v1.35", "NodeDeclaredFeatures=false", {}, "", ["v1.37"],
                     id="v1.35 server: the gate at its alpha default; a request asking for v1.37 is refused"),
        pytest.param("v1.37", "NodeDeclaredFeatures=false", {"default-scheduler": "v1.36"}, "", ["v1.37"],
                     id="v1.37 server whose only profile answers as v1.36: starts"),
        pytest.param("v1.37", "NodeDeclaredFeatures=false", {},
                     f"{NDF_LOCKED_IN_V137} (profile 'default-scheduler' answers as v1.37.2)", [],
                     id="v1.37 server: refused at start"),
        pytest.param("v1.36", "NodeDeclaredFeatures=false", {"current": "v1.37"},
                     f"{NDF_LOCKED_IN_V137} (profile 'current' answers as v1.37.2)", [],
                     id="v1.36 server with a profile at v1.37: refused at start, naming the profile"),
        pytest.param("v1.36", "NoSuchGate=false", {}, "featureGates.NoSuchGate: unrecognized feature gate: NoSuchGate",
                     [], id="a gate no supported version has: refused at start"),
    ],
)  # fmt: skip
def test_a_locked_gate_is_checked_against_the_versions_the_profiles_answer_as(
    version: str, flag: str, profile_versions: dict[str, str], refused_at_start: str, refused_requests: list[str]
) -> None:
    from podfit.server.cache.cluster_cache import ClusterCache
    from podfit.server.engine import Engine
    from podfit.server.framework.versions import VERSIONS
    from podfit.server.model import ValidationError

    if refused_at_start:
        with pytest.raises((ConfigError, SettingsError)) as refused:
            _profiles_at_start(version, flag, profile_versions)
        assert str(refused.value) == refused_at_start
        return
    engine = Engine(ClusterCache(), _profiles_at_start(version, flag, profile_versions))
    for asked in VERSIONS:
        if asked in refused_requests:
            with pytest.raises(ValidationError) as error:
                engine.at_version(asked)
            assert error.value.field == "kube_scheduler_version"
            assert error.value.message.startswith(f"cannot answer as {VERSIONS[asked].release}: {NDF_LOCKED_IN_V137}")
        else:
            for framework in engine.at_version(asked).frameworks.values():
                assert not framework.profile.features.enable_node_declared_features
                assert "NodeDeclaredFeatures" not in framework.profile.plugins


# -- a gate only another supported version has is refused for the versions the profiles answer as, as
# kube-scheduler of that version refuses a gate its registry lacks ("unrecognized feature gate") ------------


def _unrecognized(gate: str, release: str, known_in: str) -> str:
    return (
        f"featureGates.{gate}: unrecognized feature gate: {gate} (kube-scheduler {release} does not have it; "
        f"it exists only in {known_in})"
    )


@pytest.mark.parametrize(
    ("version", "flag", "profile_versions", "refused_at_start", "refused_requests"),
    [
        pytest.param("v1.37", "CSIMigrationPortworx=false", {},
                     _unrecognized("CSIMigrationPortworx", "v1.37.2", "v1.35.4")
                     + " (profile 'default-scheduler' answers as v1.37.2)", {},
                     id="v1.37 server, a gate only v1.35 has: refused at start"),
        pytest.param("v1.37", "CSIMigrationPortworx=true", {},
                     _unrecognized("CSIMigrationPortworx", "v1.37.2", "v1.35.4")
                     + " (profile 'default-scheduler' answers as v1.37.2)", {},
                     id="v1.37 server, a gate only v1.35 has, at v1.35's default: refused at start all the same"),
        pytest.param("v1.37", "SchedulerQueueingHints=true", {},
                     _unrecognized("SchedulerQueueingHints", "v1.37.2", "v1.35.4, v1.36.3")
                     + " (profile 'default-scheduler' answers as v1.37.2)", {},
                     id="v1.37 server, a gate v1.37 dropped: refused at start"),
        pytest.param("v1.35", "DRAOptionalNodeOperations=false", {},
                     _unrecognized("DRAOptionalNodeOperations", "v1.35.4", "v1.37.2")
                     + " (profile 'default-scheduler' answers as v1.35.4)", {},
                     id="v1.35 server, a gate only v1.37 has, at v1.37's default: refused at start"),
        pytest.param("v1.36", "DRAFractionalCapacityRange=false", {"current": "v1.37"},
                     _unrecognized("DRAFractionalCapacityRange", "v1.36.3", "v1.37.2")
                     + " (profile 'default-scheduler' answers as v1.36.3)", {},
                     id="v1.36 server with a profile at v1.37, a gate only v1.37 has: refused for the v1.36 profile"),
        pytest.param("v1.37", "WorkloadAwarePreemption=false", {"default-scheduler": "v1.36"},
                     "", {"v1.35": _unrecognized("WorkloadAwarePreemption", "v1.35.4", "v1.36.3"),
                          "v1.37": _unrecognized("WorkloadAwarePreemption", "v1.37.2", "v1.36.3")},
                     id="v1.37 server whose only profile answers as v1.36, a gate only v1.36 has: starts; "
                        "requests asking for v1.35 or v1.37 are refused"),
        pytest.param("v1.35", "CSIMigrationPortworx=true", {},
                     "", {"v1.36": _unrecognized("CSIMigrationPortworx", "v1.36.3", "v1.35.4"),
                          "v1.37": _unrecognized("CSIMigrationPortworx", "v1.37.2", "v1.35.4")},
                     id="v1.35 server, a gate only v1.35 has: starts; requests asking for v1.36 or v1.37 are refused"),
        pytest.param("v1.35", "GenericWorkload=false", {}, "", {},
                     id="v1.35 server, a gate v1.35 and v1.37 both have (at their defaults): answers every version"),
        pytest.param("v1.35", "StorageCapacityScoring=true", {}, "", {},
                     id="v1.35 server, a gate honoured in v1.35 and v1.37: answers every version with it on"),
    ],
)  # fmt: skip
def test_a_gate_only_another_version_has_is_refused_for_the_versions_that_answer(
    version: str, flag: str, profile_versions: dict[str, str], refused_at_start: str, refused_requests: dict[str, str]
) -> None:
    from podfit.server.cache.cluster_cache import ClusterCache
    from podfit.server.engine import Engine
    from podfit.server.framework.versions import VERSIONS
    from podfit.server.model import ValidationError

    if refused_at_start:
        with pytest.raises(ConfigError) as refused:
            _profiles_at_start(version, flag, profile_versions)
        assert str(refused.value) == refused_at_start
        return
    gate, _, value = flag.partition("=")
    engine = Engine(ClusterCache(), _profiles_at_start(version, flag, profile_versions))
    for asked in VERSIONS:
        if asked in refused_requests:
            with pytest.raises(ValidationError) as error:
                engine.at_version(asked)
            assert error.value.field == "kube_scheduler_version"
            assert error.value.message.startswith(
                f"cannot answer as {VERSIONS[asked].release}: {refused_requests[asked]}"
            )
        else:
            for framework in engine.at_version(asked).frameworks.values():
                assert framework.profile.version.name == asked
                assert framework.profile.features.gates[gate] is (value == "true")


def test_every_gate_podfit_honours_has_a_features_field_that_reads_it() -> None:
    from dataclasses import fields

    from podfit.server.framework.versions import GATES, Features

    names = {f.name for f in fields(Features)}
    for name, gate in GATES.items():
        if any(spec.honoured for spec in gate.versions.values()):
            assert gate.field in names and gate.reader, name
        assert not gate.field or gate.field in names, name
