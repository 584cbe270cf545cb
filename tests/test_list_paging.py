"""ClusterCache.List pages as Kubernetes lists do (limit / continue), through a real server."""

from __future__ import annotations

import grpc
import pytest
from podfit.client import PodfitError
from podfit.server.transport import paging
from podfit.v1 import cluster_cache_pb2 as cc

from tests.builders import make_node, make_pod
from tests.conftest import LiveServer


def _names(page: cc.ListResponse) -> list[str]:
    return [getattr(o, o.WhichOneof("object")).metadata.name for o in page.objects]


@pytest.mark.parametrize(
    ("count", "limit", "sizes"),
    [
        (7, 3, [3, 3, 1]),
        (6, 3, [3, 3]),
        (2, 5, [2]),
        (0, 2, [0]),
        (5, 0, [5]),
        (4, 1, [1, 1, 1, 1]),
    ],
    ids=[
        "seven by three ends with a short page",
        "six by three ends exactly",
        "a limit above the count is one page",
        "an empty listing is one empty page",
        "no limit is one page",
        "one at a time",
    ],
)
async def test_pages_follow_limit_and_continue(live: LiveServer, count: int, limit: int, sizes: list[int]) -> None:
    await live.client.apply([make_node(f"n{i:02d}").json() for i in range(count)])
    pages = [page async for page in live.client.list_pages("Node", limit=limit)]
    assert [len(p.objects) for p in pages] == sizes
    assert [p.remaining_item_count for p in pages] == [count - sum(sizes[: i + 1]) for i in range(len(sizes))]
    assert [bool(p.continue_token) for p in pages] == [True] * (len(sizes) - 1) + [False]
    assert [n for p in pages for n in _names(p)] == [f"n{i:02d}" for i in range(count)]


async def test_changes_between_pages_show_and_nothing_repeats(live: LiveServer) -> None:
    await live.client.apply([make_pod(name).json() for name in ("a", "c", "e", "g")])
    pages = live.client.list_pages("Pod", limit=2)
    first = await anext(pages)
    assert _names(first) == ["a", "c"]
    await live.client.apply([make_pod("b").json(), make_pod("f").json()])  # before and after the position
    await live.client.delete("Pod", "e", "default")
    rest = [n async for page in pages for n in _names(page)]
    assert rest == ["f", "g"]


async def test_a_list_bigger_than_grpcs_default_limit_is_paged(live: LiveServer) -> None:
    """~6 MB of pods: one answer would be RESOURCE_EXHAUSTED for a default client; pages stay under 4 MiB."""
    pods = []
    for i in range(300):
        pod = make_pod(f"p{i:03d}").json()
        pod["metadata"]["annotations"] = {"big": "x" * 20_000}
        pods.append(pod)
    await live.client.apply(pods)
    async with grpc.aio.insecure_channel(live.target) as channel:  # gRPC's default 4 MiB receive limit
        first = await channel.unary_unary(
            "/podfit.v1.ClusterCache/List",
            request_serializer=cc.ListRequest.SerializeToString,
            response_deserializer=cc.ListResponse.FromString,
        )(cc.ListRequest(kind=cc.OBJECT_KIND_POD), timeout=30)
    assert first.continue_token
    assert 0 < len(first.objects) < 300
    assert first.ByteSize() <= paging.PAGE_BYTES + 64 * 1024
    listed = await live.client.list("Pod")
    assert _names(listed) == [f"p{i:03d}" for i in range(300)]


async def _refusal(live: LiveServer, request: cc.ListRequest) -> PodfitError:
    with pytest.raises(PodfitError) as caught:
        await live.client._call(live.client.cache.List, request, 10)
    return caught.value


