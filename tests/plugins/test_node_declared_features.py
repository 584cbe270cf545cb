"""NodeDeclaredFeatures: default in v1.37 (its gate GA and locked on) and v1.36 (beta, on), absent in v1.35
unless its gate is turned on. A pod needing a node feature the version infers fits only nodes that declare
it; each version infers the features of its own component-helpers registry."""

from __future__ import annotations

from typing import Any

import pytest
from podfit.server.config import profiles_from_configuration
from podfit.server.engine import Engine

from tests.builders import PodBuilder, make_cache, make_node, make_pod

REJECTED = ("NodeDeclaredFeatures", ("node(s) didn't match Pod's required features",), "UnschedulableAndUnresolvable")


def declaring(name: str, *features: str) -> Any:
    node = make_node(name).capacity(cpu="4", memory="8Gi", pods="110")
    node._d["status"]["declaredFeatures"] = list(features)
    return node


def host_network_user_namespace() -> PodBuilder:
    pod = make_pod("p")
    pod.spec.update(hostNetwork=True, hostUsers=False)
    return pod


def restart_all() -> PodBuilder:
    pod = make_pod("p")
    pod.spec["containers"] = [{"name": "c", "restartPolicyRules": [{"action": "RestartAllContainers"}]}]
    return pod


def bind_mount_options() -> PodBuilder:
    pod = make_pod("p")
    pod.spec["initContainers"] = [{"name": "i", "volumeMounts": [{"name": "v", "bindMountOptions": ["nosuid"]}]}]
    return pod


def rejected(version: str, pod: PodBuilder, gates: dict[str, bool] | None = None) -> dict[str, Any]:
    cache = make_cache(
        declaring("plain"),
        declaring(
            "modern",
            "UserNamespacesHostNetworkSupport",
            "RestartAllContainersOnContainerExits",
            "VolumeBindMountOptions",
        ),
    )
    engine = Engine(cache, profiles_from_configuration(None, version, gates))
    decision, _, _ = engine.decide(pod.obj(), score=False)
    return {n: (s.plugin, s.reasons, s.code.value) for n, s in decision.rejections().items()}


@pytest.mark.parametrize(
    ("version", "pod", "gates", "want"),
    [
        pytest.param("v1.37", host_network_user_namespace(), None, {"plain": REJECTED},
                     id="v1.37: a host-network pod in a user namespace needs the declared feature"),
        pytest.param("v1.37", restart_all(), None, {"plain": REJECTED},
                     id="v1.37: a RestartAllContainers rule needs the declared feature"),
        pytest.param("v1.37", bind_mount_options(), None, {"plain": REJECTED},
                     id="v1.37: bind mount options (an init container's too) need the declared feature"),
        pytest.param("v1.37", make_pod("p"), None, {}, id="v1.37: a pod needing no feature fits both nodes"),
        pytest.param("v1.35", host_network_user_namespace(), None, {}, id="v1.35: the plugin is not in the profile"),
        pytest.param("v1.35", restart_all(), {"NodeDeclaredFeatures": True}, {"plain": REJECTED},
                     id="v1.35 with the gate turned on: the plugin is appended, as applyFeatureGates does"),
        pytest.param("v1.35", host_network_user_namespace(), {"NodeDeclaredFeatures": True}, {},
                     id="v1.35 with the gate turned on does not infer UserNamespacesHostNetworkSupport"),
        pytest.param("v1.36", host_network_user_namespace(), None, {"plain": REJECTED},
                     id="v1.36: a host-network pod in a user namespace needs the declared feature"),
        pytest.param("v1.36", restart_all(), None, {"plain": REJECTED},
                     id="v1.36: a RestartAllContainers rule needs the declared feature"),
        pytest.param("v1.36", bind_mount_options(), None, {},
                     id="v1.36 does not infer VolumeBindMountOptions: the pod fits both nodes"),
        pytest.param("v1.36", restart_all(), {"NodeDeclaredFeatures": False}, {},
                     id="v1.36 with its beta gate turned off: the plugin is not in the profile"),
    ],
)  # fmt: skip
def test_node_declared_features(
    version: str, pod: PodBuilder, gates: dict[str, bool] | None, want: dict[str, Any]
) -> None:
    assert rejected(version, pod, gates) == want
