// The status page's worker thread as the daemon runs it: at a higher nice than the daemon's
// loop (Linux keeps a nice per thread), so a page being built never wins the CPU from a slot.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import { test } from "node:test";
import { freePort, request, startDaemon, tmpdir, waitFor, writeConfig } from "./helpers.js";

/** Each thread of `pid` and its nice (field 19 of /proc/PID/task/TID/stat). */
function threadNices(pid) {
  const out = new Map();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      out.set(tid, Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]));
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

test("the page's worker thread runs at the daemon's nice + 10; the daemon's loop keeps its own", async (t) => {
  const own = os.getPriority(0);
  if (own >= 19) return t.skip("the test runs at nice 19: no higher nice to see");
  const dir = tmpdir(t);
  const port = await freePort();
  const cfg = writeConfig(
    dir,
    `http: 127.0.0.1:${port}\nheartbeat: 1s\njobs:\n  a: { schedule: "@daily", command: "true" }\n`,
  );
  const d = startDaemon(t, cfg);
  // /healthz is answered on the loop: the page's worker is not started yet.
  await waitFor(
    async () => (await request(port, { path: "/healthz" }).catch(() => null))?.status === 200,
    "the endpoint",
    30_000,
  );
  const before = threadNices(d.pid);
  assert.equal(before.get(String(d.pid)), own, "the daemon starts at the test's nice");
  const r = await request(port, { path: "/" });
  assert.equal(r.status, 200, r.body);
  const after = threadNices(d.pid);
  const fresh = [...after].filter(([tid]) => !before.has(tid));
  const want = Math.min(19, own + 10);
  assert.deepEqual(
    fresh.filter(([, nice]) => nice === want).length,
    1,
    `one new thread (the page's worker) at nice ${want}; new threads: ${JSON.stringify(fresh)}`,
  );
  assert.equal(after.get(String(d.pid)), own, "the daemon's main thread keeps its nice");
  // And it still answers, at its nice.
  assert.equal((await request(port, { path: "/" })).status, 200);
});
