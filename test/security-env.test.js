// A `user:` job's environment (its `env:` and its `env_file`, which the job's own user may own)
// must never reach a process that runs as root: the exit-status wrapper and setpriv run as root
// before the privilege drop, and a dynamic loader honours LD_PRELOAD in any process that is not
// setuid. The attack, for real: an LD_PRELOAD library that records the euid of every process it
// is loaded into, named in an env_file the job's user owns.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import {
  cli,
  startDaemon,
  stopDaemon,
  testUser,
  tmpdir,
  waitFor,
  writeConfig,
  readStore,
} from "./helpers.js";
import { needsNow } from "./needs.js";

const PRELOAD_C = `
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void note(void) {
  const char *f = getenv("PRELOAD_OUT");
  if (!f) return;
  FILE *o = fopen(f, "a");
  if (!o) return;
  fprintf(o, "%s %d\\n", geteuid() == 0 ? "root" : "user", (int)getpid());
  fclose(o);
}
`;

/** The preload library, built with the host's C compiler, or { skip } saying why there is none. */
function preloadLibrary(dir) {
  const src = path.join(dir, "note.c");
  const lib = path.join(dir, "note.so");
  fs.writeFileSync(src, PRELOAD_C);
  const cc = spawnSync("cc", ["-shared", "-fPIC", "-o", lib, src], { encoding: "utf8" });
  // The suite needs a C toolchain anyway (better-sqlite3 builds from source); under CI a missing
  // one fails the test (needsNow) instead of skipping the attack.
  if (cc.error || cc.status !== 0) {
    const why = `no C compiler to build the preload library: ${cc.stderr || cc.error}`;
    return { skip: why };
  }
  fs.chmodSync(lib, 0o755);
  return { lib };
}

function setUp(t) {
  const user = testUser();
  // No second user (not root): the caller's needsNow skips with the reason, or fails under CI.
  if (user.skip) return user;
  const dir = tmpdir(t);
  fs.chmodSync(dir, 0o755);
  const built = preloadLibrary(dir);
  if (built.skip) return built;
  const out = path.join(dir, "out");
  fs.mkdirSync(out, { mode: 0o777 });
  fs.chmodSync(out, 0o777);
  const notes = path.join(out, "notes");
  // The env_file is the job user's own (README: allowed), so they choose what is in it.
  const envFile = path.join(dir, "app.env");
  fs.writeFileSync(
    envFile,
    `LD_PRELOAD=${built.lib}\nPRELOAD_OUT=${notes}\nMULTI=not a secret\nQUOTED=it's "quoted" $HOME \`x\`\n`,
    { mode: 0o600 },
  );
  fs.chownSync(envFile, user.uid, user.gid);
  return { user, dir, out, notes, envFile };
}

const jobConfig = (s, command) =>
  writeConfig(
    s.dir,
    `heartbeat: 1s
env: { PATH: "/usr/bin:/bin", FROM_CONFIG: "line one\\nline two" }
jobs:
  app:
    schedule: "@reboot"
    user: ${s.user.name}
    env_file: ${s.envFile}
    command: ${command}
    cwd: /
`,
  );

const notesOf = (file) =>
  fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean) : [];

test("root: a user: job's LD_PRELOAD from its own env_file loads into its processes only, never into a root one (daemon and run)", async (t) => {
  const s = setUp(t);
  // Skipped only with setUp's reason: not root, no second user, or no C compiler for the preload library; in CI never.
  if (needsNow(t, s.skip)) return;
  const envOut = path.join(s.out, "env");
  // A string command (through the shell) that records the environment it received.
  const cfg = jobConfig(s, `"env > ${envOut}"`);
  const d = startDaemon(t, cfg);
  const state = path.join(s.dir, ".cronvisor");
  await waitFor(
    () => readStore(state).ended({ job: "app" })[0],
    "the daemon's run of app to end",
    30_000,
  );
  await stopDaemon(d);
  const r = cli(["run", "app", "-c", cfg]);
  assert.equal(r.code, 0, r.stderr);
  const notes = notesOf(s.notes);
  assert.deepEqual(
    notes.filter((l) => l.startsWith("root")),
    [],
    `processes that ran as root with the job's LD_PRELOAD: ${notes.join(", ")}`,
  );
  assert.ok(
    notes.some((l) => l.startsWith("user")),
    `the job's own processes get its LD_PRELOAD: ${notes.join(", ")}`,
  );
  // And the job still receives its whole environment, byte for byte.
  const env = fs.readFileSync(envOut, "utf8");
  assert.match(env, /^MULTI=not a secret$/m);
  assert.match(env, /^QUOTED=it's "quoted" \$HOME `x`$/m);
  assert.match(env, /^FROM_CONFIG=line one\nline two$/m);
  assert.match(env, /^CRONVISOR_JOB=app$/m);
  assert.match(env, new RegExp(`^USER=${s.user.name}$`, "m"));
  for (const runRow of readStore(state).runs({ job: "app" }))
    assert.equal(runRow.status, "ok", runRow.reason);
});

test("root: the root processes of a user: job's run carry none of the job's environment", async (t) => {
  const s = setUp(t);
  // Skipped only with setUp's reason: not root, no second user, or no C compiler for the preload library; in CI never.
  if (needsNow(t, s.skip)) return;
  const ready = path.join(s.out, "ready");
  // An argv command: the job waits so that its supervisor's processes can be looked at.
  const cfg = jobConfig(
    s,
    `[sh, -c, 'echo $$ > ${ready}.tmp && mv ${ready}.tmp ${ready}; while [ ! -e ${s.out}/go ]; do sleep 0.05; done']`,
  );
  const d = startDaemon(t, cfg);
  await waitFor(() => fs.existsSync(ready), "the job to start", 30_000);
  const state = path.join(s.dir, ".cronvisor");
  // The job may be ready before its pid is recorded (one transaction after the tick's spawns).
  const run = await waitFor(
    () => readStore(state).spawned({ job: "app" })[0],
    "the run's pid recorded",
  );
  // Every process of the run's group that runs as root, and the run's parent (the daemon's
  // spawner, which waits for it as root): their environments.
  const rootEnvs = [];
  const statOf = (pid) => {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  };
  const parent = Number(statOf(run.pid)[1]);
  for (const pid of fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const pgrp = Number(statOf(pid)[2]);
      if ((pgrp !== run.pgid && Number(pid) !== parent) || fs.statSync(`/proc/${pid}`).uid !== 0)
        continue;
      rootEnvs.push(fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0"));
    } catch {
      // gone meanwhile
    }
  }
  assert.ok(rootEnvs.length > 0, "the run's waiter runs as root");
  for (const env of rootEnvs) {
    for (const name of ["LD_PRELOAD", "PRELOAD_OUT", "MULTI", "FROM_CONFIG", "CRONVISOR_SECRET"])
      assert.ok(!env.some((e) => e.startsWith(`${name}=`)), `${name} in a root process: ${env}`);
  }
  fs.writeFileSync(path.join(s.out, "go"), "");
  await waitFor(
    () => readStore(state).runs({ id: run.id, status: "ok" })[0],
    "the run to end ok",
    30_000,
  );
  await stopDaemon(d);
  assert.deepEqual(
    notesOf(s.notes).filter((l) => l.startsWith("root")),
    [],
  );
});
