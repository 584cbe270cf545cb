// The README's examples are tests: each is compiled with the package, run against a real server, and
// quoted verbatim in the README.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, beforeEach, describe, test } from "node:test";
import { applyThenSchedule } from "../examples/apply_then_schedule.js";
import { applyBadNode } from "../examples/errors.js";
import { feed } from "../examples/feed.js";
import type { KubeObject } from "../src/index.js";
import { EXAMPLES, PACKAGE_ROOT, readYaml, reset, startServer, type RunningServer } from "./support/server.js";

const EXAMPLE_FILES = ["apply_then_schedule.ts", "feed.ts", "errors.ts", "tls.ts"];

describe("examples", () => {
  let server: RunningServer;

  before(async () => {
    server = await startServer();
  });
  after(async () => server?.stop());
  beforeEach(async () => reset(server.client));

  test("apply, then schedule: the example pod goes to node-b and is assumed", async (t) => {
    const log = t.mock.method(console, "log", () => {});
    const generation = (await server.client.stats()).generation;

    const selected = await applyThenSchedule(server.target, join(EXAMPLES, "cluster.yaml"), join(EXAMPLES, "pod.yaml"));

    assert.equal(selected, "node-b");
    const lines = log.mock.calls.map((call) => String(call.arguments[0]));
    assert.deepEqual(lines, [
      `applied ${readYaml(join(EXAMPLES, "cluster.yaml")).length} objects at generation ${generation + 1n}`,
      "node-b: 604",
      "node-a: 438",
      `selected node: node-b, assumed at generation ${generation + 2n}`,
    ]);
    assert.equal((await server.client.get("Pod", "web-2", "shop")).object?.object.case, "pod");
  });

  test("feed: batches acknowledged in order, a refused one reported and skipped", async (t) => {
    const warn = t.mock.method(console, "warn", () => {});
    const node = (name: string, cpu: string): KubeObject => ({ kind: "Node", metadata: { name }, status: { allocatable: { cpu } } });
    async function* changes() {
      yield [node("f1", "2")];
      yield [node("f2", "many")];
      yield [node("f3", "2"), node("f1", "4")];
    }
    const start = (await server.client.stats()).generation;

    const generation = await feed(server.target, changes());

    assert.equal(generation, start + 2n);
    assert.deepEqual(
      warn.mock.calls.map((call) => String(call.arguments[0]).split(":")[0]),
      ["batch 2 refused at updates[0].upsert.node.status.allocatable.cpu"],
    );
    assert.equal((await server.client.stats()).nodes, 2);
  });

  test("errors: a Node whose cpu is not a quantity is reported at its field path", async () => {
    assert.deepEqual(await applyBadNode(server.target), ["updates[0].upsert.node.status.allocatable.cpu"]);
  });

  test("the README quotes every example verbatim, and has no other TypeScript", () => {
    const readme = readFileSync(join(PACKAGE_ROOT, "README.md"), "utf8");
    const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]);
    const sources = EXAMPLE_FILES.map((name) => readFileSync(join(PACKAGE_ROOT, "examples", name), "utf8"));
    assert.deepEqual(blocks, sources);
  });
});
