// The shipped systemd unit (examples/cronvisor.service), without systemd: its settings are read
// from the file and checked against what docs/daemon.md promises, and what its KillMode does is done
// by hand. KillMode=process means systemd signals the daemon's pid and nothing else: on a crash
// the runs live on (adopted by the restarted daemon), and on stop the daemon itself must TERM,
// wait each job's kill_grace, KILL and record every run, its own and adopted ones alike.
// (Adoption itself, skips behind an orphan and its lock, is tested in lifecycle.test.js and
// faults.test.js; here only what the unit adds.)
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawn } from "node:child_process";
import { test } from "node:test";
import { parseDuration } from "../dist/core/duration.js";
import { JOB_KEYS } from "../dist/config/keys.js";
import { JOB_NICE_OFFSET } from "../dist/run/priority.js";
import {
  ROOT,
  cleanEnv,
  killGroupsAfter,
  readStoreIn,
  startDaemon,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";
import { needs } from "./needs.js";

const UNIT = path.join(ROOT, "examples", "cronvisor.service");
const DAEMON_DOC = path.join(ROOT, "docs", "daemon.md");
/**
 * What a stop needs beyond the largest kill_grace: the adopted runs' poll (0.5 s), queued alerts
 * (3 s), recording the runs and closing the store. The unit's comment says the same.
 */
const STOP_MARGIN_MS = 10_000;

/** A unit file's settings: { Section: { Key: [values...] } } (a key may repeat). */
function parseUnit(text) {
  const unit = {};
  let section = null;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    const head = /^\[(.+)\]$/.exec(line);
    if (head) {
      section = unit[head[1]] ??= {};
      continue;
    }
    const eq = line.indexOf("=");
    assert.ok(section && eq > 0, `not a unit file line: ${line}`);
    const key = line.slice(0, eq).trim();
    (section[key] ??= []).push(line.slice(eq + 1).trim());
  }
  return unit;
}

/** A systemd time span ("60s", "1min 30s", "90": seconds) in ms. */
function timespanMs(text) {
  const units = { us: 0.001, ms: 1, s: 1000, sec: 1000, m: 60_000, min: 60_000, h: 3_600_000 };
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  let ms = 0;
  for (const part of text.split(/\s+/)) {
    const m = /^(\d+)([a-z]+)$/.exec(part);
    assert.ok(m && units[m[2]] !== undefined, `not a time span: ${text}`);
    ms += Number(m[1]) * units[m[2]];
  }
  return ms;
}

function service() {
  return parseUnit(fs.readFileSync(UNIT, "utf8")).Service;
}

/** The one value of a [Service] key. */
function one(svc, key) {
  assert.equal(svc[key]?.length, 1, `${key}= set once in the unit`);
  return svc[key][0];
}

/**
 * Start the daemon as the unit's ExecStart and Environment= would (the config path swapped for
 * the test's), so the test runs what systemd runs.
 */
function startAsUnit(t, cfg) {
  const svc = service();
  const argv = one(svc, "ExecStart").split(/\s+/);
  // ExecStart names the installed command by its path (install-server.sh writes the install's).
  const args = argv.slice(argv.findIndex((a) => path.basename(a) === "cronvisor") + 1);
  const c = args.indexOf("-c");
  assert.ok(c >= 0, "ExecStart names its config with -c");
  args[c + 1] = cfg;
  assert.deepEqual(args.slice(0, 1), ["daemon"]);
  const env = {};
  for (const e of svc.Environment ?? []) {
    const eq = e.indexOf("=");
    env[e.slice(0, eq)] = e.slice(eq + 1);
  }
  // systemd sets Nice= (absolute) before the exec, as nice(1) does (relative to ours) here.
  const nice = svc.Nice
    ? ["/usr/bin/nice", "-n", String(Number(one(svc, "Nice")) - os.getPriority(0))]
    : [];
  return startDaemon(t, cfg, env, { wrapper: nice });
}

/** The nice of a process (field 19 of /proc/PID/stat). */
function niceOf(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
}

