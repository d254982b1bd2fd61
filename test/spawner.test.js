// The spawner (src/run/spawner.c): the daemon's runs are forked by it, waited for by it, and
// outlive the daemon with it. What a run inherits from it, what happens when the daemon dies
// while a run writes output, and when the spawner itself dies.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import {
  ROOT,
  alive,
  childrenOf,
  killGroup,
  killGroupsAfter,
  spawnerOf,
  readStoreIn,
  startDaemon,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
  isLink,
} from "./helpers.js";

const SPAWNER = path.join(ROOT, "dist", "run", "cronvisor-spawner");

/**
 * A daemon with one job (`schedule`, `command`), once its first run is running with its pid
 * recorded; the run's group is killed when the test ends.
 */
async function daemonWithRun(t, schedule, command) {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  job:\n    schedule: "${schedule}"\n    command: "${command}"\n`,
  );
  const d = startDaemon(t, cfg);
  const run = await waitFor(() => readStoreIn(dir).spawned()[0], "a running run");
  killGroupsAfter(t, [run.pgid]);
  return { dir, cfg, d, run };
}

test("the build has a spawner, and the daemon's runs are its children", async (t) => {
  assert.ok(fs.existsSync(SPAWNER), "npm run build compiles src/run/spawner.c");
  const flag = path.join(tmpdir(t), "finish");
  const { dir, d, run } = await daemonWithRun(
    t,
    "* * * * * *",
    `while [ ! -e ${flag} ]; do sleep 0.05; done`,
  );
  const spawner = spawnerOf(d.pid);
  assert.ok(spawner, "the daemon has a spawner");
  assert.equal(fs.readlinkSync(`/proc/${spawner}/exe`), SPAWNER, "this build's spawner");
  assert.ok(childrenOf(spawner).includes(run.pid), "the run is the spawner's child");
  fs.writeFileSync(flag, "");
  await waitFor(() => readStoreIn(dir).runs({ id: run.id, status: "ok" })[0], "the run to end ok");
  await stopDaemon(d);
  await waitFor(() => !alive(spawner), "the spawner to exit with the daemon's stop");
});

test("a run inherits no ignored or blocked signal and no descriptor of the spawner's", async (t) => {
  // The spawner ignores SIGINT, SIGHUP, SIGTERM, SIGQUIT and SIGPIPE and blocks SIGCHLD: a run
  // that inherited them would outlive its timeout's SIGTERM, or loop on a closed pipe.
  const dir = tmpdir(t);
  const out = path.join(dir, "out");
  const cfg = writeConfig(
    dir,
    `jobs:\n  probe:\n    schedule: "@reboot"\n    command: "grep -E '^(SigIgn|SigBlk):' /proc/self/status > ${out}.tmp; ls /proc/self/fd >> ${out}.tmp; mv ${out}.tmp ${out}"\n`,
  );
  const d = startDaemon(t, cfg);
  await waitFor(() => fs.existsSync(out), "the probe's output");
  await stopDaemon(d);
  const text = fs.readFileSync(out, "utf8");
  assert.match(text, /^SigIgn:\s+0+$/m, text);
  assert.match(text, /^SigBlk:\s+0+$/m, text);
  // grep's and ls's own: 0 (/dev/null), 1 and 2 (the log's pipes), and the directory ls reads.
  const fds = text
    .split("\n")
    .filter((l) => /^\d+$/.test(l))
    .map(Number);
  assert.deepEqual(
    fds.filter((f) => f <= 2),
    [0, 1, 2],
  );
  assert.ok(fds.length <= 4, `only stdio and ls's own directory: ${fds}`);
});

