// Dialing a server that requires a bearer token, and one that requires TLS client certificates (mTLS).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { statsOverMtls } from "../examples/tls.js";
import { Code, createClient, PodfitError } from "../src/index.js";
import { startServer, type RunningServer } from "./support/server.js";

const TOKEN = "s3cret-token";

async function code(call: () => Promise<unknown>): Promise<Code> {
  try {
    await call();
  } catch (error) {
    assert.ok(error instanceof PodfitError, String(error));
    return error.code;
  }
  assert.fail("the call succeeded");
}

/** A CA, a server certificate for 127.0.0.1/localhost and a client certificate, made with openssl. */
function makePki(dir: string): { ca: string; serverCert: string; serverKey: string; cert: string; key: string } {
  const openssl = (...args: string[]) => {
    try {
      execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
    } catch (error) {
      const missing = (error as NodeJS.ErrnoException).code === "ENOENT";
      throw new Error(missing ? "openssl is required by the mTLS test (it makes the test certificates)" : String(error));
    }
  };
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  openssl("req", "-x509", ...ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "1", "-subj", "/CN=podfit-test-ca",
    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign");
  for (const [name, extensions] of [
    ["server", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"],
    ["client", "subjectAltName=DNS:feeder\nextendedKeyUsage=clientAuth\n"],
  ] as const) {
    writeFileSync(join(dir, `${name}.ext`), extensions);
    openssl("req", ...ec, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${name}`);
    openssl("x509", "-req", "-in", `${name}.csr`, "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
      "-out", `${name}.crt`, "-days", "1", "-extfile", `${name}.ext`);
  }
  const path = (name: string) => join(dir, name);
  return { ca: path("ca.crt"), serverCert: path("server.crt"), serverKey: path("server.key"), cert: path("client.crt"), key: path("client.key") };
}

describe("auth", () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "podfit-sdk-ts-"));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  describe("a bearer token", () => {
    let server: RunningServer;
    before(async () => {
      writeFileSync(join(dir, "token"), `${TOKEN}\n`);
      server = await startServer({
        args: ["--auth-token-file", join(dir, "token")],
        client: { token: TOKEN, allowInsecureToken: true }, // plaintext loopback, test only
      });
    });
    after(async () => server?.stop());

    test("is accepted; a missing or wrong one is UNAUTHENTICATED", async () => {
      assert.equal((await server.client.stats()).nodes, 0);
      const anonymous = createClient(server.target);
      const wrong = createClient(server.target, { token: "wrong", allowInsecureToken: true });
      try {
        for (const client of [anonymous, wrong]) {
          assert.equal(await code(() => client.stats()), Code.Unauthenticated);
          assert.equal(await code(() => client.schedule({ metadata: { name: "p" } })), Code.Unauthenticated);
        }
      } finally {
        anonymous.close();
        wrong.close();
      }
    });

    test("is never sent over plaintext unless allowed", () => {
      assert.throws(() => createClient(server.target, { token: TOKEN }), /refusing to send a bearer token over plaintext/);
      assert.throws(() => createClient(`http://${server.target}`, { token: TOKEN }), /plaintext/);
    });
  });

  describe("mTLS", () => {
    let server: RunningServer;
    let pki: ReturnType<typeof makePki>;
    before(async () => {
      pki = makePki(dir);
      writeFileSync(join(dir, "mtls-token"), `${TOKEN}\n`);
      server = await startServer({
        args: [
          "--tls-cert-file", pki.serverCert,
          "--tls-key-file", pki.serverKey,
          "--tls-client-ca-file", pki.ca,
          "--auth-token-file", join(dir, "mtls-token"),
        ],
        client: { ca: readFileSync(pki.ca), cert: readFileSync(pki.cert), key: readFileSync(pki.key), token: TOKEN },
      });
    });
    after(async () => server?.stop());

    test("a client certificate signed by the CA is served (the README's TLS example)", async () => {
      const stats = await statsOverMtls(server.target, pki, TOKEN);
      assert.equal(stats.generation, 0n);
      const byUrl = createClient(`https://${server.target}`, { ca: readFileSync(pki.ca), cert: readFileSync(pki.cert), key: readFileSync(pki.key), token: TOKEN });
      try {
        assert.equal((await byUrl.stats()).nodes, 0);
      } finally {
        byUrl.close();
      }
    });

    test("without a client certificate, or over plaintext, nothing is served", async () => {
      const attempts = [
        createClient(server.target, { ca: readFileSync(pki.ca), token: TOKEN }),
        createClient(server.target, { token: TOKEN, allowInsecureToken: true }),
      ];
      try {
        for (const client of attempts) {
          const refused = await code(() => client.stats({ timeoutMs: 5_000 }));
          // The server ends the connection after the handshake: connect-node reports the HTTP/2 stream's
          // CANCEL as Canceled (grpc-go and Python's grpc say Unavailable).
          assert.ok([Code.Canceled, Code.Unavailable].includes(refused), Code[refused]);
        }
      } finally {
        for (const client of attempts) client.close();
      }
    });

    test("mTLS needs both a certificate and its key", () => {
      assert.throws(() => createClient(server.target, { cert: readFileSync(pki.cert) }), /both cert and key/);
    });
  });
});
