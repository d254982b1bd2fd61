// The runner with real processes: process groups, timeouts, spawn failures, the capped log,
// running as another user and the exit-file wrapper. Every wait is a poll with a deadline.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { test } from "node:test";
import v8 from "node:v8";
import vm from "node:vm";
import { startTimeOf } from "../dist/core/proc.js";
import { startRun } from "../dist/run/runner.js";
import { ROOT, alive, cleanEnv, tmpdir, waitFor } from "./helpers.js";
import { needs } from "./needs.js";

const PATH = "/usr/local/bin:/usr/bin:/bin";
v8.setFlagsFromString("--expose-gc"); // for the memory test: measure live buffers, not garbage
const gc = vm.runInNewContext("gc");

function specFor(t, over = {}) {
  const dir = tmpdir(t, "cvx-runner-");
  return {
    job: "j",
    runId: 1,
    command: "true",
    shell: "/bin/sh",
    cwd: dir,
    env: { PATH },
    user: null,
    logPath: path.join(dir, "logs", "j", "1.log"),
    logMaxBytes: 1024 * 1024,
    timeoutMs: null,
    killGraceMs: 5000,
    exitFile: path.join(dir, "runs", "1.exit"),
    pidFile: path.join(dir, "runs", "1.pid"),
    leftovers: "kill",
    nofile: null,
    dir,
    ...over,
  };
}

/** A run's result, or a clear failure instead of a hung test. */
function finished(handle, ms = 30_000) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`run did not end within ${ms} ms`)), ms);
  });
  return Promise.race([handle.done, limit]).finally(() => clearTimeout(timer));
}

const readLog = (spec) => fs.readFileSync(spec.logPath, "utf8");
const logHas = (spec, text) => fs.existsSync(spec.logPath) && readLog(spec).includes(text);
const modeOf = (file) => fs.statSync(file).mode & 0o777;

async function run(t, over) {
  const spec = specFor(t, over);
  const handle = await startRun(spec);
  return { spec, handle, result: await finished(handle) };
}

test("a string command runs as `shell -c` in cwd, with only spec.env and stdin from /dev/null", async (t) => {
  process.env.CVX_DAEMON_SECRET = "hunter2"; // in the daemon's env, must not reach the job
  t.after(() => delete process.env.CVX_DAEMON_SECRET);
  const { spec, result } = await run(t, {
    command:
      'echo "shell=$0"; echo "cwd=$(pwd)"; echo "stdin=$(readlink /proc/$$/fd/0)"; ' +
      'echo "foo=$FOO"; echo "secret=${CVX_DAEMON_SECRET-unset}"',
    env: { PATH, FOO: "bar baz" },
  });
  assert.equal(result.status, "ok");
  assert.equal(
    readLog(spec),
    `shell=/bin/sh\ncwd=${spec.dir}\nstdin=/dev/null\nfoo=bar baz\nsecret=unset\n`,
  );
});

test("a list command is exec'd as argv with no shell, found via the job's PATH", async (t) => {
  const bin = tmpdir(t, "cvx-bin-");
  fs.writeFileSync(path.join(bin, "cvx-args"), '#!/bin/sh\nprintf "%s|" "$@"\n', { mode: 0o755 });
  const { spec, result } = await run(t, {
    command: ["cvx-args", "a b", "$HOME", "*", "; echo no"],
    env: { PATH: `${bin}:${PATH}` },
  });
  assert.equal(result.status, "ok");
  assert.equal(readLog(spec), "a b|$HOME|*|; echo no|");

  const env = await run(t, { command: ["/usr/bin/env"], env: { PATH, ONLY: "this" } });
  assert.equal(readLog(env.spec), `PATH=${PATH}\nONLY=this\n`);
});

