"""benchmarks/flamegraphs.py sorts each sampled stack by what the server was doing: the innermost podfit
frame that matches decides, whatever runs below it (numpy, protobuf)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.flamegraphs import OTHER, breakdown, classify

LOOP = "run (asyncio/runners.py:118);_run_once (asyncio/base_events.py:1922)"
HANDLER = "_handle_exception (grpc/_cython/cygrpc.pyx:1); behavior (podfit/server/transport/errors.py:240)"


@pytest.mark.parametrize(
    ("stack", "category"),
    [
        pytest.param(f"{LOOP};{HANDLER}", OTHER, id="the gRPC runtime"),
        pytest.param(
            f"{LOOP};pod_input (podfit/server/transport/convert.py:80);FromString (google/protobuf/message.py:1)",
            "decode the request",
            id="parsing the request",
        ),
        pytest.param(
            f"{LOOP};pod_input (podfit/server/transport/convert.py:80);pod_from_k8s (podfit/server/model/objects.py:9)",
            "model records",
            id="a record built while decoding is the model's",
        ),
        pytest.param(
            f"{LOOP};schedule (podfit/server/cycle.py:96);score_rows (podfit/server/plugins/node_resources_fit.py:1);"
            "max (numpy/_core/_methods.py:1)",
            "decide (cycle, framework, plugins)",
            id="numpy under a plugin is the decision",
        ),
        pytest.param(
            f"{LOOP};schedule (podfit/server/cycle.py:96);reserve (podfit/server/reserver.py:76)",
            "reserve (assume, journal)",
            id="the reservation inside the cycle",
        ),
        pytest.param(
            f"{LOOP};schedule_response (podfit/server/transport/convert.py:358)",
            "encode the answer",
            id="building the response",
        ),
    ],
)
def test_a_stack_is_what_its_innermost_matching_frame_does(stack: str, category: str) -> None:
    assert classify(stack) == category


def test_the_breakdown_is_shares_of_samples_and_cpu_per_pod(tmp_path: Path) -> None:
    raw = tmp_path / "raw.txt"
    raw.write_text(
        f"{LOOP};schedule (podfit/server/cycle.py:96) 750\n{LOOP};{HANDLER} 250\n",
    )
    rows = {name: (share, micros) for name, share, micros in breakdown(raw, pods=10)}
    assert rows["decide (cycle, framework, plugins)"] == (0.75, pytest.approx(750 / 250 / 10 * 1e6))
    assert rows[OTHER][0] == 0.25 and len(rows) == 2


@pytest.mark.parametrize(
    ("wait", "counted"),
    [
        pytest.param(f"{LOOP};select (selectors.py:468);EpollSelector.select (selectors.py:468)", False, id="epoll"),
        pytest.param("Thread._bootstrap (threading.py:1002);_worker (concurrent/futures/thread.py:81)", False,
                     id="an idle pool worker"),
        pytest.param(f"{LOOP};{HANDLER}", True, id="the gRPC runtime at work"),
    ],
)  # fmt: skip
def test_waiting_samples_are_not_cpu_and_the_measured_cpu_is_shared_out(
    tmp_path: Path, wait: str, counted: bool
) -> None:
    raw = tmp_path / "raw.txt"
    raw.write_text(f"{LOOP};schedule (podfit/server/cycle.py:96) 600\n{wait} 400\n")
    rows = {name: (share, micros) for name, share, micros in breakdown(raw, pods=100, cpu_seconds=0.05)}
    decide = rows["decide (cycle, framework, plugins)"]
    # 0.05 s of server CPU over 100 pods is 500 us per pod, shared by the working samples only.
    assert decide == (pytest.approx(0.6 if counted else 1.0), pytest.approx(300 if counted else 500))
    assert (OTHER in rows) is counted
