import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { BadRequest, ErrorInfo } from "./rpc_details.js";
import { BadRequestSchema, ErrorInfoSchema } from "./rpc_details.js";

export { Code };

/** One invalid request field: its path in the request (e.g. `updates[1].upsert.kubernetes_json.spec...`). */
export interface FieldViolation {
  field: string;
  description: string;
}

/** The google.rpc details the server attached to the status. */
export interface ErrorDetails {
  badRequest?: BadRequest;
  errorInfo?: ErrorInfo;
}

/**
 * Every failed call rejects with a PodfitError: the gRPC status `code` (Code.InvalidArgument,
 * Code.NotFound, Code.Unauthenticated, Code.Canceled, Code.DeadlineExceeded, ...), the server's message,
 * and the decoded google.rpc details: `fieldViolations` (BadRequest) and `reason` (ErrorInfo).
 *
 * An unschedulable pod is not an error: it is a successful answer that says, per node, why.
 */
export class PodfitError extends Error {
  override readonly name = "PodfitError";
  /** The gRPC status code (numerically the gRPC code: InvalidArgument is 3). */
  readonly code: Code;
  /** The status message, without the code in front. */
  readonly rawMessage: string;
  /** From a google.rpc.BadRequest detail: the field path of each invalid input and why. */
  readonly fieldViolations: FieldViolation[];
  /** From a google.rpc.ErrorInfo detail: INVALID_OBJECT, UNKNOWN_PROFILE, NOT_FOUND, INTERNAL, ... */
  readonly reason?: string;
  /** ErrorInfo's domain ("podfit.dev"). */
  readonly domain?: string;
  readonly details: ErrorDetails;

  constructor(
    code: Code,
    rawMessage: string,
    options: { details?: ErrorDetails; cause?: unknown } = {},
  ) {
    super(`${Code[code] ?? code}: ${rawMessage}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.rawMessage = rawMessage;
    this.details = options.details ?? {};
    this.fieldViolations = (this.details.badRequest?.fieldViolations ?? []).map((v) => ({
      field: v.field,
      description: v.description,
    }));
    const info = this.details.errorInfo;
    if (info !== undefined) {
      this.reason = info.reason;
      this.domain = info.domain;
    }
  }

  /** Wraps whatever a call threw (a ConnectError, an AbortError, ...); a PodfitError is returned as is. */
  static from(reason: unknown): PodfitError {
    if (reason instanceof PodfitError) {
      return reason;
    }
    const error = ConnectError.from(reason);
    const details: ErrorDetails = {};
    const [badRequest] = error.findDetails(BadRequestSchema);
    const [errorInfo] = error.findDetails(ErrorInfoSchema);
    if (badRequest !== undefined) details.badRequest = badRequest;
    if (errorInfo !== undefined) details.errorInfo = errorInfo;
    return new PodfitError(error.code, error.rawMessage, { details, cause: error });
  }

  /** An input the SDK refuses before sending anything (reported like the server would, at `field`). */
  static invalidArgument(field: string, description: string): PodfitError {
    const badRequest = create(BadRequestSchema, { fieldViolations: [{ field, description }] });
    return new PodfitError(Code.InvalidArgument, `${field}: ${description}`, { details: { badRequest } });
  }
}
