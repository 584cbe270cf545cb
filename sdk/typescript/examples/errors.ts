import { Code, createClient, PodfitError } from "@podfit/sdk";

/** Every failed call rejects with a PodfitError; bad input names the request field at fault. */
export async function applyBadNode(target: string): Promise<string[]> {
  const client = createClient(target);
  const node = { kind: "Node", metadata: { name: "n1" }, status: { allocatable: { cpu: "lots" } } };
  try {
    await client.apply([node]);
    return [];
  } catch (error) {
    if (error instanceof PodfitError && error.code === Code.InvalidArgument) {
      // error.reason: "INVALID_OBJECT"; nothing of the batch was applied.
      return error.fieldViolations.map((violation) => violation.field);
    }
    throw error;
  } finally {
    client.close();
  }
}
