// Failures: every call rejects with a PodfitError carrying the gRPC code and the google.rpc details; an
// AbortSignal or a timeout ends a call.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import { cached, Code, createClient, PodfitError, type KubeObject, type PodfitClient } from "../src/index.js";
import { reset, startServer, type RunningServer } from "./support/server.js";

function node(name: string, cpu = "4"): KubeObject {
  return { kind: "Node", metadata: { name }, status: { allocatable: { cpu, memory: "8Gi", pods: "110" } } };
}

function pod(name: string, cpu = "100m"): KubeObject {
  return { kind: "Pod", metadata: { name }, spec: { containers: [{ name: "c", resources: { requests: { cpu } } }] } };
}

/** Asserts that `call` rejects with a PodfitError and returns it. */
async function failure(call: () => Promise<unknown>): Promise<PodfitError> {
  try {
    await call();
  } catch (error) {
    assert.ok(error instanceof PodfitError, `expected a PodfitError, got ${String(error)}`);
    return error;
  }
  assert.fail("the call succeeded");
}

interface BadRequestCase {
  name: string;
  call: (client: PodfitClient) => Promise<unknown>;
  field: string;
  reason?: string;
}

// Each is refused as INVALID_ARGUMENT with the field path of the offending input (google.rpc.BadRequest),
// as the Python SDK's tests assert; paths name the request's fields (plain objects travel as kubernetes_json).
const BAD_REQUESTS: BadRequestCase[] = [
  {
    name: "a Node whose cpu is not a quantity, second in the batch",
    call: (c) => c.apply([node("n9"), node("n10", "lots")]),
    field: "updates[1].upsert.node.status.allocatable.cpu",
  },
  {
    name: "a malformed label selector",
    call: (c) => c.list("Pod", { labelSelector: "a in b" }),
    field: "label_selector",
  },
  { name: "a get without a name", call: (c) => c.get("Node", ""), field: "key.name" },
  {
    name: "a replace with an object of another kind",
    call: (c) => c.replace("Node", [pod("p")]),
    field: "objects[0]",
  },
  { name: "a pod without a name", call: (c) => c.schedule({ spec: {} }), field: "pod.kubernetes_json.metadata.name" },
  {
    name: "a candidate node not in the cache",
    call: (c) => c.schedule(pod("p"), { nodeNames: ["nowhere"] }),
    field: "node_names[0]",
  },
  {
    name: "an unknown profile",
    call: (c) => c.schedule(pod("p"), { schedulerName: "nobody" }),
    field: "scheduler_name",
    reason: "UNKNOWN_PROFILE",
  },
  {
    name: "a bad pod in a batch, at its index",
    call: (c) => c.scheduleBatch([pod("a"), pod("b", "x")]),
    field: "pods[1].kubernetes_json.spec.containers[0].resources.requests.cpu",
  },
  { name: "preempt with a node instead of a pod", call: (c) => c.preempt(node("x")), field: "pod.kubernetes_json.kind" },
  {
    name: "a scenario pod that names no node",
    call: (c) => c.simulate([], { scenario: { addPods: [pod("z")] } }),
    field: "scenario.add_pods[0].spec.nodeName",
  },
  {
    name: "a node group template with a bad quantity",
    call: (c) => c.estimateScaleUp([[pod("e")]], [{ id: "g", template: node("t", "zz"), currentSize: 0, maxSize: 1 }]),
    field: "node_groups[0].template.node.status.allocatable.cpu",
  },
  { name: "draining a node not in the cluster", call: (c) => c.simulateDrain(["nope"]), field: "node_names[0]" },
];

