"""NodePorts: host ports (ip, protocol, port) must be free on the node; 0.0.0.0 overlaps every address."""

from __future__ import annotations

import pytest
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.status import SKIP, Status, unschedulable
from podfit.server.plugins import node_ports

from tests.builders import PodBuilder, make_cache, make_node, make_pod, node_info
from tests.plugins.harness import filter_one

CONFLICT = unschedulable("node(s) didn't have free ports for the requested pod ports")


def with_init_port(pod: PodBuilder, port: int, sidecar: bool) -> PodBuilder:
    container = {
        "name": "init",
        "image": "busybox",
        "ports": [{"containerPort": port, "hostPort": port, "protocol": "TCP"}],
    }
    if sidecar:
        container["restartPolicy"] = "Always"
    pod.spec.setdefault("initContainers", []).append(container)
    return pod


def existing(port: int, protocol: str = "TCP", host_ip: str = "") -> PodBuilder:
    return make_pod(f"existing-{protocol}-{host_ip}-{port}").node("node").host_port(port, protocol, host_ip)


@pytest.mark.parametrize(
    ("pod", "on_node", "want"),
    [
        pytest.param(make_pod().host_port(80), [], None, id="a free port fits"),
        pytest.param(make_pod().host_port(80), [existing(80)], CONFLICT, id="the same TCP port in use conflicts"),
        pytest.param(make_pod().host_port(80), [existing(8080)], None, id="another port in use does not conflict"),
        pytest.param(
            make_pod().host_port(53, "UDP"),
            [existing(53, "TCP")],
            None,
            id="the same port number with another protocol does not conflict",
        ),
        pytest.param(
            make_pod().host_port(53, "SCTP"),
            [existing(53, "SCTP")],
            CONFLICT,
            id="SCTP ports conflict with SCTP ports",
        ),
        pytest.param(
            make_pod().host_port(80, host_ip="10.0.0.1"),
            [existing(80, host_ip="10.0.0.2")],
            None,
            id="the same port on two specific addresses does not conflict",
        ),
        pytest.param(
            make_pod().host_port(80, host_ip="10.0.0.1"),
            [existing(80, host_ip="10.0.0.1")],
            CONFLICT,
            id="the same port on the same address conflicts",
        ),
        pytest.param(
            make_pod().host_port(80, host_ip="10.0.0.1"),
            [existing(80)],
            CONFLICT,
            id="a specific address conflicts with the port bound on all addresses",
        ),
        pytest.param(
            make_pod().host_port(80),
            [existing(80, host_ip="10.0.0.2")],
            CONFLICT,
            id="binding all addresses conflicts with the port on any specific address",
        ),
        pytest.param(
            make_pod().host_port(80, host_ip="0.0.0.0"),
            [existing(80, host_ip="10.0.0.2")],
            CONFLICT,
            id="an explicit 0.0.0.0 behaves like an empty host IP",
        ),
        pytest.param(
            make_pod().host_port(81).host_port(80),
            [existing(80)],
            CONFLICT,
            id="any one conflicting port of several rejects the node",
        ),
        pytest.param(
            with_init_port(make_pod(), 80, sidecar=True),
            [existing(80)],
            CONFLICT,
            id="a sidecar's host port must be free",
        ),
        pytest.param(
            with_init_port(make_pod().host_port(81), 80, sidecar=False),
            [existing(80)],
            None,
            id="a plain init container's host port is not checked",
        ),
    ],
)
def test_filter(pod: PodBuilder, on_node: list[PodBuilder], want: Status | None) -> None:
    plugin = node_ports.new({})
    state = CycleState()
    assert plugin.pre_filter(state, pod.obj(), make_cache(make_node("node")).snapshot()) == (None, None)
    assert filter_one(plugin, state, pod.obj(), node_info(make_node("node"), *on_node)) == want


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod().container(), id="PreFilter skips a pod without host ports"),
        pytest.param(
            make_pod().container(ports=[{"containerPort": 80, "protocol": "TCP"}]),
            id="container ports without a host port do not count",
        ),
        pytest.param(
            with_init_port(make_pod(), 80, sidecar=False), id="host ports of plain init containers do not count"
        ),
    ],
)
def test_pre_filter_skips(pod: PodBuilder) -> None:
    plugin = node_ports.new({})
    assert plugin.pre_filter(CycleState(), pod.obj(), make_cache().snapshot()) == (None, SKIP)
