// A store held by another writer past the daemon's busy timeout (a long `sqlite3` session, a
// backup tool, a stuck `mark`) must never take the daemon down: a signal handler, hook or timer
// that writes to the store logs the failure, keeps what it meant to write, and the next beat
// writes it.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import {
  ROOT,
  startDaemon,
  statusJson,
  tmpdir,
  waitFor,
  writeConfig,
  readStore,
} from "./helpers.js";

/**
 * Another process holding the store's write lock until `release()` (no timeout of its own).
 * Resolves once the lock is held.
 */
async function holdWriteLock(t, stateDir) {
  const script = `
    const Database = require(${JSON.stringify(path.join(ROOT, "node_modules", "better-sqlite3"))});
    const db = new Database(${JSON.stringify(path.join(stateDir, "cronvisor.db"))});
    db.pragma("busy_timeout = 10000");
    db.exec("BEGIN IMMEDIATE");
    process.stdout.write("locked\\n");
    process.stdin.once("data", () => { db.exec("COMMIT"); db.close(); process.exit(0); });
  `;
  const p = spawn(process.execPath, ["-e", script], { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => p.on("exit", resolve));
  t.after(() => p.kill("SIGKILL"));
  await new Promise((resolve, reject) => {
    p.stdout.once("data", resolve);
    p.once("exit", () => reject(new Error("the lock holder exited before locking")));
  });
  return {
    release: async () => {
      p.stdin.write("go\n");
      await exited;
    },
  };
}

const CONFIG = (jobs) => ["heartbeat: 1s", "jobs:", ...jobs, ""].join("\n");
const JOB_A = ["  a:", '    schedule: "@daily"', '    command: "true"'];
const JOB_B = ["  b:", '    schedule: "@daily"', '    command: "true"'];

test("SIGHUP while another writer holds the store: the daemon lives, and the next beats record the reload", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(dir, CONFIG(JOB_A));
  const stateDir = path.join(dir, ".cronvisor");
  const d = startDaemon(t, cfg);
  await waitFor(() => statusJson(cfg).daemon.state === "running", "daemon running");

  // A broken config, reloaded as systemd's ExecReload does (kill -HUP), while the store is held.
  let lock = await holdWriteLock(t, stateDir);
  fs.writeFileSync(cfg, "jobs: [\n");
  const errBefore = d.err.length;
  d.kill("SIGHUP");
  await waitFor(() => /database is locked/.test(d.err.slice(errBefore)), "a busy write logged");
  assert.equal(d.exitCode, null, d.err);
  await lock.release();
  // Nobody reloads again: the refusal reaches the store on a later beat by itself.
  const row = await waitFor(
    () => readStore(stateDir).daemon()?.config_error,
    "config_error recorded after the lock is gone",
  );
  assert.match(row, /jobs\.yaml/);
  assert.equal(d.exitCode, null, d.err);

  // A valid config with a new job, reloaded while the store is held: applied once the lock is gone.
  lock = await holdWriteLock(t, stateDir);
  fs.writeFileSync(cfg, CONFIG([...JOB_A, ...JOB_B]));
  const errBefore2 = d.err.length;
  d.kill("SIGHUP");
  await waitFor(() => /database is locked/.test(d.err.slice(errBefore2)), "a busy write logged");
  await lock.release();
  await waitFor(() => readStore(stateDir).job("b") !== null, "job b known to the store");
  await waitFor(() => readStore(stateDir).daemon()?.config_error === null, "config_error cleared");
  assert.equal(d.exitCode, null, d.err);
  assert.doesNotMatch(d.err, /\n\s+at /, "no stack trace in the daemon's log");
});

test("SIGTERM while another writer holds the store: the daemon stops without a stack trace", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(dir, CONFIG(JOB_A));
  const stateDir = path.join(dir, ".cronvisor");
  const d = startDaemon(t, cfg);
  await waitFor(() => statusJson(cfg).daemon.state === "running", "daemon running");
  const lock = await holdWriteLock(t, stateDir);
  d.kill("SIGTERM");
  const r = await d.exited;
  await lock.release();
  assert.doesNotMatch(d.err, /\n\s+at /, "no stack trace in the daemon's log");
  assert.match(d.err, /could not record the stop/);
  assert.equal(r.code, 1, d.err);
  // The next daemon starts on the same store (the old one's pid is gone).
  const d2 = startDaemon(t, cfg);
  await waitFor(() => statusJson(cfg).daemon.pid === d2.pid, "a new daemon running");
});