test("exit 0 is ok, non-zero is failed with the code, a signal is failed with the signal", async (t) => {
  const before = Date.now();
  const ok = await run(t, { command: "sleep 0.2" });
  assert.deepEqual(
    { status: ok.result.status, reason: ok.result.reason, exitCode: ok.result.exitCode },
    { status: "ok", reason: null, exitCode: 0 },
  );
  assert.ok(ok.result.startedAt >= before && ok.result.finishedAt <= Date.now());
  assert.equal(ok.result.durationMs, ok.result.finishedAt - ok.result.startedAt);
  assert.ok(ok.result.durationMs >= 200, `durationMs ${ok.result.durationMs}`);

  const failed = await run(t, { command: "exit 3" });
  assert.deepEqual(
    [failed.result.status, failed.result.reason, failed.result.exitCode, failed.result.signal],
    ["failed", "exit 3", 3, null],
  );

  const killed = await run(t, { command: "kill -KILL $$" });
  assert.deepEqual(
    [killed.result.status, killed.result.reason, killed.result.exitCode, killed.result.signal],
    ["failed", "signal SIGKILL", null, "SIGKILL"],
  );
});

test("each run leads its own process group and session; pidStart identifies the process", async (t) => {
  const spec = specFor(t, { command: "cut -d' ' -f5,6 /proc/$$/stat; exec sleep 300" });
  const h = await startRun(spec);
  assert.equal(h.pgid, h.pid);
  assert.notEqual(h.pidStart, null);
  await waitFor(() => /^\d+ \d+\n$/.test(readLog(spec)), "the job to print its pgid");
  assert.equal(readLog(spec), `${h.pid} ${h.pid}\n`); // pgid and session id are the pid
  assert.equal(startTimeOf(h.pid), h.pidStart);
  h.terminate("killed");
  const r = await finished(h);
  assert.deepEqual([r.status, r.reason, r.signal], ["killed", "killed", "SIGTERM"]);
});

test("the run ends when its main process does: a grandchild holding stdout is killed", async (t) => {
  const { spec, result } = await run(t, { command: "sleep 300 & echo $!" });
  assert.equal(result.status, "ok");
  const grandchild = Number(readLog(spec));
  await waitFor(() => !alive(grandchild), "the grandchild to be killed");
});

test("a process that left the group (setsid) and holds stdout cannot hang the run", async (t) => {
  const spec = specFor(t);
  const pidFile = path.join(spec.dir, "escaped.pid");
  // The escapee writes its pid and keeps the pipe open; the main process waits for the pid.
  spec.command =
    `setsid sh -c 'echo $$ > "${pidFile}.tmp"; mv "${pidFile}.tmp" "${pidFile}"; echo escaped; exec sleep 300' & ` +
    `until [ -s "${pidFile}" ]; do sleep 0.01; done; echo main done`;
  const h = await startRun(spec);
  const escaped = Number(
    await waitFor(() => fs.readFileSync(pidFile, "utf8"), "the escapee's pid"),
  );
  t.after(() => process.kill(escaped, "SIGKILL")); // not in the run's group: ours to clean up
  const r = await finished(h, 20_000);
  assert.equal(r.status, "ok");
  assert.ok(alive(escaped), "the escapee is out of reach of the group kill");
  assert.match(readLog(spec), /main done/);
});

test("timeoutMs: SIGTERM to the whole group, status timeout", async (t) => {
  const { spec, result } = await run(t, {
    command: "sleep 300 & echo $!; wait",
    timeoutMs: 300,
    killGraceMs: 20_000,
  });
  assert.deepEqual(
    [result.status, result.reason, result.signal],
    ["timeout", "timeout after 300ms", "SIGTERM"],
  );
  assert.ok(result.durationMs < 20_000, "ended by SIGTERM, before the SIGKILL");
  const grandchild = Number(readLog(spec));
  await waitFor(() => !alive(grandchild), "the grandchild to be gone");
});

test("a tree that ignores SIGTERM is SIGKILLed after kill_grace", async (t) => {
  const spec = specFor(t, {
    command:
      "trap '' TERM; " +
      `sh -c 'trap "" TERM; echo child=$$; while :; do sleep 1; done' & ` +
      "echo main=$$; while :; do sleep 1; done",
    timeoutMs: 3_600_000,
    killGraceMs: 500,
  });
  const h = await startRun(spec);
  // Readiness first: a SIGTERM before the traps are set would prove nothing.
  await waitFor(() => logHas(spec, "main=") && logHas(spec, "child="), "both traps set");
  const log = readLog(spec);
  const pids = [/main=(\d+)/, /child=(\d+)/].map((re) => Number(log.match(re)[1]));
  const t0 = Date.now();
  h.terminate("timeout");
  const r = await finished(h);
  assert.deepEqual([r.status, r.reason, r.signal], ["timeout", "timeout after 1h", "SIGKILL"]);
  assert.ok(r.finishedAt - t0 >= 450, `SIGKILL came after the grace (${r.finishedAt - t0} ms)`);
  for (const pid of pids) await waitFor(() => !alive(pid), `pid ${pid} to be killed`);
});

