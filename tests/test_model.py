"""Kubernetes JSON -> domain records: effective requests, host ports, validation with field paths."""

from typing import Any

import pytest
from podfit.server.model import ValidationError
from podfit.server.model.objects import (
    DEFAULT_MEMORY_REQUEST,
    node_from_k8s,
    pdb_from_k8s,
    pod_from_k8s,
)

from tests.builders import make_node, make_pod

GI = 2**30
MI = 2**20


@pytest.mark.parametrize(
    ("builder", "requests", "non_zero"),
    [
        pytest.param(
            make_pod().req(cpu="500m", memory="1Gi"),
            {"cpu": 500, "memory": GI},
            (500, GI),
            id="one container's requests are the pod's",
        ),
        pytest.param(
            make_pod().req(cpu="250m").req(cpu="250m", memory="1Gi"),
            {"cpu": 500, "memory": GI},
            (500, GI + DEFAULT_MEMORY_REQUEST),
            id="app containers are summed; scoring fills missing memory",
        ),
        pytest.param(
            make_pod().req(cpu="1").init_container({"cpu": "2"}),
            {"cpu": 2000},
            (2000, DEFAULT_MEMORY_REQUEST),
            id="a larger init container sets the floor",
        ),
        pytest.param(
            make_pod().req(cpu="1").init_container({"cpu": "500m"}, sidecar=True),
            {"cpu": 1500},
            (1500, DEFAULT_MEMORY_REQUEST * 2),
            id="sidecars add to the app containers",
        ),
        pytest.param(
            make_pod().req(cpu="1").init_container({"cpu": "500m"}, sidecar=True).init_container({"cpu": "1200m"}),
            {"cpu": 1700},
            (1700, DEFAULT_MEMORY_REQUEST * 2),
            id="an init container after a sidecar runs beside it",
        ),
        pytest.param(
            make_pod().req(cpu="2").overhead(cpu="250m"),
            {"cpu": 2250},
            (2250, DEFAULT_MEMORY_REQUEST),
            id="overhead is added on top",
        ),
        pytest.param(
            make_pod().container(),
            {},
            (100, DEFAULT_MEMORY_REQUEST),
            id="a pod without requests requests nothing but scores with defaults",
        ),
        pytest.param(
            make_pod().req(cpu="0.0001").req(cpu="0.0001"),
            {"cpu": 1},
            (1, 2 * DEFAULT_MEMORY_REQUEST),
            id="quantities are summed exactly and rounded once",
        ),
        pytest.param(
            make_pod().container({"example.com/gpu": "2", "ephemeral-storage": "1Gi"}),
            {"example.com/gpu": 2, "ephemeral-storage": GI},
            (100, DEFAULT_MEMORY_REQUEST),
            id="extended resources and ephemeral storage are kept",
        ),
    ],
)
def test_effective_requests(builder: Any, requests: dict[str, int], non_zero: tuple[int, int]) -> None:
    pod = builder.obj()
    assert dict(pod.requests) == requests
    assert (pod.non_zero_cpu, pod.non_zero_memory) == non_zero


def test_pod_level_resources_replace_the_container_sum() -> None:
    data = make_pod().req(cpu="1", memory="1Gi").json()
    data["spec"]["resources"] = {"requests": {"cpu": "3"}}
    pod = pod_from_k8s(data)
    assert dict(pod.requests) == {"cpu": 3000, "memory": GI}


def test_only_sidecar_init_containers_hold_host_ports() -> None:
    data = make_pod().host_port(8080).json()
    data["spec"]["initContainers"] = [
        {"name": "init", "ports": [{"containerPort": 1, "hostPort": 9000, "protocol": "TCP"}]},
        {
            "name": "side",
            "restartPolicy": "Always",
            "ports": [{"containerPort": 2, "hostPort": 9001, "protocol": "UDP"}],
        },
    ]
    pod = pod_from_k8s(data)
    assert [(p.host_port, p.protocol) for p in pod.host_ports] == [(8080, "TCP"), (9001, "UDP")]


def test_defaults_for_namespace_scheduler_and_policy() -> None:
    pod = pod_from_k8s({"metadata": {"name": "p"}, "spec": {"containers": []}})
    assert (pod.namespace, pod.scheduler_name, pod.preemption_policy, pod.priority) == (
        "default",
        "default-scheduler",
        "PreemptLowerPriority",
        0,
    )


def test_node_allocatable_is_in_scheduler_units() -> None:
    node = make_node("n").capacity(cpu="3500m", memory="8Gi", pods="110").obj()
    assert node.allocatable["cpu"] == 3500
    assert node.allocatable["memory"] == 8 * GI
    assert node.allocatable["pods"] == 110


def test_pdb_int_or_string() -> None:
    pdb = pdb_from_k8s({"metadata": {"name": "b"}, "spec": {"minAvailable": 2, "maxUnavailable": "50%"}})
    assert (pdb.min_available, pdb.max_unavailable, pdb.selector) == ("2", "50%", None)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        pytest.param({"metadata": {}}, "pod.metadata.name", id="a pod needs a name"),
        pytest.param(
            {"metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"requests": {"cpu": "x"}}}]}},
            "pod.spec.containers[0].resources.requests.cpu",
            id="malformed quantity names its path",
        ),
        pytest.param(
            {"metadata": {"name": "p"}, "spec": {"containers": "no"}},
            "pod.spec.containers",
            id="containers must be a list",
        ),
        pytest.param(
            {"metadata": {"name": "p"}, "spec": {"priority": "high"}},
            "pod.spec.priority",
            id="priority must be an integer",
        ),
        pytest.param(
            {
                "metadata": {"name": "p"},
                "spec": {
                    "topologySpreadConstraints": [
                        {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                    ]
                },
            },
            "pod.spec.topologySpreadConstraints[0].maxSkew",
            id="maxSkew must be positive",
        ),
        pytest.param(
            {
                "metadata": {"name": "p"},
                "spec": {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Like"}]}]
                            }
                        }
                    }
                },
            },
            "pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchExpressions[0].operator",
            id="unknown node selector operator",
        ),
        pytest.param(
            {"metadata": {"name": "p"}, "status": {"startTime": "yesterday"}},
            "pod.status.startTime",
            id="start time must be RFC 3339",
        ),
        pytest.param(
            {"metadata": {"name": "p"}, "spec": {"containers": [{"ports": [{"hostPort": 70000}]}]}},
            "pod.spec.containers[0].ports[0].hostPort",
            id="host ports must be valid port numbers",
        ),
    ],
)
def test_invalid_pods_name_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        pod_from_k8s(data)
    assert info.value.field == field


def test_invalid_taint_effect_is_rejected() -> None:
    data = make_node("n").taint("k", effect="Sometimes").json()
    with pytest.raises(ValidationError) as info:
        node_from_k8s(data)
    assert info.value.field == "node.spec.taints[0].effect"


@pytest.mark.parametrize(
    ("requests", "message"),
    [
        pytest.param({"cpu": "-1"}, "greater than or equal to 0", id="negative requests are refused"),
        pytest.param({"memory": "10E"}, "too large", id="amounts beyond int64 are refused"),
        pytest.param({"cpu": "9223372036854775807"}, "too large", id="cpu is compared in millicores"),
    ],
)
def test_out_of_range_quantities(requests: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError) as info:
        make_pod().container(requests).obj()
    assert message in info.value.message


def test_the_largest_int64_memory_is_accepted() -> None:
    assert make_node("n").capacity(memory="8E").obj().allocatable["memory"] == 8 * 10**18
