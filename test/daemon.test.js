// The daemon end to end: the built CLI as real processes, real jobs, a real SQLite store.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import {
  alive,
  cli,
  readStoreIn,
  spawnCli,
  startDaemon,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";
import { needs } from "./needs.js";

test("a per-second job runs, is recorded with its log, and no slot runs twice across a restart", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  tick:\n    schedule: "* * * * * *"\n    command: echo slot=$CRONVISOR_SLOT trigger=$CRONVISOR_TRIGGER\n    catchup: skip\n`,
  );
  let d = startDaemon(t, cfg);
  await waitFor(() => readStoreIn(dir).runs({ status: "ok" }).length >= 2, "two ok runs");
  await stopDaemon(d);
  d = startDaemon(t, cfg);
  const before = readStoreIn(dir).runs({ status: "ok" }).length;
  await waitFor(
    () => readStoreIn(dir).runs({ status: "ok" }).length >= before + 2,
    "runs after restart",
  );
  await stopDaemon(d);
  // One job: its slots doubled are the store's.
  const dup = readStoreIn(dir).doubled({ trigger: "schedule" });
  assert.deepEqual(dup, [], "no slot has two dispositions");
  const last = readStoreIn(dir).runs({ status: "ok" }).at(-1);
  const log = fs.readFileSync(last.log_path, "utf8");
  assert.equal(log, `slot=${new Date(last.slot).toISOString()} trigger=schedule\n`);
  // Permissions: state dir 0700, store and logs 0600.
  assert.equal(fs.statSync(path.join(dir, ".cronvisor")).mode & 0o777, 0o700);
  assert.equal(fs.statSync(path.join(dir, ".cronvisor", "cronvisor.db")).mode & 0o777, 0o600);
  assert.equal(fs.statSync(last.log_path).mode & 0o777, 0o600);
  const hist = JSON.parse(
    cli(["history", "-c", path.join(dir, "jobs.yaml"), "--json", "--limit", "3"]).stdout,
  );
  assert.equal(hist.length, 3);
  for (const k of [
    "run_id",
    "job",
    "slot",
    "trigger",
    "status",
    "reason",
    "exit_code",
    "signal",
    "attempt",
    "started_at",
    "finished_at",
    "duration_ms",
    "markers_new",
    "markers_skipped",
  ]) {
    assert.ok(k in hist[0], `history entry has ${k}`);
  }
  const logs = cli(["logs", "tick", "-c", path.join(dir, "jobs.yaml")]);
  assert.equal(logs.code, 0);
  assert.match(logs.stdout, /^slot=\S+ trigger=schedule\n$/);
});

test("overlap: a held lock skips the slot and records why; `run` exits 75; status shows the holder", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  slow:\n    schedule: "* * * * * *"\n    command: sleep 30\n    kill_grace: 1s\n`,
  );
  const d = startDaemon(t, cfg);
  await waitFor(() => readStoreIn(dir).runs({ status: "skipped" }).length >= 1, "a skipped slot");
  const skipped = readStoreIn(dir).runs({ status: "skipped" })[0];
  const holder = readStoreIn(dir).runs({ status: "running" })[0];
  assert.equal(skipped.reason, `overlap: run ${holder.id} holds the lock`);
  const r = cli(["run", "slow", "-c", cfg]);
  assert.equal(r.code, 75, r.stderr);
  assert.match(r.stderr, new RegExp(`run ${holder.id} .*holds the lock`));
  // And what to do about it, as commands to paste.
  assert.match(r.stderr, new RegExp(`^ +watch it: +cronvisor logs slow --follow -c ${cfg}$`, "m"));
  assert.match(r.stderr, new RegExp(`^ +then again: +cronvisor run slow -c ${cfg}$`, "m"));
  const st = JSON.parse(cli(["status", "-c", cfg, "--json"]).stdout);
  assert.equal(st.daemon.state, "running");
  const job = st.jobs[0];
  assert.equal(job.lock.run_id, holder.id);
  assert.equal(job.lock.pid, holder.pid);
  assert.equal(job.running.run_id, holder.id);
  await stopDaemon(d);
  const ended = readStoreIn(dir).runs({ id: holder.id })[0];
  assert.equal(ended.status, "killed");
  assert.equal(alive(holder.pid), false, "graceful stop took the job down");
});