/** Live (not zombie) processes of a process group, from /proc. */
function groupMembers(pgid) {
  const left = [];
  for (const p of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${p}/stat`, "utf8");
      const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (rest[2] === String(pgid) && rest[0] !== "Z" && rest[0] !== "X") left.push(Number(p));
    } catch {
      // exited while we looked
    }
  }
  return left;
}

/** The group's members but the short-lived `sleep 0.1` of a polling loop. */
function settled(pgid) {
  return groupMembers(pgid).filter((p) => {
    try {
      return fs.readFileSync(`/proc/${p}/comm`, "utf8").trim() !== "sleep";
    } catch {
      return false;
    }
  });
}

test("the shipped unit sets what the docs rely on, and docs/daemon.md says so", () => {
  const svc = service();
  assert.equal(one(svc, "KillMode"), "process", "adoption after a crash needs KillMode=process");
  assert.equal(one(svc, "Delegate"), "yes", "a cgroup per run needs the unit's subtree");
  assert.equal(one(svc, "Restart"), "always");
  const defaultGraceMs = parseDuration(JOB_KEYS.kill_grace.default);
  assert.ok(
    timespanMs(one(svc, "TimeoutStopSec")) > defaultGraceMs + STOP_MARGIN_MS,
    `TimeoutStopSec=${one(svc, "TimeoutStopSec")} must exceed the default kill_grace plus a margin`,
  );
  assert.match(one(svc, "ExecReload"), /^\/bin\/kill -HUP \$MAINPID$/);
  assert.match(one(svc, "ExecStart"), /(^|[\s/])cronvisor daemon(\s|$)/);
  assert.equal(svc.ExecStop, undefined, "the daemon's own stop (SIGTERM) is the stop");

  // The unit's settings are explained with the daemon's behaviour they serve.
  const readme = fs.readFileSync(DAEMON_DOC, "utf8");
  for (const said of [
    "KillMode=process",
    "Delegate=yes",
    "TimeoutStopSec",
    "systemctl kill",
    "setsid",
    "Nice=-5",
  ]) {
    assert.ok(readme.includes(said), `docs/daemon.md mentions ${said}`);
  }
});

test(
  "Nice=: the daemon runs ahead of its jobs, and its jobs run at nice 0, as under cron",
  // Lowering a nice below 0 needs root (systemd does it as root before the exec).
  needs(process.getuid() !== 0 && "needs root"),
  async (t) => {
    const nice = Number(one(service(), "Nice"));
    assert.equal(nice + JOB_NICE_OFFSET, 0, "a job's nice is the daemon's + the offset");
    const dir = tmpdir(t);
    const out = path.join(dir, "nice");
    const cfg = writeConfig(
      dir,
      `jobs:\n  n:\n    schedule: "* * * * * *"\n    command: "cut -d' ' -f19 /proc/$$/stat >> ${out}"\n`,
    );
    const d = startAsUnit(t, cfg);
    await waitFor(() => fs.existsSync(out) && fs.readFileSync(out, "utf8").includes("\n"), "a run");
    assert.equal(fs.readFileSync(out, "utf8").split("\n")[0], "0");
    assert.equal(niceOf(d.pid), nice, "the daemon keeps its own nice");
    await stopDaemon(d);
  },
);

test("KillMode=process, the daemon crashes: its run lives on, the restarted daemon adopts it and records its real end", async (t) => {
  const dir = tmpdir(t);
  const flag = path.join(dir, "finish");
  const done = path.join(dir, "done");
  // The job's waiting is done by a child process: the whole group must outlive the daemon.
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  long:\n    schedule: "* * * * * *"\n    command: "sh -c 'while [ ! -e ${flag} ]; do sleep 0.1; done' && echo $CRONVISOR_RUN_ID >> ${done}"\n`,
  );
  let d = startAsUnit(t, cfg);
  const first = await waitFor(() => readStoreIn(dir).spawned()[0], "a running run");
  killGroupsAfter(t, [first.pgid]);
  await waitFor(() => settled(first.pgid).length >= 2, "the job and its child");
  const members = settled(first.pgid);
  // The crash under KillMode=process: the main pid dies; systemd signals nothing else.
  d.kill("SIGKILL");
  await d.exited;
  assert.deepEqual(settled(first.pgid), members, "every process of the run lives on");
  // Restart=always: a new daemon from the same ExecStart (RestartSec is only a delay).
  d = startAsUnit(t, cfg);
  await waitFor(() => d.err.includes(`adopted run ${first.id} of long`), "the run adopted");
  fs.writeFileSync(flag, "");
  const ended = await waitFor(
    () => readStoreIn(dir).ended({ id: first.id })[0],
    "the adopted run's end recorded",
  );
  assert.equal(ended.status, "ok", JSON.stringify(ended));
  assert.equal(ended.exit_code, 0);
  assert.equal(ended.reason, null);
  const ran = fs.readFileSync(done, "utf8").split("\n");
  assert.equal(ran.filter((id) => id === String(first.id)).length, 1, "it finished once");
  assert.deepEqual(
    readStoreIn(dir)
      .ran({ job: "long" })
      .filter((r) => r.id !== first.id && r.started_at < ended.finished_at)
      .map((r) => ({ id: r.id })),
    [],
    "no second copy while it ran",
  );
  await stopDaemon(d);
});

