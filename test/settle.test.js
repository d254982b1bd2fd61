// The collection that ends start-up (src/daemon/settle.ts) leaves V8's memory reducer one
// collection to do, not two or three: each is a whole mark-compact, the largest piece of an idle
// daemon's CPU, and after the first the reducer released nothing more (BENCHMARKS.md, "Idle CPU:
// what a minute costs"). V8 prints the reducer's decisions with --trace-gc-verbose.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { ROOT, cleanEnv, waitFor } from "./helpers.js";

test("settle: after start-up's collection the memory reducer runs one collection and is done", async (t) => {
  // Held objects past the reducer's 10 MB of committed old space, as a daemon of 1,000 jobs
  // holds after start-up, and garbage around them.
  const script = `
    const { collectGarbage } = await import(${JSON.stringify(path.join(ROOT, "dist", "daemon", "settle.js"))});
    const held = [];
    for (let i = 0; i < 300000; i++) {
      const o = { i, s: "job-" + i, a: [i, i + 1] };
      if (i % 2 === 0) held.push(o);
    }
    collectGarbage();
    globalThis.held = held;
    setInterval(() => {}, 1 << 30);
  `;
  const child = spawn(
    process.execPath,
    ["--max-semi-space-size=1", "--trace-gc-verbose", "--input-type=module", "-e", script],
    { env: cleanEnv(), stdio: ["ignore", "pipe", "pipe"] },
  );
  t.after(() => child.kill("SIGKILL"));
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  // The reducer waits 8 s after a collection, longer while it judges the allocation rate high.
  const line = await waitFor(
    () => /Memory reducer: finished GC #1 \(([^)]*)\)/.exec(out),
    `the memory reducer's first collection:\n${out.slice(-2000)}`,
    60_000,
    100,
  );
  assert.equal(line[1], "done", "the reducer plans no second collection");
});
