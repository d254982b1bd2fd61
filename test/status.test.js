// `status` end to end: every health word arising from real runs, `--check` exit codes for a
// healthy, a warning, a SIGSTOPped and a SIGKILLed daemon, the human view with and without colour.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import {
  BIN,
  ROOT,
  alive,
  cleanEnv,
  cli,
  killGroup,
  killGroupsAfter,
  startDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";

/** Jobs call `cronvisor` from this checkout. */
const PATH = `${path.join(ROOT, "bin")}:${path.dirname(process.execPath)}:/usr/bin:/bin`;

function status(cfg, ...args) {
  const r = cli(["status", "-c", cfg, ...args]);
  return args.includes("--json") ? { ...r, json: r.stdout ? JSON.parse(r.stdout) : null } : r;
}
const jobOf = (st, name) => st.jobs.find((j) => j.name === name);

test("--check: 3 without a store, 0 healthy, 1 failing, 2 for a SIGSTOPped daemon, 2 for a SIGKILLed one", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  good:\n    schedule: "@yearly"\n    command: "true"\n  bad:\n    schedule: "@yearly"\n    command: exit 3\n`,
  );
  const none = status(cfg, "--check");
  assert.equal(none.code, 3, none.stdout + none.stderr);
  assert.match(none.stdout, /^UNKNOWN: no state store/);

  const d = startDaemon(t, cfg);
  await waitFor(() => status(cfg, "--json").json?.daemon.state === "running", "daemon running");
  const ok = status(cfg, "--check");
  assert.equal(ok.code, 0, ok.stdout);
  assert.match(ok.stdout, /^OK: daemon running/);

  assert.equal(cli(["run", "bad", "-c", cfg]).code, 3);
  const warn = status(cfg, "--check");
  assert.equal(warn.code, 1, warn.stdout);
  assert.match(warn.stdout, /^WARNING: bad failing\n/);
  // --check --json: the JSON alone, and the code.
  const wj = status(cfg, "--check", "--json");
  assert.equal(wj.code, 1);
  assert.equal(jobOf(wj.json, "bad").health, "failing");

  // SIGSTOP: the pid lives, the beat stops: unresponsive after more than 3 heartbeats.
  process.kill(d.pid, "SIGSTOP");
  const stopped = await waitFor(() => {
    const r = status(cfg, "--check");
    return r.code === 2 ? r : null;
  }, "CRITICAL for a stopped daemon");
  assert.match(stopped.stdout, /^CRITICAL: daemon unresponsive \(last heartbeat \d+s ago\)/);
  assert.match(
    stopped.stdout,
    new RegExp(`daemon unresponsive: pid ${d.pid} is alive but not beating`),
  );
  const sj = status(cfg, "--json").json;
  assert.equal(sj.daemon.state, "unresponsive");
  assert.equal(sj.daemon.pid, d.pid);
  assert.ok(sj.daemon.heartbeat_age_s > 3, `heartbeat age ${sj.daemon.heartbeat_age_s}`);

  process.kill(d.pid, "SIGCONT");
  await waitFor(() => status(cfg, "--check").code === 1, "beating again after SIGCONT");

  d.kill("SIGKILL");
  await d.exited;
  const down = status(cfg, "--check");
  assert.equal(down.code, 2, down.stdout);
  assert.match(down.stdout, /^CRITICAL: daemon down/);
  const dj = status(cfg, "--json").json;
  assert.equal(dj.daemon.state, "down");
  assert.equal(dj.daemon.pid, null);
  // The store still tells the jobs' story while the daemon is down.
  assert.equal(jobOf(dj, "bad").health, "failing");
});

test("health words from real runs: failing, stuck, late; a job reporting progress is not stuck", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    [
      "heartbeat: 1s",
      `env: { PATH: "${PATH}" }`,
      "defaults: { kill_grace: 1s }",
      "jobs:",
      "  boom:",
      '    schedule: "* * * * * *"',
      "    command: echo boom >&2; exit 3",
      "  hang:",
      '    schedule: "* * * * * *"',
      "    command: sleep 60",
      "    health: { progress_within: 1s }",
      "  steady:",
      '    schedule: "* * * * * *"',
      '    command: for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do cronvisor progress "step $i"; sleep 0.5; done',
      // 5 s, not less: each `cronvisor progress` is a process start, seconds long on a loaded CI box.
      "    health: { progress_within: 5s }",
      "  nightly:",
      '    schedule: "@yearly"',
      '    command: "true"',
      "    health: { success_within: 2s }",
      "",
    ].join("\n"),
  );
  const d = startDaemon(t, cfg);
  const seen = [];
  let steadyRunningFor = 0;
  const st = await waitFor(
    () => {
      const before = Date.now();
      const s = status(cfg, "--json").json;
      const after = Date.now();
      if (!s) return null;
      const steady = jobOf(s, "steady");
      if (steady.running) {
        const r = steady.running;
        // Quiet since the later of its start and its last progress; status judged it at a
        // moment between `before` and `after`.
        const since = Math.max(
          Date.parse(r.started_at),
          r.progress_at ? Date.parse(r.progress_at) : 0,
        );
        seen.push({
          health: steady.health,
          quietAtLeast: before - since,
          quietAtMost: after - since,
        });
        steadyRunningFor = after - Date.parse(r.started_at);
      }
      const ready =
        jobOf(s, "boom").health === "failing" &&
        jobOf(s, "hang").health === "stuck" &&
        jobOf(s, "nightly").health === "late" &&
        // Past its 5 s limit and not stuck: its progress calls kept it fresh.
        steady.running !== null &&
        steadyRunningFor > 7000 &&
        steady.health === "ok";
      return ready ? s : null;
    },
    "failing, stuck and late, and steady running for 7s",
    40_000,
    100,
  );
  // Stuck exactly when its last progress was older than its 5 s limit. On a loaded box one
  // `cronvisor progress` (a process start) can itself take longer than that, and then stuck is
  // the truth; the words must agree with the progress times status reported alongside them.
  assert.ok(seen.length >= 3, `steady sampled ${seen.length} times`);
  const told = JSON.stringify(seen);
  for (const x of seen) {
    if (x.health === "stuck") assert.ok(x.quietAtMost > 5000, `stuck while quiet < 5 s: ${told}`);
    else assert.ok(x.quietAtLeast <= 5000, `not stuck while quiet > 5 s: ${told}`);
  }
  const steady = jobOf(st, "steady");
  assert.equal(steady.health, "ok");
  assert.match(steady.running.progress_message, /^step \d+$/);
  assert.ok(steady.running.progress_age_s < 5, `progress age ${steady.running.progress_age_s}`);

  const boom = jobOf(st, "boom");
  assert.match(
    boom.problems[0],
    /^the last (run|\d+ runs) failed \((latest )?run \d+: failed, exit 3\)$/,
  );
  const hang = jobOf(st, "hang");
  assert.equal(hang.running.run_id, hang.lock.run_id);
  assert.match(
    hang.problems[0],
    new RegExp(`^run ${hang.running.run_id} has shown no progress for \\d+s \\(limit 1s\\)$`),
  );
  assert.match(
    jobOf(st, "nightly").problems[0],
    /^no successful run since it was first seen \d+s ago \(limit 2s\)$/,
  );

  const check = status(cfg, "--check");
  assert.equal(check.code, 1);
  assert.match(check.stdout, /^WARNING: boom failing, hang stuck, nightly late\n/);
  const human = status(cfg).stdout;
  assert.match(human, /^failing\s+boom\s+failed /m);
  assert.match(human, /^stuck\s+hang\s+/m);
  assert.match(human, /^late\s+nightly\s+-/m);
  assert.match(human, /^ {2}hang: run \d+ has shown no progress/m);

  d.kill("SIGTERM");
  assert.equal((await d.exited).code, 0, d.err);
});

test("repeating: a key attempted 4 times with repeat_limit 3; a run that only skips done work shows it", (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    [
      `env: { PATH: "${PATH}" }`,
      "jobs:",
      "  retry:",
      '    schedule: "@yearly"',
      "    command: cronvisor once invoice-7 -- false; exit 0",
      "    health: { repeat_limit: 3 }",
      "  redo:",
      '    schedule: "@yearly"',
      "    command: cronvisor once upload-1 -- true",
      "",
    ].join("\n"),
  );
  for (let i = 1; i <= 3; i++) assert.equal(cli(["run", "retry", "-c", cfg]).code, 0);
  // Three attempts are within the limit; each run "succeeds".
  let st = status(cfg, "--json").json;
  assert.equal(jobOf(st, "retry").health, "ok");
  assert.equal(cli(["run", "retry", "-c", cfg]).code, 0);
  st = status(cfg, "--json").json;
  const retry = jobOf(st, "retry");
  assert.equal(retry.health, "repeating");
  assert.deepEqual(retry.problems, [
    '1 key was attempted more than 3 times without being marked done (worst: "invoice-7", 4 times)',
  ]);
  assert.equal(retry.last_run.status, "ok", "the runs themselves succeeded");
  assert.match(status(cfg, "retry").stdout, /^repeating\s+retry\s+ok /m);

  // Work done once, then a run that only finds it done: visible as +0 new, 1 skipped.
  assert.equal(cli(["run", "redo", "-c", cfg]).code, 0);
  assert.equal(cli(["run", "redo", "-c", cfg]).code, 0);
  const redo = jobOf(status(cfg, "--json").json, "redo");
  assert.equal(redo.health, "ok");
  assert.equal(redo.markers, 1);
  assert.equal(redo.markers_new_last_run, 0);
  assert.equal(redo.markers_skipped_last_run, 1);
  assert.match(status(cfg).stdout, /^ok\s+redo\s+.*\s1 \(\+0, 1 done\)/m);
});

test("slow: a run lasting more than 2x the p95 of its recent successes is flagged", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `jobs:\n  sometimes:\n    schedule: "@yearly"\n    command: if [ -e slow ]; then sleep 60; fi\n`,
  );
  for (let i = 0; i < 5; i++) assert.equal(cli(["run", "sometimes", "-c", cfg]).code, 0);
  assert.equal(jobOf(status(cfg, "--json").json, "sometimes").running, null);
  fs.writeFileSync(path.join(dir, "slow"), "");
  assert.equal(cli(["run", "sometimes", "--no-wait", "-c", cfg]).code, 0);
  const job = await waitFor(() => {
    const j = jobOf(status(cfg, "--json").json, "sometimes");
    if (j.running?.pid) killGroupsAfter(t, [j.running.pid]);
    return j.running?.slow ? j : null;
  }, "the run flagged slow");
  // p95 of sub-second runs is measured against a 1 s floor: slow after 2 s.
  assert.equal(job.health, "ok", "slow is a warning sign, not a health word");
  assert.match(
    job.problems[0],
    new RegExp(
      `^run ${job.running.run_id} has run \\d+s, over 2× its usual [01]s \\(p95 of recent successes\\)$`,
    ),
  );
  assert.ok(job.p95_duration_ms < 1000, `p95 ${job.p95_duration_ms}`);
  assert.match(status(cfg).stdout, /\(slow\)/);
  killGroup(job.running.pid);
  await waitFor(
    () =>
      !alive(job.running.pid) && jobOf(status(cfg, "--json").json, "sometimes").running === null,
    "run ended",
  );
});

test("human status: health first, colour only on a terminal without NO_COLOR; status JOB shows the last runs", (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `jobs:\n  a:\n    schedule: "@daily"\n    command: "true"\n  b:\n    schedule: "@daily"\n    command: exit 4\n`,
  );
  cli(["run", "a", "-c", cfg]);
  cli(["run", "b", "-c", cfg]);
  cli(["run", "b", "-c", cfg]);
  const plain = status(cfg);
  assert.equal(plain.code, 0);
  assert.ok(!plain.stdout.includes("\x1b"), "no escape codes when stdout is not a terminal");
  const lines = plain.stdout.split("\n");
  assert.match(lines[0], /^daemon down: no daemon process$/);
  assert.match(lines[1], /^HEALTH\s+JOB\s+LAST RUN\s+LAST SUCCESS\s+PROGRESS\s+MARKERS\s+NEXT/);
  assert.match(lines[2], /^ok\s+a\s+ok \d+s ago\s+\d+s ago/);
  assert.match(lines[3], /^failing\s+b\s+failed \d+s ago\s+never/);
  assert.equal(lines[4], "  b: the last 2 runs failed (latest run 3: failed, exit 4)");

  const detail = status(cfg, "b").stdout;
  assert.match(detail, /^b: @daily \(UTC\), next \d{4}-\d\d-\d\d 00:00Z$/m);
  assert.match(detail, /^ {2}lock: free$/m);
  assert.match(detail, /^ {4}RUN\s+STATUS\s+TRIGGER\s+STARTED\s+DURATION\s+MARKERS\s+REASON$/m);
  assert.match(detail, /^ {4}3\s+failed\s+manual\s+.*exit 4$/m);
  assert.match(detail, /^ {4}2\s+failed\s+manual\s+.*exit 4$/m);

  // On a terminal (script(1) gives the command a pty): colour, unless NO_COLOR or TERM=dumb.
  const onTty = (env) => {
    // Node's hasColors() answers "2 colours" whenever CI is set (as it is in CI): leave it out.
    const base = cleanEnv({ TERM: "xterm-256color", ...env });
    delete base.CI;
    const r = spawnSync(
      "script",
      ["-qec", `${process.execPath} ${BIN} status -c ${cfg}`, "/dev/null"],
      {
        encoding: "utf8",
        env: base,
        timeout: 30_000,
      },
    );
    assert.equal(r.status, 0, r.stderr);
    return r.stdout;
  };
  const tty = onTty({});
  const ESC = "\x1b";
  assert.ok(tty.includes(`${ESC}[31mfailing${ESC}[0m`), JSON.stringify(tty));
  assert.ok(tty.includes(`${ESC}[32mok${ESC}[0m`), JSON.stringify(tty));
  assert.ok(tty.startsWith(`daemon ${ESC}[31mdown${ESC}[0m`), JSON.stringify(tty));
  // The table still lines up: padding is outside the escape codes.
  assert.ok(tty.includes(`${ESC}[32mok${ESC}[0m${" ".repeat(7)}a  `), JSON.stringify(tty));
  assert.ok(!onTty({ NO_COLOR: "1" }).includes("\x1b"), "NO_COLOR on a terminal: no escape codes");
  assert.ok(!onTty({ TERM: "dumb" }).includes("\x1b"), "TERM=dumb: no escape codes");
});

test("status --json has every field of the contract", (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(dir, `jobs:\n  a:\n    schedule: "@daily"\n    command: "true"\n`);
  cli(["run", "a", "-c", cfg]);
  const st = status(cfg, "--json").json;
  for (const k of [
    "state",
    "pid",
    "started_at",
    "heartbeat_at",
    "heartbeat_age_s",
    "config_error",
  ]) {
    assert.ok(k in st.daemon, `daemon.${k}`);
  }
  const j = st.jobs[0];
  for (const k of [
    "name",
    "schedule",
    "timezone",
    "paused",
    "health",
    "problems",
    "next_slot",
    "running",
    "lock",
    "last_run",
    "last_success_at",
    "last_progress_at",
    "markers",
  ]) {
    assert.ok(k in j, `job.${k}`);
  }
  assert.equal(j.health, "ok");
  assert.equal(j.last_run.status, "ok");
  assert.match(j.last_success_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.equal(cli(["pause", "a", "-c", cfg]).code, 0);
  assert.equal(jobOf(status(cfg, "--json").json, "a").health, "paused");
});
