"""gRPC server reflection, v1 as well as v1alpha.

grpcio-reflection serves only ``grpc.reflection.v1alpha``; current clients (grpcurl, Postman, grpc-go's
reflection client) ask for ``grpc.reflection.v1`` first. v1 is v1alpha promoted without change: the same
messages with the same field numbers under another package. So podfit derives the v1 file descriptor
from v1alpha's when reflection is enabled (no generated code to keep in step), registers it so that
reflection can describe itself, and answers v1 with the v1alpha servicer: the wire bytes are the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import grpc
from google.protobuf import descriptor, descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection as v1alpha
from grpc_reflection.v1alpha import reflection_pb2 as v1alpha_pb2

V1_FILE = "grpc/reflection/v1/reflection.proto"
V1_PACKAGE = "grpc.reflection.v1"
V1_SERVICE_NAME = f"{V1_PACKAGE}.ServerReflection"
V1ALPHA_SERVICE_NAME: str = v1alpha.SERVICE_NAME
SERVICE_NAMES = (V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME)


def _renamed(type_name: str) -> str:
    old = f".{v1alpha_pb2.DESCRIPTOR.package}."
    return f".{V1_PACKAGE}." + type_name[len(old) :] if type_name.startswith(old) else type_name


def v1_file_descriptor(pool: Any = None) -> descriptor.FileDescriptor:
    """grpc/reflection/v1/reflection.proto, built from v1alpha's descriptor into ``pool`` (default pool)."""
    pool = pool or descriptor_pool.Default()
    try:
        found: descriptor.FileDescriptor = pool.FindFileByName(V1_FILE)
        return found
    except KeyError:
        pass
    proto = descriptor_pb2.FileDescriptorProto()
    v1alpha_pb2.DESCRIPTOR.CopyToProto(proto)
    proto.name, proto.package = V1_FILE, V1_PACKAGE
    proto.options.java_package = "io.grpc.reflection.v1"
    proto.options.go_package = "google.golang.org/grpc/reflection/grpc_reflection_v1"
    proto.options.ClearField("deprecated")
    for message in proto.message_type:
        for field in message.field:
            if field.HasField("type_name"):
                field.type_name = _renamed(field.type_name)
    for service in proto.service:
        service.options.ClearField("deprecated")
        for method in service.method:
            method.input_type, method.output_type = _renamed(method.input_type), _renamed(method.output_type)
    pool.AddSerializedFile(proto.SerializeToString())
    built: descriptor.FileDescriptor = pool.FindFileByName(V1_FILE)
    return built


def enable_server_reflection(service_names: Iterable[str], server: grpc.aio.Server) -> None:
    """Serves reflection v1 and v1alpha on ``server``, both listing ``service_names`` and themselves."""
    v1_file_descriptor()
    names = (*service_names, *SERVICE_NAMES)
    servicer = v1alpha.aio.ReflectionServicer(names)
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=v1alpha_pb2.ServerReflectionRequest.FromString,
        response_serializer=v1alpha_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        tuple(grpc.method_handlers_generic_handler(name, {"ServerReflectionInfo": handler}) for name in SERVICE_NAMES)
    )
