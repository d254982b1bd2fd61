// The disk the state dir takes: one job's logs stay within 100 MB by default, `logs.max_total`
// removes the oldest finished runs' logs first (never a running run's), and `status` (text,
// JSON, --check) and the page show what the store and the logs take and warn when the state
// dir's file system runs short.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { parseConfig } from "../dist/config/parse.js";
import { logsToPrune } from "../dist/daemon/log-budget.js";
import { diskReport } from "../dist/health/disk.js";
import {
  cli,
  freePort,
  mountTmpfs,
  request,
  readStoreIn,
  startDaemon,
  statusJson,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";
import { needsNow } from "./needs.js";

const MB = 1024 * 1024;

test("defaults: one job's logs stay within 100 MB; logs.max_total is 1 GB and takes a size", () => {
  const { config } = parseConfig(
    'jobs:\n  a: { schedule: "@daily", command: "true" }\n',
    "/x/jobs.yaml",
  );
  const [a] = config.jobs;
  assert.ok(a.log.maxSizeBytes * a.log.keepRuns <= 100 * MB, JSON.stringify(a.log));
  assert.equal(config.logsMaxTotalBytes, 1024 * MB);
  const set = parseConfig(
    'logs: { max_total: 200MB }\njobs:\n  a: { schedule: "@daily", command: "true" }\n',
    "/x/jobs.yaml",
  );
  assert.equal(set.config.logsMaxTotalBytes, 200 * MB);
  const bad = parseConfig(
    'logs: { max_total: lots }\njobs:\n  a: { schedule: "@daily", command: "true" }\n',
    "/x/jobs.yaml",
  );
  assert.equal(bad.config, null);
  assert.match(
    `${bad.errors[0].line}:${bad.errors[0].path}: ${bad.errors[0].message}`,
    /^1:logs\.max_total: bad size "lots"/,
  );
});

test("logsToPrune: oldest first, never a running run's, down to a tenth under the cap", () => {
  const f = (runId, bytes) => ({ runId, path: `/l/${runId}.log`, bytes });
  const files = [f(5, 30), f(1, 40), f(3, 30), f(9, 20), f(7, 30)];
  assert.deepEqual(logsToPrune(files, 150, 150, new Set()), [], "at the cap: nothing");
  // 150 over a cap of 100: down to 90; run 1 is running.
  assert.deepEqual(
    logsToPrune(files, 150, 100, new Set([1])).map((x) => x.runId),
    [3, 5],
  );
  assert.deepEqual(
    logsToPrune(files, 150, 100, new Set()).map((x) => x.runId),
    [1, 3],
  );
});

test("diskReport: WARNING under 500 MB or under 5% free, not otherwise", () => {
  const at = (free, size) => diskReport({ store_bytes: 1, free_bytes: free, fs_bytes: size }, 2);
  assert.equal(at(600 * MB, 10_000 * MB).low_space, null);
  assert.match(
    at(400 * MB, 10_000 * MB).low_space,
    /has 400 MB free \(4\.0%; under 500 MB or 5%\)/,
  );
  assert.match(at(40_000 * MB, 1_000_000 * MB).low_space, /has 39\.1 GB free \(4\.0%/);
  assert.equal(at(null, null).low_space, null);
  assert.deepEqual(Object.keys(at(1, 1)), ["store_bytes", "logs_bytes", "free_bytes", "low_space"]);
});

/** Bytes of every file under dir, by name relative to it. */
function sizes(dir) {
  const out = new Map();
  for (const e of fs.readdirSync(dir, { recursive: true, withFileTypes: true }))
    if (e.isFile())
      out.set(
        path.join(e.parentPath ?? e.path, e.name),
        fs.statSync(path.join(e.parentPath ?? e.path, e.name)).size,
      );
  return out;
}

test("logs.max_total: the oldest finished runs' logs go first, a running run's never; status shows the disk", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `state_dir: ./.cronvisor
heartbeat: 1s
logs: { max_total: 100KB }
jobs:
  long: { schedule: "* * * * * *", command: "head -c 30000 /dev/zero | tr '\\\\0' x; sleep 60", overlap: skip }
  chatty: { schedule: "* * * * * *", command: "head -c 20000 /dev/zero | tr '\\\\0' y", overlap: skip }
`,
  );
  const logs = path.join(dir, ".cronvisor", "logs");
  const d = startDaemon(t, cfg);
  await waitFor(
    () => readStoreIn(dir).runs({ job: "chatty", status: "ok" }).length >= 10,
    "10 chatty runs",
    40_000,
  );
  const [long] = readStoreIn(dir).runs({ job: "long" });
  assert.equal(long.status, "running");
  const chatty = readStoreIn(dir).runs({ job: "chatty", status: "ok" });
  const kept = chatty.filter((r) => fs.existsSync(r.log_path)).map((r) => r.id);
  const gone = chatty.filter((r) => !fs.existsSync(r.log_path)).map((r) => r.id);
  assert.ok(gone.length >= 3, `some logs were removed: kept ${kept}, gone ${gone}`);
  assert.ok(Math.max(...gone) < Math.min(...kept), `oldest first: kept ${kept}, gone ${gone}`);
  assert.ok(long.id < Math.min(...gone), "the running run is older than every removed log");
  assert.equal(fs.statSync(long.log_path).size, 30000, "the running run's log is left whole");
  // The cap holds, but for the one chatty run that may be writing now.
  const total = [...sizes(logs).values()].reduce((a, b) => a + b, 0);
  assert.ok(total <= 100 * 1024 + 20000, `logs take ${total} bytes`);

  const s = await waitFor(() => {
    const st = statusJson(cfg);
    return st.daemon.disk?.logs_bytes > 0 && st;
  }, "logs_bytes after a heartbeat");
  const disk = s.daemon.disk;
  assert.ok(
    disk.logs_bytes >= 30000 && disk.logs_bytes <= 100 * 1024 + 20000,
    JSON.stringify(disk),
  );
  assert.ok(
    disk.store_bytes >= fs.statSync(path.join(dir, ".cronvisor", "cronvisor.db")).size,
    JSON.stringify(disk),
  );
  assert.ok(disk.free_bytes > 0);
  assert.equal(disk.low_space, null);
  const pruned = cli(["logs", "chatty", "--run", String(gone[0]), "-c", cfg]);
  assert.equal(pruned.code, 1);
  assert.match(pruned.stderr, /is gone \(removed past logs\.max_total, or moved since the run\)/);
  const text = cli(["status", "-c", cfg]);
  assert.match(
    text.stdout,
    /^ {2}disk: store \d+(\.\d)? [KM]B, logs \d+(\.\d)? KB, [\d.]+ [MGT]B free$/m,
  );
  await stopDaemon(d);
});

