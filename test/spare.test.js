// Spare inodes (src/run/spare.ts): a finished run's exit file, retired, becomes a later run's log
// (no file freed and none created per run), and only a plain file of ours ever does.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { retireExitFile, exitFileFor } from "../dist/run/exit-file.js";
import { startRun } from "../dist/run/runner.js";
import { clearSpares, spareCount, takeSpare } from "../dist/run/spare.js";
import {
  isLink,
  readStore,
  startDaemon,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";

function spec(dir, runId, command) {
  return {
    job: "j",
    runId,
    command,
    shell: "/bin/sh",
    cwd: "/",
    env: { PATH: "/usr/bin:/bin" },
    user: null,
    logPath: path.join(dir, "logs", "j", `${runId}.log`),
    logMaxBytes: 1 << 20,
    timeoutMs: null,
    killGraceMs: 5000,
    exitFile: exitFileFor(dir, runId),
    pidFile: path.join(dir, "runs", `${runId}.pid`),
    leftovers: "kill",
    nofile: null,
  };
}

/** Empty the process's pool, so that each test counts its own spares. */
function drain(dir) {
  fs.mkdirSync(path.join(dir, "sink"), { recursive: true });
  for (let i = 0; spareCount() > 0 && i < 10_000; i++) takeSpare(path.join(dir, "sink", String(i)));
}

test("a retired exit file's inode becomes the next run's log: emptied, 0600, only the new run's output", async (t) => {
  const dir = tmpdir(t);
  drain(dir);
  const first = await (await startRun(spec(dir, 1, "echo one; exit 3"))).done;
  assert.deepEqual([first.status, first.exitCode], ["failed", 3]);
  const exitFile = exitFileFor(dir, 1);
  assert.equal(fs.readFileSync(exitFile, "utf8"), "3\n");
  const ino = fs.statSync(exitFile).ino;
  retireExitFile(dir, 1);
  assert.equal(fs.existsSync(exitFile), false, "the exit file's name is gone once retired");
  assert.equal(spareCount(), 1);
  const second = await (await startRun(spec(dir, 2, ["/bin/echo", "two"]))).done;
  assert.equal(second.status, "ok");
  const log = path.join(dir, "logs", "j", "2.log");
  const st = fs.statSync(log);
  assert.equal(st.ino, ino, "the log took the spare's inode instead of a new one");
  assert.equal(st.nlink, 1, "the spare's own name is gone");
  assert.equal(st.mode & 0o777, 0o600);
  assert.equal(fs.readFileSync(log, "utf8"), "two\n", "nothing of the exit status is left");
  assert.equal(spareCount(), 0);
  const names = fs.readdirSync(path.join(dir, "runs")).filter((n) => n.endsWith(".spare"));
  // Not counted: the spawner's own (`sPID-N.spare`: pid files put away, exit files made ahead).
  assert.deepEqual(
    names.filter((n) => !/^s\d+-\d+\.spare$/.test(n)),
    [],
    "this process's spares are all used",
  );
});

test("only a plain file of ours with one name becomes a spare: a link, a FIFO or a file linked elsewhere is removed, never followed", (t) => {
  const dir = tmpdir(t);
  drain(dir);
  const runs = path.join(dir, "runs");
  fs.mkdirSync(runs, { recursive: true });
  const target = path.join(dir, "precious");
  fs.writeFileSync(target, "do not truncate\n");
  fs.symlinkSync(target, exitFileFor(dir, 1));
  retireExitFile(dir, 1);
  fs.writeFileSync(exitFileFor(dir, 2), "0\n");
  fs.linkSync(exitFileFor(dir, 2), path.join(dir, "other-name"));
  retireExitFile(dir, 2);
  const made = spawnSync("mkfifo", [exitFileFor(dir, 3)]);
  assert.equal(made.status, 0, String(made.stderr));
  retireExitFile(dir, 3); // an open that waited for a reader would hang here
  assert.equal(spareCount(), 0, "no spare from a link, a FIFO or a file with another name");
  assert.equal(fs.readFileSync(target, "utf8"), "do not truncate\n", "the link's target untouched");
  assert.equal(
    fs.readFileSync(path.join(dir, "other-name"), "utf8"),
    "0\n",
    "the other name keeps its content",
  );
  assert.equal(fs.existsSync(exitFileFor(dir, 1)) || isLink(exitFileFor(dir, 1)), false);
  assert.equal(fs.existsSync(exitFileFor(dir, 2)), false);
  assert.equal(fs.existsSync(exitFileFor(dir, 3)), false);
});

test("a spare never replaces what is at a log's path: a link planted there still fails the run (ELOOP), and the spare is kept", async (t) => {
  const dir = tmpdir(t);
  drain(dir);
  fs.mkdirSync(path.join(dir, "runs"), { recursive: true });
  fs.writeFileSync(exitFileFor(dir, 1), "0\n");
  retireExitFile(dir, 1);
  assert.equal(spareCount(), 1);
  const target = path.join(dir, "precious");
  fs.writeFileSync(target, "keep\n");
  fs.mkdirSync(path.join(dir, "logs", "j"), { recursive: true });
  fs.symlinkSync(target, path.join(dir, "logs", "j", "2.log"));
  const r = await (await startRun(spec(dir, 2, ["/bin/echo", "two"]))).done;
  assert.equal(r.status, "spawn_failed");
  assert.match(r.reason, /^spawn failed: ELOOP /);
  assert.equal(fs.readFileSync(target, "utf8"), "keep\n");
  assert.equal(spareCount(), 1, "the spare waits for the next log");
});

test("a start clears the spares an earlier daemon left, and keeps this process's own", (t) => {
  const dir = tmpdir(t);
  drain(dir);
  fs.mkdirSync(path.join(dir, "runs"), { recursive: true });
  fs.writeFileSync(exitFileFor(dir, 1), "0\n");
  retireExitFile(dir, 1);
  const [mine] = fs.readdirSync(path.join(dir, "runs"));
  assert.equal(fs.statSync(path.join(dir, "runs", mine)).size, 0, "emptied when retired");
  const left = path.join(dir, "runs", "1-0.spare");
  fs.writeFileSync(left, "");
  clearSpares(dir);
  assert.equal(fs.existsSync(left), false, "an earlier daemon's spare is removed");
  assert.equal(fs.existsSync(path.join(dir, "runs", mine)), true, "this process's own is kept");
});

test("a pruned log no one holds open serves on: its inode is a later run's exit file, then its log, holding only that run's output", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    [
      "jobs:",
      "  j:",
      '    schedule: "* * * * * *"',
      '    command: echo "run $CRONVISOR_RUN_ID"',
      "    log: { keep_runs: 1 }",
      "",
    ].join("\n"),
  );
  const state = path.join(dir, ".cronvisor");
  const d = startDaemon(t, cfg);
  const firstRunOf = new Map(); // an inode -> the first run whose log it was
  const { first, later, text } = await waitFor(
    () => {
      for (const r of readStore(state).runs({ job: "j", status: "ok" })) {
        // The inode by its number and birth time: a freed number is soon given to a new file.
        const st = fs.statSync(r.log_path, { throwIfNoEntry: false, bigint: true });
        if (st === undefined) continue;
        const ino = `${st.ino}@${st.birthtimeNs}`;
        const first = firstRunOf.get(ino) ?? r.id;
        firstRunOf.set(ino, first);
        // Read at once: the next run's end prunes it.
        if (first !== r.id) return { first, later: r, text: fs.readFileSync(r.log_path, "utf8") };
      }
      return null;
    },
    "a later run's log on a pruned run's inode",
    30_000,
    50,
  );
  assert.ok(later.id > first);
  assert.equal(text, `run ${later.id}\n`);
  await stopDaemon(d);
});

