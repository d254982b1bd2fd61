// Issue 37, the newcomer's path: what a new user met between a fresh clone and a server install.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import {
  BIN,
  ROOT,
  cleanEnv,
  cli,
  freePort,
  request,
  startDaemon,
  statusJson,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";

/** A shell line run with the CLI as `cronvisor`, its stdout wherever the line sends it. */
function shell(line, cwd) {
  const r = spawnSync("sh", ["-c", line], {
    cwd,
    env: cleanEnv({ CVX: `${process.execPath} ${BIN}` }),
    encoding: "utf8",
    timeout: 60_000,
  });
  return { code: r.status, stderr: r.stderr };
}

const sha = (file) => crypto.createHash("sha256").update(fs.readFileSync(file)).digest("hex");

test("logs of a 5 MB run through a pipe and to a file are the log, byte for byte", (t) => {
  const dir = tmpdir(t);
  // 5 MiB of numbered lines (any reordering or reused chunk shows), under a 10 MB log cap.
  const cfg = writeConfig(
    dir,
    `state_dir: ./state
jobs:
  big:
    schedule: "0 0 1 1 *"
    log: { max_size: 10MB }
    command: awk 'BEGIN { for (i = 0; i < 209715; i++) printf "line %012d of the log\\n", i }'
`,
  );
  const run = shell(`$CVX run big -c ${cfg} > /dev/null`, dir);
  assert.equal(run.code, 0, run.stderr);
  const logs = path.join(dir, "state", "logs", "big");
  const [log] = fs.readdirSync(logs).map((f) => path.join(logs, f));
  assert.ok(fs.statSync(log).size > 5_000_000, "the log holds 5 MB");
  const toFile = shell(`$CVX logs big -c ${cfg} > file.txt`, dir);
  assert.equal(toFile.code, 0, toFile.stderr);
  // A slow reader: the pipe fills, and stdout's writes queue behind it.
  const piped = shell(`$CVX logs big -c ${cfg} | (sleep 0.3; cat) > piped.txt`, dir);
  assert.equal(piped.code, 0, piped.stderr);
  assert.equal(sha(path.join(dir, "file.txt")), sha(log), "to a file");
  assert.equal(sha(path.join(dir, "piped.txt")), sha(log), "through a pipe");
});

test("status's last runs name their node, and migration 011 gives a store's summaries theirs", (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `state_dir: ./state
node: web1
jobs:
  j:
    schedule: "0 0 1 1 *"
    command: "true"
`,
  );
  assert.equal(cli(["run", "j", "-c", cfg]).code, 0);
  const lastRuns = () => {
    const st = JSON.parse(cli(["status", "--json", "-c", cfg]).stdout);
    return [st.jobs[0].last_run?.node, st.jobs[0].last_finished_run?.node];
  };
  assert.deepEqual(lastRuns(), ["web1", "web1"]);
  // The store as migration 010 left it: 011's and 012's columns gone, 010's view, summaries
  // without the node (and the table of 013, which came after).
  const db = new Database(path.join(dir, "state", "cronvisor.db"));
  const m010 = fs.readFileSync(
    path.join(ROOT, "src", "store", "migrations", "sqlite", "010_operable_store.sql"),
    "utf8",
  );
  const view = /CREATE VIEW job_summary AS[\s\S]*?FROM jobs j;/.exec(m010)?.[0];
  assert.ok(view, "migration 010's view");
  db.exec(`DROP VIEW job_summary;
    ${view}
    ALTER TABLE runs DROP COLUMN cpu_s;
    ALTER TABLE runs DROP COLUMN memory_peak_bytes;
    ALTER TABLE daemon DROP COLUMN containment;
    ALTER TABLE jobs DROP COLUMN last_work_at;
    ALTER TABLE jobs DROP COLUMN idle_runs;
    DROP TABLE holds;`);
  db.exec("UPDATE jobs SET last_finished = json_remove(last_finished, '$.node')");
  db.pragma("user_version = 10");
  db.close();
  // A writer brings it forward (without a run of its own).
  assert.equal(cli(["pause", "j", "-c", cfg]).code, 0);
  assert.equal(cli(["resume", "j", "-c", cfg]).code, 0);
  assert.deepEqual(lastRuns(), ["web1", "web1"]);
});

test("npm start builds only when a source is newer than the last build", (t) => {
  // The script in a tree of its own: a fake clone whose times the test sets.
  const dir = tmpdir(t);
  fs.mkdirSync(path.join(dir, "scripts"));
  fs.mkdirSync(path.join(dir, "src", "core"), { recursive: true });
  fs.mkdirSync(path.join(dir, "dist"));
  fs.copyFileSync(
    path.join(ROOT, "scripts", "build-if-stale.js"),
    path.join(dir, "scripts", "build-if-stale.js"),
  );
  for (const f of ["package.json", "tsconfig.json", "src/core/a.ts"])
    fs.writeFileSync(path.join(dir, f), "{}\n");
  const check = () =>
    spawnSync(process.execPath, ["scripts/build-if-stale.js", "--check"], {
      cwd: dir,
      encoding: "utf8",
    });
  assert.deepEqual([check().status, check().stdout], [1, "stale: no build yet\n"]);
  const past = new Date(Date.now() - 60_000);
  for (const f of ["package.json", "tsconfig.json", "src/core/a.ts", "scripts/build-if-stale.js"])
    fs.utimesSync(path.join(dir, f), past, past);
  spawnSync(process.execPath, ["scripts/build-if-stale.js", "--stamp"], { cwd: dir });
  assert.deepEqual([check().status, check().stdout], [0, "fresh\n"]);
  const later = new Date(Date.now() + 60_000);
  fs.utimesSync(path.join(dir, "src", "core", "a.ts"), later, later);
  assert.deepEqual(
    [check().status, check().stdout],
    [1, `stale: ${path.join("src", "core", "a.ts")} changed since the last build\n`],
  );
  // And the real one: `npm start` runs it before the daemon, `npm run build` stamps.
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
  assert.match(pkg.scripts.start, /^node scripts\/build-if-stale\.js && /);
  assert.match(pkg.scripts.build, /&& node scripts\/build-if-stale\.js --stamp$/);
});

