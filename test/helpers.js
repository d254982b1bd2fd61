// Shared test helpers: real temp dirs, the built CLI as a real process, polling with a deadline.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const BIN = path.join(ROOT, "bin", "cronvisor");

/** A fresh temp dir, removed when the test ends (pass the node:test context). */
export function tmpdir(t, prefix = "cvx-") {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t?.after?.(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Write `jobs.yaml` (or `name`) into dir and return its path. */
export function writeConfig(dir, text, name = "jobs.yaml") {
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return file;
}

/** Base environment for CLI calls: no CRONVISOR_* leaking in from outside. */
export function cleanEnv(extra = {}) {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith("CRONVISOR_")) delete env[k];
  delete env.NODE_EXTRA_CA_CERTS; // triples Node start-up here and is irrelevant to tests
  return { ...env, ...extra };
}

/** Run the CLI to completion. Returns { code, signal, stdout, stderr }. */
export function cli(args, opts = {}) {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    encoding: "utf8",
    env: cleanEnv(opts.env),
    cwd: opts.cwd,
    input: opts.input,
    timeout: opts.timeout ?? 60_000,
  });
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

/** Start the CLI as a long-lived child (e.g. the daemon). Output is collected on .out/.err. */
export function spawnCli(args, opts = {}) {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: cleanEnv(opts.env),
    cwd: opts.cwd,
    stdio: ["ignore", "pipe", "pipe"],
    detached: opts.detached ?? false,
  });
  child.out = "";
  child.err = "";
  child.stdout.on("data", (d) => (child.out += d));
  child.stderr.on("data", (d) => (child.err += d));
  child.exited = new Promise((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  return child;
}

/** Poll `fn` until it returns a truthy value; throw with `what` after `ms`. Never a fixed sleep. */
export async function waitFor(fn, what = "condition", ms = 20_000, every = 25) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${ms} ms waiting for ${what} (last: ${String(last)})`);
    }
    await new Promise((r) => setTimeout(r, every));
  }
}

/** Is a pid alive (and not a zombie)? */
export function alive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

/** SIGKILL a whole process group. Refuses 0/1/null: `kill(-0)` would kill the test runner's own group. */
export function killGroup(pgid) {
  if (!Number.isInteger(pgid) || pgid <= 1) return;
  try {
    process.kill(-pgid, "SIGKILL");
  } catch {
    // already gone
  }
}
