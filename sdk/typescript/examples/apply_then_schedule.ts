import { readFile } from "node:fs/promises";
import { parse, parseAllDocuments } from "yaml";
import { createClient } from "@podfit/sdk";

/** Applies the example cluster, then schedules a pod on it and reserves the chosen node. */
export async function applyThenSchedule(target: string, clusterYaml: string, podYaml: string): Promise<string> {
  const client = createClient(target); // plaintext; see "TLS and tokens" for {ca, cert, key, token}
  try {
    // Any Kubernetes objects as plain data: parsed YAML, JSON, a Kubernetes client's objects.
    const cluster = parseAllDocuments(await readFile(clusterYaml, "utf8")).map((doc) => doc.toJS());
    const applied = await client.apply(cluster);
    console.log(`applied ${applied.appliedCount} objects at generation ${applied.generation}`);

    const pod = parse(await readFile(podYaml, "utf8"));
    const decision = await client.schedule(pod, { assume: true, timeoutMs: 5_000 });
    for (const score of decision.scores) {
      console.log(`${score.nodeName}: ${score.total}`);
    }
    console.log(`selected node: ${decision.selectedNode}, assumed at generation ${decision.assumedGeneration}`);
    return decision.selectedNode;
  } finally {
    client.close();
  }
}