/**
 * Scripts for jobs that announce they are ready (their traps are set) and what they received.
 * They write nothing: a shell whose child dies of TERM prints "Terminated" on stderr, and an
 * adopted run's output is not logged since the crash (see docs/daemon.md on output after a crash;
 * built without the spawner, that write would end it with SIGPIPE before its trap runs).
 */
function stopJobs(dir) {
  const script = (name, body) => {
    const file = path.join(dir, `${name}.sh`);
    fs.writeFileSync(file, body);
    // A list, not a string: no `sh -c` between the wrapper and the script.
    return { file, command: `[sh, ${file}]` };
  };
  const polite = script(
    "polite",
    `exec 2>/dev/null\ntrap 'echo TERM > ${dir}/polite.term; exit 0' TERM\ntouch ${dir}/polite.ready\nwhile :; do sleep 0.1; done\n`,
  );
  // Catches TERM, notes it and goes on: only KILL ends it.
  const stubborn = script(
    "stubborn",
    `exec 2>/dev/null\ntrap 'echo TERM > ${dir}/stubborn.term' TERM\ntouch ${dir}/stubborn.ready\nwhile :; do sleep 0.1; done\n`,
  );
  // Its main process dies of TERM; its two children ignore TERM and must not outlive the run.
  const kid = script(
    "kid",
    `exec 2>/dev/null\ntrap '' TERM\ntouch ${dir}/kid.ready.$$\nwhile :; do sleep 0.1; done\n`,
  );
  const kids = script("kids", `sh ${kid.file} &\nsh ${kid.file} &\nwait\n`);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n` +
      `  polite:\n    schedule: "* * * * * *"\n    command: ${polite.command}\n    kill_grace: 8s\n` +
      `  stubborn:\n    schedule: "* * * * * *"\n    command: ${stubborn.command}\n    kill_grace: 2s\n` +
      `  kids:\n    schedule: "* * * * * *"\n    command: ${kids.command}\n    kill_grace: 2s\n`,
  );
  const ready = () =>
    fs.existsSync(`${dir}/polite.ready`) &&
    fs.existsSync(`${dir}/stubborn.ready`) &&
    fs.readdirSync(dir).filter((f) => f.startsWith("kid.ready.")).length === 2;
  return { cfg, ready };
}

for (const adopted of [false, true]) {
  const whose = adopted ? "runs it adopted after a crash" : "its own runs";
  test(`KillMode=process, systemctl stop (SIGTERM to the daemon only): the daemon TERMs, KILLs after kill_grace and records ${whose}; nothing is left`, async (t) => {
    const dir = tmpdir(t);
    const { cfg, ready } = stopJobs(dir);
    let d = startAsUnit(t, cfg);
    const running = await waitFor(() => {
      const r = readStoreIn(dir).spawned();
      return r.length === 3 && ready() ? r : null;
    }, "three runs with their traps set");
    killGroupsAfter(
      t,
      running.map((r) => r.pgid),
    );
    if (adopted) {
      d.kill("SIGKILL");
      await d.exited;
      d = startAsUnit(t, cfg);
      await waitFor(
        () =>
          running.every((r) => d.err.includes(`adopted run ${r.id} `)) && d.err.includes("started"),
        "every run adopted",
      );
    }
    const stopAt = Date.now();
    d.kill("SIGTERM"); // what systemctl stop sends under KillMode=process, to the main pid only
    const exit = await d.exited;
    const tookMs = Date.now() - stopAt;
    assert.equal(exit.code, 0, d.err);
    assert.ok(tookMs < timespanMs(one(service(), "TimeoutStopSec")), `stop took ${tookMs} ms`);

    assert.equal(fs.readFileSync(`${dir}/polite.term`, "utf8"), "TERM\n");
    assert.equal(fs.readFileSync(`${dir}/stubborn.term`, "utf8"), "TERM\n", "TERM came first");
    const after = Object.fromEntries(
      readStoreIn(dir)
        .runs({ id: running.map((r) => r.id) })
        .map((r) => [r.job, r]),
    );
    for (const job of ["polite", "stubborn", "kids"]) {
      assert.equal(after[job].status, "killed", `${job}: ${JSON.stringify(after[job])}`);
      assert.match(after[job].reason, /daemon stopping/);
    }
    assert.ok(
      after.stubborn.finished_at - stopAt >= 2000 - 50,
      `stubborn KILLed after its kill_grace, not before (${after.stubborn.finished_at - stopAt} ms)`,
    );
    assert.ok(after.polite.finished_at - stopAt < 8000, "polite ended at TERM, within its grace");
    for (const r of running) {
      assert.deepEqual(groupMembers(r.pgid), [], `nothing left of ${r.job}'s group`);
    }
    assert.equal(readStoreIn(dir).runs({ status: "running" }).length, 0);
  });
}

