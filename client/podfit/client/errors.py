"""Typed client errors carrying the gRPC status code and the parsed google.rpc details."""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status


@dataclass
class PodfitError(Exception):
    code: grpc.StatusCode
    message: str
    # (field path, description) pairs from a BadRequest detail.
    field_violations: list[tuple[str, str]] = field(default_factory=list)
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> PodfitError:
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        details = error.details() if hasattr(error, "details") else str(error)
        violations: list[tuple[str, str]] = []
        reason = ""
        try:
            status = rpc_status.from_call(error)
        except (ValueError, AttributeError):
            status = None
        if status is not None:
            for detail in status.details:
                if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                    bad = error_details_pb2.BadRequest()
                    detail.Unpack(bad)
                    violations.extend((v.field, v.description) for v in bad.field_violations)
                elif detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                    info = error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    reason = info.reason
        return cls(code, details or "", violations, reason)
