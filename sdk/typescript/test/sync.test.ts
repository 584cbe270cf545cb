// A server started with --wait-for-sync refuses decisions until a feeder marks the cache synced.
import assert from "node:assert/strict";
import { Code } from "@connectrpc/connect";
import { after, before, test } from "node:test";
import { PodfitError, type KubeObject } from "../src/index.js";
import { startServer, type RunningServer } from "./support/server.js";

const NODE: KubeObject = {
  kind: "Node",
  metadata: { name: "n1" },
  status: { allocatable: { cpu: "4", memory: "8Gi", pods: "110" } },
};
const POD: KubeObject = { kind: "Pod", metadata: { name: "p" }, spec: { containers: [{ name: "c" }] } };

let server: RunningServer;
before(async () => {
  server = await startServer({ args: ["--wait-for-sync"] });
});
after(async () => server?.stop());

test("decisions wait for markSynced; writes do not", async () => {
  const client = server.client;
  await client.apply([NODE]);
  await assert.rejects(client.schedule(POD), (error: unknown) => {
    assert.ok(error instanceof PodfitError);
    assert.equal(error.code, Code.FailedPrecondition);
    assert.equal(error.reason, "CACHE_NOT_SYNCED");
    return true;
  });
  const marked = await client.markSynced("ts-sdk-test");
  const stats = await client.stats();
  assert.equal(stats.synced, true);
  assert.ok(marked.serverEpoch.length > 0);
  assert.equal(marked.serverEpoch, stats.serverEpoch);
  assert.equal((await client.schedule(POD)).selectedNode, "n1");
});