test("a pruned log's inode is never a later run's log while a reader still holds it (logs --follow, the page): the reader never sees another run's output", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    [
      "jobs:",
      "  old:",
      '    schedule: "* * * * * *"',
      '    command: ["/bin/echo", "old-output"]',
      "    log: { keep_runs: 1 }",
      "  other:",
      '    schedule: "* * * * * *"',
      '    command: ["/bin/echo", "SECRET-OTHER"]',
      "",
    ].join("\n"),
  );
  const state = path.join(dir, ".cronvisor");
  const d = startDaemon(t, cfg);
  const firstLog = () => readStore(state).runs({ job: "old", status: "ok" })[0]?.log_path;
  await waitFor(
    () => firstLog() && fs.statSync(firstLog()).size > 0,
    "the first run's log",
    20_000,
  );
  const log = firstLog();
  const fd = fs.openSync(log, "r"); // as a follower holds it
  t.after(() => fs.closeSync(fd));
  const read = () => {
    const buf = Buffer.alloc(4096);
    return buf.toString("utf8", 0, fs.readSync(fd, buf, 0, buf.length, 0));
  };
  const before = read();
  assert.match(before, /old-output/);
  await waitFor(() => !fs.existsSync(log), "the first run's log to be pruned", 20_000);
  // Later runs of both jobs, each with a new log.
  const logsNow = () => readStore(state).runs({ status: "ok" }).length;
  const n0 = logsNow();
  await waitFor(() => logsNow() >= n0 + 6, "six more runs", 20_000);
  await stopDaemon(d);
  assert.equal(read(), before, "the pruned log still holds what it held, and nothing else");
});
