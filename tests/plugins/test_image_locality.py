"""ImageLocality: image sizes on the node, scaled by the share of nodes holding them, between 23MB and 1000MB."""

from __future__ import annotations

import pytest
from podfit.server.framework.cycle_state import CycleState
from podfit.server.plugins import image_locality

from tests.builders import NodeBuilder, PodBuilder, make_cache, make_node, make_pod

MB = 1024 * 1024


def scores(pod: PodBuilder, *nodes: NodeBuilder) -> list[int]:
    plugin = image_locality.new({})
    snapshot = make_cache(*nodes).snapshot()
    state = CycleState()
    assert plugin.pre_score(state, pod.obj(), snapshot, snapshot.rows) is None
    return list(plugin.score_rows(state, pod.obj(), snapshot.table, snapshot.rows).tolist())


def pod_with(*images: str) -> PodBuilder:
    pod = make_pod()
    for image in images:
        pod.container(image=image)
    return pod


@pytest.mark.parametrize(
    ("pod", "nodes", "want"),
    [
        pytest.param(
            pod_with("app:v1"),
            [make_node("a").image(500 * MB, "app:v1"), make_node("b")],
            [23, 0],
            id="an image on half the nodes counts with half its size",
        ),
        pytest.param(
            pod_with("app:v1"),
            [make_node("a").image(500 * MB, "app:v1"), make_node("b").image(500 * MB, "app:v1")],
            [48, 48],
            id="an image on every node counts with its full size",
        ),
        pytest.param(
            pod_with("app:v1"),
            [make_node("a").image(500 * MB, "app:v1"), make_node("b"), make_node("c"), make_node("d")],
            [10, 0, 0, 0],
            id="the spread divides by all nodes of the snapshot",
        ),
        pytest.param(
            pod_with("app:v1"),
            [make_node("a").image(40 * MB, "app:v1"), make_node("b")],
            [0, 0],
            id="a scaled size below 23MB scores 0",
        ),
        pytest.param(
            pod_with("app:v1"),
            [make_node("a").image(2000 * MB, "app:v1"), make_node("b").image(2000 * MB, "app:v1")],
            [100, 100],
            id="sizes above 1000MB per container are capped",
        ),
        pytest.param(
            pod_with("app"),
            [make_node("a").image(500 * MB, "app:latest"), make_node("b")],
            [23, 0],
            id="an untagged image name matches the latest tag",
        ),
        pytest.param(
            pod_with("nginx:1.25"),
            [make_node("a").image(500 * MB, "docker.io/library/nginx:1.25"), make_node("b")],
            [0, 0],
            id="a short name does not match the fully qualified name",
        ),
        pytest.param(
            pod_with("app:v1").init_container({}),
            [make_node("a").image(500 * MB, "app:v1"), make_node("b")],
            [11, 0],
            id="init containers raise the cap even when their image is absent",
        ),
        pytest.param(
            pod_with("app:v1", "app:v1"),
            [make_node("a").image(500 * MB, "app:v1"), make_node("b")],
            [24, 0],
            id="an image used by two containers counts twice",
        ),
        pytest.param(
            pod_with("app:v1"),
            [make_node("a").image(500 * MB, "app:v1", "app@sha256:abc"), make_node("b")],
            [23, 0],
            id="an image listed under several names counts once",
        ),
        pytest.param(
            pod_with("app:v1", "db:v2"),
            [
                make_node("a").image(300 * MB, "app:v1").image(700 * MB, "db:v2"),
                make_node("b").image(700 * MB, "db:v2"),
            ],
            [41, 34],
            id="the scaled sizes of all the pod's images add up",
        ),
    ],
)
def test_score(pod: PodBuilder, nodes: list[NodeBuilder], want: list[int]) -> None:
    assert scores(pod, *nodes) == want


@pytest.mark.parametrize(
    ("name", "want"),
    [
        pytest.param("nginx", "nginx:latest", id="an untagged name gets the latest tag"),
        pytest.param("nginx:1.25", "nginx:1.25", id="a tagged name is unchanged"),
        pytest.param("registry:5000/app", "registry:5000/app:latest", id="a registry port is not a tag"),
        pytest.param("registry:5000/app:v1", "registry:5000/app:v1", id="a tag after a registry port is kept"),
        pytest.param("app@sha256:abc", "app@sha256:abc", id="a digest counts as tagged"),
    ],
)
def test_normalized_image_name(name: str, want: str) -> None:
    assert image_locality.normalized_image_name(name) == want