test("terminate(): a job that traps TERM finishes its cleanup within the grace", async (t) => {
  const spec = specFor(t, { killGraceMs: 20_000 });
  const cleaned = path.join(spec.dir, "cleaned");
  spec.env = { PATH, CLEANED: cleaned };
  spec.command =
    `trap 'echo got-term; sleep 0.2; echo yes > "$CLEANED"; echo cleaned; exit 7' TERM; ` +
    "echo ready; sleep 300 & wait";
  const h = await startRun(spec);
  await waitFor(() => logHas(spec, "ready"), "the trap to be set");
  h.terminate("replaced by run 2");
  h.terminate("killed"); // idempotent: the first reason stands
  const r = await finished(h);
  assert.deepEqual(
    [r.status, r.reason, r.exitCode, r.signal],
    ["killed", "replaced by run 2", 7, null],
  );
  assert.ok(r.durationMs < 20_000);
  assert.equal(fs.readFileSync(cleaned, "utf8"), "yes\n");
  assert.equal(readLog(spec), "ready\ngot-term\ncleaned\n");
  h.terminate("killed"); // after the end: a no-op
});

test("spawn failures resolve spawn_failed with the code and never throw", async (t) => {
  const notExec = path.join(tmpdir(t), "script.sh");
  fs.writeFileSync(notExec, "#!/bin/sh\necho hi\n", { mode: 0o644 });
  const cases = [
    [
      { command: ["/nonexistent/prog"] },
      /^spawn failed: ENOENT \/nonexistent\/prog does not exist/,
    ],
    [{ command: ["no-such-cmd-cvx"] }, /^spawn failed: ENOENT command not found: no-such-cmd-cvx/],
    [{ cwd: "/nonexistent/dir" }, /^spawn failed: ENOENT cwd \/nonexistent\/dir does not exist/],
    [{ command: [notExec] }, /^spawn failed: EACCES .*script\.sh is not executable/],
    [{ user: "no-such-user-cvx" }, /^spawn failed: ENOENT no such user: no-such-user-cvx/],
    [{ command: ["echo", "nul\0byte"] }, /^spawn failed: EINVAL a NUL byte in a command/],
    [{ exitFile: path.join(notExec, "runs", "1.exit") }, /^spawn failed: ENOTDIR /],
  ];
  for (const [over, reason] of cases) {
    const spec = specFor(t, over);
    const h = await startRun(spec);
    assert.deepEqual([h.pid, h.pgid, h.pidStart], [null, null, null]);
    h.terminate("killed"); // harmless
    const r = await finished(h);
    assert.equal(r.status, "spawn_failed", JSON.stringify(over));
    assert.match(r.reason, reason);
    assert.match(r.reason, /\(job: j, run: 1\)$/);
    assert.equal(readLog(spec), `[cronvisor: ${r.reason}]\n`);
  }
  // With a shell, a missing program is the shell's exit 127: a failed run, not a spawn failure.
  const viaShell = await run(t, { command: "no-such-cmd-cvx" });
  assert.deepEqual([viaShell.result.status, viaShell.result.exitCode], ["failed", 127]);
});

test("EMFILE at spawn is spawn_failed, not a crash", async (t) => {
  const spec = specFor(t, { command: ["/bin/true"] });
  // In a child with few descriptors: use them all but one (for the log), so the pipes fail.
  const script = `
    import fs from "node:fs";
    import { startRun } from ${JSON.stringify(path.join(ROOT, "dist", "run", "runner.js"))};
    const held = [];
    try { for (;;) held.push(fs.openSync("/dev/null", "r")); } catch (e) { if (e.code !== "EMFILE") throw e; }
    fs.closeSync(held.pop());
    const h = await startRun(JSON.parse(process.env.CVX_SPEC));
    const r = await h.done;
    for (const fd of held) fs.closeSync(fd);
    process.stdout.write(JSON.stringify({ pid: h.pid, r }));`;
  const out = spawnSync(
    "/bin/sh",
    ["-c", 'ulimit -n 64 && exec "$0" --input-type=module -e "$1"', process.execPath, script],
    { encoding: "utf8", env: cleanEnv({ CVX_SPEC: JSON.stringify(spec) }), timeout: 30_000 },
  );
  assert.equal(out.status, 0, out.stderr);
  const { pid, r } = JSON.parse(out.stdout);
  assert.equal(pid, null);
  assert.equal(r.status, "spawn_failed");
  assert.match(r.reason, /^spawn failed: EMFILE /);
});

