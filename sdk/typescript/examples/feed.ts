import { createClient, type KubeObject, type StreamBatch } from "@podfit/sdk";

/** Feeds changes over one Stream as they come (e.g. an informer's events); returns the last generation. */
export async function feed(target: string, changes: AsyncIterable<KubeObject[]>): Promise<bigint> {
  const client = createClient(target);
  async function* batches(): AsyncGenerator<StreamBatch> {
    for await (const objects of changes) {
      yield { objects }; // sequence numbers 1, 2, 3, ... unless given
    }
  }
  let generation = 0n;
  try {
    for await (const ack of client.stream(batches())) {
      if (ack.error) {
        // Refused in band: nothing of this batch was applied, and the stream goes on.
        console.warn(`batch ${ack.sequence} refused at ${ack.errorField}: ${ack.error}`);
      } else {
        generation = ack.generation;
      }
    }
    return generation;
  } finally {
    client.close();
  }
}