test("daemon SIGKILLed while its run writes output: the run goes on (no SIGPIPE), its exit status is recorded on adoption, and the spawner exits after it", async (t) => {
  // A run's output went through a pipe the daemon read: once the daemon was gone, the job's
  // next write killed it (SIGPIPE, exit 141). The spawner keeps reading, and waits for it.
  const flag = path.join(tmpdir(t), "finish");
  const started = await daemonWithRun(
    t,
    "@reboot",
    `while [ ! -e ${flag} ]; do echo tick; sleep 0.05; done; echo done; exit 3`,
  );
  const { dir, cfg, run } = started;
  let { d } = started;
  const spawner = spawnerOf(d.pid);
  d.kill("SIGKILL");
  await d.exited;
  // Output goes on meanwhile: the job is still alive well after its next writes.
  const deadline = Date.now() + 500;
  await waitFor(() => Date.now() > deadline || !alive(run.pid), "half a second of output");
  assert.ok(alive(run.pid), "the job outlives its daemon while writing output");
  fs.writeFileSync(flag, "");
  await waitFor(() => !alive(run.pid), "the job's end");
  // Its last run ended: the spawner of the dead daemon has nothing left to wait for.
  await waitFor(() => !alive(spawner), "the orphaned spawner to exit");
  d = startDaemon(t, cfg);
  const row = await waitFor(
    () => readStoreIn(dir).ended({ id: run.id })[0],
    "the run's end recorded",
  );
  await stopDaemon(d);
  assert.equal(row.status, "failed");
  assert.equal(row.exit_code, 3, row.reason);
});

test("the spawner SIGKILLed under a live run: the run is recorded interrupted once its group is gone, and later runs start from a new spawner", async (t) => {
  const flag = path.join(tmpdir(t), "finish");
  const { dir, d, run } = await daemonWithRun(
    t,
    "* * * * * *",
    `while [ ! -e ${flag} ]; do sleep 0.05; done`,
  );
  const first = spawnerOf(d.pid);
  process.kill(first, "SIGKILL");
  await waitFor(() => !alive(first), "the spawner's death");
  assert.ok(alive(run.pid), "the run outlives its spawner");
  killGroup(run.pgid);
  const row = await waitFor(
    () => readStoreIn(dir).ended({ id: run.id })[0],
    "the run's end recorded",
  );
  assert.equal(row.status, "interrupted");
  assert.match(row.reason, /the spawner exited: exit status unknown/);
  // The next slot's run starts from a new spawner and ends as usual.
  fs.writeFileSync(flag, "");
  const later = await waitFor(
    () => readStoreIn(dir).runs({ id: { gt: run.id }, status: "ok" })[0],
    "a later run ok",
  );
  assert.ok(later);
  const second = spawnerOf(d.pid);
  assert.ok(second !== null && second !== first, "a new spawner");
  await stopDaemon(d);
});

/** A spawner of this test process's own, closed when the test ends. */
async function ownSpawner(t) {
  const { Spawner } = await import("../dist/run/spawner.js");
  const spawner = new Spawner(1000);
  // The spawner's pipes do not hold a process's event loop open (a stopping daemon exits while
  // its spawner still waits for runs): this test's timer does.
  const keep = setInterval(() => {}, 1000);
  t.after(() => {
    clearInterval(keep);
    spawner.close();
  });
  return spawner;
}

/** What a start through the spawner and the daemon's path both name: run `runId` in `dir`. */
function runFiles(dir, runId) {
  return {
    runId,
    cwd: dir,
    env: { PATH: "/usr/bin:/bin" },
    exitFile: path.join(dir, `${runId}.exit`),
    pidFile: path.join(dir, `${runId}.pid`),
    leftovers: "kill",
    nofile: null,
    memory: null,
    cpu: null,
    tasks: null,
  };
}

/**
 * A start request for `spawner.start`: run `runId` of `argv` in `dir` (its exit and pid files
 * there), nothing else asked; `over` replaces any field.
 */
function request(dir, runId, argv, over = {}) {
  return {
    ...runFiles(dir, runId),
    nice: 0,
    argv,
    script: null,
    ...over,
  };
}

/**
 * Start one run through `spawner` and wait for its end: { out, failed, exited, pid, st }
 * (`failed`: the exec's error code, or "lost"; `exited`: { code, signal }).
 */
function startOne(spawner, dir, runId, argv, over = {}) {
  return new Promise((resolve) => {
    const r = { out: "", failed: null, exited: null, pid: null, st: null };
    spawner.start(request(dir, runId, argv, over), {
      started: (pid, st) => Object.assign(r, { pid, st }),
      failed: (code) => resolve({ ...r, failed: code }),
      output: (chunk) => (r.out += chunk),
      exited: (code, signal) => (r.exited = { code, signal }),
      closed: () => resolve(r),
      lost: () => resolve({ ...r, failed: "lost" }),
    });
  });
}