test("stdout and stderr go to one log in arrival order; dirs 0700, file 0600", async (t) => {
  const spec = specFor(t);
  spec.logPath = path.join(spec.dir, "new", "deeper", "1.log");
  // Each line is written only once the previous one is in the log: the order is then exact.
  const step = (line, fd) =>
    `echo ${line} >&${fd}; until grep -q ${line} "$LOG"; do sleep 0.01; done`;
  spec.env = { PATH, LOG: spec.logPath };
  spec.command = [step("one", 1), step("two", 2), step("three", 1), step("four", 2)].join("; ");
  const h = await startRun(spec);
  const r = await finished(h);
  assert.equal(r.status, "ok");
  assert.equal(readLog(spec), "one\ntwo\nthree\nfour\n");
  assert.deepEqual([r.logBytes, r.logTruncated], [19, false]);
  assert.equal(modeOf(spec.logPath), 0o600);
  assert.equal(modeOf(path.join(spec.dir, "new")), 0o700);
  assert.equal(modeOf(path.join(spec.dir, "new", "deeper")), 0o700);

  // An existing log file is truncated and made 0600.
  const again = specFor(t, { command: "echo fresh" });
  fs.mkdirSync(path.dirname(again.logPath), { recursive: true });
  fs.writeFileSync(again.logPath, "old contents\n", { mode: 0o644 });
  await finished(await startRun(again));
  assert.equal(readLog(again), "fresh\n");
  assert.equal(modeOf(again.logPath), 0o600);
});

test("the log keeps the head and the latest tail around a cut marker", async (t) => {
  const seq = (n) => Array.from({ length: n }, (_, i) => `${i + 1}\n`).join("");
  const full = seq(2000);
  const cut = await run(t, { command: "seq 1 2000", logMaxBytes: 100 });
  assert.equal(
    readLog(cut.spec),
    `${full.slice(0, 50)}\n[cronvisor: ${full.length - 100} bytes cut]\n${full.slice(-50)}`,
  );
  assert.deepEqual([cut.result.logBytes, cut.result.logTruncated], [full.length, true]);
  assert.ok(!fs.existsSync(`${cut.spec.logPath}.tail`), "the ring file is removed");

  // More than the head but within the cap: whole, no marker.
  const whole = await run(t, { command: "seq 1 200", logMaxBytes: 1000 });
  assert.equal(readLog(whole.spec), seq(200));
  assert.deepEqual([whole.result.logBytes, whole.result.logTruncated], [seq(200).length, false]);
});

test("50 MB of output with a 1 MB cap: bounded log and bounded memory", async (t) => {
  const MB = 1024 * 1024;
  const spec = specFor(t, {
    command: `printf BEGIN; head -c ${50 * MB} /dev/zero | tr '\\0' x; printf END`,
    logMaxBytes: MB,
  });
  // Live buffer memory, sampled after a full GC so that garbage is not counted: buffering the
  // output would hold 50 MB; streaming it holds a few pipe chunks.
  let peak = 0;
  let samples = 0;
  const sampler = setInterval(() => {
    gc();
    samples++;
    peak = Math.max(peak, process.memoryUsage().arrayBuffers);
  }, 100);
  const r = await finished(await startRun(spec), 50_000).finally(() => clearInterval(sampler));
  const total = 50 * MB + 8;
  const marker = `\n[cronvisor: ${total - MB} bytes cut]\n`;
  assert.deepEqual([r.status, r.logBytes, r.logTruncated], ["ok", total, true]);
  const log = fs.readFileSync(spec.logPath);
  assert.equal(log.length, MB + marker.length);
  assert.equal(log.subarray(0, 8).toString(), "BEGINxxx");
  assert.equal(log.subarray(MB / 2, MB / 2 + marker.length).toString(), marker);
  assert.equal(log.subarray(-6).toString(), "xxxEND");
  assert.equal(log.toString().replace(/x/g, ""), `BEGIN${marker}END`);
  assert.ok(samples > 0);
  // Buffering the output would hold all 50 MB; streaming holds pipe chunks in flight, which
  // reached ~20 MB on a loaded 2-core CI machine (12 MB or less when idle). 32 MB still tells
  // the two apart; the 2 GiB end-to-end test (faults-resources) bounds the daemon's RSS too.
  assert.ok(peak < 32 * MB, `${(peak / MB).toFixed(1)} MB of live buffers`);
});

