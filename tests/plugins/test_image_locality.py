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


# Upstream's formulas by hand, in Python ints: scaledImageScore = int64(float64(size) * float64(numNodes) /
# float64(totalNodes)); a node's sum adds one per container using the image; calculatePriority clamps the sum
# to [23MB, 1000MB * containers] and scales it: 100 * (sum - 23MB) // (max - 23MB).
HUGE = 2**62
TWO_THIRDS = 2.0 / 3.0
HUGE_SCALED = int(float(HUGE) * TWO_THIRDS)  # 3074457345618258432: the exact float product
SMALL_SCALED = int(float(600 * MB) * TWO_THIRDS)  # 419430399
CONTAINERS = 5
MAX_THRESHOLD = 1000 * MB * CONTAINERS


def _priority(total: int) -> int:
    clamped = min(max(total, 23 * MB), MAX_THRESHOLD)
    return 100 * (clamped - 23 * MB) // (MAX_THRESHOLD - 23 * MB)


@pytest.mark.parametrize(
    ("node", "want"),
    [
        # 4 * HUGE_SCALED + SMALL_SCALED passes 2**63: summed exactly, then clamped to the maximum.
        pytest.param("both", _priority(4 * HUGE_SCALED + SMALL_SCALED), id="sum past int64 clamps to 100"),
        pytest.param("huge-only", _priority(4 * HUGE_SCALED), id="four containers of a 4EiB image: 100"),
        # (419430399 - 24117248) * 100 // (5242880000 - 24117248) = 39531315100 // 5218762752 = 7
        pytest.param("small-only", _priority(SMALL_SCALED), id="a row beside the huge ones keeps its own score: 7"),
    ],
)
def test_image_sizes_whose_sum_exceeds_int64(node: str, want: int) -> None:
    assert 4 * HUGE_SCALED + SMALL_SCALED >= 2**63
    assert (_priority(4 * HUGE_SCALED), _priority(SMALL_SCALED)) == (100, 7)
    nodes = [
        make_node("both").image(HUGE, "huge:1").image(600 * MB, "small:1"),
        make_node("huge-only").image(HUGE, "huge:1"),
        make_node("small-only").image(600 * MB, "small:1"),
    ]
    pod = pod_with("huge:1", "huge:1", "huge:1", "huge:1", "small:1")
    assert len(pod.obj().images) == CONTAINERS
    got = dict(zip(["both", "huge-only", "small-only"], scores(pod, *nodes), strict=True))
    assert got[node] == want
