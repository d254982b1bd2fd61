// A run is every process it started (src/run/cgroup.ts, src/run/spawner.c): a process that leaves
// the run's process group (setsid, a double fork) stays in the run's cgroup, so the lock, the
// timeout and the record reach it. Real daemons, real cgroups on this machine's cgroup2 mount:
// each test puts its daemons' cgroups under a subtree of its own (CRONVISOR_CGROUP_ROOT) and
// removes it after, and never touches a cgroup or a process it did not create.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import {
  CGROUP2_MOUNT,
  ROOT,
  alive,
  cli,
  freePort,
  removeCgroupTree,
  request,
  runAs,
  readStore,
  readStoreIn,
  startDaemon,
  statusJson,
  stopDaemon,
  testUser,
  tmpdir,
  userCli,
  waitFor,
  writeConfig,
} from "./helpers.js";
import { needs, needsNow } from "./needs.js";

const MOUNT = CGROUP2_MOUNT;
const why =
  MOUNT === null ? "no cgroup2 file system mounted" : process.getuid() !== 0 ? "needs root" : null;
// Under CI (root, cgroup2 mounted by the machine) these never skip: `needs` fails them.
const skip = why ?? false;

/**
 * A subtree of this test's own under the cgroup2 mount, for its daemons' runs; at the end every
 * process still in it is killed (all of them this test's jobs) and it is removed, bottom up.
 */
function cgroupRoot(t) {
  const root = path.join(MOUNT, `cvx-test-${process.pid}-${Math.random().toString(36).slice(2)}`);
  t.after(() => removeCgroupTree(root));
  return root;
}

/**
 * Live processes named `comm` whose command line holds `marker` (each test's own digits, in a
 * `sleep`'s duration or a shell's command): the job's work, not the shells around it.
 */
