"""Maps request-level faults to gRPC statuses with google.rpc details; an unschedulable pod is not one."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status
from podfit.k8s.convert import ConversionError
from podfit.k8s.limits import bounded
from podfit.server.budget import CallCancelled, DeadlineExceeded, deadline_scope
from podfit.server.engine import UnknownProfileError
from podfit.server.gate import HeavyCallsBusy
from podfit.server.model import ValidationError
from podfit.server.reserver import OwnerGone, ReservationMoved
from podfit.server.service import CacheNotSyncedError, NotFoundError, StalePodError

log = logging.getLogger("podfit.server")
DOMAIN = "podfit.dev"
# ErrorInfo.reason of a decision refused because no feeder has marked the cache synced yet.
CACHE_NOT_SYNCED = "CACHE_NOT_SYNCED"

__all__ = [
    "CACHE_NOT_SYNCED",
    "REJECTED_LOG",
    "CacheNotSyncedError",
    "ExpiredError",
    "LocatedProfileError",
    "NotFoundError",
    "RateLimitedLog",
    "log_fault",
    "log_rejected",
    "status_for",
    "stream_errors",
    "unary_errors",
]


class ExpiredError(Exception):
    """A token that outlived what it pointed into (FAILED_PRECONDITION, like Kubernetes' 410 Expired)."""

    def __init__(self, subject: str, message: str) -> None:
        super().__init__(message)
        self.subject = subject


class LocatedProfileError(UnknownProfileError):
    """An unknown profile chosen by a pod's own schedulerName, reported at that pod's field path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


# Bounds on what a status echoes: gRPC sends message and details in trailing metadata (16 KiB at most, and
# details are base64), so a 70 KB value quoted back would turn the answer into RESOURCE_EXHAUSTED.
FIELD_CHARS = 256


def _violation(field: str, description: str) -> error_details_pb2.BadRequest.FieldViolation:
    return error_details_pb2.BadRequest.FieldViolation(field=bounded(field, FIELD_CHARS), description=description)


def status_for(exc: BaseException) -> status_pb2.Status:
    """The google.rpc.Status for a request fault (INVALID_ARGUMENT carries a BadRequest field path)."""
    if isinstance(exc, ValidationError | ConversionError):
        bad = error_details_pb2.BadRequest(field_violations=[_violation(exc.field, bounded(exc.message))])
        return _status(code_pb2.INVALID_ARGUMENT, str(exc), bad, "INVALID_OBJECT")
    if isinstance(exc, RecursionError | UnicodeError):
        # A last line of defence: the edge bounds nesting and text, so reaching here means a check missed.
        what = "nests too deeply" if isinstance(exc, RecursionError) else "holds text that is not valid UTF-8"
        bad = error_details_pb2.BadRequest(field_violations=[_violation("", f"the request {what}")])
        return _status(code_pb2.INVALID_ARGUMENT, f"the request {what}", bad, "INVALID_OBJECT")
    if isinstance(exc, UnknownProfileError):
        bad = error_details_pb2.BadRequest(
            field_violations=[
                _violation(exc.field if isinstance(exc, LocatedProfileError) else "scheduler_name", bounded(str(exc)))
            ]
        )
        return _status(code_pb2.INVALID_ARGUMENT, str(exc), bad, "UNKNOWN_PROFILE")
    if isinstance(exc, ExpiredError):
        failure = error_details_pb2.PreconditionFailure(
            violations=[
                error_details_pb2.PreconditionFailure.Violation(
                    type="EXPIRED", subject=exc.subject, description=bounded(str(exc))
                )
            ]
        )
        return _status(code_pb2.FAILED_PRECONDITION, str(exc), failure, "EXPIRED")
    if isinstance(exc, DeadlineExceeded):
        return _status(code_pb2.DEADLINE_EXCEEDED, str(exc), None, "DEADLINE_EXCEEDED")
    if isinstance(exc, HeavyCallsBusy):
        info = error_details_pb2.QuotaFailure(
            violations=[
                error_details_pb2.QuotaFailure.Violation(subject="limits.heavyCallsWaiting", description=str(exc))
            ]
        )
        return _status(code_pb2.RESOURCE_EXHAUSTED, str(exc), info, "HEAVY_CALLS_BUSY")
    if isinstance(exc, CallCancelled):
        return _status(code_pb2.CANCELLED, str(exc), None, "CANCELLED")
    if isinstance(exc, NotFoundError):
        return _status(code_pb2.NOT_FOUND, str(exc), None, "NOT_FOUND")
    if isinstance(exc, StalePodError):
        return _status(code_pb2.ABORTED, str(exc), None, "STALE_POD")
    if isinstance(exc, OwnerGone):
        return _status(code_pb2.UNAVAILABLE, f"{exc}: retry", None, "OWNER_GONE")
    if isinstance(exc, CacheNotSyncedError):
        failure = error_details_pb2.PreconditionFailure(
            violations=[
                error_details_pb2.PreconditionFailure.Violation(
                    type=CACHE_NOT_SYNCED, subject="podfit.v1.ClusterCache", description=str(exc)
                )
            ]
        )
        return _status(code_pb2.FAILED_PRECONDITION, str(exc), failure, CACHE_NOT_SYNCED)
    return _status(code_pb2.INTERNAL, "internal error; the server log has the details", None, "INTERNAL")


def _status(code: int, message: str, detail: Any, reason: str) -> status_pb2.Status:
    details = []
    if detail is not None:
        packed = any_pb2.Any()
        packed.Pack(detail)
        details.append(packed)
    info = any_pb2.Any()
    info.Pack(error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN))
    details.append(info)
    return status_pb2.Status(code=code, message=bounded(message), details=details)


class RateLimitedLog:
    """At most ``burst`` lines per ``interval`` seconds; lines over that are counted and the count is
    reported with the next line let through, so a flood of bad requests cannot flood the log."""

    def __init__(self, logger: logging.Logger, burst: int = 10, interval: float = 10.0) -> None:
        self.logger, self.burst, self.interval = logger, burst, interval
        self._window_start = 0.0
        self._lines = 0
        self.suppressed = 0

    def __call__(self, level: int, message: str, *args: object, exc_info: BaseException | None = None) -> bool:
        now = time.monotonic()
        if now - self._window_start >= self.interval:
            self._window_start, self._lines = now, 0
        if self._lines >= self.burst:
            self.suppressed += 1
            return False
        self._lines += 1
        if self.suppressed:
            message += " (%d similar lines suppressed)"
            args = (*args, self.suppressed)
            self.suppressed = 0
        self.logger.log(level, message, *args, exc_info=exc_info)
        return True

    def reset(self) -> None:
        """Starts a new window (tests)."""
        self._window_start, self._lines, self.suppressed = 0.0, 0, 0


REJECTED_LOG = RateLimitedLog(log)
_unexpected_log = RateLimitedLog(log)

# Request faults answered with their own status; anything else is logged as a bug and answered INTERNAL.
_EXPECTED = (
    ValidationError,
    ConversionError,
    UnknownProfileError,
    NotFoundError,
    CacheNotSyncedError,
    ExpiredError,
    DeadlineExceeded,
    HeavyCallsBusy,
    CallCancelled,
    OwnerGone,
)
# Refused input worth a line in the log (a miss on a Get is not).
_REJECTED = (ValidationError, ConversionError, UnknownProfileError, RecursionError, UnicodeError)


def log_rejected(method: str, exc: BaseException) -> None:
    """One line per refused input (rate-limited): the method, the field and a bounded message."""
    if isinstance(exc, ValidationError | ConversionError):
        field, message = bounded(exc.field, FIELD_CHARS), bounded(exc.message, 200)
        REJECTED_LOG(logging.INFO, "rejected %s: %s: %s", method, field, message)
    else:
        REJECTED_LOG(logging.INFO, "rejected %s: %s", method, bounded(str(exc) or type(exc).__name__, 200))


def log_fault(method: str, exc: BaseException) -> None:
    """Refused input as one line, a bug with its traceback; both rate-limited."""
    if isinstance(exc, _REJECTED):
        log_rejected(method, exc)
    elif not isinstance(exc, _EXPECTED):
        _unexpected_log(logging.ERROR, "unexpected error in %s", method, exc_info=exc)


Req = TypeVar("Req")
Resp = TypeVar("Resp")
F = TypeVar("F")

# How a servicer method uses the cache (podfit.server.gate): shared with other updates and reservations
# (the default: writers), not at all (``ungated``: decisions that reserve nothing, which read the
# service's view, and reads that need no consistent view), or on the heavy-call thread (``heavy``: the
# method runs its work through ``service.gate.run_heavy`` itself).
GATE_ATTRIBUTE = "_podfit_gate"
SHARED, UNGATED, HEAVY = "shared", "ungated", "heavy"


def ungated(method: F) -> F:
    setattr(method, GATE_ATTRIBUTE, UNGATED)
    return method


def heavy(method: F) -> F:
    setattr(method, GATE_ATTRIBUTE, HEAVY)
    return method


def unary_errors(
    method: Callable[[Any, Req, grpc.aio.ServicerContext], Awaitable[Resp]],
) -> Callable[[Any, Req, grpc.aio.ServicerContext], Awaitable[Resp]]:
    """Turns exceptions raised by a unary servicer method into proper gRPC statuses."""

    gated = getattr(method, GATE_ATTRIBUTE, SHARED) == SHARED

    @functools.wraps(method)
    async def wrapper(self: Any, request: Req, context: grpc.aio.ServicerContext) -> Resp:
        try:
            # The simulation loops check the caller's deadline between steps (podfit.server.budget).
            with deadline_scope(context.time_remaining()):
                if not gated:
                    return await method(self, request, context)
                async with self.service.gate.shared():
                    return await method(self, request, context)
        except (grpc.aio.AbortError, ReservationMoved):  # a worker's refused reservation goes to the owner
            raise
        except Exception as exc:
            log_fault(method.__qualname__, exc)
            await context.abort_with_status(rpc_status.to_status(status_for(exc)))
            raise AssertionError("unreachable") from exc

    return wrapper


def stream_errors(
    method: Callable[[Any, Any, grpc.aio.ServicerContext], AsyncIterator[Resp]],
) -> Callable[[Any, Any, grpc.aio.ServicerContext], AsyncIterator[Resp]]:
    @functools.wraps(method)
    async def wrapper(self: Any, requests: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Resp]:
        try:
            async for response in method(self, requests, context):
                yield response
        except (grpc.aio.AbortError, ReservationMoved):  # a worker's refused reservation goes to the owner
            raise
        except Exception as exc:
            log_fault(method.__qualname__, exc)
            await context.abort_with_status(rpc_status.to_status(status_for(exc)))

    return wrapper