test("the spawner itself: a start, its output, its end and exit file; a failed exec and a missing cwd say why", async (t) => {
  const dir = tmpdir(t);
  const spawner = await ownSpawner(t);
  const start = (runId, argv, cwd = dir) =>
    startOne(spawner, dir, runId, argv, { cwd, env: { PATH: "/usr/bin:/bin", GREETING: "hello" } });
  const ok = await start(1, ["sh", "-c", 'echo "$GREETING from $(pwd)"; echo oops >&2; exit 7']);
  assert.ok(ok.pid > 0);
  assert.equal(ok.out, `hello from ${dir}\noops\n`);
  assert.deepEqual(ok.exited, { code: 7, signal: null });
  assert.equal(fs.readFileSync(path.join(dir, "1.exit"), "utf8"), "7\n");
  const killed = await start(2, ["sh", "-c", "kill -TERM $$"]);
  assert.deepEqual(killed.exited, { code: null, signal: "SIGTERM" });
  assert.equal(fs.readFileSync(path.join(dir, "2.exit"), "utf8"), "143\n");
  assert.equal((await start(3, ["/nonexistent/program"])).failed, "ENOENT");
  assert.equal((await start(4, ["true"], path.join(dir, "gone"))).failed, "ENOENT");
  assert.ok(!fs.existsSync(path.join(dir, "3.exit")), "a run that never started has no exit file");
  // An exit file planted where a new one belongs is never written through (O_EXCL, O_NOFOLLOW).
  fs.symlinkSync(path.join(dir, "target"), path.join(dir, "5.exit"));
  await start(5, ["true"]);
  assert.ok(!fs.existsSync(path.join(dir, "target")), "not written through a link");
});

test("the pid file: there before the exec, put away at the run's end (also a start that failed), and the next run's pid file is the same inode, not a new file", async (t) => {
  const dir = tmpdir(t);
  const spawner = await ownSpawner(t);
  const start = (runId, argv) => startOne(spawner, dir, runId, argv);
  // Each run reads its own pid file (it is there before the exec) and says its inode.
  const own = (id) => ["sh", "-c", `cat ${id}.pid; stat -c %i ${id}.pid`];
  const inodes = [];
  for (const id of [1, 2, 3]) {
    const r = await start(id, own(id));
    const [line, inode] = r.out.trim().split("\n");
    assert.deepEqual(
      line.trim().split(/ +/),
      [String(r.pid), r.st],
      `run ${id}'s pid and start time`,
    );
    // The format adoption reads (exit-file.ts, readPidFile).
    const { readPidFile } = await import("../dist/run/exit-file.js");
    inodes.push(Number(inode));
    assert.ok(
      !fs.existsSync(path.join(dir, `${id}.pid`)),
      `run ${id}'s pid file is put away at its end`,
    );
    assert.equal(readPidFile(path.join(dir, `${id}.pid`)), null);
  }
  assert.equal(inodes[1], inodes[0], "the second run's pid file is the first's inode");
  assert.equal(inodes[2], inodes[0], "and so is the third's");
  // An exit file is new (it goes on to be a later run's log), made ahead while the spawner had
  // nothing to do, and renamed into place at the run's end.
  const ahead = () =>
    fs
      .readdirSync(dir)
      .filter((n) => /^s\d+-\d+\.spare$/.test(n))
      .map((n) => fs.statSync(path.join(dir, n)).ino)
      .filter((ino) => ino !== inodes[0]);
  // Made one after another until the stock is full: taken once two looks 100 ms apart agree.
  let seen = -1;
  const made = await waitFor(
    () => {
      const now = ahead();
      const full = now.length > 0 && now.length === seen;
      seen = now.length;
      return full && now;
    },
    "exit files made ahead",
    20_000,
    100,
  );
  const later = await start(6, ["true"]);
  assert.equal(later.failed, null);
  assert.ok(
    made.includes(fs.statSync(path.join(dir, "6.exit")).ino),
    "run 6's exit file was made ahead",
  );
  assert.equal(fs.readFileSync(path.join(dir, "6.exit"), "utf8"), "0\n");
  assert.equal((await start(4, ["/nonexistent/program"])).failed, "ENOENT");
  assert.ok(!fs.existsSync(path.join(dir, "4.pid")), "a start that failed leaves no pid file");
  const again = await start(5, own(5));
  assert.equal(Number(again.out.trim().split("\n")[1]), inodes[0], "its inode served the next run");
});