function withMarker(marker, comm = "sleep") {
  const out = [];
  for (const p of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${p}/cmdline`, "utf8");
      if (fs.readFileSync(`/proc/${p}/comm`, "utf8").trim() !== comm) continue;
      const state = fs.readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1]?.[0];
      if (cmd.includes(marker) && state !== "Z") out.push(Number(p));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** Kill what is left of a marker's processes at the end (a failed test must leave none). */
function reapAfter(t, marker) {
  t.after(() => {
    for (const pid of [...withMarker(marker), ...withMarker(marker, "sh")])
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone
      }
  });
}

function daemonDir(t, jobs, extra = "") {
  const dir = tmpdir(t);
  const cfg = writeConfig(dir, `heartbeat: 1s\n${extra}jobs:\n${jobs}`);
  return { dir, cfg };
}

test(
  "a per-second job whose command escapes with setsid: never two copies alive, each run kills its leftover",
  needs(skip),
  async (t) => {
    const root = cgroupRoot(t);
    const marker = `${process.pid}19`;
    reapAfter(t, marker);
    // The escapee outlives the run's main process by 4 s unless its run takes it along.
    const { dir, cfg } = daemonDir(
      t,
      `  esc:\n    schedule: "* * * * * *"\n    command: "setsid sh -c 'exec sleep 4.0${marker}' & sleep 0.3"\n`,
    );
    const d = startDaemon(t, cfg, { CRONVISOR_CGROUP_ROOT: root });
    let most = 0;
    await waitFor(() => {
      most = Math.max(most, withMarker(marker).length);
      return readStoreIn(dir).runs({ status: "ok" }).length >= 4;
    }, "four runs");
    assert.ok(most <= 1, `at most one copy of the escaped work alive at once, saw ${most}`);
    const done = readStoreIn(dir).runs({ status: "ok" });
    assert.ok(
      done.every((r) => r.reason === "killed 1 leftover process"),
      JSON.stringify(done),
    );
    const st = statusJson(cfg);
    assert.equal(st.daemon.containment.mode, "cgroup");
    assert.match(st.daemon.containment.reason, new RegExp(root));
    await stopDaemon(d);
    assert.deepEqual(withMarker(marker), [], "nothing of the job outlives the daemon's stop");
  },
);

test(
  "leftovers: wait keeps the run and its lock until its last process exits (flock's way); later slots are overlap skips",
  needs(skip),
  async (t) => {
    const root = cgroupRoot(t);
    const marker = `${process.pid}29`;
    reapAfter(t, marker);
    const { dir, cfg } = daemonDir(
      t,
      `  esc:\n    schedule: "* * * * * *"\n    leftovers: wait\n    command: "setsid sh -c 'exec sleep 3.0${marker}' &"\n`,
    );
    const d = startDaemon(t, cfg, { CRONVISOR_CGROUP_ROOT: root });
    const first = await waitFor(
      () => readStoreIn(dir).runs({ status: "ok" })[0],
      "the first run to end",
    );
    assert.ok(
      first.duration_ms >= 2500,
      `the run lasted as long as its escapee: ${first.duration_ms} ms`,
    );
    assert.equal(first.reason, "waited for 1 leftover process");
    const skipped = readStoreIn(dir).runs({
      status: "skipped",
      slot: { gt: first.slot, lt: first.finished_at - 1000 },
    });
    assert.ok(skipped.length >= 1, "slots during the wait were skipped");
    assert.ok(
      skipped.every((s) => /run \d+ (still running|holds the lock)|overlap/.test(s.reason)),
      JSON.stringify(skipped),
    );
    await stopDaemon(d);
  },
);

test(
  "timeout: reaches an escapee that ignores SIGTERM, and a double-forked daemon",
  needs(skip),
  async (t) => {
    const root = cgroupRoot(t);
    const marker = `${process.pid}39`;
    reapAfter(t, marker);
    // The main process waits; two escapees ignore TERM: a setsid one and a double-forked one.
    const cmd = `setsid sh -c 'trap \\"\\" TERM; sleep 60.0${marker}' & (setsid sh -c 'trap \\"\\" TERM; sleep 60.0${marker}' &) ; sleep 60`;
    const { dir, cfg } = daemonDir(
      t,
      `  slow:\n    schedule: "@reboot"\n    timeout: 1s\n    kill_grace: 500ms\n    command: "${cmd}"\n`,
    );
    const d = startDaemon(t, cfg, { CRONVISOR_CGROUP_ROOT: root });
    const run = await waitFor(
      () => readStoreIn(dir).runs({ status: "timeout" })[0],
      "the run to time out",
    );
    assert.match(run.reason, /^timeout after 1s/);
    assert.deepEqual(withMarker(marker), [], "both escapees are gone with their run");
    await stopDaemon(d);
  },
);

test(
  "leftovers: keep moves what is left out of the run and its lock; it keeps running, said in history",
  needs(skip),
  async (t) => {
    const root = cgroupRoot(t);
    const marker = `${process.pid}49`;
    reapAfter(t, marker);
    const { dir, cfg } = daemonDir(
      t,
      `  svc:\n    schedule: "@reboot"\n    leftovers: keep\n    command: "setsid sh -c 'exec sleep 30.0${marker}' &"\n`,
    );
    const d = startDaemon(t, cfg, { CRONVISOR_CGROUP_ROOT: root });
    const run = await waitFor(() => readStoreIn(dir).runs({ status: "ok" })[0], "the run to end");
    assert.equal(run.reason, "left 1 process running");
    const [kept] = withMarker(marker);
    assert.ok(kept, "the kept process still runs");
    const cg = fs.readFileSync(`/proc/${kept}/cgroup`, "utf8");
    assert.match(cg, new RegExp(`kept-${run.id}`), "in a kept cgroup of its own, outside the run");
    await stopDaemon(d);
    assert.ok(alive(kept), "a daemon's stop leaves a kept process be");
  },
);

// Both containments: the cgroup (named by the run's id or job), and without one the pid file
// the spawner writes before the exec.
for (const mode of ["cgroup", "process-group"])
  test(
    `a daemon SIGKILLed between its runs' spawn and the record of their pids (${mode}): the restart adopts them, no second copy`,
    needs(mode === "cgroup" ? skip : false),
    async (t) => {
      const root = mode === "cgroup" ? cgroupRoot(t) : "off";
      const marker = `${process.pid}5${mode === "cgroup" ? 9 : 8}`;
      reapAfter(t, marker);
      const flag = path.join(tmpdir(t), "finish");
      const { dir, cfg } = daemonDir(
        t,
        `  job:\n    schedule: "* * * * * *"\n    command: "while [ ! -e ${flag} ]; do sleep 0.05; done; : ${marker}"\n`,
      );
      const first = startDaemon(t, cfg, {
        CRONVISOR_CGROUP_ROOT: root,
        CRONVISOR_FAULT: "die-before-pids",
      });
      const r = await first.exited;
      assert.equal(r.signal, "SIGKILL", "the fault hook killed the daemon");
      const [orphan] = readStoreIn(dir).runs({ status: "running" });
      assert.ok(orphan, "its run is recorded running");
      assert.equal(orphan.pid, null, "with no pid recorded");
      await waitFor(() => withMarker(marker, "sh").length === 1, "the run's process to live on");
      const second = startDaemon(t, cfg, { CRONVISOR_CGROUP_ROOT: root });
      await waitFor(
        () =>
          readStoreIn(dir)
            .runs({ id: orphan.id })
            .find((r) => r.pid !== null),
        "the restarted daemon to adopt the run (its pid recorded)",
      );
      // Slots come every second while it runs: each is skipped, none starts a second copy.
      await waitFor(
        () => readStoreIn(dir).runs({ status: "skipped" }).length >= 2,
        "two skipped slots",
      );
      assert.equal(withMarker(marker, "sh").length, 1, "one copy, never two");
      fs.writeFileSync(flag, "");
      await waitFor(
        () => readStoreIn(dir).runs({ id: orphan.id, status: "ok" })[0],
        "the adopted run's end, recorded from its exit file",
      );
      await stopDaemon(second);
    },
  );

test(
  "cpu_s and memory_peak_bytes: a run that burns CPU and holds 160 MiB",
  needs(skip),
  async (t) => {
    const root = cgroupRoot(t);
    const node = process.execPath;
    // 0.6 s of its own CPU (not of wall time: a loaded machine gives a 700 ms loop less).
    const burn = `const b = Buffer.alloc(160 * 1024 * 1024, 1); let x = 0; while (process.cpuUsage().user + process.cpuUsage().system < 600000) x += b[x % b.length]; process.stdout.write(String(x > 0))`;
    const port = await freePort();
    const { dir, cfg } = daemonDir(
      t,
      `  burn:\n    schedule: "@reboot"\n    command: [${JSON.stringify(node)}, "-e", ${JSON.stringify(burn)}]\n`,
      `http: 127.0.0.1:${port}\nhttp_logs: true\n`,
    );
    const d = startDaemon(t, cfg, { CRONVISOR_CGROUP_ROOT: root });
    const run = await waitFor(() => readStoreIn(dir).runs({ status: "ok" })[0], "the run to end");
    // The page says where runs are contained; the run's page and /metrics say what it cost.
    const page = await request(port, { path: "/" });
    assert.match(page.body, /data-containment="cgroup"[^>]*>a cgroup per run/);
    const runPage = await request(port, { path: `/runs/${run.id}` });
    assert.match(runPage.body, /<dt>cost<\/dt>\s*<dd>\d+\.\d\d s CPU, \d+ MiB peak memory<\/dd>/);
    const metrics = await waitFor(async () => {
      const body = (await request(port, { path: "/metrics" })).body;
      return (
        /cronvisor_run_cpu_seconds_total\{job_name="burn"\} (0\.[5-9]|[1-9])/.test(body) && body
      );
    }, "the run's CPU in /metrics");
    assert.match(metrics, /cronvisor_run_memory_peak_bytes_count\{job_name="burn"\} 1/);
    await stopDaemon(d);
    assert.ok(run.cpu_s >= 0.5, `CPU seconds: ${run.cpu_s}`);
    assert.ok(run.memory_peak_bytes >= 160 * 1024 * 1024, `peak memory: ${run.memory_peak_bytes}`);
    const h = JSON.parse(cli(["history", "burn", "--json", "-c", cfg]).stdout)[0];
    assert.equal(h.cpu_s, run.cpu_s);
    assert.equal(h.memory_peak_bytes, run.memory_peak_bytes);
    const st = statusJson(cfg);
    assert.equal(st.jobs[0].last_run.cpu_s, run.cpu_s, "status's last_run has them too");
    assert.equal(st.jobs[0].last_run.memory_peak_bytes, run.memory_peak_bytes);
  },
);

test("without a cgroup of its own (not root) the daemon says so: process-group containment and why", async (t) => {
  const user = testUser();
  if (needsNow(t, user.skip)) return;
  const bin = userCli(user);
  if (needsNow(t, bin.skip)) return;
  const dir = tmpdir(t);
  fs.chmodSync(dir, 0o777);
  const marker = `${process.pid}69`;
  reapAfter(t, marker);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\nstate_dir: ./state\njobs:\n  j:\n    schedule: "@reboot"\n    command: "sleep 0.2${marker}"\n`,
  );
  fs.chmodSync(cfg, 0o644);
  const cv = path.join(bin.bin, "cronvisor");
  const daemon = spawnSync(
    "setpriv",
    [
      `--reuid=${user.uid}`,
      `--regid=${user.gid}`,
      "--clear-groups",
      "--",
      "timeout",
      "--preserve-status",
      "-s",
      "TERM",
      "4",
      process.execPath,
      cv,
      "daemon",
      "-c",
      cfg,
    ],
    { encoding: "utf8", cwd: dir, env: { PATH: process.env.PATH } },
  );
  assert.equal(daemon.status, 0, daemon.stderr);
  const st = runAs(user, [process.execPath, cv, "status", "--json", "-c", cfg], { cwd: dir });
  assert.equal(st.code, 0, st.stderr);
  // Stopped now: status shows no containment for a daemon that is down; the row keeps it.
  const row = readStore(path.join(dir, "state")).daemon();
  assert.ok(row, "the daemon's row");
  const c = JSON.parse(row.containment);
  assert.equal(c.mode, "process-group");
  assert.match(c.reason, /not root/);
  const ran = readStore(path.join(dir, "state")).runs()[0];
  assert.equal(ran?.status, "ok", "its runs still run, in their process groups");
});

test("limits: nofile is set for the run (1024 by default, not the daemon's raised limit); a limit this host cannot enforce is a WARNING in validate and status", async (t) => {
  const { dir, cfg } = daemonDir(
    t,
    `  plain:\n    schedule: "@reboot"\n    command: "ulimit -n"\n  capped:\n    schedule: "@reboot"\n    limits: { memory: 512MB, cpu: 150%, tasks: 200, nofile: 4096 }\n    command: "ulimit -n"\n`,
  );
  const v = cli(["validate", "-c", cfg]);
  assert.equal(v.code, 0, v.stderr);
  const d = startDaemon(
    t,
    cfg,
    MOUNT && process.getuid() === 0 ? { CRONVISOR_CGROUP_ROOT: cgroupRoot(t) } : {},
  );
  await waitFor(() => readStoreIn(dir).runs({ status: "ok" }).length === 2, "both runs");
  const log = (job) =>
    fs.readFileSync(
      path.join(dir, ".cronvisor", "logs", job, `${readStoreIn(dir).runs({ job })[0].id}.log`),
      "utf8",
    );
  assert.equal(log("plain"), "1024\n");
  assert.equal(log("capped"), "4096\n");
  const st = statusJson(cfg);
  const have = st.daemon.containment.mode === "cgroup" ? st.daemon.containment.controllers : [];
  for (const [key, controller] of [
    ["memory", "memory"],
    ["cpu", "cpu"],
    ["tasks", "pids"],
  ]) {
    const warned = new RegExp(`capped: limits\\.${key} is not enforced`);
    if (have.includes(controller)) {
      assert.doesNotMatch(v.stdout, warned);
      continue;
    }
    // This machine's cgroup2 mount has no memory, cpu or pids controller: each is warned of.
    assert.match(v.stdout, new RegExp(`^WARNING: ${warned.source}`, "m"));
    assert.ok(
      st.daemon.containment.warnings.some((w) => warned.test(w)),
      JSON.stringify(st.daemon.containment),
    );
  }
  if (have.length < 3)
    assert.equal(cli(["status", "--check", "-c", cfg]).code, 1, "--check: WARNING");
  await stopDaemon(d);
});

test(
  "a job's runs reuse its cgroup: each run's cpu_s is its own, and an idle job's cgroup is removed",
  needs(skip),
  async (t) => {
    const root = cgroupRoot(t);
    const node = process.execPath;
    // 0.3 s of its own CPU, however long a loaded machine takes to give it.
    const burn = `let x = 0; while (process.cpuUsage().user + process.cpuUsage().system < 300000) x++;`;
    const { dir, cfg } = daemonDir(
      t,
      `  burn:\n    schedule: "* * * * * *"\n    command: [${JSON.stringify(node)}, "-e", ${JSON.stringify(burn)}]\n`,
    );
    const d = startDaemon(t, cfg, { CRONVISOR_CGROUP_ROOT: root });
    const base = await waitFor(() => {
      try {
        return fs.readFileSync(path.join(dir, ".cronvisor", "cgroup"), "utf8").trim();
      } catch {
        return null;
      }
    }, "the daemon to record its cgroup base");
    const jobCg = path.join(base, "job-burn");
    const ok = await waitFor(() => {
      const r = readStoreIn(dir).runs({ job: "burn", status: "ok" });
      return r.length >= 4 && r;
    }, "four runs of burn");
    // Kept from one run to the next: the job's cgroup, not one per run.
    assert.ok(fs.existsSync(path.join(jobCg, "cgroup.procs")), `${jobCg} is there`);
    assert.deepEqual(
      fs.readdirSync(base).filter((n) => n.startsWith("run-")),
      [],
      "no run made a cgroup of its own",
    );
    // Each run's CPU is its own, not the sum so far of the cgroup it shares with earlier runs.
    for (const r of ok) assert.ok(r.cpu_s >= 0.3 && r.cpu_s < 0.8, `run ${r.id}: ${r.cpu_s} s CPU`);
    // Paused, the job stops running: its idle cgroup goes after a while (10 s) while the daemon runs.
    assert.equal(cli(["pause", "burn", "-c", cfg]).code, 0);
    await waitFor(() => !fs.existsSync(jobCg), "the idle job cgroup to be removed", 30_000);
    assert.ok(alive(d.pid), "the daemon still runs");
    await stopDaemon(d);
  },
);

test("a daemon's clean stop removes its job cgroups with its base", needs(skip), async (t) => {
  const root = cgroupRoot(t);
  const { dir, cfg } = daemonDir(
    t,
    `  tick:\n    schedule: "* * * * * *"\n    command: [/bin/true]\n`,
  );
  const d = startDaemon(t, cfg, { CRONVISOR_CGROUP_ROOT: root });
  await waitFor(() => readStoreIn(dir).runs({ status: "ok" }).length >= 2, "two runs");
  const base = fs.readFileSync(path.join(dir, ".cronvisor", "cgroup"), "utf8").trim();
  assert.ok(fs.existsSync(path.join(base, "job-tick")), "the job's cgroup is kept while it runs");
  await stopDaemon(d);
  assert.equal(fs.existsSync(base), false, `${base} is gone after the clean stop`);
});

test(
  "a job whose run was killed through its cgroup (timeout, leftovers) runs again and succeeds, run after run",
  needs(skip),
  async (t) => {
    // cgroup.kill marks a cgroup for good on some kernels: a child later cloned into it
    // (clone3's CLONE_INTO_CGROUP) is SIGKILLed at birth. A job's kept cgroup is reused by its
    // next run, so a kill must never cost the job its later runs.
    const root = cgroupRoot(t);
    const marker = `${process.pid}69`;
    reapAfter(t, marker);
    const dir0 = tmpdir(t);
    const once = path.join(dir0, "timed-out-once");
    // tmo: its first run ignores TERM (so does its sleep) and is SIGKILLed through its cgroup by
    // the daemon's timeout; its later runs end at once. lk: every run leaves an escapee, which
    // the spawner kills through the cgroup at the run's end.
    const { dir, cfg } = daemonDir(
      t,
      `  tmo:\n    schedule: "* * * * * *"\n    timeout: 500ms\n    kill_grace: 200ms\n` +
        `    command: "[ -e ${once} ] && exit 0; touch ${once}; trap '' TERM; sleep 30.0${marker}"\n` +
        `  lk:\n    schedule: "* * * * * *"\n` +
        `    command: "setsid sh -c 'exec sleep 20.0${marker}' & sleep 0.1"\n`,
    );
    const d = startDaemon(t, cfg, { CRONVISOR_CGROUP_ROOT: root });
    const ran = (job) =>
      readStoreIn(dir)
        .runs({ job })
        .filter((r) => r.status !== "skipped");
    await waitFor(() => {
      const tmo = ran("tmo").filter((r) => r.status !== "running");
      const lk = ran("lk").filter((r) => r.status !== "running");
      return tmo.length >= 4 && lk.length >= 4;
    }, "four ended runs of each job");
    await stopDaemon(d);
    const [first, ...later] = ran("tmo");
    assert.equal(first.status, "timeout", JSON.stringify(first));
    assert.ok(later.length >= 3 && later.every((r) => r.status === "ok"), JSON.stringify(later));
    const lk = ran("lk");
    assert.ok(
      lk.every((r) => r.status === "ok" && /^killed \d+ leftover process/.test(r.reason ?? "")),
      JSON.stringify(lk),
    );
    // Every kill above is known to the spawner: it never cloned a child into a killed cgroup, so
    // its safety net (a child killed at birth is forked again) never had to catch one.
    assert.doesNotMatch(d.err, /killed at its birth/);
  },
);

test(
  "a job cgroup killed by a writer the spawner does not know: the next run, killed at its birth, is started again",
  needs(skip),
  async (t) => {
    const root = cgroupRoot(t);
    const { dir, cfg } = daemonDir(
      t,
      `  tick:\n    schedule: "* * * * * *"\n    command: [/bin/true]\n`,
    );
    const d = startDaemon(t, cfg, { CRONVISOR_CGROUP_ROOT: root });
    await waitFor(() => readStoreIn(dir).runs({ status: "ok" }).length >= 2, "two runs");
    const base = fs.readFileSync(path.join(dir, ".cronvisor", "cgroup"), "utf8").trim();
    // Between two runs: the job's kept cgroup, idle, is killed behind the spawner's back (an
    // operator, another tool). A run that was in it at that moment may die of it: only the runs
    // of later slots count.
    const jobCg = path.join(base, "job-tick");
    await waitFor(
      () => fs.readFileSync(path.join(jobCg, "cgroup.events"), "utf8").includes("populated 0"),
      "the job's cgroup idle",
    );
    fs.writeFileSync(path.join(jobCg, "cgroup.kill"), "1");
    const killedAt = Date.now();
    const later = () => readStoreIn(dir).ended({ slot: { gt: killedAt } });
    await waitFor(() => later().length >= 3, "three runs after the kill");
    await stopDaemon(d);
    assert.ok(
      later().every((r) => r.status === "ok"),
      JSON.stringify(later()),
    );
    assert.match(
      d.err,
      /run \d+ was killed (at its birth|before its exec) in its cgroup/,
      "the safety net caught it",
    );
  },
);

test(
  "signalCgroup: a run with a cgroup of its own is signalled there only; a kill of a job's kept cgroup is told to the spawner",
  needs(skip),
  async (t) => {
    const base = path.join(cgroupRoot(t), "base");
    fs.mkdirSync(base, { recursive: true });
    const { setRunCgroups } = await import(path.join(ROOT, "dist", "core", "proc.js"));
    const { signalCgroup, tellJobCgroupKills } = await import(
      path.join(ROOT, "dist", "run", "cgroup.js")
    );
    // A process of this test's own in each of a run's two cgroups: `run-5` (a run with its own
    // cgroup) and `job-x` (its job's kept one, which may hold another run of the job, or none).
    const sleeper = (name) => {
      const dir = path.join(base, name);
      fs.mkdirSync(dir);
      const c = spawn("sleep", ["30"], { stdio: "ignore" });
      t.after(() => c.kill("SIGKILL"));
      fs.writeFileSync(path.join(dir, "cgroup.procs"), String(c.pid));
      c.over = new Promise((res) => c.once("exit", (code, sig) => res(sig)));
      return c;
    };
    const own = sleeper("run-5");
    const job = sleeper("job-x");
    const told = [];
    setRunCgroups(base);
    tellJobCgroupKills((name) => told.push(name));
    t.after(() => {
      tellJobCgroupKills(null);
      setRunCgroups(null);
    });
    /** Is a SIGKILL on its way to the process (sent, not yet taken)? */
    const killPending = (pid) =>
      (BigInt(`0x${fs.readFileSync(`/proc/${pid}/status`, "utf8").match(/^ShdPnd:\s*(\w+)/m)[1]}`) &
        0x100n) !==
      0n;
    signalCgroup({ id: 5, job: "x" }, "SIGKILL");
    assert.equal(await own.over, "SIGKILL");
    assert.equal(killPending(job.pid), false, "the job's kept cgroup was not killed with the run");
    assert.deepEqual(told, [], "nothing to tell: no job cgroup was killed");
    // A run without a cgroup of its own is in its job's: that one is killed, and said.
    signalCgroup({ id: 6, job: "x" }, "SIGKILL");
    assert.equal(await job.over, "SIGKILL");
    assert.deepEqual(told, ["job-x"]);
  },
);

test(
  "overlap: allow, the daemon SIGKILLed while runs overlap: on the restart a run that ended meanwhile is recorded from its exit file, and another run of the job lives on",
  needs(skip),
  async (t) => {
    const root = cgroupRoot(t);
    const marker = `${process.pid}79`;
    reapAfter(t, marker);
    const dir0 = tmpdir(t);
    // The first run lives long (the job's kept cgroup was free for it); the later ones take 2 s
    // each, so some are running whenever the daemon dies, each in a cgroup of its own.
    const { dir, cfg } = daemonDir(
      t,
      `  job:\n    schedule: "* * * * * *"\n    overlap: allow\n    command: "if mkdir ${dir0}/first 2>/dev/null; then exec sleep ${marker}; fi; sleep 2"\n`,
    );
    const first = startDaemon(t, cfg, { CRONVISOR_CGROUP_ROOT: root });
    await waitFor(() => withMarker(marker).length === 1, "the long run");
    await waitFor(() => readStoreIn(dir).spawned().length >= 2, "a short run beside the long one");
    first.kill("SIGKILL");
    await first.exited;
    const [long] = withMarker(marker);
    const running = readStoreIn(dir).runs({ status: "running" });
    const short = running.filter((r) => r.pid !== long);
    assert.ok(short.length >= 1, "a short run was running at the kill");
    // The short runs end while no daemon watches them; their spawner writes their exit files.
    await waitFor(
      () => short.every((r) => fs.existsSync(path.join(dir, ".cronvisor", "runs", `${r.id}.exit`))),
      "the short runs' ends, in their exit files",
    );
    const second = startDaemon(t, cfg, { CRONVISOR_CGROUP_ROOT: root });
    await waitFor(
      () => short.every((r) => readStoreIn(dir).runs({ id: r.id })[0].status === "ok"),
      "the short runs recorded ok",
    );
    // A short run taken for alive because of the long run in its job's cgroup would be recorded
    // only once that cgroup was empty: after its leftovers' grace, killing the long run.
    assert.deepEqual(withMarker(marker), [long], "the long run still runs");
    await stopDaemon(second);
  },
);
