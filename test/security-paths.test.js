// Planted links are never followed by a root daemon (issue 13, item 3: defence in depth behind the
// ancestor-ownership check). As root, with a real daemon running a per-second job `victim` and a
// second job `other`, a link is planted (as an attacker who got write access to the state dir
// would) where the daemon opens a file next: a run's log, the exit-status file the wrapper writes,
// the heartbeat file. Each points at a root-owned file outside the state dir. Its bytes, mode and
// mtime never change; the affected run fails alone or is recorded as it ended; the daemon keeps
// beating and running `other`; nothing prints a stack trace.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import {
  cli,
  killDaemon,
  readStore,
  startDaemon as start,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
  isLink,
} from "./helpers.js";
import { needs } from "./needs.js";

// What these tests attack is a root daemon opening paths others can write: skipped with this
// reason only when not root; in CI, which runs as root, never.
const notRoot = process.getuid?.() === 0 ? false : "the daemon opens these paths as root";

const SECRET = "root-only: do not overwrite\n";
const STACK = /\n\s+at /;
/** For each wait: generous, for a loaded machine (CI runs test files two at a time). */
const DEADLINE = 60_000;

/**
 * A temp dir and a startDaemon whose daemons are killed before the dir is removed when the test
 * ends (after hooks run in the order they were added): a failed test must not remove the dir
 * under a daemon that goes on writing into it, which can fail the removal and leave it running.
 */
function setup(t) {
  const daemons = [];
  t.after(() => Promise.all(daemons.map(killDaemon)));
  const dir = tmpdir(t);
  const startDaemon = (cfg) => {
    const d = start(t, cfg);
    daemons.push(d);
    return d;
  };
  return { dir, startDaemon };
}

/** A root-owned file outside the state dir, with known content and mode; snapshot() to compare. */
function target(dir) {
  const file = path.join(dir, "precious.txt");
  fs.writeFileSync(file, SECRET, { mode: 0o640 });
  fs.chmodSync(file, 0o640);
  const snapshot = () => {
    const st = fs.statSync(file);
    return {
      bytes: fs.readFileSync(file, "utf8"),
      mode: (st.mode & 0o7777).toString(8),
      uid: st.uid,
      mtimeMs: st.mtimeMs,
    };
  };
  return { file, before: snapshot(), snapshot };
}

/** `victim` (its command given) and `other`, both every second, as root. */
function config(dir, victimCommand, victimExtra = "") {
  return writeConfig(
    dir,
    `heartbeat: 1s
jobs:
  victim:
    schedule: "* * * * * *"
    command: ${victimCommand}
${victimExtra}  other:
    schedule: "* * * * * *"
    command: echo other
`,
  );
}

/**
 * Runs that tried to start and have ended: not `skipped` or `missed` (a slot disposition, no log
 * opened; on a loaded machine a run may outlast its second and skip the next slot).
 */
const ended = (r) => !["running", "skipped", "missed"].includes(r.status);

/** The runs of `job` that `keep`, oldest first. */
const runsOf = (state, job, keep = () => true) => readStore(state).runs({ job }).filter(keep);

/** The id of the newest run, or null. */
const lastId = (state) => readStore(state).runs().at(-1)?.id ?? null;

const beatAt = (state) => readStore(state).daemon()?.heartbeat_at ?? 0;

/** The daemon keeps beating and keeps running `other` after `sinceId`; status and history work. */
async function stillServing(d, state, cfg, sinceId) {
  const beat = beatAt(state);
  await waitFor(() => beatAt(state) > beat, "a heartbeat after the attack", DEADLINE);
  await waitFor(
    () => runsOf(state, "other", (r) => r.status === "ok" && r.id > sinceId).length >= 2,
    "`other` to keep running",
    DEADLINE,
  );
  assert.equal(d.exitCode, null, `the daemon is still running\n${d.err}`);
  for (const args of [
    ["status", "-c", cfg],
    ["history", "-c", cfg, "--limit", "20"],
  ]) {
    const r = cli(args);
    assert.equal(r.code === 0 || r.code === 1, true, `${args[0]}: ${r.code} ${r.stderr}`);
    assert.doesNotMatch(r.stdout + r.stderr, STACK, `${args[0]}: no stack trace`);
    assert.doesNotMatch(
      r.stdout + r.stderr,
      /do not overwrite/,
      `${args[0]}: nothing of the target`,
    );
  }
}

