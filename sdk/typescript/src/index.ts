// @podfit/sdk: the TypeScript client of podfit. The generated podfit.v1 messages and services are
// re-exported as `v1` (and their types at the top level) for requests built by hand.
export { createClient, PodfitClient, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_TARGET } from "./client.js";
export type {
  ApplyOptions,
  CallOptions,
  ClientOptions,
  DecisionOptions,
  EstimateOptions,
  ListOptions,
  NodeGroupInput,
  PreemptOptions,
  ScenarioInput,
  ScheduleBatchOptions,
  ScheduleOptions,
  ScheduleStreamItem,
  SimulateDrainOptions,
  SimulateOptions,
  StreamBatch,
  View,
} from "./client.js";
export { Code, PodfitError } from "./errors.js";
export type { ErrorDetails, FieldViolation } from "./errors.js";
export { cached, objectKey, objectKind, unwrap } from "./objects.js";
export type { KubeObject, ObjectInput, ObjectKeyInput, PodInput, TypedObject } from "./objects.js";
export type { BadRequest, ErrorInfo } from "./rpc_details.js";
export * as v1 from "./v1.js";
