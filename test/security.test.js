// Attacks from a local user on the same host: each test does what an attacker would and asserts
// that nothing leaks, nothing outside the state dir changes, and the daemon keeps serving.
import assert from "node:assert/strict";
import net from "node:net";
import { test } from "node:test";
import { freePort, request, startDaemon, tmpdir, waitFor, writeConfig } from "./helpers.js";

test("http: 200 connections that never finish a request do not keep /healthz blind for more than 5 s", async (t) => {
  const dir = tmpdir(t);
  const port = await freePort();
  const cfg = writeConfig(dir, `heartbeat: 1s\nhttp: 127.0.0.1:${port}\njobs: {}\n`);
  startDaemon(t, cfg);
  await waitFor(
    async () => (await request(port, { path: "/healthz" }).catch(() => ({}))).status === 200,
    "healthz 200",
  );
  // Half of them send nothing, half send a request line and then stall (slowloris).
  const sockets = [];
  t.after(() => sockets.forEach((s) => s.destroy()));
  await Promise.all(
    Array.from(
      { length: 200 },
      (_, i) =>
        new Promise((resolve) => {
          const s = net.connect(port, "127.0.0.1", () => {
            if (i % 2) s.write("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n");
            resolve();
          });
          s.on("error", resolve);
          sockets.push(s);
        }),
    ),
  );
  const opened = Date.now();
  await waitFor(
    async () =>
      (await request(port, { path: "/healthz", timeoutMs: 1000 }).catch(() => ({}))).status === 200,
    "healthz 200 while 200 idle connections are open",
    5_000,
  );
  const took = Date.now() - opened;
  assert.ok(took <= 5_000, `${took} ms`);
  t.diagnostic(`healthz answered again after ${took} ms`);
});
