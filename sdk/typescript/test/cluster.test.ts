// The example cluster (deploy/examples) through every unary RPC of the SDK, against a real podfit-server.
import { create } from "@bufbuild/protobuf";
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import { join } from "node:path";
import { cached, unwrap, type PodfitClient, type KubeObject, v1 } from "../src/index.js";
import { EXAMPLES, readYaml, reset, startServer, type RunningServer } from "./support/server.js";

const CLUSTER = readYaml(join(EXAMPLES, "cluster.yaml"));
const [POD] = readYaml(join(EXAMPLES, "pod.yaml")) as [KubeObject];

/** A pending pod asking for `cpu`, named `name` in namespace shop. */
function pod(name: string, cpu: string, extra: Record<string, unknown> = {}): KubeObject {
  return {
    kind: "Pod",
    metadata: { name, namespace: "shop", labels: { app: "extra" } },
    spec: { containers: [{ name: "c", resources: { requests: { cpu, memory: "1Gi" } } }], ...extra },
  };
}

describe("the example cluster", () => {
  let server: RunningServer;
  let client: PodfitClient;

  before(async () => {
    server = await startServer();
    client = server.client;
  });
  after(async () => server?.stop());
  beforeEach(async () => {
    await reset(client);
    await client.apply(CLUSTER);
  });

  test("schedule with assume picks node-b (as `podfit schedule` shows) and moves the generation", async () => {
    const before = await client.stats();
    assert.equal(before.nodes, 3);
    assert.equal(before.pods, 2);

    const decision = await client.schedule(POD, { assume: true });

    assert.equal(decision.selectedNode, "node-b");
    assert.deepEqual(decision.bestNodes, ["node-b"]);
    assert.deepEqual(
      decision.scores.map((s) => [s.nodeName, s.total]),
      [["node-b", 604n], ["node-a", 438n]],
    );
    const gpu = decision.nodes.find((n) => n.nodeName === "node-gpu");
    assert.equal(gpu?.fits, false);
    assert.equal(gpu?.plugin, "TaintToleration"); // the first filter, in kube-scheduler's order, that rejects it
    const after = await client.stats();
    assert.equal(decision.assumedGeneration, before.generation + 1n);
    assert.equal(after.generation, decision.assumedGeneration);
    assert.equal(after.boundPods, before.boundPods + 1);
    const assumed = await client.get("Pod", "web-2", "shop");
    assert.equal(assumed.object?.object.case, "pod");
    assert.equal(assumed.object?.object.value?.spec?.nodeName, "node-b");
  });

  test("kubeSchedulerVersion picks the release that answers; an unsupported one names the field", async () => {
    for (const [version, release, nodeB] of [
      ["", "v1.37.2", 604n],
      ["v1.35", "v1.35.4", 599n],
      ["v1.36", "v1.36.3", 604n],
      ["v1.37", "v1.37.2", 604n],
    ] as const) {
      const decision = await client.schedule(POD, { kubeSchedulerVersion: version });
      assert.equal(decision.kubeSchedulerVersion, release);
      assert.deepEqual([decision.scores[0]?.nodeName, decision.scores[0]?.total], ["node-b", nodeB]);
    }
    const preempted = await client.preempt(POD, { kubeSchedulerVersion: "v1.35" });
    assert.equal(preempted.kubeSchedulerVersion, "v1.35.4");
    await assert.rejects(client.filter(POD, { kubeSchedulerVersion: "v1.38" }), (error: unknown) => {
      const e = error as { fieldViolations: { field: string }[] };
      assert.equal(e.fieldViolations[0]?.field, "kube_scheduler_version");
      return true;
    });
    assert.deepEqual((await client.stats()).supportedKubeSchedulerVersions, ["v1.35.4", "v1.36.3", "v1.37.2"]);
  });

  test("schedule without assume changes nothing; the basic view carries only the outcome", async () => {
    const generation = (await client.stats()).generation;
    const decision = await client.schedule(POD, { view: "basic" });
    assert.equal(decision.selectedNode, "node-b");
    assert.deepEqual([decision.nodes, decision.scores, decision.bestNodes], [[], [], []]);
    assert.equal(decision.feasibleCount, 2);
    assert.equal(decision.assumedGeneration, 0n);
    assert.equal((await client.stats()).generation, generation);
  });

  test("filter and score answer per node; nodeNames narrows the candidates", async () => {
    const filtered = await client.filter(POD);
    assert.deepEqual(
      filtered.nodes.map((n) => [n.nodeName, n.fits]),
      [["node-a", true], ["node-b", true], ["node-gpu", false]],
    );
    assert.equal(filtered.feasibleCount, 2);
    const scored = await client.score(POD, { nodeNames: ["node-a"] });
    assert.deepEqual(scored.scores.map((s) => s.nodeName), ["node-a"]);
    assert.ok(scored.scores[0]?.plugins.some((p) => p.plugin === "NodeResourcesFit"));
  });

  test("a pod of the cache is given by reference", async () => {
    await client.apply(pod("pending", "100m"));
    for (const reference of [cached("shop", "pending"), "shop/pending"]) {
      const decision = await client.schedule(reference);
      assert.notEqual(decision.selectedNode, "");
    }
  });

  test("scheduleBatch places pods in order, each seeing the earlier ones; allOrNothing undoes a partial batch", async () => {
    const big = (name: string) => pod(name, "3", { nodeSelector: { disktype: "ssd" } });
    const generation = (await client.stats()).generation;

    const gang = await client.scheduleBatch([big("g1"), big("g2")], { allOrNothing: true });
    assert.equal(gang.allPlaced, false);
    assert.equal(gang.placedCount, 0);
    assert.equal((await client.stats()).generation, generation);

    const dry = await client.scheduleBatch([pod("d1", "1"), pod("d2", "1")], { dryRun: true, view: "basic" });
    assert.deepEqual(dry.results.map((r) => r.selectedNode !== ""), [true, true]);
    assert.deepEqual(dry.results.map((r) => r.assumedGeneration), [0n, 0n]);
    assert.equal((await client.stats()).generation, generation);

    const batch = await client.scheduleBatch([pod("b1", "1"), pod("b2", "1")], { view: "basic" });
    assert.equal(batch.allPlaced, true);
    assert.deepEqual(batch.results.map((r) => r.assumedGeneration), [generation + 1n, generation + 2n]);
    assert.equal(batch.assumedGeneration, generation + 2n);
  });

  test("preempt names the victims when the pod only fits by evicting lower-priority pods", async () => {
    const urgent = pod("urgent", "3500m", { priority: 1000, nodeSelector: { disktype: "ssd" } });
    const answer = await client.preempt(urgent);
    assert.equal(answer.nominatedNode, "node-b");
    assert.deepEqual(answer.victims.map((v) => `${v.namespace}/${v.name}`), ["shop/batch-1"]);
    const scheduled = await client.schedule(urgent);
    assert.equal(scheduled.selectedNode, "");
    assert.equal(scheduled.preemption?.nominatedNode, "node-b");
  });

  test("get, list (label selector, pod filter), delete and replace", async () => {
    const nodes = await client.list("nodes", { labelSelector: "disktype=ssd" });
    assert.deepEqual(nodes.objects.map((o) => unwrap(o)?.metadata?.name), ["node-a", "node-b"]);
    const bound = await client.list("Pod", { namespace: "shop", podFilter: "bound" });
    assert.equal(bound.objects.length, 2);
    const onNodeA = await client.list("Pod", { fieldSelector: "spec.nodeName=node-a" });
    assert.ok(onNodeA.objects.length > 0);
    assert.ok(onNodeA.objects.every((o) => o.object.case === "pod" && o.object.value.spec?.nodeName === "node-a"));
    assert.ok(onNodeA.objects.length < (await client.list("Pod", { podFilter: "bound" })).objects.length);
    const pages: v1.ListResponse[] = [];
    for await (const page of client.listPages("nodes", { labelSelector: "disktype=ssd", limit: 1 })) {
      pages.push(page);
    }
    assert.deepEqual(pages.map((p) => p.objects.map((o) => unwrap(o)?.metadata?.name)), [["node-a"], ["node-b"]]);
    assert.equal(pages[0]?.remainingItemCount, 1n);
    assert.equal(pages[1]?.continueToken, "");

    const deleted = await client.delete("Node", "node-gpu");
    assert.equal(deleted.appliedCount, 1);
    assert.equal(deleted.results[0]?.outcome, v1.UpdateOutcome.APPLIED);

    // Bare objects take their kind from replace's.
    const replaced = await client.replace("Node", [{ metadata: { name: "node-c" }, status: { allocatable: { cpu: "2" } } }]);
    assert.deepEqual([replaced.upsertedCount, replaced.deletedCount], [1, 2]);
    assert.equal((await client.stats()).nodes, 1);
  });

  test("apply: typed messages, kind: List, deletes in the same batch, idempotent re-apply", async () => {
    const typed = create(v1.NodeSchema, {
      metadata: { name: "typed", labels: { zone: "z" } },
      status: { allocatable: { cpu: "1", memory: "1Gi", pods: "10" } },
    });
    const list = { kind: "List", items: [pod("l1", "10m"), pod("l2", "10m")] };
    const response = await client.apply([typed, list], { deletes: [{ kind: "pdb", namespace: "shop", name: "web" }] });
    assert.equal(response.appliedCount, 4);
    assert.deepEqual(
      response.results.map((r) => [v1.ObjectKind[r.key?.kind ?? 0], r.key?.name]),
      [["NODE", "typed"], ["POD", "l1"], ["POD", "l2"], ["POD_DISRUPTION_BUDGET", "web"]],
    );
    const again = await client.apply(CLUSTER);
    assert.equal(again.unchangedCount, CLUSTER.length - 1); // the PDB deleted above comes back
    assert.equal(again.appliedCount, 1);
  });

  test("simulateDrain: node-a is blocked by web-1's PDB (as `podfit drain node-a --dry-run` shows)", async () => {
    const generation = (await client.stats()).generation;
    const drain = await client.simulateDrain(["node-a"]);
    assert.equal(drain.baseGeneration, generation);
    assert.equal(drain.nodes.length, 1);
    const [node] = drain.nodes;
    assert.equal(node?.nodeName, "node-a");
    assert.equal(node?.removable, false);
    assert.equal(node?.unremovableReason, "BlockedByPod");
    assert.equal(node?.blockingPod?.reason, "NotEnoughPdb");
    assert.deepEqual([node?.blockingPod?.namespace, node?.blockingPod?.name], ["shop", "web-1"]);

    // node-gpu has nothing to move; an explicit clock is accepted.
    const gpu = await client.simulateDrain(["node-gpu"], { now: new Date("2026-11-02T00:00:00Z") });
    assert.equal(gpu.nodes[0]?.removable, true);
    assert.equal((await client.stats()).generation, generation);
  });

  test("simulateDrain leaves expendable pods out unless expendablePodsPriorityCutoff says otherwise", async () => {
    // A bare pod (it would block as NotReplicated) of priority -100 on node-gpu; removed again at the end.
    await client.apply(pod("cheap", "100m", { nodeName: "node-gpu", priority: -100 }));
    try {
      const left = await client.simulateDrain(["node-gpu"]);
      assert.equal(left.nodes[0]?.removable, true);
      const counted = await client.simulateDrain(["node-gpu"], { expendablePodsPriorityCutoff: -1000 });
      assert.equal(counted.nodes[0]?.removable, false);
      assert.equal(counted.nodes[0]?.blockingPod?.name, "cheap");
    } finally {
      await client.delete("Pod", "cheap", "shop");
    }
  });

  test("simulate: a scenario (cordon, hypothetical nodes) then pods placed in it, the cache untouched", async () => {
    const generation = (await client.stats()).generation;
    const template = { metadata: { name: "big", labels: { disktype: "ssd" } }, status: { allocatable: { cpu: "16", memory: "64Gi", pods: "110" } } };
    const result = await client.simulate([POD, pod("s2", "10")], {
      scenario: { cordonNodes: ["node-b"], addNodes: [{ template, count: 1 }] },
    });
    assert.equal(result.baseGeneration, generation);
    assert.deepEqual(
      result.placements.map((p) => [p.name, p.nodeName]),
      [["web-2", "node-a"], ["s2", "big-sim-0"]],
    );
    assert.deepEqual(result.hypotheticalNodes.map((n) => [n.nodeName, n.pods]), [["big-sim-0", ["shop/s2"]]]);
    assert.equal((await client.stats()).generation, generation);
  });

  test("estimateScaleUp: cluster-autoscaler's binpacking of pending pods onto new nodes", async () => {
    const template = { metadata: { name: "tmpl" }, status: { allocatable: { cpu: "4", memory: "16Gi", pods: "110" } } };
    const pending = [pod("e1", "3"), pod("e2", "3"), pod("e3", "3")];
    const estimate = await client.estimateScaleUp([pending], [{ id: "pool", template, currentSize: 0, maxSize: 2 }]);
    assert.equal(estimate.estimates.length, 1);
    const [pool] = estimate.estimates;
    assert.equal(pool?.nodeGroupId, "pool");
    assert.equal(pool?.nodeCount, 2);
    assert.equal(pool?.scheduled.length, 2);
    assert.equal(pool?.unscheduled.length, 1);
  });

  test("estimateScaleUp of GPU groups: each template's ResourceSlices give every new node its GPUs", async () => {
    // The README's example: ten pods claiming one GPU each, an 8-GPU and a 4-GPU group.
    await client.apply(readYaml(join(EXAMPLES, "gpu-cluster.yaml")));
    const documents = readYaml(join(EXAMPLES, "gpu-node-groups.yaml")) as KubeObject[];
    const pending = documents.filter((d) => d.kind === "Pod");
    const groups = documents
      .filter((d) => d.kind === "NodeGroup")
      .map((d) => {
        const group = d as unknown as { id: string; maxSize: number; template: KubeObject; resourceSlices: KubeObject[] };
        return { id: group.id, template: group.template, currentSize: 0, maxSize: group.maxSize, resourceSlices: group.resourceSlices };
      });
    const estimate = await client.estimateScaleUp(pending.map((p) => [p]), groups);
    assert.deepEqual(
      estimate.estimates.map((e) => [e.nodeGroupId, e.nodeCount, e.scheduled.length]),
      [["h100x8", 2, 10], ["l4x4", 3, 10]],
    );
    const bare = await client.estimateScaleUp(pending.map((p) => [p]), [{ ...groups[0]!, resourceSlices: [] }]);
    assert.equal(bare.estimates[0]?.nodeCount, 0);
  });
});