@pytest.mark.parametrize(
    ("token", "code", "says"),
    [
        ("garbage!", grpc.StatusCode.INVALID_ARGUMENT, "is not a continue token this server issued"),
        ("eyJ2IjoxfQ", grpc.StatusCode.INVALID_ARGUMENT, "is not a continue token this server issued"),
        (paging.token("", "another-epoch", ("", "a")), grpc.StatusCode.FAILED_PRECONDITION, "continue token expired"),
    ],
    ids=["garbage", "base64 JSON without the fields", "a token from before a restart"],
)
async def test_bad_continue_tokens_are_refused(live: LiveServer, token: str, code: grpc.StatusCode, says: str) -> None:
    error = await _refusal(live, cc.ListRequest(kind=cc.OBJECT_KIND_NODE, continue_token=token))
    assert error.code == code
    assert says in error.message
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        assert error.field_violations[0][0] == "continue_token"
    else:
        assert error.reason == "EXPIRED"


async def test_a_token_is_bound_to_its_listing(live: LiveServer) -> None:
    await live.client.apply([make_pod("a").json(), make_pod("b").json(), make_node("n1").json()])
    first = await anext(live.client.list_pages("Pod", limit=1))
    for other in (
        cc.ListRequest(kind=cc.OBJECT_KIND_NODE),
        cc.ListRequest(kind=cc.OBJECT_KIND_POD, namespace="kube-system"),
        cc.ListRequest(kind=cc.OBJECT_KIND_POD, label_selector="app=web"),
        cc.ListRequest(kind=cc.OBJECT_KIND_POD, pod_filter=cc.POD_PHASE_FILTER_BOUND),
        cc.ListRequest(kind=cc.OBJECT_KIND_POD, field_selector="spec.nodeName=n1"),
    ):
        other.continue_token = first.continue_token
        error = await _refusal(live, other)
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "different listing" in error.message
    same = cc.ListRequest(kind=cc.OBJECT_KIND_POD, limit=5, continue_token=first.continue_token)
    assert _names(await live.client._call(live.client.cache.List, same, 10)) == ["b"]


async def test_a_negative_limit_is_invalid(live: LiveServer) -> None:
    error = await _refusal(live, cc.ListRequest(kind=cc.OBJECT_KIND_NODE, limit=-1))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.field_violations[0][0] == "limit"


@pytest.mark.parametrize(
    ("kind", "selector", "names"),
    [
        pytest.param("Pod", "spec.nodeName=n1", ["a", "c"], id="a node's pods"),
        pytest.param("Pod", "spec.nodeName==n2", ["b"], id="double equals"),
        pytest.param("Pod", "spec.nodeName=", ["pending"], id="empty value: unbound pods"),
        pytest.param("Pod", "spec.nodeName!=n1,metadata.name!=pending", ["b"], id="terms are ANDed"),
        pytest.param("Pod", "metadata.namespace=default,metadata.name=c", ["c"], id="metadata fields"),
        pytest.param("Node", "metadata.name=n2", ["n2"], id="nodes by name"),
        pytest.param("Pod", "", ["a", "b", "c", "pending"], id="empty selects all"),
    ],
)
async def test_field_selectors_select_on_the_server(
    live: LiveServer, kind: str, selector: str, names: list[str]
) -> None:
    await live.client.apply(
        [
            make_node("n1").json(),
            make_node("n2").json(),
            make_pod("a").node("n1").json(),
            make_pod("b").node("n2").json(),
            make_pod("c").node("n1").json(),
            make_pod("pending").json(),
        ]
    )
    assert _names(await live.client.list(kind, field_selector=selector)) == names


@pytest.mark.parametrize(
    ("kind", "selector", "says"),
    [
        pytest.param("Node", "spec.nodeName=n1", "field label not supported: spec.nodeName", id="pod field on nodes"),
        pytest.param("Pod", "status.phase=Running", "field label not supported: status.phase", id="unknown field"),
        pytest.param("Pod", "spec.nodeName", "is not field=value", id="no operator"),
        pytest.param("Pod", "spec.nodeName=a,,", "empty term", id="empty term"),
    ],
)
async def test_bad_field_selectors_are_invalid_at_their_field(
    live: LiveServer, kind: str, selector: str, says: str
) -> None:
    request = cc.ListRequest(
        kind=cc.OBJECT_KIND_NODE if kind == "Node" else cc.OBJECT_KIND_POD, field_selector=selector
    )
    error = await _refusal(live, request)
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.field_violations[0][0] == "field_selector" and says in error.field_violations[0][1], error
