// A real podfit-server for the tests: found on the PATH (as after the README's install command), started
// on a free loopback port, waited for until it answers, and stopped by its PID. Never skipped: a missing
// server fails the suite with the command that fixes it.
import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { Code, createClient, PodfitError, type ClientOptions, type KubeObject, type PodfitClient } from "../../src/index.js";

/** sdk/typescript, whether running from test/ (sources) or dist/test/ (compiled). */
export const PACKAGE_ROOT = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      accessSync(join(dir, "package.json"));
      return dir;
    } catch {
      const parent = dirname(dir);
      if (parent === dir) throw new Error("sdk/typescript/package.json not found above the tests");
      dir = parent;
    }
  }
})();
export const REPO_ROOT = join(PACKAGE_ROOT, "..", "..");
export const EXAMPLES = join(REPO_ROOT, "deploy", "examples");

/** The documents of a YAML file as plain objects, as a Kubernetes client would hand them over. */
export function readYaml(path: string): KubeObject[] {
  return parseAllDocuments(readFileSync(path, "utf8"))
    .map((document) => document.toJS() as KubeObject | null)
    .filter((document): document is KubeObject => document !== null);
}

export function podfitServerExecutable(): string {
  for (const dir of (process.env["PATH"] ?? "").split(delimiter)) {
    if (dir === "") continue;
    const candidate = join(dir, "podfit-server");
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  throw new Error(
    "podfit-server is not on the PATH: the TypeScript SDK tests need a real server. Run the README's install " +
      "command, then e.g. `PATH=$PWD/.venv/bin:$PATH npm --prefix sdk/typescript test`",
  );
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

export interface RunningServer {
  /** host:port to dial. */
  readonly target: string;
  readonly pid: number;
  /** A client of this server with the options it was started for (close() is done by stop()). */
  readonly client: PodfitClient;
  connect(options?: ClientOptions): PodfitClient;
  stop(): Promise<void>;
}

export interface ServerOptions {
  /** More podfit-server flags (--auth-token-file, --tls-cert-file, ...). */
  args?: string[];
  /** How the test's clients dial it (token, TLS files). */
  client?: ClientOptions;
}

const STARTUP_TIMEOUT_MS = 30_000;

/** Starts podfit-server and resolves once it answers a Stats call. */
export async function startServer(options: ServerOptions = {}): Promise<RunningServer> {
  const executable = podfitServerExecutable();
  const port = await freePort();
  const target = `127.0.0.1:${port}`;
  const child: ChildProcess = spawn(
    executable,
    ["--grpc-addr", target, "--extender-addr", "off", "--metrics-addr", "off", "--log-level", "WARNING", ...(options.args ?? [])],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  let exited: string | undefined;
  const exit = new Promise<void>((resolve) =>
    child.once("exit", (code, signal) => {
      exited = `exited (${signal ?? code})`;
      resolve();
    }),
  );
  const pid = child.pid;
  if (pid === undefined) {
    throw new Error(`could not start ${executable}`);
  }
  // Belt and braces: a test process that dies leaves no server behind.
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);

  const clients: PodfitClient[] = [];
  const connect = (extra: ClientOptions = {}) => {
    const client = createClient(target, { ...options.client, ...extra });
    clients.push(client);
    return client;
  };
  const stop = async () => {
    for (const client of clients) client.close();
    if (exited === undefined) {
      process.kill(pid, "SIGTERM");
      const timer = setTimeout(() => exited === undefined && process.kill(pid, "SIGKILL"), 5_000);
      await exit;
      clearTimeout(timer);
    }
    process.removeListener("exit", killOnExit);
  };

  const client = connect();
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  for (;;) {
    if (exited !== undefined) {
      await stop();
      throw new Error(`podfit-server ${exited} before answering:\n${output}`);
    }
    try {
      await client.stats({ timeoutMs: 1_000 });
      break;
    } catch (error) {
      if (!(error instanceof PodfitError) || ![Code.Unavailable, Code.DeadlineExceeded].includes(error.code)) {
        await stop();
        throw error;
      }
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`podfit-server did not answer on ${target} within ${STARTUP_TIMEOUT_MS} ms:\n${output}`);
      }
      client.close();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return { target, pid, client, connect, stop };
}

/** Empties the cache (every kind replaced by nothing), so that each test starts from the same state. */
export async function reset(client: PodfitClient): Promise<void> {
  for (const kind of ["Pod", "Node", "Namespace", "PodDisruptionBudget", "Service", "ReplicaSet", "StatefulSet", "ReplicationController", "Job", "DaemonSet"]) {
    await client.replace(kind, []);
  }
}