test("the example's enrich stays a few seconds: a `cronvisor once` per item is a Node start-up", () => {
  const text = fs.readFileSync(path.join(ROOT, "jobs.example.yaml"), "utf8");
  const enrich = text.slice(text.indexOf("\n  enrich:"), text.indexOf("\n  upload:"));
  assert.match(enrich, /command: \.\/examples\/enrich\.sh/);
  // 200 items made a run with nothing left to do take 18.6 s; 20 take about 2.
  const items = Number(/ITEMS: (\d+)/.exec(enrich)?.[1]);
  assert.ok(items > 0 && items <= 20, `ITEMS ${items}`);
});

test("resume of a job its config pauses does not say resumed: it says it stays paused and why", (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `state_dir: ./state
jobs:
  off:
    schedule: "0 0 1 1 *"
    command: "true"
    paused: true
  on:
    schedule: "0 0 1 1 *"
    command: "true"
`,
  );
  assert.equal(cli(["pause", "off", "-c", cfg]).code, 0);
  const r = cli(["resume", "off", "-c", cfg]);
  assert.equal(r.code, 0, r.stderr);
  assert.doesNotMatch(r.stdout, /resumed/);
  assert.equal(
    r.stdout,
    `off stays paused: its entry in ${cfg} (line 3) says paused: true; remove that, then \`cronvisor reload -c ${cfg}\` (the pause set by \`cronvisor pause\` is lifted)\n`,
  );
  assert.equal(JSON.parse(cli(["status", "--json", "-c", cfg]).stdout).jobs[0].paused, true);
  // A job paused by `pause` alone is resumed, and says so.
  assert.equal(cli(["pause", "on", "-c", cfg]).code, 0);
  assert.equal(cli(["resume", "on", "-c", cfg]).stdout, "on resumed\n");
});

test("reload says which changes wait for a restart (http, node, store, state_dir), and the daemon keeps them", async (t) => {
  const dir = tmpdir(t);
  const [a, b] = [await freePort(), await freePort()];
  const jobs = `jobs:\n  j:\n    schedule: "0 0 1 1 *"\n    command: "true"\n`;
  const cfg = writeConfig(dir, `state_dir: ./state\nheartbeat: 1s\nhttp: 127.0.0.1:${a}\n${jobs}`);
  const d = startDaemon(t, cfg);
  await waitFor(async () => (await request(a).catch(() => ({}))).status === 200, "the page");
  writeConfig(
    dir,
    `state_dir: ./state\nheartbeat: 1s\nnode: web2\nhttp: 127.0.0.1:${b}\n${jobs}  k:\n    schedule: "0 0 1 1 *"\n    command: "true"\n`,
  );
  const r = cli(["reload", "-c", cfg]);
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.split("\n");
  assert.deepEqual(lines.slice(1, 4), [
    "not applied until the daemon restarts (`systemctl restart cronvisor`, or stop and start `cronvisor daemon`):",
    "  node: the host name -> web2",
    `  http: 127.0.0.1:${a} -> 127.0.0.1:${b}`,
  ]);
  // Then `plan`'s summary of what it applies (test/plan.test.js): the new job, the kept one.
  assert.match(lines[4], /^baseline: the config the running daemon accepted at /);
  assert.deepEqual(lines.slice(-3), [
    "unchanged: j",
    "1 added, 0 removed, 0 changed, 1 unchanged",
    "",
  ]);
  assert.ok(lines.includes("added    k"), r.stdout);
  // The rest is applied: the new job is there; the page stays where it was bound.
  await waitFor(() => statusJson(cfg).jobs.some((j) => j.name === "k"), "job k");
  assert.equal((await request(a)).status, 200);
  await waitFor(() => /takes effect when the daemon restarts/.test(d.err), "the daemon's note");
  assert.match(
    d.err,
    new RegExp(`node: the host name -> web2; http: 127.0.0.1:${a} -> 127.0.0.1:${b}`),
  );
  // A second reload still says so: the daemon records what it runs, not what the file asks.
  assert.match(cli(["reload", "-c", cfg]).stdout, /not applied until the daemon restarts/);
  await stopDaemon(d);
});

test("next: local times zero-padded and 24-hour, in a column", (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `state_dir: ./state\njobs:\n  j:\n    schedule: "5 1 * * *"\n    timezone: America/New_York\n    command: "true"\n  k:\n    schedule: "30 14 * * *"\n    timezone: Asia/Kolkata\n    command: "true"\n`,
  );
  const r = cli(["next", "-c", cfg, "--count", "2"]);
  assert.equal(r.code, 0, r.stderr);
  const times = r.stdout.split("\n").filter((l) => l.startsWith("  "));
  assert.equal(times.length, 4, r.stdout);
  for (const l of times)
    assert.match(
      l,
      /^ {2}\d{4}-\d\d-\d\dT\d\d:\d\d:00\.000Z {2}\d{4}-\d\d-\d\d \d\d:\d\d:00 [A-Z][\w+:-]*$/,
    );
  assert.match(times[0], / 01:05:00 E[SD]T$/);
  assert.match(times[2], / 14:30:00 GMT\+5:30$/);
});