test("a second daemon on the same state dir is refused and leaves the first untouched", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  a:\n    schedule: "0 0 1 1 *"\n    command: "true"\n`,
  );
  const d = startDaemon(t, cfg);
  await waitFor(() => readStoreIn(dir).daemon()?.pid === d.pid, "first daemon registered");
  const second = cli(["daemon", "-c", cfg]);
  assert.notEqual(second.code, 0);
  assert.match(second.stderr, new RegExp(`another cronvisor daemon \\(pid ${d.pid}`));
  assert.equal(readStoreIn(dir).daemon().pid, d.pid);
  assert.equal(JSON.parse(cli(["status", "-c", cfg, "--json"]).stdout).daemon.state, "running");
  await stopDaemon(d);
});

test("run JOB works without the daemon: prints output, records the run, returns the job's exit code", (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `jobs:\n  hello:\n    schedule: "@daily"\n    command: echo hello from $CRONVISOR_JOB run $CRONVISOR_RUN_ID; exit 3\n`,
  );
  const r = cli(["run", "hello", "-c", cfg]);
  assert.equal(r.code, 3);
  assert.match(r.stdout, /^hello from hello run 1\n$/);
  const h = JSON.parse(cli(["history", "hello", "-c", cfg, "--json"]).stdout);
  assert.equal(h[0].status, "failed");
  assert.equal(h[0].trigger, "manual");
  assert.equal(h[0].exit_code, 3);
  assert.equal(cli(["run", "nope", "-c", cfg]).code, 2);
});

test("env hygiene: a job sees the minimal base, config env and CRONVISOR_*, never the daemon's secrets", (t) => {
  const dir = tmpdir(t);
  fs.writeFileSync(
    path.join(dir, "job.env"),
    "# secrets for the job\nAPI_TOKEN='abc def'\nexport REGION=eu\n",
  );
  const cfg = writeConfig(
    dir,
    `env: { GLOBAL: g }\njobs:\n  envy:\n    schedule: "@daily"\n    command: env | sort\n    env: { MODE: nightly }\n    env_file: job.env\n`,
  );
  const r = cli(["run", "envy", "-c", cfg], {
    env: { DAEMON_SECRET: "s3cret", AWS_SECRET_ACCESS_KEY: "x" },
  });
  assert.equal(r.code, 0, r.stderr);
  const names = r.stdout
    .trim()
    .split("\n")
    .map((l) => l.split("=")[0]);
  assert.ok(!r.stdout.includes("s3cret"));
  const allowed = new Set([
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "TZ",
    "GLOBAL",
    "MODE",
    "API_TOKEN",
    "REGION",
    "PWD",
    "SHLVL",
    "_",
  ]);
  for (const n of names)
    assert.ok(allowed.has(n) || n.startsWith("CRONVISOR_"), `unexpected variable ${n}`);
  assert.match(r.stdout, /^API_TOKEN=abc def$/m);
  assert.match(r.stdout, /^MODE=nightly$/m);
  assert.match(r.stdout, /^GLOBAL=g$/m);
  for (const k of ["JOB", "RUN_ID", "FENCE", "SLOT", "ATTEMPT", "TRIGGER", "STATE_DIR"]) {
    assert.match(r.stdout, new RegExp(`^CRONVISOR_${k}=.+$`, "m"));
  }
});

test("spawn failures are recorded and the daemon keeps serving the other jobs", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  missing:\n    schedule: "* * * * * *"\n    command: [/nonexistent/prog]\n  nocwd:\n    schedule: "* * * * * *"\n    command: "true"\n    cwd: /nonexistent-dir\n  fine:\n    schedule: "* * * * * *"\n    command: "true"\n`,
  );
  const d = startDaemon(t, cfg);
  await waitFor(
    () =>
      new Set(
        readStoreIn(dir)
          .runs({ status: "spawn_failed" })
          .map((r) => r.job),
      ).size === 2 && readStoreIn(dir).runs({ job: "fine", status: "ok" }).length >= 2,
    "spawn failures recorded and the fine job running",
  );
  const missing = readStoreIn(dir).runs({ job: "missing", status: "spawn_failed" })[0];
  assert.match(missing.reason, /ENOENT/);
  const nocwd = readStoreIn(dir).runs({ job: "nocwd", status: "spawn_failed" })[0];
  assert.match(nocwd.reason, /nonexistent-dir/);
  const st = JSON.parse(cli(["status", "-c", cfg, "--json"]).stdout);
  assert.equal(st.jobs.find((j) => j.name === "missing").health, "failing");
  await stopDaemon(d);
});

test("a corrupt store is refused with a clear message and left untouched", (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(dir, `jobs:\n  a:\n    schedule: "@daily"\n    command: "true"\n`);
  fs.mkdirSync(path.join(dir, ".cronvisor"), { mode: 0o700 });
  const db = path.join(dir, ".cronvisor", "cronvisor.db");
  const junk = Buffer.from("this is not a database, it is a very important file ".repeat(200));
  fs.writeFileSync(db, junk);
  const r = cli(["daemon", "-c", cfg]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /not a valid database|integrity check/);
  assert.match(r.stderr, /left untouched/);
  assert.deepEqual(fs.readFileSync(db), junk);
  assert.equal(cli(["status", "-c", cfg, "--check"]).code !== 0, true);
});