test("a pruned log given back (recycle) is a later run's exit file when no one holds it open; held open, linked twice, a link or elsewhere, it is removed, never reused", async (t) => {
  const dir = tmpdir(t);
  const spawner = await ownSpawner(t);
  const start = (runId, argv) => startOne(spawner, dir, runId, argv);
  // Two exit files written: the spawner keeps exit files ahead next to them from now on.
  await start(1, ["true"]);
  await start(2, ["true"]);
  const put = (name, text) => {
    const f = path.join(dir, name);
    fs.mkdirSync(path.dirname(f), { recursive: true });
    fs.writeFileSync(f, text);
    return f;
  };
  const free = put("900-1.spare", "an old run's output\n");
  const freeIno = fs.statSync(free).ino;
  const held = put("900-2.spare", "followed\n");
  const heldIno = fs.statSync(held).ino;
  const fd = fs.openSync(held, "r"); // as `logs --follow` or the page holds a log
  t.after(() => fs.closeSync(fd));
  const twice = put("900-3.spare", "two names\n");
  fs.linkSync(twice, path.join(dir, "other-name"));
  const target = put("target", "not ours to empty\n");
  const link = path.join(dir, "900-4.spare");
  fs.symlinkSync(target, link);
  const elsewhere = put("sub/900-5.spare", "another directory\n");
  for (const f of [held, twice, link, elsewhere, free]) assert.equal(spawner.recycle(f), true);
  await waitFor(
    () => [held, twice, link, elsewhere].every((f) => !fs.existsSync(f) && !isLink(f)),
    "the refused ones removed",
  );
  await waitFor(() => fs.statSync(free).size === 0, "the free one kept, emptied");
  const later = await start(3, ["true"]);
  assert.equal(later.exited.code, 0);
  assert.equal(fs.statSync(path.join(dir, "3.exit")).ino, freeIno, "run 3's exit file is it");
  assert.equal(fs.readFileSync(path.join(dir, "3.exit"), "utf8"), "0\n", "and holds only that");
  for (let id = 4; id < 12; id++) {
    await start(id, ["true"]);
    assert.notEqual(fs.statSync(path.join(dir, `${id}.exit`)).ino, heldIno, `run ${id}`);
  }
  const buf = Buffer.alloc(64);
  assert.equal(buf.toString("utf8", 0, fs.readSync(fd, buf, 0, 64, 0)), "followed\n");
  assert.equal(fs.readFileSync(path.join(dir, "other-name"), "utf8"), "two names\n");
  assert.equal(fs.readFileSync(target, "utf8"), "not ours to empty\n");
});