test("a TERM or HUP while the daemon starts acts once start-up is done, instead of killing it with its runs left behind", async (t) => {
  // systemd (Type=simple) may send the stop right after a (re)start, while start-up adopts or
  // starts runs. The signals are handled from before start-up; start-up ends here at SIGUSR2.
  const script = `
    import { handleDaemonSignals } from ${JSON.stringify(path.join(ROOT, "dist", "commands", "daemon-signals.js"))};
    let go;
    process.on("SIGUSR2", () => go());
    handleDaemonSignals(
      {
        reload: () => process.stdout.write("reload\\n"),
        stop: async () => process.stdout.write("stop\\n"),
        force: () => process.stdout.write("force\\n"),
      },
      new Promise((r) => (go = r)),
    );
    process.stdout.write("starting\\n");
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    env: cleanEnv(),
    stdio: ["ignore", "pipe", "pipe"],
  });
  t.after(() => child.kill("SIGKILL"));
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  // 'close', not 'exit': the last lines asserted below are written right before the exit, and
  // 'exit' can come before they have been read from the pipes.
  const exited = new Promise((r) => child.on("close", (code, signal) => r({ code, signal })));
  await waitFor(() => out.includes("starting"), "start-up begun");
  child.kill("SIGHUP");
  child.kill("SIGTERM");
  await waitFor(() => err.includes("SIGTERM: stopping"), "the TERM seen");
  assert.equal(out, "starting\n", "nothing acted on before start-up ends");
  child.kill("SIGUSR2");
  assert.deepEqual(await exited, { code: 0, signal: null });
  // Both act then (HUP and TERM may be taken in either order).
  assert.deepEqual(out.trim().split("\n").sort(), ["reload", "starting", "stop"]);
});
