// Unit tests for the run stage's small pieces: the one RunResult builder, the exit-code mapping,
// the one run-liveness check and the exit-status file.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { EXIT, runExitCode, signalExitCode, signalNumber } from "../dist/core/exit.js";
import {
  exitFileFor,
  freshExitFile,
  pidFileFor,
  readExitFile,
  readPidFile,
  removeExitFile,
} from "../dist/run/exit-file.js";
import { runAlive, startTimeOf } from "../dist/core/proc.js";
import {
  exited,
  interrupted,
  NO_LOG,
  runResult,
  spawnFailed,
  stopped,
} from "../dist/core/result.js";
import { tmpdir, waitFor } from "./helpers.js";

test("exited(): ok on 0, else failed with the exit code or the signal in words", () => {
  assert.deepEqual(exited(0, null), { status: "ok", reason: null, exitCode: 0, signal: null });
  assert.deepEqual(exited(3, null), {
    status: "failed",
    reason: "exit 3",
    exitCode: 3,
    signal: null,
  });
  assert.deepEqual(exited(null, "SIGSEGV"), {
    status: "failed",
    reason: "signal SIGSEGV",
    exitCode: null,
    signal: "SIGSEGV",
  });
  // A reason the caller knows better replaces the wording, also for ok (a late exit file).
  assert.equal(exited(0, null, "exit 0 (recorded late)").reason, "exit 0 (recorded late)");
  assert.equal(exited(0, null, "exit 0 (recorded late)").status, "ok");
  assert.equal(exited(2, null, null).reason, null);
});

test("stopped(), spawnFailed(), interrupted(): the status says who ended the run", () => {
  assert.deepEqual(stopped("timeout", "timeout after 1s", null, "SIGTERM"), {
    status: "timeout",
    reason: "timeout after 1s",
    exitCode: null,
    signal: "SIGTERM",
  });
  assert.deepEqual(stopped("killed", "replaced by run 2", 143, null).status, "killed");
  assert.deepEqual(spawnFailed("spawn failed: ENOENT x"), {
    status: "spawn_failed",
    reason: "spawn failed: ENOENT x",
    exitCode: null,
    signal: null,
  });
  assert.deepEqual(interrupted("its processes died with the daemon"), {
    status: "interrupted",
    reason: "its processes died with the daemon",
    exitCode: null,
    signal: null,
  });
});

test("runResult(): one field per end column of the run row, duration from the span", () => {
  const r = runResult(exited(1, null), 1_000, 3_500, { bytes: 42, truncated: true });
  assert.deepEqual(r, {
    status: "failed",
    reason: "exit 1",
    exitCode: 1,
    signal: null,
    startedAt: 1_000,
    finishedAt: 3_500,
    durationMs: 2_500,
    logBytes: 42,
    logTruncated: true,
    cpuS: null,
    memoryPeakBytes: null,
  });
  const none = runResult(spawnFailed("spawn failed: EACCES"), 7, 7);
  assert.equal(none.durationMs, 0);
  assert.equal(none.logBytes, NO_LOG.bytes);
  assert.equal(none.logTruncated, false);
});