test("a state dir on a small file system: status --check WARNING, JSON and the page say so", async (t) => {
  let d = null;
  const disk = mountTmpfs(t, async () => {
    if (d) await stopDaemon(d);
  });
  if (needsNow(t, disk.skip)) return;
  const dir = tmpdir(t);
  const port = await freePort();
  const cfg = writeConfig(
    dir,
    `state_dir: ${disk.mnt}/state
heartbeat: 1s
http: 127.0.0.1:${port}
jobs:
  a: { schedule: "@daily", command: "true" }
`,
  );
  d = startDaemon(t, cfg);
  const check = await waitFor(() => {
    const r = cli(["status", "--check", "-c", cfg]);
    return r.stdout.startsWith("WARNING") && r;
  }, "WARNING from --check");
  assert.equal(check.code, 1);
  assert.match(
    check.stdout,
    /^WARNING: the state dir's file system has \d+(\.\d)? MB free \([\d.]+%; under 500 MB or 5%\)/,
  );
  const s = statusJson(cfg);
  assert.match(s.daemon.disk.low_space, /under 500 MB or 5%/);
  assert.ok(s.daemon.disk.free_bytes < 16 * MB);
  assert.match(cli(["status", "-c", cfg]).stdout, /^ {2}WARNING: the state dir's file system has/m);
  const page = await waitFor(async () => {
    const r = await request(port);
    return r.status === 200 && r;
  }, "the page");
  assert.match(
    page.body,
    /<dt>disk<\/dt>\s*<dd class="err">store [^<]+ free<br \/>the state dir&#39;s file system has/,
  );
});
