// The status page's worker thread as the daemon runs it: at a higher nice than the daemon's
// loop (Linux keeps a nice per thread), so a page being built never wins the CPU from a slot;
// 100 jobs to a page, problems first across pages, the filter on the server; and the rows it
// keeps between loads (page-reads.ts) never hide a commit.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { semiSpaceFlag } from "../dist/monitor/page-client.js";
import { cli, freePort, request, startDaemon, tmpdir, waitFor, writeConfig } from "./helpers.js";
import { pageDaemon, statusUntil } from "./page-helpers.js";
import { needsNow } from "./needs.js";

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
  // Skipped only when the suite itself runs at the lowest priority, where no thread can go lower.
  if (needsNow(t, own >= 19 && "the test runs at nice 19: no higher nice to see")) return;
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

/** The names of the jobs a page lists, in its order, and its count line's text. */
function listed(html) {
  const names = [...html.matchAll(/<li id="job-[^"]*" data-name="([^"]*)"/g)].map((m) => m[1]);
  const count = /<p class="count" id="count"[^>]*>([\s\S]*?)<\/p>/.exec(html)?.[1] ?? "";
  return { names, count: count.replace(/<[^>]*>/g, "") };
}

test("the page's worker gets its own young generation under the unit's --max-semi-space-size=1 (a V8 flag, which overrides a worker's resourceLimits); the process keeps the flag", (t) => {
  assert.equal(semiSpaceFlag([], ""), null);
  assert.equal(semiSpaceFlag([], "--max-semi-space-size=1"), "1");
  assert.equal(semiSpaceFlag(["--max_semi_space_size=4"], "--max-semi-space-size=1"), "4");
  assert.equal(semiSpaceFlag(["--max-semi-space-size", "2"], ""), "2");
  // In a process started as the unit starts the daemon: a worker started as the page's is, then
  // a plain one. Each allocates short-lived objects and says how large its new space grew.
  const grow = path.join(tmpdir(t), "grow.cjs");
  fs.writeFileSync(
    grow,
    `const v8 = require("node:v8");
    let keep = [];
    for (let i = 0; i < 3e6; i++) { keep.push({ i, s: "x" + i }); if (keep.length > 5000) keep = []; }
    const ns = v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space");
    require("node:worker_threads").parentPort.postMessage(ns.space_size);`,
  );
  const script = `
    import { Worker } from "node:worker_threads";
    import { pageWorkerThread } from ${JSON.stringify(new URL("../dist/monitor/page-client.js", import.meta.url).href)};
    const grown = (w) => new Promise((r) => w.once("message", (n) => (w.terminate(), r(n))));
    const page = await grown(pageWorkerThread(${JSON.stringify(grow)}, {}));
    const plain = await grown(new Worker(${JSON.stringify(grow)}));
    console.log(JSON.stringify({ page, plain }));
  `;
  const out = spawnSync(
    process.execPath,
    ["--max-semi-space-size=1", "--input-type=module", "-e", script],
    {
      encoding: "utf8",
    },
  );
  assert.equal(out.status, 0, out.stderr);
  const { page, plain } = JSON.parse(out.stdout);
  assert.ok(page >= 16 * 1024 * 1024, `the page's worker: a new space of ${page} bytes`);
  assert.ok(
    plain <= 2 * 1024 * 1024,
    `a worker started after it: ${plain} bytes (the flag is back)`,
  );
});

test("100 jobs to a page: problems first across pages, paging and the filter on the server", async (t) => {
  const dir = tmpdir(t);
  const lines = ["jobs:"];
  for (let i = 0; i < 117; i++)
    lines.push(`  job-${String(i).padStart(4, "0")}: { schedule: "@daily", command: "true" }`);
  // The last three in the config fail: the first three on the first page.
  for (let i = 117; i < 120; i++)
    lines.push(
      `  job-${String(i).padStart(4, "0")}: { schedule: "*/2 * * * * *", command: "exit 1" }`,
    );
  const p = await pageDaemon(t, dir, lines);
  await statusUntil(
    p.cfg,
    (j) => ["job-0117", "job-0118", "job-0119"].every((n) => j.get(n).health === "failing"),
    "three jobs failing",
  );
  const one = listed((await p.get("/")).body);
  assert.equal(one.names.length, 100);
  assert.deepEqual(one.names.slice(0, 3).sort(), ["job-0117", "job-0118", "job-0119"]);
  assert.deepEqual(one.names.slice(3, 6), ["job-0000", "job-0001", "job-0002"]);
  assert.match(one.count, /^Showing 100 of 120 jobs \(1–100\), problems first\. next 100 /);
  const two = listed((await p.get("/?page=2")).body);
  assert.deepEqual(
    two.names,
    Array.from({ length: 20 }, (_, i) => `job-${String(97 + i).padStart(4, "0")}`),
  );
  assert.match(two.count, /^Showing 20 of 120 jobs \(101–120\), problems first\. previous 100 /);
  const problems = listed((await p.get("/?problems=1")).body);
  assert.deepEqual(problems.names.sort(), ["job-0117", "job-0118", "job-0119"]);
  assert.match(problems.count, /^Showing 3 of 3 matching jobs \(of 120\)/);
  const found = listed((await p.get("/?q=job-005")).body);
  assert.deepEqual(
    found.names,
    Array.from({ length: 10 }, (_, i) => `job-005${i}`),
  );
});

test("a page loaded again after a commit shows it at once: kept rows never hide a write", async (t) => {
  const dir = tmpdir(t);
  const p = await pageDaemon(t, dir, [
    "jobs:",
    '  a: { schedule: "@daily", command: "true" }',
    '  b: { schedule: "@daily", command: "true" }',
  ]);
  const health = (html) => /<li id="job-a" data-name="a" data-health="([^"]*)"/.exec(html)?.[1];
  assert.equal(health((await p.get("/")).body), "never-run");
  assert.equal(health((await p.get("/")).body), "never-run");
  const r = cli(["pause", "a", "-c", p.cfg]);
  assert.equal(r.code, 0, r.stderr);
  // No polling: the pause is committed when the command returns, and the next page shows it.
  assert.equal(health((await p.get("/")).body), "paused");
  const beat = (html) => /<dt>heartbeat<\/dt>\s*<dd>([^<]*)<\/dd>/.exec(html)?.[1];
  // And what is judged at now moves while the rows stand still: the heartbeat's age.
  const ages = new Set();
  await waitFor(
    async () => (ages.add(beat((await p.get("/")).body)), ages.size > 1),
    "the heartbeat's age to change between loads",
    10_000,
    100,
  );
});
