"""Maps request-level faults to gRPC statuses with google.rpc details; an unschedulable pod is not one."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status
from podfit.k8s.convert import ConversionError
from podfit.server.engine import UnknownProfileError
from podfit.server.model import ValidationError
from podfit.server.service import CacheNotSyncedError, NotFoundError, StalePodError

log = logging.getLogger("podfit.server")
DOMAIN = "podfit.dev"
# ErrorInfo.reason of a decision refused because no feeder has marked the cache synced yet.
CACHE_NOT_SYNCED = "CACHE_NOT_SYNCED"

__all__ = [
    "CACHE_NOT_SYNCED",
    "CacheNotSyncedError",
    "LocatedProfileError",
    "NotFoundError",
    "status_for",
    "stream_errors",
    "unary_errors",
]


class LocatedProfileError(UnknownProfileError):
    """An unknown profile chosen by a pod's own schedulerName, reported at that pod's field path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def status_for(exc: BaseException) -> status_pb2.Status:
    """The google.rpc.Status for a request fault (INVALID_ARGUMENT carries a BadRequest field path)."""
    if isinstance(exc, ValidationError | ConversionError):
        bad = error_details_pb2.BadRequest(
            field_violations=[error_details_pb2.BadRequest.FieldViolation(field=exc.field, description=exc.message)]
        )
        return _status(code_pb2.INVALID_ARGUMENT, str(exc), bad, "INVALID_OBJECT")
    if isinstance(exc, UnknownProfileError):
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(
                    field=exc.field if isinstance(exc, LocatedProfileError) else "scheduler_name", description=str(exc)
                )
            ]
        )
        return _status(code_pb2.INVALID_ARGUMENT, str(exc), bad, "UNKNOWN_PROFILE")
    if isinstance(exc, NotFoundError):
        return _status(code_pb2.NOT_FOUND, str(exc), None, "NOT_FOUND")
    if isinstance(exc, StalePodError):
        return _status(code_pb2.ABORTED, str(exc), None, "STALE_POD")
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
    return status_pb2.Status(code=code, message=message, details=details)


# Request faults answered with their own status; anything else is logged as a bug and answered INTERNAL.
_EXPECTED = (ValidationError, ConversionError, UnknownProfileError, NotFoundError, CacheNotSyncedError)


def _log_unexpected(method: str, exc: BaseException) -> None:
    if not isinstance(exc, _EXPECTED):
        log.exception("unexpected error in %s", method, exc_info=exc)


Req = TypeVar("Req")
Resp = TypeVar("Resp")


def unary_errors(
    method: Callable[[Any, Req, grpc.aio.ServicerContext], Awaitable[Resp]],
) -> Callable[[Any, Req, grpc.aio.ServicerContext], Awaitable[Resp]]:
    """Turns exceptions raised by a unary servicer method into proper gRPC statuses."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Req, context: grpc.aio.ServicerContext) -> Resp:
        try:
            return await method(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            _log_unexpected(method.__qualname__, exc)
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
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            _log_unexpected(method.__qualname__, exc)
            await context.abort_with_status(rpc_status.to_status(status_for(exc)))

    return wrapper
