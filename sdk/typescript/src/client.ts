import type { MessageInitShape } from "@bufbuild/protobuf";
import { create, isMessage } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { CallOptions as ConnectCallOptions, Client, Interceptor } from "@connectrpc/connect";
import { createClient as createConnectClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type { SecureClientSessionOptions } from "node:http2";
import type {
  ApplyResponse,
  GetResponse,
  ListResponse,
  ReplaceResponse,
  MarkSyncedResponse,
  StatsResponse,
  StreamRequest,
  StreamResponse,
  Update,
} from "./gen/podfit/v1/cluster_cache_pb.js";
import { ClusterCache, PodPhaseFilter, StreamRequestSchema, UpdateSchema } from "./gen/podfit/v1/cluster_cache_pb.js";
import type {
  FilterResponse,
  PreemptResponse,
  ScheduleBatchResponse,
  ScheduleRequest,
  ScheduleResponse,
  ScoreResponse,
} from "./gen/podfit/v1/scheduler_pb.js";
import { Scheduler, ScheduleRequestSchema, View as ViewEnum } from "./gen/podfit/v1/scheduler_pb.js";
import type {
  EstimateScaleUpResponse,
  Scenario,
  SimulateDrainResponse,
  SimulateResponse,
} from "./gen/podfit/v1/simulation_pb.js";
import { DrainDestinations, ScenarioSchema, Simulation } from "./gen/podfit/v1/simulation_pb.js";
import { PodfitError } from "./errors.js";
import type { ObjectInput, ObjectKeyInput, PodInput } from "./objects.js";
import { flatten, objectKey, objectKind, toClusterObject, toPodReference } from "./objects.js";

export const DEFAULT_TARGET = "localhost:50051";
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

export interface ClientOptions {
  /** Dial with TLS (implied by ca, cert and key, and by an https:// target). */
  tls?: boolean;
  /** PEM CA certificate(s) to trust instead of the system's (a private CA). */
  ca?: string | Buffer;
  /** PEM client certificate and key, for mTLS. */
  cert?: string | Buffer;
  key?: string | Buffer;
  /** Sent as `authorization: Bearer <token>` on every call. */
  token?: string;
  /** Send the token over plaintext too (tests, a loopback sidecar). Off by default: the token would travel in clear. */
  allowInsecureToken?: boolean;
  /** Largest message sent or received (default 64 MiB, as the server's default). */
  maxMessageBytes?: number;
  /** A timeout for every call that does not set its own. */
  defaultTimeoutMs?: number;
  /** More interceptors, run after the token's. */
  interceptors?: Interceptor[];
  /** Passed to Node's http2.connect() (e.g. servername); ca, cert and key above take precedence. */
  nodeOptions?: SecureClientSessionOptions;
}

/** Every method takes these: an AbortSignal cancels the call (Code.Canceled), timeoutMs bounds it (Code.DeadlineExceeded). */
export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

/** "basic" returns only the outcome of a decision (no per-node lists): small responses on large clusters. */
export type View = "full" | "basic";

export interface DecisionOptions extends CallOptions {
  /** Candidate nodes; empty means every node in the cache. */
  nodeNames?: string[];
  /** The profile; empty means the pod's spec.schedulerName, then "default-scheduler". */
  schedulerName?: string;
  /**
   * The kube-scheduler version to answer as, "v1.36" say (stats() lists the supported ones); empty
   * means the profile's. The response's kubeSchedulerVersion names the release that answered.
   */
  kubeSchedulerVersion?: string;
  view?: View;
}

export interface ScheduleOptions extends DecisionOptions {
  /** Reserve the pod on the selected node in the cache (it becomes a bound pod). */
  assume?: boolean;
  /** When nothing fits, do not compute a preemption answer. */
  disablePreemption?: boolean;
}

export interface ScheduleBatchOptions extends DecisionOptions {
  /** Assume nothing unless every pod is placed (gang scheduling). */
  allOrNothing?: boolean;
  disablePreemption?: boolean;
  /** Answer as the batch would place the pods, then undo every reservation. */
  dryRun?: boolean;
}

export interface PreemptOptions extends CallOptions {
  nodeNames?: string[];
  schedulerName?: string;
  kubeSchedulerVersion?: string;
}

export interface ApplyOptions extends CallOptions {
  /** Deletes applied after the upserts, in the same atomic batch. */
  deletes?: ObjectKeyInput[];
}

export interface ListOptions extends CallOptions {
  /** Only objects of this namespace; empty means all. */
  namespace?: string;
  /** A Kubernetes label selector ("app=web,tier!=db"). */
  labelSelector?: string;
  /** A Kubernetes field selector, evaluated by the server: metadata.name, metadata.namespace, and pods'
   * spec.nodeName ("spec.nodeName=node-a" is one node's pods). */
  fieldSelector?: string;
  /** Pods only: "pending" (no node) or "bound". */
  podFilter?: "" | "pending" | "bound";
  /** listPages: at most this many objects per page (Kubernetes' limit); 0 or unset: as many as fit. */
  limit?: number;
}

/** One batch of a Stream: applied atomically, acknowledged in order. */
export interface StreamBatch {
  /** Echoed in the acknowledgement; by default the previous batch's plus one, from 1. */
  sequence?: number | bigint;
  objects?: ObjectInput | ObjectInput[];
  deletes?: ObjectKeyInput[];
}

/** One pod of a ScheduleStream, with its own options. */
export interface ScheduleStreamItem {
  pod: PodInput;
  nodeNames?: string[];
  schedulerName?: string;
  kubeSchedulerVersion?: string;
  assume?: boolean;
  disablePreemption?: boolean;
  view?: View;
}

/** A what-if scenario, with nodes and pods as plain Kubernetes objects; applied in this order. */
export interface ScenarioInput {
  removeNodes?: string[];
  /**
   * Copy i of a template is named "<template name>-sim-<i>". `resourceSlices` are what DRA drivers
   * publish on one node of the template (node-local ResourceSlices): each copy gets its own.
   */
  addNodes?: { template: ObjectInput; count: number; resourceSlices?: ObjectInput[] }[];
  cordonNodes?: string[];
  taintNodes?: { nodeName: string; taint: { key: string; value?: string; effect: string } }[];
  removePods?: { namespace?: string; name: string }[];
  /** Pods bound in the scenario: each names its node (spec.nodeName). */
  addPods?: PodInput[];
}

export interface SimulateOptions extends CallOptions {
  scenario?: ScenarioInput | Scenario;
  schedulerName?: string;
  kubeSchedulerVersion?: string;
}

/** A node group as cluster-autoscaler sees it: at most maxSize - currentSize new copies of template. */
export interface NodeGroupInput {
  id: string;
  template: ObjectInput;
  currentSize: number;
  maxSize: number;
  /** What DRA drivers publish on one node of the group (node-local ResourceSlices): each new node gets its own. */
  resourceSlices?: ObjectInput[];
}

export interface EstimateOptions extends CallOptions {
  schedulerName?: string;
  kubeSchedulerVersion?: string;
}

/** cluster-autoscaler's drain flags, with its defaults. */
export interface SimulateDrainOptions extends CallOptions {
  skipNodesWithSystemPods?: boolean;
  skipNodesWithLocalStorage?: boolean;
  skipNodesWithCustomControllerPods?: boolean;
  minReplicaCount?: number;
  /** cluster-autoscaler's --expendable-pods-priority-cutoff; -10 when unset. */
  expendablePodsPriorityCutoff?: number;
  /** Leave Succeeded and Failed pods out, as cluster-autoscaler's scale-down loop does; true when unset. */
  skipTerminalPods?: boolean;
  /** "other-nodes" (default: no node of the request receives pods) or "all-but-removed" (cluster-autoscaler's). */
  destinations?: "other-nodes" | "all-but-removed";
  /** Judges terminating pods; the server's clock when unset. */
  now?: Date;
  schedulerName?: string;
  kubeSchedulerVersion?: string;
}

const VIEWS: Record<View, ViewEnum> = { full: ViewEnum.FULL, basic: ViewEnum.BASIC };
const POD_FILTERS = { "": PodPhaseFilter.UNSPECIFIED, pending: PodPhaseFilter.PENDING, bound: PodPhaseFilter.BOUND };

function view(value: View | undefined, field = "view"): ViewEnum {
  const result = VIEWS[value ?? "full"];
  if (result === undefined) {
    throw PodfitError.invalidArgument(field, `must be one of ${Object.keys(VIEWS).join(", ")}, not ${JSON.stringify(value)}`);
  }
  return result;
}

function baseUrl(target: string, tls: boolean): string {
  if (/^https?:\/\//.test(target)) {
    if (tls && target.startsWith("http://")) {
      throw new TypeError(`podfit: TLS options given for a plaintext target ${target}`);
    }
    return target.replace(/\/+$/, "");
  }
  return `${tls ? "https" : "http"}://${target}`;
}

function connectOptions(options: CallOptions | undefined): ConnectCallOptions {
  const result: ConnectCallOptions = {};
  if (options?.signal !== undefined) result.signal = options.signal;
  if (options?.timeoutMs !== undefined) result.timeoutMs = options.timeoutMs;
  return result;
}

/**
 * Dials podfit: `createClient("localhost:50051")` (plaintext), `createClient("podfit:50051", {ca, cert,
 * key})` (mTLS), or a full `https://host:port` URL. Nothing connects until the first call.
 */
export function createClient(target: string = DEFAULT_TARGET, options: ClientOptions = {}): PodfitClient {
  return new PodfitClient(target, options);
}

/** podfit's three services behind async methods that take plain Kubernetes objects and return typed messages. */
export class PodfitClient {
  readonly baseUrl: string;
  /** The generated clients, for requests built by hand. */
  readonly cache: Client<typeof ClusterCache>;
  readonly scheduler: Client<typeof Scheduler>;
  readonly simulation: Client<typeof Simulation>;
  private readonly session: Http2SessionManager;

  constructor(target: string = DEFAULT_TARGET, options: ClientOptions = {}) {
    const tls = Boolean(options.tls || options.ca || options.cert || options.key) || target.startsWith("https://");
    this.baseUrl = baseUrl(target, tls);
    const secure = this.baseUrl.startsWith("https://");
    if (options.token !== undefined && !secure && !options.allowInsecureToken) {
      throw new TypeError(
        "podfit: refusing to send a bearer token over plaintext; dial with TLS, or set allowInsecureToken: true",
      );
    }
    if ((options.cert === undefined) !== (options.key === undefined)) {
      throw new TypeError("podfit: mTLS needs both cert and key");
    }
    const nodeOptions: SecureClientSessionOptions = { ...options.nodeOptions };
    if (options.ca !== undefined) nodeOptions.ca = options.ca;
    if (options.cert !== undefined) nodeOptions.cert = options.cert;
    if (options.key !== undefined) nodeOptions.key = options.key;
    this.session = new Http2SessionManager(this.baseUrl, {}, nodeOptions);

    const interceptors: Interceptor[] = [];
    const token = options.token;
    if (token !== undefined) {
      interceptors.push((next) => (request) => {
        request.header.set("authorization", `Bearer ${token}`);
        return next(request);
      });
    }
    interceptors.push(...(options.interceptors ?? []));
    const maxBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    const transport = createGrpcTransport({
      baseUrl: this.baseUrl,
      sessionManager: this.session,
      interceptors,
      readMaxBytes: maxBytes,
      writeMaxBytes: maxBytes,
      ...(options.defaultTimeoutMs === undefined ? {} : { defaultTimeoutMs: options.defaultTimeoutMs }),
    });
    this.cache = createConnectClient(ClusterCache, transport);
    this.scheduler = createConnectClient(Scheduler, transport);
    this.simulation = createConnectClient(Simulation, transport);
  }

  /** Closes the connection and any open stream; a later call dials again. */
  close(): void {
    this.session.abort();
  }

  private async call<T>(run: (options: ConnectCallOptions) => Promise<T>, options: CallOptions | undefined): Promise<T> {
    try {
      return await run(connectOptions(options));
    } catch (error) {
      throw PodfitError.from(error);
    }
  }

  // ClusterCache ------------------------------------------------------------------------------------

  /** Upserts objects (and `deletes`) atomically, in order: all are valid and applied, or none is. */
  async apply(objects: ObjectInput | ObjectInput[] = [], options: ApplyOptions = {}): Promise<ApplyResponse> {
    const updates = updatesOf(objects, options.deletes ?? [], "updates");
    return this.call((o) => this.cache.apply({ updates }, o), options);
  }

  async delete(kind: string, name: string, namespace = "", options: CallOptions = {}): Promise<ApplyResponse> {
    return this.apply([], { ...options, deletes: [{ kind, name, namespace }] });
  }

  /** Makes `objects` exactly the objects of `kind` (an informer relist). */
  async replace(kind: string, objects: ObjectInput | ObjectInput[], options: CallOptions = {}): Promise<ReplaceResponse> {
    const request = {
      kind: objectKind(kind),
      objects: flatten(objects).map((o, i) => toClusterObject(o, `objects[${i}]`, kind)),
    };
    return this.call((o) => this.cache.replace(request, o), options);
  }

  async get(kind: string, name: string, namespace = "", options: CallOptions = {}): Promise<GetResponse> {
    const key = objectKey({ kind, name, namespace });
    return this.call((o) => this.cache.get({ key }, o), options);
  }

  /** Every matching object in one answer, however many pages the server splits it into. */
  async list(kind: string, options: ListOptions = {}): Promise<ListResponse> {
    let merged: ListResponse | undefined;
    for await (const page of this.listPages(kind, options)) {
      if (merged === undefined) {
        merged = page;
      } else {
        merged.objects.push(...page.objects);
        merged.nodeAllocations.push(...page.nodeAllocations);
        merged.generation = page.generation;
        merged.serverEpoch = page.serverEpoch;
      }
    }
    merged!.continueToken = "";
    merged!.remainingItemCount = 0n;
    return merged!;
  }

  /** The List pages in turn (`limit` objects at most each), following continueToken. */
  async *listPages(kind: string, options: ListOptions = {}): AsyncGenerator<ListResponse> {
    const podFilter = POD_FILTERS[options.podFilter ?? ""];
    if (podFilter === undefined) {
      throw PodfitError.invalidArgument("pod_filter", `must be "pending", "bound" or empty, not ${JSON.stringify(options.podFilter)}`);
    }
    const request = {
      kind: objectKind(kind),
      namespace: options.namespace ?? "",
      labelSelector: options.labelSelector ?? "",
      fieldSelector: options.fieldSelector ?? "",
      podFilter,
      limit: options.limit ?? 0,
      continueToken: "",
    };
    for (;;) {
      const page = await this.call((o) => this.cache.list(request, o), options);
      yield page;
      if (!page.continueToken) {
        return;
      }
      request.continueToken = page.continueToken;
    }
  }

  async stats(options: CallOptions = {}): Promise<StatsResponse> {
    return this.call((o) => this.cache.stats({}, o), options);
  }

  /**
   * Tells a server started with --wait-for-sync that this feeder's initial list of every kind is applied:
   * decisions are refused until then. Idempotent; the answer carries the server's epoch, which changes
   * when a restart empties the cache (a feeder then relists everything and marks again).
   */
  async markSynced(feeder = "", options: CallOptions = {}): Promise<MarkSyncedResponse> {
    return this.call((o) => this.cache.markSynced({ feeder }, o), options);
  }

  /**
   * Feeds batches over one Stream and yields each acknowledgement, in order. A batch the server finds
   * invalid is refused in band (ack.error, ack.errorField; nothing of it applied) and the stream goes on.
   * `batches` may be an async generator that waits for changes (an informer's events).
   */
  async *stream(
    batches: AsyncIterable<StreamBatch | StreamRequest> | Iterable<StreamBatch | StreamRequest>,
    options: CallOptions = {},
  ): AsyncGenerator<StreamResponse> {
    let refused: PodfitError | undefined;
    async function* requests(): AsyncGenerator<StreamRequest> {
      let sequence = 0n;
      let index = 0;
      for await (const batch of batches) {
        try {
          if (isMessage(batch, StreamRequestSchema)) {
            sequence = batch.sequence;
            yield batch;
          } else {
            sequence = batch.sequence === undefined ? sequence + 1n : BigInt(batch.sequence);
            const updates = updatesOf(batch.objects ?? [], batch.deletes ?? [], `batches[${index}].updates`);
            yield create(StreamRequestSchema, { sequence, updates });
          }
        } catch (error) {
          refused = PodfitError.from(error);
          throw refused;
        }
        index++;
      }
    }
    try {
      yield* this.cache.stream(requests(), connectOptions(options));
    } catch (error) {
      throw refused ?? PodfitError.from(error);
    }
  }

  // Scheduler ---------------------------------------------------------------------------------------

  /** Every candidate node's filter verdict. */
  async filter(pod: PodInput, options: DecisionOptions = {}): Promise<FilterResponse> {
    const request = { ...decision(options), pod: toPodReference(pod, "pod") };
    return this.call((o) => this.scheduler.filter(request, o), options);
  }

  /** Scores of every feasible node, best first, with the per-plugin breakdown. */
  async score(pod: PodInput, options: DecisionOptions = {}): Promise<ScoreResponse> {
    const request = { ...decision(options), pod: toPodReference(pod, "pod") };
    return this.call((o) => this.scheduler.score(request, o), options);
  }

  /** Filter, score and select; `assume` reserves the pod on the selected node. */
  async schedule(pod: PodInput, options: ScheduleOptions = {}): Promise<ScheduleResponse> {
    const request = scheduleRequest({ ...options, pod }, "pod");
    return this.call((o) => this.scheduler.schedule(request, o), options);
  }

  /** Schedule for a stream of pods on one call, answered in order. */
  async *scheduleStream(
    requests: AsyncIterable<ScheduleStreamItem | ScheduleRequest> | Iterable<ScheduleStreamItem | ScheduleRequest>,
    options: CallOptions = {},
  ): AsyncGenerator<ScheduleResponse> {
    let refused: PodfitError | undefined;
    async function* messages(): AsyncGenerator<ScheduleRequest> {
      let index = 0;
      for await (const item of requests) {
        try {
          yield isMessage(item, ScheduleRequestSchema) ? item : scheduleRequest(item, `requests[${index}].pod`);
        } catch (error) {
          refused = PodfitError.from(error);
          throw refused;
        }
        index++;
      }
    }
    try {
      yield* this.scheduler.scheduleStream(messages(), connectOptions(options));
    } catch (error) {
      throw refused ?? PodfitError.from(error);
    }
  }

  /** Schedules `pods` in order on one call, assuming them (unless `dryRun`); each sees the earlier ones. */
  async scheduleBatch(pods: PodInput[], options: ScheduleBatchOptions = {}): Promise<ScheduleBatchResponse> {
    const request = {
      ...decision(options),
      pods: pods.map((pod, i) => toPodReference(pod, `pods[${i}]`)),
      allOrNothing: options.allOrNothing ?? false,
      disablePreemption: options.disablePreemption ?? false,
      dryRun: options.dryRun ?? false,
    };
    return this.call((o) => this.scheduler.scheduleBatch(request, o), options);
  }

  /** Which pods to evict, and where the pod would then go. */
  async preempt(pod: PodInput, options: PreemptOptions = {}): Promise<PreemptResponse> {
    const request = {
      pod: toPodReference(pod, "pod"),
      nodeNames: options.nodeNames ?? [],
      schedulerName: options.schedulerName ?? "",
      kubeSchedulerVersion: options.kubeSchedulerVersion ?? "",
    };
    return this.call((o) => this.scheduler.preempt(request, o), options);
  }

  // Simulation --------------------------------------------------------------------------------------

  /** A what-if scenario, then `pods` placed in order inside it; the server's cache never changes. */
  async simulate(pods: PodInput[], options: SimulateOptions = {}): Promise<SimulateResponse> {
    const request = {
      scenario: scenarioOf(options.scenario),
      pods: pods.map((pod, i) => toPodReference(pod, `pods[${i}]`)),
      schedulerName: options.schedulerName ?? "",
      kubeSchedulerVersion: options.kubeSchedulerVersion ?? "",
    };
    return this.call((o) => this.simulation.simulate(request, o), options);
  }

  /** cluster-autoscaler's binpacking estimate: `groups` are lists of identical pending pods. */
  async estimateScaleUp(
    groups: PodInput[][],
    nodeGroups: NodeGroupInput[],
    options: EstimateOptions = {},
  ): Promise<EstimateScaleUpResponse> {
    const request = {
      groups: groups.map((pods, g) => ({ pods: pods.map((pod, i) => toPodReference(pod, `groups[${g}].pods[${i}]`)) })),
      nodeGroups: nodeGroups.map((group, i) => ({
        id: group.id,
        template: toClusterObject(group.template, `node_groups[${i}].template`, "Node"),
        currentSize: group.currentSize,
        maxSize: group.maxSize,
        templateResourceSlices: (group.resourceSlices ?? []).map((slice, j) =>
          toClusterObject(slice, `node_groups[${i}].template_resource_slices[${j}]`, "ResourceSlice"),
        ),
      })),
      schedulerName: options.schedulerName ?? "",
      kubeSchedulerVersion: options.kubeSchedulerVersion ?? "",
    };
    return this.call((o) => this.simulation.estimateScaleUp(request, o), options);
  }

  /** cluster-autoscaler's removal simulation of `nodeNames`: per node, whether it can go and where its pods would move. */
  async simulateDrain(nodeNames: string[], options: SimulateDrainOptions = {}): Promise<SimulateDrainResponse> {
    const request = {
      nodeNames,
      options: {
        skipNodesWithSystemPods: options.skipNodesWithSystemPods ?? true,
        skipNodesWithLocalStorage: options.skipNodesWithLocalStorage ?? true,
        skipNodesWithCustomControllerPods: options.skipNodesWithCustomControllerPods ?? true,
        minReplicaCount: options.minReplicaCount ?? 0,
        expendablePodsPriorityCutoff: options.expendablePodsPriorityCutoff,
        skipTerminalPods: options.skipTerminalPods,
      },
      destinations:
        options.destinations === "all-but-removed"
          ? DrainDestinations.ALL_BUT_REMOVED
          : options.destinations === "other-nodes"
            ? DrainDestinations.OTHER_NODES
            : DrainDestinations.UNSPECIFIED,
      schedulerName: options.schedulerName ?? "",
      kubeSchedulerVersion: options.kubeSchedulerVersion ?? "",
      ...(options.now === undefined ? {} : { now: timestampFromDate(options.now) }),
    };
    return this.call((o) => this.simulation.simulateDrain(request, o), options);
  }
}

function updatesOf(objects: ObjectInput | ObjectInput[], deletes: ObjectKeyInput[], field: string): Update[] {
  const upserts = flatten(objects).map((object, i) =>
    create(UpdateSchema, { operation: { case: "upsert", value: toClusterObject(object, `${field}[${i}].upsert`) } }),
  );
  const offset = upserts.length;
  const removals = deletes.map((key, i) =>
    create(UpdateSchema, { operation: { case: "delete", value: objectKey(key, `${field}[${offset + i}].delete`) } }),
  );
  return [...upserts, ...removals];
}

function decision(options: DecisionOptions) {
  return {
    nodeNames: options.nodeNames ?? [],
    schedulerName: options.schedulerName ?? "",
    kubeSchedulerVersion: options.kubeSchedulerVersion ?? "",
    view: view(options.view),
  };
}

function scheduleRequest(item: ScheduleStreamItem, field: string): ScheduleRequest {
  return create(ScheduleRequestSchema, {
    ...decision(item),
    pod: toPodReference(item.pod, field),
    assume: item.assume ?? false,
    disablePreemption: item.disablePreemption ?? false,
  });
}

function scenarioOf(input: ScenarioInput | Scenario | undefined): Scenario {
  if (input === undefined) {
    return create(ScenarioSchema);
  }
  if (isMessage(input, ScenarioSchema)) {
    return input;
  }
  const init: MessageInitShape<typeof ScenarioSchema> = {
    removeNodes: input.removeNodes ?? [],
    addNodes: (input.addNodes ?? []).map((nodes, i) => ({
      template: toClusterObject(nodes.template, `scenario.add_nodes[${i}].template`, "Node"),
      count: nodes.count,
      resourceSlices: (nodes.resourceSlices ?? []).map((slice, j) =>
        toClusterObject(slice, `scenario.add_nodes[${i}].resource_slices[${j}]`, "ResourceSlice"),
      ),
    })),
    cordonNodes: input.cordonNodes ?? [],
    taintNodes: (input.taintNodes ?? []).map((t) => ({
      nodeName: t.nodeName,
      taint: { key: t.taint.key, value: t.taint.value ?? "", effect: t.taint.effect },
    })),
    removePods: (input.removePods ?? []).map((pod, i) => objectKey({ kind: "Pod", ...pod }, `scenario.remove_pods[${i}]`)),
    addPods: (input.addPods ?? []).map((pod, i) => toPodReference(pod, `scenario.add_pods[${i}]`)),
  };
  return create(ScenarioSchema, init);
}