describe("errors", () => {
  let server: RunningServer;
  let client: PodfitClient;

  before(async () => {
    server = await startServer();
    client = server.client;
  });
  after(async () => server?.stop());
  beforeEach(async () => {
    await reset(client);
    await client.apply([node("n1")]);
  });

  for (const { name, call, field, reason } of BAD_REQUESTS) {
    test(`INVALID_ARGUMENT at the field: ${name}`, async () => {
      const generation = (await client.stats()).generation;
      const error = await failure(() => call(client));
      assert.equal(error.code, Code.InvalidArgument);
      assert.equal(error.fieldViolations[0]?.field, field);
      assert.ok(error.fieldViolations[0]?.description);
      assert.equal(error.reason, reason ?? "INVALID_OBJECT");
      assert.equal(error.domain, "podfit.dev");
      assert.equal(error.details.badRequest?.fieldViolations[0]?.field, field);
      assert.ok(error.rawMessage);
      assert.equal(error.message, `InvalidArgument: ${error.rawMessage}`);
      // Nothing changed, and the server goes on serving.
      assert.equal((await client.stats()).generation, generation);
    });
  }

  test("NOT_FOUND for an object or a cached pod that is not there", async () => {
    for (const call of [() => client.get("Pod", "ghost", "shop"), () => client.schedule(cached("shop", "ghost"))]) {
      const error = await failure(call);
      assert.equal(error.code, Code.NotFound);
      assert.equal(error.reason, "NOT_FOUND");
      assert.deepEqual(error.fieldViolations, []);
    }
  });

  test("inputs the SDK cannot encode are refused before sending, as INVALID_ARGUMENT at their field", async () => {
    const cases: [() => Promise<unknown>, string][] = [
      [() => client.get("Widget", "w"), "key.kind"],
      [() => client.apply([], { deletes: [{ kind: "Node", name: "n1" }, { kind: "gizmos", name: "g" }] }), "updates[1].delete.kind"],
      [() => client.schedule(pod("p"), { view: "everything" as "full" }), "view"],
      [() => client.list("Pod", { podFilter: "running" as "bound" }), "pod_filter"],
      [() => client.apply([node("ok"), 42 as unknown as KubeObject]), "updates[1].upsert"],
      [() => client.scheduleBatch([pod("a"), 7 as unknown as KubeObject]), "pods[1]"],
    ];
    for (const [call, field] of cases) {
      const error = await failure(call);
      assert.equal(error.code, Code.InvalidArgument);
      assert.deepEqual(error.fieldViolations.map((v) => v.field), [field]);
    }
    assert.equal((await client.stats()).nodes, 1);
  });

  test("an AbortSignal cancels a call: already aborted, in flight, and a stream waiting for input", async () => {
    const aborted = await failure(() => client.stats({ signal: AbortSignal.abort() }));
    assert.equal(aborted.code, Code.Canceled);

    const controller = new AbortController();
    const inFlight = client.schedule(pod("p"), { signal: controller.signal });
    controller.abort();
    assert.equal((await failure(() => inFlight)).code, Code.Canceled);

    // A feeder whose next batch never comes: only the signal ends the call.
    async function* stalled() {
      yield { objects: node("streamed") };
      await new Promise(() => {});
    }
    const streaming = new AbortController();
    const acks: bigint[] = [];
    const error = await failure(async () => {
      for await (const ack of client.stream(stalled(), { signal: streaming.signal })) {
        acks.push(ack.generation);
        streaming.abort();
      }
    });
    assert.equal(error.code, Code.Canceled);
    assert.equal(acks.length, 1);
    // The batch acknowledged before the abort stays applied; the server goes on serving.
    assert.equal((await client.stats()).nodes, 2);
  });

  test("timeoutMs bounds a call: DEADLINE_EXCEEDED", async () => {
    async function* stalled() {
      await new Promise(() => {});
      yield {};
    }
    const started = Date.now();
    const error = await failure(async () => {
      for await (const ack of client.stream(stalled(), { timeoutMs: 200 })) void ack;
    });
    assert.equal(error.code, Code.DeadlineExceeded);
    assert.ok(Date.now() - started < 5_000);
  });

  test("an unreachable server is UNAVAILABLE", async () => {
    const nowhere = createClient("127.0.0.1:1");
    try {
      assert.equal((await failure(() => nowhere.stats({ timeoutMs: 5_000 }))).code, Code.Unavailable);
    } finally {
      nowhere.close();
    }
  });
});
