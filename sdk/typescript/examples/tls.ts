import { readFile } from "node:fs/promises";
import { createClient } from "@podfit/sdk";

/** mTLS with a private CA, plus a bearer token (sent only over TLS unless allowInsecureToken is set). */
export async function statsOverMtls(target: string, files: { ca: string; cert: string; key: string }, token: string) {
  const client = createClient(target, {
    ca: await readFile(files.ca),
    cert: await readFile(files.cert),
    key: await readFile(files.key),
    token,
  });
  try {
    return await client.stats({ timeoutMs: 5_000 });
  } finally {
    client.close();
  }
}
