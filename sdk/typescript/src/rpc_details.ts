// The two google.rpc error details podfit sends in grpc-status-details-bin (google/rpc/error_details.proto),
// described at runtime with @bufbuild/protobuf: only the fields podfit reads, with their upstream names
// and numbers, so that ConnectError.findDetails() can decode them. Nothing here is generated: podfit's
// generated code (src/gen) is podfit/v1 only.
import type { Message } from "@bufbuild/protobuf";
import { create, createFileRegistry } from "@bufbuild/protobuf";
import type { GenMessage } from "@bufbuild/protobuf/codegenv2";
import {
  FieldDescriptorProto_Label as Label,
  FieldDescriptorProto_Type as Type,
  FileDescriptorProtoSchema,
} from "@bufbuild/protobuf/wkt";

/** google.rpc.BadRequest.FieldViolation: which request field is invalid, and why. */
export type FieldViolation = Message<"google.rpc.BadRequest.FieldViolation"> & {
  field: string;
  description: string;
  reason: string;
};

/** google.rpc.BadRequest: podfit sends one for every INVALID_ARGUMENT. */
export type BadRequest = Message<"google.rpc.BadRequest"> & {
  fieldViolations: FieldViolation[];
};

/** google.rpc.ErrorInfo: podfit's machine-readable reason (INVALID_OBJECT, UNKNOWN_PROFILE, NOT_FOUND, ...). */
export type ErrorInfo = Message<"google.rpc.ErrorInfo"> & {
  reason: string;
  domain: string;
  metadata: { [key: string]: string };
};

const string = (name: string, number: number, jsonName: string) => ({
  name,
  number,
  jsonName,
  label: Label.OPTIONAL,
  type: Type.STRING,
});

const registry = createFileRegistry(
  create(FileDescriptorProtoSchema, {
    name: "google/rpc/error_details.proto",
    package: "google.rpc",
    syntax: "proto3",
    messageType: [
      {
        name: "ErrorInfo",
        field: [
          string("reason", 1, "reason"),
          string("domain", 2, "domain"),
          {
            name: "metadata",
            number: 3,
            jsonName: "metadata",
            label: Label.REPEATED,
            type: Type.MESSAGE,
            typeName: ".google.rpc.ErrorInfo.MetadataEntry",
          },
        ],
        nestedType: [
          {
            name: "MetadataEntry",
            field: [string("key", 1, "key"), string("value", 2, "value")],
            options: { mapEntry: true },
          },
        ],
      },
      {
        name: "BadRequest",
        field: [
          {
            name: "field_violations",
            number: 1,
            jsonName: "fieldViolations",
            label: Label.REPEATED,
            type: Type.MESSAGE,
            typeName: ".google.rpc.BadRequest.FieldViolation",
          },
        ],
        nestedType: [
          {
            name: "FieldViolation",
            field: [string("field", 1, "field"), string("description", 2, "description"), string("reason", 3, "reason")],
          },
        ],
      },
    ],
  }),
  () => undefined,
);

function message<T extends Message>(typeName: T["$typeName"]): GenMessage<T> {
  const desc = registry.getMessage(typeName);
  if (desc === undefined) {
    throw new Error(`podfit: ${typeName} missing from the google.rpc descriptors`);
  }
  return desc as GenMessage<T>;
}

export const BadRequestSchema = message<BadRequest>("google.rpc.BadRequest");
export const ErrorInfoSchema = message<ErrorInfo>("google.rpc.ErrorInfo");