test("runExitCode(): the job's code, else 124 / 127 / 128+N as timeout(1) and shells", () => {
  assert.equal(runExitCode({ status: "ok", exitCode: 0, signal: null }), 0);
  assert.equal(runExitCode({ status: "failed", exitCode: 3, signal: null }), 3);
  // A job stopped at its timeout that still exited by itself passes its own code on.
  assert.equal(runExitCode({ status: "timeout", exitCode: 143, signal: null }), 143);
  assert.equal(runExitCode({ status: "timeout", exitCode: null, signal: "SIGKILL" }), 124);
  assert.equal(runExitCode({ status: "spawn_failed", exitCode: null, signal: null }), 127);
  assert.equal(runExitCode({ status: "killed", exitCode: null, signal: "SIGKILL" }), 137);
  assert.equal(runExitCode({ status: "failed", exitCode: null, signal: "SIGTERM" }), 143);
  assert.equal(runExitCode({ status: "failed", exitCode: null, signal: "SIGHUP" }), 129);
  assert.equal(runExitCode({ status: "failed", exitCode: null, signal: "SIGINT" }), 130);
  assert.equal(runExitCode({ status: "interrupted", exitCode: null, signal: null }), EXIT.fail);
  assert.equal(signalNumber("SIGTERM"), 15);
  assert.equal(signalNumber("SIGNOPE"), 0);
  assert.equal(signalExitCode("SIGKILL"), 137);
  assert.deepEqual(
    [EXIT.timeout, EXIT.cannotExecute, EXIT.notFound, EXIT.busy],
    [124, 126, 127, 75],
  );
});

test("runAlive(): a run lives while its group or its owner does", async (t) => {
  const me = { pid: process.pid, start: startTimeOf(process.pid) };
  assert.equal(runAlive({ pgid: null, owner_pid: me.pid, owner_start: me.start }), true);
  // The same pid with another start time is another process: pids are reused.
  assert.equal(runAlive({ pgid: null, owner_pid: me.pid, owner_start: "1" }), false);
  assert.equal(runAlive({ pgid: null, owner_pid: null, owner_start: null }), false);

  const gone = spawnSync("/bin/sh", ["-c", "echo $$"], { encoding: "utf8" });
  const deadPid = Number(gone.stdout.trim());
  assert.equal(runAlive({ pgid: deadPid, owner_pid: deadPid, owner_start: null }), false);

  const child = spawn("/bin/sh", ["-c", "sleep 30"], { detached: true, stdio: "ignore" });
  t.after(() => {
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  });
  const group = { pgid: child.pid, owner_pid: null, owner_start: null };
  assert.equal(runAlive(group), true);
  process.kill(-child.pid, "SIGKILL");
  await waitFor(() => !runAlive(group), "the killed group to be gone", 10_000);
});

test("exit and pid files: a stale one is cleared before a run; read and removed by run id", (t) => {
  const dir = tmpdir(t);
  const file = exitFileFor(dir, 7);
  assert.equal(file, path.join(dir, "runs", "7.exit"));
  assert.equal(readExitFile(file), null);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, "99\n");
  freshExitFile(file);
  assert.equal(fs.existsSync(file), false, "a stale status is never read for this run");
  fs.writeFileSync(file, "3\n"); // as the spawner writes it
  assert.equal(readExitFile(file), 3);
  fs.writeFileSync(file, "not a number\n");
  assert.equal(readExitFile(file), null);
  const pidFile = pidFileFor(dir, 7);
  assert.equal(pidFile, path.join(dir, "runs", "7.pid"));
  fs.writeFileSync(pidFile, "4242 123456\n");
  assert.deepEqual(readPidFile(pidFile), { pid: 4242, start: "123456" });
  removeExitFile(dir, 7);
  assert.equal(fs.existsSync(file), false);
  assert.equal(fs.existsSync(pidFile), false);
  removeExitFile(dir, 7); // already gone: best effort, no throw
});

test("exit file: a link or a FIFO in its place is never followed or waited on", (t) => {
  const dir = tmpdir(t);
  const target = path.join(dir, "target");
  fs.writeFileSync(target, "5\n");
  const link = exitFileFor(dir, 8);
  fs.mkdirSync(path.dirname(link), { recursive: true });
  fs.symlinkSync(target, link);
  assert.equal(readExitFile(link), null, "a link is not followed");
  const fifo = exitFileFor(dir, 9);
  const made = spawnSync("mkfifo", [fifo]);
  assert.equal(made.status, 0, String(made.stderr));
  // A blocking open of a FIFO with no writer would never return: this one returns at once.
  assert.equal(readExitFile(fifo), null);
});