test("starts sent back to back: each run is told started before its output and its end, a failed exec only failed, whichever child execs first", async (t) => {
  // The spawner no longer waits for one child's exec before forking the next (a tick's runs
  // start side by side): each 'P' or 'F' is sent when that child's exec-error pipe says, so the
  // order between runs is the children's, and within a run it must still be P, output, X, C.
  const dir = tmpdir(t);
  const spawner = await ownSpawner(t);
  const n = 90;
  const kind = (i) => ["fails", "echoes", "exits"][i % 3];
  const runs = await Promise.all(
    Array.from(
      { length: n },
      (_, i) =>
        new Promise((resolve) => {
          const r = { i, events: [], out: "", pid: null };
          const argv = {
            fails: ["/nonexistent/program"],
            echoes: ["sh", "-c", `echo out-${i}; echo err-${i} >&2; exit ${i % 5}`],
            exits: ["true"],
          }[kind(i)];
          spawner.start(request(dir, i + 1, argv), {
            started: (pid) => {
              r.pid = pid;
              r.events.push("started");
            },
            failed: (code) => {
              r.events.push(`failed ${code}`);
              resolve(r);
            },
            output: (chunk) => {
              r.out += chunk;
              if (r.events.at(-1) !== "output") r.events.push("output");
            },
            exited: (code) => r.events.push(`exited ${code}`),
            closed: () => {
              r.events.push("closed");
              resolve(r);
            },
            lost: () => {
              r.events.push("lost");
              resolve(r);
            },
          });
        }),
    ),
  );
  for (const r of runs) {
    const exit = path.join(dir, `${r.i + 1}.exit`);
    if (kind(r.i) === "fails") {
      assert.deepEqual(r.events, ["failed ENOENT"], `run ${r.i + 1}`);
      assert.ok(!fs.existsSync(exit), `run ${r.i + 1} never started: no exit file`);
      continue;
    }
    const code = kind(r.i) === "echoes" ? r.i % 5 : 0;
    // Started first and closed last, one exit between; output anywhere between started and
    // closed (the pipes drain after the main process ends, in as many chunks as they come).
    const told = r.events.filter((e) => e !== "output");
    assert.deepEqual(told, ["started", `exited ${code}`, "closed"], `run ${r.i + 1}: ${r.events}`);
    if (kind(r.i) === "exits") assert.ok(!r.events.includes("output"), `run ${r.i + 1}`);
    assert.ok(r.pid > 0, `run ${r.i + 1} has a pid`);
    assert.equal(fs.readFileSync(exit, "utf8"), `${code}\n`, `run ${r.i + 1}'s exit file`);
    if (kind(r.i) === "echoes")
      assert.deepEqual(r.out.split("\n").filter(Boolean).sort(), [`err-${r.i}`, `out-${r.i}`]);
  }
  const pids = runs.filter((r) => r.pid !== null).map((r) => r.pid);
  assert.equal(new Set(pids).size, pids.length, "every run its own process");
});

