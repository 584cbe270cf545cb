"""KubeSchedulerConfiguration profiles and server settings: merging, expansion, refusal with the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from podfit.server.config import ConfigError, default_profile, profiles_from_configuration
from podfit.server.settings import SettingsError, resolve

DEFAULT_FILTER = [
    "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
    "PodTopologySpread", "InterPodAffinity",
]  # fmt: skip
DEFAULT_SCORE = [
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodeResourcesFit", 1), ("PodTopologySpread", 2),
    ("InterPodAffinity", 2), ("DynamicResources", 2), ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1),
]  # fmt: skip


def config(*profiles: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": list(profiles),
    }


def test_default_profile_matches_kube_scheduler() -> None:
    profile = default_profile()
    assert [p.name for p in profile.filter] == DEFAULT_FILTER
    assert [(s.plugin.name, s.weight) for s in profile.score] == DEFAULT_SCORE
    assert [p.name for p in profile.pre_filter] == [
        "NodeAffinity", "NodePorts", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity",
    ]  # fmt: skip
    assert [p.name for p in profile.pre_enqueue] == ["SchedulingGates"]
    assert [p.name for p in profile.post_filter] == ["DefaultPreemption"]


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


def test_volume_and_queue_plugins_are_accepted_as_inert() -> None:
    profiles = profiles_from_configuration(config({"plugins": {"filter": {"disabled": [{"name": "VolumeBinding"}]}}}))
    assert [p.name for p in profiles["default-scheduler"].filter] == DEFAULT_FILTER


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
