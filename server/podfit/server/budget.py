"""What one question may cost: size limits decided before the work starts, and the caller's deadline
checked while it runs.

Limits bound memory (a scenario of a million template nodes, an estimate allowed 2^31 new nodes); the
deadline bounds time: the simulation loops call ``check_deadline`` between steps, so a heavy call ends
with DEADLINE_EXCEEDED shortly after its deadline instead of running on for minutes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from podfit.server.model import ValidationError


class DeadlineExceeded(Exception):
    """The call's deadline passed while it was being answered."""


@dataclass(frozen=True)
class Limits:
    """Per-request limits (PodfitConfiguration ``limits``); each is checked before any work."""

    # Template nodes one Simulate scenario may add (the sum of add_nodes counts).
    hypothetical_nodes: int = 10_000
    # Pods per Simulate, per EstimateScaleUp (all groups) and per ScheduleBatch.
    pods_per_request: int = 10_000
    # Nodes one SimulateDrain may remove.
    drain_nodes: int = 1_000
    # New nodes an estimate may add per node group: cluster-autoscaler's --max-nodes-per-scaleup
    # default. A node group allowing more is capped, as cluster-autoscaler caps it.
    new_nodes_per_estimate: int = 1_000
    # Options (node groups) per BestOptions call, and pods per option.
    expansion_options: int = 1_000
    pods_per_option: int = 10_000
    # Devices the template nodes of one what-if question may bring: each added node holds its own copy of
    # its template's ResourceSlices, so the copies are the template's devices times the nodes added.
    template_devices: int = 100_000
    # Heavy calls (simulations, estimates, drains, BestOptions, preemptions, batches) that may wait while
    # one runs; one more is RESOURCE_EXHAUSTED (podfit.server.gate).
    heavy_calls_waiting: int = 8
    # A heavy call's deadline on the server, from its arrival, whatever the client's (a client may send
    # none): DEADLINE_EXCEEDED after it. Bounds how long it and the writes queued behind it wait.
    heavy_call_seconds: int = 30

    def check(self, field: str, count: int, limit: int, what: str, setting: str) -> None:
        if count > limit:
            raise ValidationError(field, f"{count} {what}: at most {limit} per request (limits.{setting})")

    # The checks each request kind makes, named once: the transport makes them on the raw counts before
    # decoding anything, the service again on what it was handed (in-process callers included).

    def check_pods(self, count: int, field: str = "pods") -> None:
        self.check(field, count, self.pods_per_request, "pods", "podsPerRequest")

    def check_grouped_pods(self, total: int) -> None:
        self.check("groups", total, self.pods_per_request, "pods in all groups", "podsPerRequest")

    def check_template_devices(self, field: str, count: int) -> None:
        self.check(field, count, self.template_devices, "devices on template nodes", "templateDevices")

    def check_options(self, count: int) -> None:
        self.check("options", count, self.expansion_options, "options", "expansionOptions")

    def check_option_pods(self, field: str, count: int) -> None:
        self.check(field, count, self.pods_per_option, "pods", "podsPerOption")


_deadline: ContextVar[float | None] = ContextVar("podfit_deadline", default=None)


@contextmanager
def deadline_scope(seconds: float | None) -> Iterator[None]:
    """Work inside runs until ``seconds`` from now (None: no deadline)."""
    with deadline_at(None if seconds is None else time.monotonic() + seconds):
        yield


@contextmanager
def deadline_at(deadline: float | None) -> Iterator[None]:
    """Work inside runs until ``deadline`` (``time.monotonic()``; None: no deadline)."""
    token = _deadline.set(deadline)
    try:
        yield
    finally:
        _deadline.reset(token)


def current_deadline() -> float | None:
    """The current call's deadline (``time.monotonic()``), None when it has none."""
    return _deadline.get()


_cancelled: ContextVar[threading.Event | None] = ContextVar("podfit_cancelled", default=None)


class CallCancelled(Exception):
    """The call was cancelled (its client went away, or the server is stopping) while it was answered."""


@contextmanager
def cancellation_scope(flag: threading.Event) -> Iterator[None]:
    """Work inside (and in contexts copied from it, such as a worker thread's) stops once ``flag`` is set."""
    token = _cancelled.set(flag)
    try:
        yield
    finally:
        _cancelled.reset(token)


_sharing: ContextVar[bool] = ContextVar("podfit_sharing", default=False)


@contextmanager
def sharing_scope() -> Iterator[None]:
    """Work inside (a heavy reader, on its thread) yields the interpreter at every ``check_deadline``."""
    token = _sharing.set(True)
    try:
        yield
    finally:
        _sharing.reset(token)


def check_deadline() -> None:
    """Raises DeadlineExceeded once the current call's deadline has passed, CallCancelled once the call
    was cancelled; the simulation loops call it between steps.

    In a reader running beside decisions (``sharing_scope``) it also hands the interpreter over
    (``time.sleep(0)``) to whoever waits for it: otherwise the event loop, and gRPC's polling thread, wait
    up to the switch interval (5 ms) for it at every step of every call they answer meanwhile, and a
    decision that needs it a dozen times takes a hundred milliseconds longer. A writer (a batch) holds the
    cache anyway: nothing it could hand over to would decide before it ends."""
    if _sharing.get():
        time.sleep(0)
    deadline = _deadline.get()
    if deadline is not None and time.monotonic() > deadline:
        raise DeadlineExceeded("the deadline passed before the answer was complete")
    flag = _cancelled.get()
    if flag is not None and flag.is_set():
        raise CallCancelled("the call was cancelled")