/** Live (not zombie) processes whose environment holds `tag`, by pid. */
function taggedProcesses(tag) {
  const out = [];
  for (const d of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (!fs.readFileSync(`/proc/${d}/environ`, "latin1").includes(tag)) continue;
      const state = fs.readFileSync(`/proc/${d}/stat`, "utf8").split(") ")[1].split(" ")[0];
      if (state !== "Z") out.push(Number(d));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return out;
}

test("the spawner killed while a tick's starts exec: a start it never answered leaves no process behind", async (t) => {
  // The spawner forks a tick's runs without waiting for each exec, so more than one start can be
  // forked and not yet answered when it dies. Each is told lost before started, and is recorded
  // as a start that failed: its process (if it got that far) must not live on unwatched.
  const dir = tmpdir(t);
  const spawner = await ownSpawner(t);
  const tag = `CVX_TEST_TAG=${process.pid}-${Date.now()}`;
  t.after(() => {
    for (const pid of taggedProcesses(tag)) process.kill(pid, "SIGKILL");
  });
  const n = 60;
  let anyStarted;
  const first = new Promise((r) => (anyStarted = r));
  const runs = Array.from(
    { length: n },
    (_, i) =>
      new Promise((resolve) => {
        const r = { pid: null, end: null };
        spawner.start(
          request(dir, i + 1, ["sleep", "30"], {
            env: { PATH: "/usr/bin:/bin", CVX_TEST_TAG: tag.split("=")[1] },
          }),
          {
            started: (pid) => {
              r.pid = pid;
              anyStarted(pid);
            },
            failed: (code) => resolve({ ...r, end: `failed ${code}` }),
            output: () => {},
            exited: () => {},
            closed: () => resolve({ ...r, end: "closed" }),
            lost: () => resolve({ ...r, end: "lost" }),
          },
        );
      }),
  );
  // This test's spawner: the parent of its first run (an earlier test's spawner, closed, may
  // still be this process's child while its last runs drain).
  const firstPid = await first;
  const parent = Number(
    fs.readFileSync(`/proc/${firstPid}/stat`, "utf8").split(") ")[1].split(" ")[1],
  );
  assert.equal(fs.readlinkSync(`/proc/${parent}/exe`), SPAWNER, "the run's parent is a spawner");
  process.kill(parent, "SIGKILL");
  const ends = await Promise.all(runs);
  const started = new Set(ends.filter((r) => r.pid !== null).map((r) => r.pid));
  assert.ok(
    ends.every((r) => r.end === "lost" || r.end?.startsWith("failed")),
    "every run lost with the spawner",
  );
  // What is still running is what was told started (and is watched by its group): nothing else.
  const stray = await waitFor(
    () => {
      const left = taggedProcesses(tag).filter((pid) => !started.has(pid));
      return left.length === 0 ? [] : null;
    },
    "no process of a start the spawner never answered",
    5000,
  ).catch(() => taggedProcesses(tag).filter((pid) => !started.has(pid)));
  assert.deepEqual(stray, [], `${started.size} of ${n} were told started`);
});

/** A run started through `spawner` by the daemon's path (runner.ts's startRun). */
async function runVia(spawner, dir, runId, command, timeoutMs = null) {
  const { startRun } = await import("../dist/run/runner.js");
  return startRun(
    {
      ...runFiles(dir, runId),
      job: "probe",
      command,
      shell: "/bin/sh",
      user: null,
      logPath: path.join(dir, `${runId}.log`),
      logMaxBytes: 1 << 20,
      timeoutMs,
      killGraceMs: 500,
    },
    spawner,
    0,
  );
}

test("the spawner killed with a start in flight, or under a run with a timeout: the start fails, the run still times out", async (t) => {
  const dir = tmpdir(t);
  const spawner = await ownSpawner(t);
  const first = await runVia(spawner, dir, 1, "sleep 30", 1500);
  assert.ok(first.pid > 0);
  killGroupsAfter(t, [first.pid]);
  const pid = Number(
    fs.readFileSync(`/proc/${first.pid}/stat`, "utf8").split(") ")[1].split(" ")[1],
  );
  // Frozen, it reads no request: the second start is in flight when it dies.
  process.kill(pid, "SIGSTOP");
  const second = runVia(spawner, dir, 2, "true");
  process.kill(pid, "SIGKILL");
  const h2 = await second;
  assert.equal(h2.pid, null, "never started");
  const r2 = await h2.done;
  assert.equal(r2.status, "spawn_failed");
  assert.match(r2.reason, /spawner exited before the run started/);
  // The first run lives on without its spawner, and its timeout still ends it.
  const r1 = await first.done;
  assert.equal(r1.status, "timeout", r1.reason);
  assert.ok(!alive(first.pid));
  // A job killed by SIGABRT says so (not by one of its aliases), from a new spawner.
  const abrt = await (await runVia(spawner, dir, 3, "kill -ABRT $$")).done;
  assert.equal(abrt.signal, "SIGABRT");
});

test("a spawner holding more than 1,024 descriptors still starts runs: a run's open-files limit is set once it holds only its own", async (t) => {
  const dir = tmpdir(t);
  const spawner = await ownSpawner(t);
  // Each run under way holds its output pipes in the spawner: 600 at once, over 1,200 descriptors.
  const flag = path.join(dir, "finish");
  const starts = Array.from(
    { length: 600 },
    (_, i) =>
      new Promise((resolve) => {
        spawner.start(
          request(
            dir,
            i + 1,
            ["sh", "-c", `while [ ! -e ${flag} ]; do sleep 0.1; done; ulimit -n`],
            { job: `j${i}` },
          ),
          {
            started: () => {},
            failed: (code) => resolve({ failed: code }),
            output: () => {},
            exited: (code) => resolve({ code }),
            closed: () => {},
            lost: () => resolve({ failed: "lost" }),
          },
        );
      }),
  );
  // Every run has started (its pid file written before the exec) before any may end.
  await waitFor(
    () => fs.readdirSync(dir).filter((f) => f.endsWith(".pid")).length === 600,
    "600 runs started",
    60_000,
  );
  fs.writeFileSync(flag, "");
  const ends = await Promise.all(starts);
  const failed = ends.filter((e) => e.failed !== undefined);
  assert.deepEqual(failed.slice(0, 3), [], `${failed.length} of 600 runs could not start`);
  assert.ok(ends.every((e) => e.code === 0));
});
