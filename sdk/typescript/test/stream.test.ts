// The streaming RPCs: ClusterCache.Stream (a feeder's batches, acknowledged in order) and ScheduleStream.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, beforeEach, describe, test } from "node:test";
import { Code, PodfitError, type KubeObject, type PodfitClient, type StreamBatch, type v1 } from "../src/index.js";
import { EXAMPLES, readYaml, reset, startServer, type RunningServer } from "./support/server.js";

const CLUSTER = readYaml(join(EXAMPLES, "cluster.yaml"));

function node(name: string, cpu = "4"): KubeObject {
  return { apiVersion: "v1", kind: "Node", metadata: { name }, status: { allocatable: { cpu, memory: "8Gi", pods: "110" } } };
}

function pod(name: string, cpu = "100m"): KubeObject {
  return { kind: "Pod", metadata: { name, namespace: "default" }, spec: { containers: [{ name: "c", resources: { requests: { cpu } } }] } };
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const result: T[] = [];
  for await (const item of items) result.push(item);
  return result;
}

describe("streams", () => {
  let server: RunningServer;
  let client: PodfitClient;

  before(async () => {
    server = await startServer();
    client = server.client;
  });
  after(async () => server?.stop());
  beforeEach(async () => reset(client));

  test("batches are acknowledged in order; an invalid one is refused in band and the stream goes on", async () => {
    const start = (await client.stats()).generation;
    const acks = await collect(
      client.stream([
        { objects: CLUSTER },
        { objects: [node("n1"), pod("p1")] },
        { objects: [node("bad", "lots")] },
        { objects: pod("p2"), deletes: [{ kind: "Node", name: "n1" }] },
      ]),
    );

    assert.deepEqual(acks.map((a) => a.sequence), [1n, 2n, 3n, 4n]);
    const [first, second, refused, last] = acks as [v1.StreamResponse, v1.StreamResponse, v1.StreamResponse, v1.StreamResponse];
    assert.deepEqual([first.appliedCount, second.appliedCount, last.appliedCount], [CLUSTER.length, 2, 2]);
    assert.ok(start < first.generation && first.generation < second.generation && second.generation < last.generation);
    assert.deepEqual([first.error, second.error, last.error], ["", "", ""]);

    assert.equal(refused.generation, 0n);
    assert.equal(refused.appliedCount, 0);
    assert.equal(refused.errorField, "updates[0].upsert.node.status.allocatable.cpu");
    assert.match(refused.error, /lots/);

    const stats = await client.stats();
    assert.equal(stats.generation, last.generation);
    assert.equal(stats.nodes, 3); // the example's three; n1 deleted, "bad" never applied
  });

  test("a feeder's async generator, with its own sequence numbers, fed as changes arrive", async () => {
    async function* informer(): AsyncGenerator<StreamBatch> {
      for (let i = 0; i < 3; i++) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        yield { sequence: 100 + i * 10, objects: node(`watch-${i}`) };
      }
    }
    const acks = await collect(client.stream(informer()));
    assert.deepEqual(acks.map((a) => a.sequence), [100n, 110n, 120n]);
    assert.deepEqual(acks.map((a) => a.appliedCount), [1, 1, 1]);
    assert.equal((await client.stats()).nodes, 3);
  });

  test("a batch the SDK cannot encode ends the stream with a PodfitError at its field", async () => {
    const acks: bigint[] = [];
    await assert.rejects(
      async () => {
        for await (const ack of client.stream([{ objects: node("ok") }, { deletes: [{ kind: "Widget", name: "w" }] }])) {
          acks.push(ack.sequence);
        }
      },
      (error: unknown) => {
        assert.ok(error instanceof PodfitError);
        assert.equal(error.code, Code.InvalidArgument);
        assert.deepEqual(error.fieldViolations.map((v) => v.field), ["batches[1].updates[0].delete.kind"]);
        return true;
      },
    );
    assert.ok(acks.length <= 1);
  });

  test("scheduleStream answers each pod in order; assumed pods are seen by the next", async () => {
    await client.apply([node("only", "1")]);
    const answers = await collect(
      client.scheduleStream([
        { pod: pod("s1", "600m"), assume: true },
        { pod: pod("s2", "600m"), assume: true, disablePreemption: true },
        { pod: pod("s3", "300m"), view: "basic" },
      ]),
    );
    assert.deepEqual(answers.map((a) => a.selectedNode), ["only", "", "only"]);
    assert.notEqual(answers[0]?.assumedGeneration, 0n);
    assert.equal(answers[1]?.preemption, undefined);
    assert.deepEqual(answers[2]?.nodes, []);
  });
});