test("pause survives a restart: paused slots are recorded skipped; resume fires again", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  p:\n    schedule: "* * * * * *"\n    command: "true"\n    catchup: skip\n`,
  );
  assert.equal(cli(["pause", "p", "-c", cfg]).code, 0);
  let d = startDaemon(t, cfg);
  await waitFor(
    () => readStoreIn(dir).runs({ status: "skipped", reason: "paused" }).length >= 2,
    "paused skips",
  );
  await stopDaemon(d);
  assert.equal(readStoreIn(dir).runs({ status: "ok" }).length, 0);
  assert.equal(JSON.parse(cli(["status", "-c", cfg, "--json"]).stdout).jobs[0].health, "paused");
  assert.equal(cli(["resume", "p", "-c", cfg]).code, 0);
  d = startDaemon(t, cfg);
  await waitFor(() => readStoreIn(dir).runs({ status: "ok" }).length >= 1, "runs after resume");
  await stopDaemon(d);
});

test("validate prints next fire times (0) or every error (2); next --json lists upcoming slots", (t) => {
  const dir = tmpdir(t);
  const good = writeConfig(
    dir,
    `jobs:\n  nightly:\n    schedule: "30 2 * * *"\n    timezone: Europe/Berlin\n    command: "true"\n`,
  );
  const v = cli(["validate", "-c", good]);
  assert.equal(v.code, 0, v.stderr);
  assert.match(v.stdout, /nightly\s+Europe\/Berlin\s+\d{4}-\d\d-\d\dT\d\d:30:00\.000Z/);
  const n = JSON.parse(cli(["next", "-c", good, "--json", "--count", "3"]).stdout);
  assert.equal(n[0].job, "nightly");
  assert.equal(n[0].timezone, "Europe/Berlin");
  assert.equal(n[0].next.length, 3);
  const bad = writeConfig(
    dir,
    `jobs:\n  nightly:\n    schedule: "61 2 * * *"\n    comand: "true"\n`,
    "bad.yaml",
  );
  const b = cli(["validate", "-c", bad]);
  assert.equal(b.code, 2);
  const lines = b.stderr.trim().split("\n");
  assert.ok(lines.length >= 2, b.stderr);
  assert.ok(
    lines.every((l) => l.startsWith(`${bad}:`)),
    b.stderr,
  );
});

test("retention: log.keep_runs prunes old run rows and their logs", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  r:\n    schedule: "* * * * * *"\n    command: echo $CRONVISOR_RUN_ID\n    log: { keep_runs: 3 }\n`,
  );
  const d = startDaemon(t, cfg);
  await waitFor(
    () =>
      readStoreIn(dir)
        .runs({ status: "ok" })
        .filter((r) => r.id >= 6).length >= 1,
    "six runs",
  );
  await stopDaemon(d);
  const left = readStoreIn(dir).runs();
  assert.ok(left.length <= 4, `at most keep_runs (+1 in flight) rows left: ${left.length}`);
  assert.ok(left[0].id > 1, "the oldest runs are gone");
  const logs = fs.readdirSync(path.join(dir, ".cronvisor", "logs", "r"));
  assert.ok(logs.length <= 4, `old logs removed: ${logs}`);
  assert.ok(!logs.includes("1.log"));
  assert.equal(cli(["logs", "r", "--run", "1", "-c", cfg]).code, 1, "a pruned run has no log");
});

test(
  "as root, a config or state dir writable by others is refused with exit 2 and the reason",
  // Skipped only when not root: the refusal is of a root daemon; in CI, which runs as root, never.
  needs(process.getuid() !== 0 && "needs root"),
  (t) => {
    const dir = tmpdir(t);
    const cfg = writeConfig(dir, `jobs:\n  a:\n    schedule: "@daily"\n    command: "true"\n`);
    fs.chmodSync(cfg, 0o666);
    const r = cli(["daemon", "-c", cfg]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /refusing to run as root/);
    assert.match(r.stderr, /config file .* is writable by group or others \(mode 666\)/);
    fs.chmodSync(cfg, 0o644);
    fs.mkdirSync(path.join(dir, ".cronvisor"), { mode: 0o777 });
    fs.chmodSync(path.join(dir, ".cronvisor"), 0o777);
    const s = cli(["daemon", "-c", cfg]);
    assert.equal(s.code, 2);
    assert.match(s.stderr, /state dir .* is writable by group or others \(mode 777\)/);
  },
);

test("run --no-wait returns at once and the run is still recorded; logs --follow streams until the end", async (t) => {
  const dir = tmpdir(t);
  const flag = path.join(dir, "go");
  const cfg = writeConfig(
    dir,
    `jobs:\n  bg:\n    schedule: "@daily"\n    command: "echo first; while [ ! -e ${flag} ]; do sleep 0.05; done; echo second"\n`,
  );
  const r = cli(["run", "bg", "--no-wait", "-c", cfg]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /started bg in the background/);
  await waitFor(() => readStoreIn(dir).spawned()[0], "the background run");
  const follow = spawnCli(["logs", "bg", "--follow", "-c", cfg]);
  await waitFor(() => follow.out.includes("first\n"), "the first line");
  assert.ok(!follow.out.includes("second"));
  fs.writeFileSync(flag, "");
  const end = await follow.exited;
  assert.equal(end.code, 0);
  assert.equal(follow.out, "first\nsecond\n");
  assert.equal(readStoreIn(dir).runs()[0].status, "ok");
});
