"""Request bytes that are not the protobuf they claim to be are refused as INVALID_ARGUMENT, not UNKNOWN.

gRPC decodes a request before any servicer code runs, and answers a decode failure itself with UNKNOWN
and protobuf's own text. Here every servicer is registered with deserializers that never fail: bytes
that do not parse become an :class:`Undecodable`, which the unary handler refuses with the field path
where the wire format broke, and which a request stream hands to the servicer (ClusterCache.Stream
refuses that one batch in band and goes on) or raises as a ValidationError where the stream is read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass
from grpc_status import rpc_status
from podfit.k8s.protobuf import read_varint
from podfit.server.model import ValidationError
from podfit.server.transport.errors import log_rejected, status_for

# Sub-messages deeper than this are not searched for the broken field (protobuf refuses ~100 deep anyway).
_LOCATE_DEPTH = 32


class _Malformed(Exception):
    """The wire format breaks at the field being read (``number``; 0 when its tag is unreadable)."""

    def __init__(self, number: int = 0) -> None:
        super().__init__(number)
        self.number = number


@dataclass(frozen=True)
class Undecodable:
    """A request whose bytes did not parse as ``message_type``."""

    message_type: type[Message]
    data: bytes

    def error(self) -> ValidationError:
        """The refusal, at the field path (proto names, ``updates[2].upsert``) where decoding broke."""
        name = self.message_type.DESCRIPTOR.full_name
        field = _locate(self.message_type.DESCRIPTOR, self.data, "", 0)
        return ValidationError(field, f"is not valid protobuf wire format for {name}: the request cannot be decoded")

    def varint(self, name: str) -> int:
        """A top-level integer field read from the raw bytes (0 when absent or unreadable), so a stream
        can still say which request it refuses."""
        field = self.message_type.DESCRIPTOR.fields_by_name[name]
        number = field.number
        found = 0
        try:
            for field_number, wire_type, value in _fields(self.data):
                if field_number == number and wire_type == 0:
                    found = int(value) & 0xFFFFFFFFFFFFFFFF
        except _Malformed:
            pass
        if field.type in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_UINT32):
            # Unsigned (a Stream sequence): 2^64-1 is a sequence, not -1.
            return found if field.type == FieldDescriptor.TYPE_UINT64 else found & 0xFFFFFFFF
        return found if found < 1 << 63 else found - (1 << 64)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    try:
        return read_varint(data, pos)
    except IndexError:
        raise _Malformed from None


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value or length-delimited bytes) for each top-level field."""
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire_type = tag >> 3, tag & 7
        if number == 0:
            raise _Malformed
        value: int | bytes
        try:
            if wire_type == 0:
                value, pos = _varint(data, pos)
            elif wire_type in (1, 5):
                size = 8 if wire_type == 1 else 4
                if pos + size > len(data):
                    raise _Malformed
                value, pos = int.from_bytes(data[pos : pos + size], "little"), pos + size
            elif wire_type == 2:
                size, pos = _varint(data, pos)
                if pos + size > len(data):
                    raise _Malformed
                value, pos = data[pos : pos + size], pos + size
            else:
                raise _Malformed  # groups are not used by podfit's messages
        except _Malformed:
            raise _Malformed(number) from None
        yield number, wire_type, value


def _locate(descriptor: Any, data: bytes, path: str, depth: int) -> str:
    """The path of the first field of ``data`` that does not decode (``path`` itself when none is found)."""
    seen: dict[int, int] = {}
    try:
        for number, wire_type, value in _fields(data):
            field = descriptor.fields_by_number.get(number)
            if field is None or wire_type != 2:
                continue
            index = seen.get(number, 0)
            seen[number] = index + 1
            where = f"{path}.{field.name}" if path else field.name
            if field.is_repeated:
                where += f"[{index}]"
            assert isinstance(value, bytes)
            if field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type is not None:
                try:
                    GetMessageClass(field.message_type).FromString(value)
                except DecodeError:
                    if depth >= _LOCATE_DEPTH:
                        return where
                    return _locate(field.message_type, value, where, depth + 1)
            elif field.type == FieldDescriptor.TYPE_STRING:
                try:
                    value.decode("utf-8")
                except UnicodeDecodeError:
                    return where
    except _Malformed as exc:
        field = descriptor.fields_by_number.get(exc.number)
        if field is not None:
            where = f"{path}.{field.name}" if path else field.name
            return f"{where}[{seen.get(exc.number, 0)}]" if field.is_repeated else where
    return path


def _deserializer(message_type: type[Message]) -> Callable[[bytes], Message | Undecodable]:
    def deserialize(data: bytes) -> Message | Undecodable:
        try:
            return message_type.FromString(data)
        except DecodeError:
            return Undecodable(message_type, data)

    return deserialize


async def _refuse(request: Undecodable, method: str, context: grpc.aio.ServicerContext) -> None:
    exc = request.error()
    log_rejected(method, exc)
    await context.abort_with_status(rpc_status.to_status(status_for(exc)))


def _tolerant(handler: Any, method: str) -> Any:
    """``handler`` (a grpc RpcMethodHandler) with a deserializer that never fails and a behaviour that
    refuses what it could not decode."""
    deserialize = handler.request_deserializer
    message_type = getattr(deserialize, "__self__", None)
    if not isinstance(message_type, type) or not issubclass(message_type, Message):
        return handler
    if handler.unary_unary is not None:
        inner = handler.unary_unary

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            if isinstance(request, Undecodable):
                await _refuse(request, method, context)
            return await inner(request, context)

        return handler._replace(request_deserializer=_deserializer(message_type), unary_unary=unary)
    if handler.stream_stream is not None:
        inner_stream = handler.stream_stream
        if getattr(inner_stream, "accepts_undecodable", False):
            return handler._replace(request_deserializer=_deserializer(message_type))

        async def checked(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
            async for request in requests:
                if isinstance(request, Undecodable):
                    raise request.error()
                yield request

        def stream(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
            return inner_stream(checked(requests), context)

        return handler._replace(request_deserializer=_deserializer(message_type), stream_stream=stream)
    return handler


def accepts_undecodable(method: Any) -> Any:
    """Marks a stream servicer method that handles Undecodable requests itself (refusing them in band)."""
    method.accepts_undecodable = True
    return method


class _TolerantGenericHandler(grpc.GenericRpcHandler):  # type: ignore[misc]
    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._rewritten: dict[str, Any] = {}

    def service(self, details: grpc.HandlerCallDetails) -> Any:
        method = details.method
        if method not in self._rewritten:
            handler = self._inner.service(details)
            if handler is None:
                return None
            self._rewritten[method] = _tolerant(handler, method.strip("/").replace("/", "."))
        return self._rewritten[method]


class _Registrar:
    """Stands in for the server while generated ``add_*Servicer_to_server`` code registers its handlers."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, generic_handlers: Any) -> None:
        self._server.add_generic_rpc_handlers(tuple(_TolerantGenericHandler(g) for g in generic_handlers))

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        rewritten = {name: _tolerant(handler, f"{service}.{name}") for name, handler in handlers.items()}
        self._server.add_registered_method_handlers(service, rewritten)


def add_servicer(add: Callable[[Any, Any], None], servicer: Any, server: grpc.aio.Server) -> None:
    """``add(servicer, server)`` (generated registration code), with undecodable requests refused as bad input."""
    add(servicer, _Registrar(server))