/** What the test ends with: the target untouched, a clean stop, no stack trace in the daemon's log. */
async function untouchedAndClean(d, t0) {
  assert.deepEqual(
    t0.snapshot(),
    t0.before,
    "the target file is unchanged (bytes, mode, owner, mtime)",
  );
  await stopDaemon(d);
  assert.doesNotMatch(d.err, STACK, "no stack trace in the daemon's log");
  assert.doesNotMatch(d.err, /do not overwrite/, "nothing of the target in the daemon's log");
  assert.deepEqual(t0.snapshot(), t0.before, "the target file is unchanged after the stop");
}

// The four attacks at once, each on its own daemon: they mostly wait for the next second.
describe("links planted in the state dir of a root daemon", { concurrency: true }, () => {
  test(
    "a link planted at the next runs' log files: those runs fail to spawn (ELOOP), the target is untouched, the job's later runs and the other job run",
    needs(notRoot),
    async (t) => {
      const { dir, startDaemon } = setup(t);
      const t0 = target(dir);
      const cfg = config(dir, "echo victim");
      const state = path.join(dir, ".cronvisor");
      const d = startDaemon(cfg);
      await waitFor(
        () => runsOf(state, "victim", (r) => r.status === "ok").length >= 1,
        "a victim run",
        DEADLINE,
      );
      // The next ids (both jobs take them, two a second): a link at each of the next 6.
      const max = lastId(state);
      const planted = [];
      for (let id = max + 2; id <= max + 7; id++) {
        const link = path.join(state, "logs", "victim", `${id}.log`);
        fs.symlinkSync(t0.file, link);
        planted.push(id);
      }
      const last = planted.at(-1);
      const failed = await waitFor(
        () => runsOf(state, "victim", (r) => r.id >= max + 2 && r.id <= last && ended(r))[0],
        "a victim run at a planted id",
        DEADLINE,
      );
      assert.deepEqual(t0.snapshot(), t0.before, "the run's log was not opened through the link");
      assert.equal(failed.status, "spawn_failed", JSON.stringify(failed));
      await waitFor(
        () => runsOf(state, "victim", (r) => r.status === "ok" && r.id > last).length >= 1,
        "a victim run after the planted ids",
        DEADLINE,
      );
      for (const r of runsOf(state, "victim", (r) => r.id > max && ended(r))) {
        if (planted.includes(r.id)) {
          assert.equal(r.status, "spawn_failed", `run ${r.id} met a link: ${JSON.stringify(r)}`);
          assert.match(r.reason, /^spawn failed: ELOOP /, `run ${r.id}`);
          assert.match(r.reason, new RegExp(`${r.id}\\.log`), "the reason names the log path");
          assert.doesNotMatch(r.reason, /precious|do not overwrite/, "never the target");
          assert.equal(r.pid, null, "no process ran");
        } else {
          assert.equal(r.status, "ok", `run ${r.id} had no link: ${JSON.stringify(r)}`);
        }
      }
      // The link is left as it was planted: the daemon neither followed nor replaced it.
      assert.equal(
        fs.lstatSync(path.join(state, "logs", "victim", `${failed.id}.log`)).isSymbolicLink(),
        true,
      );
      await stillServing(d, state, cfg, last);
      await untouchedAndClean(d, t0);
    },
  );

  test(
    "a link planted at the log file of a run whose env_file cannot be read: the failure note is not written through it",
    needs(notRoot),
    async (t) => {
      const { dir, startDaemon } = setup(t);
      const t0 = target(dir);
      const envFile = path.join(dir, "victim.env");
      const cfg = config(dir, "echo victim", `    env_file: ${envFile}\n`);
      const state = path.join(dir, ".cronvisor");
      const d = startDaemon(cfg);
      // Without its env_file every victim run fails to spawn, and says so in its log.
      const first = await waitFor(
        () => runsOf(state, "victim", (r) => r.status === "spawn_failed")[0],
        "a victim run without its env_file",
        DEADLINE,
      );
      assert.match(fs.readFileSync(first.log_path, "utf8"), /spawn failed/);
      const max = lastId(state);
      const planted = [];
      for (let id = max + 2; id <= max + 7; id++) {
        fs.symlinkSync(t0.file, path.join(state, "logs", "victim", `${id}.log`));
        planted.push(id);
      }
      const last = planted.at(-1);
      await waitFor(
        () =>
          runsOf(state, "victim", (r) => r.status === "spawn_failed" && r.id > last).length >= 1,
        "victim runs past the planted ids",
        DEADLINE,
      );
      const met = runsOf(state, "victim", (r) => r.id >= max + 2 && r.id <= last && ended(r));
      assert.ok(met.length >= 1, "some victim runs met a link");
      for (const r of met) {
        assert.equal(r.status, "spawn_failed", JSON.stringify(r));
        assert.doesNotMatch(r.reason, /precious|do not overwrite/, "never the target");
      }
      await stillServing(d, state, cfg, last);
      await untouchedAndClean(d, t0);
    },
  );

  test(
    "a link planted at a running run's exit-status file: the wrapper does not write through it (set -C), the run is recorded as it ended",
    needs(notRoot),
    async (t) => {
      const { dir, startDaemon } = setup(t);
      const t0 = target(dir);
      const go = path.join(dir, "go");
      // Each victim run waits for `go`, then exits 7: the exit status the wrapper would write.
      const cfg = config(
        dir,
        `[sh, -c, 'while [ ! -e "$0" ]; do sleep 0.02; done; exit 7', ${go}]`,
      );
      const state = path.join(dir, ".cronvisor");
      const d = startDaemon(cfg);
      const run = await waitFor(
        () => readStore(state).spawned({ job: "victim" })[0],
        "a running victim run",
        DEADLINE,
      );
      // Planted while the run runs: after the daemon cleared the path for it, before the wrapper writes.
      const exitFile = path.join(state, "runs", `${run.id}.exit`);
      assert.equal(fs.existsSync(exitFile), false, "no exit status yet");
      fs.symlinkSync(t0.file, exitFile);
      fs.writeFileSync(go, "");
      const ended = await waitFor(
        () => readStore(state).ended({ job: "victim", id: run.id })[0],
        "the victim run's end",
        DEADLINE,
      );
      assert.equal(ended.status, "failed", JSON.stringify(ended));
      assert.equal(ended.exit_code, 7, "the daemon that started it learns the status by waiting");
      assert.equal(ended.reason, "exit 7");
      assert.deepEqual(t0.snapshot(), t0.before, "the wrapper did not write through the link");
      // Once the end is recorded the exit file is removed: the link, not its target.
      await waitFor(
        () => !fs.existsSync(exitFile) && !isLink(exitFile),
        "the planted link removed",
        DEADLINE,
      );
      // The victim's later runs (go exists now) end the same way, each on its own exit file.
      await waitFor(
        () =>
          runsOf(
            state,
            "victim",
            (r) => r.id > run.id && r.status === "failed" && r.exit_code === 7,
          ).length >= 1,
        "a later victim run",
        DEADLINE,
      );
      await stillServing(d, state, cfg, run.id);
      await untouchedAndClean(d, t0);
    },
  );

  test(
    "a link planted at the heartbeat file: never written through; the daemon keeps beating in its store",
    needs(notRoot),
    async (t) => {
      const { dir, startDaemon } = setup(t);
      const t0 = target(dir);
      const cfg = config(dir, "echo victim");
      const state = path.join(dir, ".cronvisor");
      const heartbeat = path.join(state, "heartbeat");
      const d = startDaemon(cfg);
      await waitFor(() => fs.existsSync(heartbeat), "the heartbeat file", DEADLINE);
      fs.rmSync(heartbeat);
      fs.symlinkSync(t0.file, heartbeat);
      const since = lastId(state) ?? 0;
      // Three beats later (1 s apart): each one met the link.
      const beat = beatAt(state);
      await waitFor(
        () => beatAt(state) >= beat + 3000,
        "three heartbeats after the link",
        DEADLINE,
      );
      assert.deepEqual(t0.snapshot(), t0.before, "no beat went through the link");
      const check = cli(["status", "-c", cfg, "--check"]);
      assert.notEqual(check.code, 2, `the daemon is not CRITICAL: ${check.stdout}${check.stderr}`);
      await waitFor(
        () => runsOf(state, "victim", (r) => r.status === "ok" && r.id > since).length >= 2,
        "victim runs go on",
        DEADLINE,
      );
      await stillServing(d, state, cfg, since);
      await untouchedAndClean(d, t0);
    },
  );
});

test(
  "root: `cronvisor logs` does not print what a link planted at a run's log points to",
  needs(notRoot),
  (t) => {
    const dir = tmpdir(t);
    const cfg = writeConfig(dir, 'jobs:\n  a:\n    schedule: "@daily"\n    command: "echo hi"\n');
    assert.equal(cli(["run", "a", "-c", cfg]).code, 0);
    const target = path.join(dir, "target");
    fs.writeFileSync(target, "SECRET-CONTENT\n", { mode: 0o600 });
    const log = path.join(dir, ".cronvisor", "logs", "a", "1.log");
    fs.rmSync(log);
    fs.symlinkSync(target, log);
    const r = cli(["logs", "a", "-c", cfg]);
    assert.equal(r.code, 1, r.stderr);
    assert.doesNotMatch(r.stdout + r.stderr, /SECRET-CONTENT/);
    assert.match(r.stderr, /1\.log of run 1 of a is not a regular file/);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  },
);