test("echo gets the output as it arrives, waiting for a slow reader", async (t) => {
  const chunks = [];
  const slow = new Writable({
    highWaterMark: 1024,
    write(chunk, _enc, cb) {
      chunks.push(chunk);
      setTimeout(cb, 1);
    },
  });
  const { spec, result } = await run(t, {
    command: "seq 1 100000; echo done >&2",
    echo: slow,
    logMaxBytes: 64 * 1024 * 1024,
  });
  assert.equal(result.status, "ok");
  await new Promise((resolve) => slow.end(resolve)); // what the slow reader still has queued
  const echoed = Buffer.concat(chunks).toString();
  assert.ok(echoed === readLog(spec), "the echo equals the log");
  // (Across the two pipes the order is the parent's order of arrival, so "done" may come earlier.)
  const seq = Array.from({ length: 100000 }, (_, i) => `${i + 1}\n`).join("");
  assert.equal(echoed.replace("done\n", ""), seq);
});

test(
  "user: runs as that user with that user's groups only",
  // Skipped when not root: switching to another user needs root.
  needs(process.getuid() !== 0 && "needs root"),
  async (t) => {
    const spec = specFor(t, { command: "id -u; id -g; id -G", user: "nobody", cwd: "/" });
    spec.exitFile = path.join(spec.dir, "runs", "1.exit"); // in a root-only dir: the wrapper writes it
    const h = await startRun(spec);
    const r = await finished(h);
    assert.equal(r.status, "ok", readLog(spec));
    assert.equal(readLog(spec), "65534\n65534\n65534\n");
    assert.equal(fs.readFileSync(spec.exitFile, "utf8"), "0\n");
    assert.equal(modeOf(path.dirname(spec.exitFile)), 0o700);
  },
);

test("exitFile: the spawner records the exit status (a stale one cleared first), never in the log", async (t) => {
  const exitFile = (spec) => path.join(spec.dir, "runs", "1.exit");
  const withExit = async (over) => {
    const spec = specFor(t, over);
    spec.exitFile = exitFile(spec);
    fs.mkdirSync(path.dirname(spec.exitFile), { recursive: true });
    fs.writeFileSync(spec.exitFile, "99\n"); // stale, from an earlier run with this id
    spec.env = { PATH, EXITF: spec.exitFile };
    const h = await startRun(spec);
    return { spec, h, r: await finished(h), status: () => fs.readFileSync(spec.exitFile, "utf8") };
  };

  const failed = await withExit({ command: 'test -e "$EXITF" && echo stale; echo out; exit 5' });
  assert.deepEqual([failed.r.status, failed.r.exitCode, failed.r.reason], ["failed", 5, "exit 5"]);
  assert.equal(readLog(failed.spec), "out\n"); // and no stale file during the run
  assert.equal(failed.status(), "5\n");

  const argv = await withExit({ command: ["printf", "%s|", "a b", "*"] });
  assert.equal(argv.r.status, "ok");
  assert.equal(readLog(argv.spec), "a b|*|");
  assert.equal(argv.status(), "0\n");

  // A job killed by a signal: the run says the signal; its exit file says 128+N, as sh would.
  const killed = await withExit({ command: ["sh", "-c", "echo err >&2; kill -KILL $$"] });
  assert.deepEqual(
    [killed.r.status, killed.r.exitCode, killed.r.signal],
    ["failed", null, "SIGKILL"],
  );
  assert.equal(readLog(killed.spec), "err\n");
  assert.equal(killed.status(), "137\n");

  // Group signals reach the job once, directly: it keeps its grace and its own exit status.
  const spec = specFor(t, { killGraceMs: 20_000 });
  spec.exitFile = exitFile(spec);
  spec.command =
    "trap 'echo got-term; sleep 0.2; echo cleaned; exit 7' TERM; echo ready; sleep 300 & wait";
  const h = await startRun(spec);
  await waitFor(() => logHas(spec, "ready"), "the trap to be set");
  h.terminate("killed");
  const r = await finished(h);
  assert.deepEqual([r.status, r.exitCode], ["killed", 7]);
  assert.equal(readLog(spec), "ready\ngot-term\ncleaned\n");
  assert.equal(fs.readFileSync(spec.exitFile, "utf8"), "7\n");

  // The pre-checks still apply.
  const missing = await withExit({ command: ["/nonexistent/prog"] });
  assert.equal(missing.r.status, "spawn_failed");
});

test("a run starts at its starter's nice + 5, and so does what it forks at once", async (t) => {
  const own = os.getPriority(0);
  const expected = Math.min(19, own + 5);
  // /proc/PID/stat field 19 is the nice; `$$` is the run's main process, the subshell a child
  // forked before the daemon could have reniced it afterwards. As root the forking thread goes
  // to the job's nice and back, with no window; otherwise the run is reniced right after the
  // spawn, and what it forks at once may still have the starter's nice (the sleep: see README).
  const wait = process.getuid() === 0 ? "" : "sleep 0.2; ";
  const script = `${wait}cut -d' ' -f19 /proc/$$/stat; (cut -d' ' -f19 /proc/self/stat)`;
  const { spec, result } = await run(t, { command: script });
  assert.equal(result.status, "ok", readLog(spec));
  assert.equal(readLog(spec), `${expected}\n${expected}\n`);
  assert.equal(os.getPriority(0), own, "the starter's own nice is back where it was");
  const argv = await run(t, { command: ["/usr/bin/nice"] });
  assert.equal(readLog(argv.spec), `${expected}\n`);
});

test("a string command is the run's main process itself: `shell -c COMMAND`, no wrapper around it", async (t) => {
  const spec = specFor(t, {
    command: `echo "$$ $(cut -d' ' -f5 /proc/$$/stat)"; echo "0=$0 n=$#"; tr '\\0' ' ' < /proc/$$/cmdline | cut -c1-30; exit 4`,
  });
  spec.exitFile = path.join(spec.dir, "runs", "1.exit");
  const h = await startRun(spec);
  const r = await finished(h);
  assert.deepEqual([r.status, r.exitCode], ["failed", 4]);
  const [ids, args, cmdline] = readLog(spec).split("\n");
  assert.equal(
    ids,
    `${h.pid} ${h.pid}`,
    "the command runs in the run's main process's group, as it",
  );
  assert.equal(args, "0=/bin/sh n=0", "what `sh -c COMMAND` gives it");
  assert.match(cmdline, /^\/bin\/sh -c echo "\$\$/, "the job's own shell, nothing around it");
  assert.equal(fs.readFileSync(spec.exitFile, "utf8"), "4\n");
});

test("exitFile: a job environment that sets up bash (SHELLOPTS, BASH_ENV, exported functions) cannot stop the status being written", async (t) => {
  const dir = tmpdir(t, "cvx-runner-env-");
  const bashEnv = path.join(dir, "bashenv");
  fs.writeFileSync(bashEnv, "set -e\n");
  const cases = [
    { SHELLOPTS: "errexit" },
    { BASH_ENV: bashEnv },
    { "BASH_FUNC_echo%%": "() { :; }" },
  ];
  for (const [i, extra] of cases.entries()) {
    const spec = specFor(t, { shell: "/bin/bash", command: "false", env: { PATH, ...extra } });
    spec.exitFile = path.join(spec.dir, "runs", `${i}.exit`);
    const r = await finished(await startRun(spec));
    assert.deepEqual([r.status, r.exitCode], ["failed", 1], JSON.stringify(extra));
    assert.equal(
      fs.existsSync(spec.exitFile) && fs.readFileSync(spec.exitFile, "utf8"),
      "1\n",
      `the exit file with ${JSON.stringify(extra)}`,
    );
  }
});
