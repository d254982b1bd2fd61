// Shared helpers for the benchmarks: temp dirs, configs, starting and stopping the real daemon,
// CPU and memory read from /proc, percentiles. Everything here measures real processes.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
// The daemon's spawner is found as the tests find it (any build's: --root measures others).
import { spawnerOf } from "../test/helpers.js";

export const BENCH = path.dirname(fileURLToPath(import.meta.url));
/** The cronvisor checkout under test (`--root DIR` measures another build, e.g. a patched one). */
export let ROOT = path.resolve(BENCH, "..");
export function setRoot(dir) {
  ROOT = path.resolve(dir);
}
export const bin = () => path.join(ROOT, "bin", "cronvisor");
export const dist = (file) => path.join(ROOT, "dist", file);
/** A module of the measured build's dist/. */
export const importDist = (file) => import(pathToFileURL(dist(file)).href);
/** 0, 1, ..., n - 1. */
export const range = (n) => Array.from({ length: n }, (_, i) => i);

/** Where temp dirs go (`--tmp DIR`); default the OS temp dir, which is what a user would see. */
let TMP = os.tmpdir();
export function setTmp(dir) {
  TMP = path.resolve(dir);
  fs.mkdirSync(TMP, { recursive: true });
}
export const tmpBase = () => TMP;

const made = [];
export function tmpdir(prefix = "cvx-bench-") {
  const dir = fs.mkdtempSync(path.join(TMP, prefix));
  made.push(dir);
  return dir;
}
export function cleanup() {
  for (const d of made.splice(0)) fs.rmSync(d, { recursive: true, force: true });
}

/**
 * The environment for every process a benchmark starts: no CRONVISOR_* from outside, and no
 * NODE_EXTRA_CA_CERTS (set in this environment, it triples Node's start-up time).
 */
export function cleanEnv(extra = {}) {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith("CRONVISOR_")) delete env[k];
  delete env.NODE_EXTRA_CA_CERTS;
  return { ...env, ...extra };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** Sleep until the wall clock reaches `at` (ms since the epoch). */
export const sleepUntil = (at) => sleep(at - Date.now());

/** The next instant at `frac` of a second (0.5: the middle of a second) at least `min` ms away. */
export function nextPhase(frac, min = 0) {
  const t = Date.now() + min;
  const base = Math.floor(t / 1000) * 1000 + frac * 1000;
  return base >= t ? base : base + 1000;
}

export async function waitFor(fn, what, ms = 60_000, every = 20) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(every);
  }
}

// ---- /proc ----------------------------------------------------------------------------------

const HZ = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/**
 * CPU seconds of a process: `self` (utime+stime) and `children` (cutime+cstime: every child it
 * has reaped, with their own reaped children). Resolution 1/CLK_TCK (10 ms).
 */
export function procCpu(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // After the command name: state is field 3, utime 14, stime 15, cutime 16, cstime 17.
  const n = (i) => Number(f[i - 3]);
  const self = (n(14) + n(15)) / HZ;
  const children = (n(16) + n(17)) / HZ;
  return { self, children, total: self + children };
}

/**
 * procCpu() of a daemon together with its spawner (src/run/spawner.c: the child that forks its
 * runs and reaps them, so the runs' CPU lands in its cutime, not the daemon's): `self` is both
 * processes' own CPU, `children` the runs'. A build without a spawner: the daemon's alone.
 */
export function daemonCpu(pid) {
  const own = procCpu(pid);
  const spawner = spawnerOf(pid);
  if (spawner === null) return own;
  let c;
  try {
    c = procCpu(spawner);
  } catch {
    return own; // it exited meanwhile
  }
  return {
    self: own.self + c.self,
    children: own.children + c.children,
    total: own.total + c.total,
  };
}

/** Resident set size in MiB (VmRSS), and the peak (VmHWM). */
export function procMem(pid) {
  const s = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(s)?.[1] ?? NaN);
  return { rssMiB: kib("VmRSS") / 1024, hwmMiB: kib("VmHWM") / 1024 };
}

// ---- numbers --------------------------------------------------------------------------------

/** Nearest-rank percentile of an unsorted array (p in 0..100). */
export function pct(values, p) {
  if (values.length === 0) return NaN;
  const s = Float64Array.from(values).sort();
  const rank = Math.ceil((p / 100) * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))];
}

export const median = (values) => pct(values, 50);

export function summary(values) {
  return { n: values.length, p50: pct(values, 50), p99: pct(values, 99), max: pct(values, 100) };
}

// ---- configs and the daemon -----------------------------------------------------------------

const q = (s) => JSON.stringify(s);

/**
 * A jobs.yaml. `jobs` is a list of { name, schedule, command (argv list or shell string), extra
 * (a map of further job keys, written as flow YAML) }; `top` adds top-level keys.
 */
export function writeConfig(dir, { jobs, heartbeat = "10s", top = {} }) {
  const lines = [
    `state_dir: ${q(path.join(dir, "state"))}`,
    "timezone: UTC",
    `heartbeat: ${heartbeat}`,
  ];
  for (const [k, v] of Object.entries(top)) lines.push(`${k}: ${JSON.stringify(v)}`);
  lines.push("jobs:");
  for (const j of jobs) {
    lines.push(`  ${j.name}:`);
    lines.push(`    schedule: ${q(j.schedule)}`);
    lines.push(`    command: ${JSON.stringify(j.command)}`);
    for (const [k, v] of Object.entries(j.extra ?? {}))
      lines.push(`    ${k}: ${JSON.stringify(v)}`);
  }
  const file = path.join(dir, "jobs.yaml");
  fs.writeFileSync(file, `${lines.join("\n")}\n`);
  return file;
}

export const jobName = (i) => `j${String(i).padStart(5, "0")}`;

/** Start `cronvisor daemon` on a config and wait until it says it started. */
/**
 * The node options the shipped systemd unit gives the daemon (its `NODE_OPTIONS`), as the README
 * tells people to run it: read from the measured build's examples/cronvisor.service, so the rows
 * follow the unit.
 */
export function unitNodeOptions() {
  const unit = fs.readFileSync(path.join(ROOT, "examples", "cronvisor.service"), "utf8");
  const m = /^Environment=NODE_OPTIONS=(.*)$/m.exec(unit);
  return m ? m[1].trim().split(/\s+/) : [];
}

/**
 * Start the daemon on `configFile`, with the unit's node options (as flags, so its jobs do not
 * inherit them, as under the unit) unless `unitFlags` is false.
 */
export async function startDaemon(
  configFile,
  { nodeArgs = [], timeoutMs = 180_000, unitFlags = true, env = {} } = {},
) {
  const flags = unitFlags ? unitNodeOptions() : [];
  const child = spawn(
    process.execPath,
    [...flags, ...nodeArgs, bin(), "daemon", "-c", configFile],
    {
      env: cleanEnv(env),
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  child.err = "";
  child.stderr.on("data", (d) => (child.err += d));
  child.exited = new Promise((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  let gone = false;
  void child.exited.then(() => (gone = true));
  await waitFor(
    () => {
      if (gone) throw new Error(`daemon exited during start-up:\n${child.err}`);
      return /daemon \d+ started/.test(child.err);
    },
    "the daemon to start",
    timeoutMs,
  );
  return child;
}

/** SIGTERM (clean stop, bounded) or SIGKILL; resolves when it has exited. */
export async function stopDaemon(child, { kill = false, graceMs = 30_000 } = {}) {
  if (child.exitCode !== null || child.signalCode !== null) return child.exited;
  child.kill(kill ? "SIGKILL" : "SIGTERM");
  const t = setTimeout(() => child.kill("SIGKILL"), graceMs);
  const r = await child.exited;
  clearTimeout(t);
  return r;
}

/** Open a daemon's store read-only with better-sqlite3 (WAL readers never block the writer). */
export async function openDb(stateDir, { readonly = true } = {}) {
  const { default: Database } = await import("better-sqlite3");
  const db = new Database(path.join(stateDir, "cronvisor.db"), { readonly, fileMustExist: true });
  db.pragma("busy_timeout = 10000");
  return db;
}

/** Wall time of a process run to completion, in ms. */
export function timeRun(cmd, args, opts = {}) {
  const t0 = performance.now();
  const r = spawnSync(cmd, args, {
    env: cleanEnv(opts.env),
    input: opts.input,
    stdio: opts.stdio ?? "pipe",
    maxBuffer: 1 << 30,
  });
  const ms = performance.now() - t0;
  if (r.status !== 0 && !opts.allowFail) {
    throw new Error(`${cmd} ${args.join(" ")} exited ${r.status}: ${r.stderr?.toString() ?? ""}`);
  }
  return { ms, stdout: r.stdout?.toString() ?? "", status: r.status };
}

// ---- the child that records when it started -----------------------------------------------

/**
 * A tiny C program that appends "JOB SLOT SECONDS.NANOS" (its own exec time) to argv[1]; the
 * slot-to-spawn lateness is that time minus CRONVISOR_SLOT. Compiled once per run; if there is
 * no C compiler, a shell one-liner stands in (slower to start, for both contenders alike).
 */
export function stampCommand(dir) {
  const exe = path.join(dir, "stamp");
  const cc = ["cc", "gcc", "clang"].find((c) => spawnSync(c, ["--version"]).status === 0);
  if (cc && spawnSync(cc, ["-O2", "-o", exe, path.join(BENCH, "stamp.c")]).status === 0) {
    return { argv: (out) => [exe, out], kind: "C stamp program" };
  }
  return {
    argv: (out) => [
      "/bin/sh",
      "-c",
      'echo "$CRONVISOR_JOB $CRONVISOR_SLOT $(date +%s.%N)" >> "$0"',
      out,
    ],
    kind: "sh + date (no C compiler found)",
  };
}

/**
 * Parse a stamp file into lateness values (ms) of child start after its slot, and (C stamps
 * only) each child's wait for a CPU since its fork (ms), index for index.
 */
export function readStamps(file, { from = -Infinity, to = Infinity } = {}) {
  const late = [];
  const wait = [];
  const seen = new Set();
  let dup = 0;
  if (!fs.existsSync(file)) return { late, dup };
  for (const line of fs.readFileSync(file, "utf8").split("\n")) {
    const [job, slotIso, t, waitNs] = line.split(" ");
    if (!t) continue;
    const slot = Date.parse(slotIso);
    if (!(slot >= from && slot < to)) continue;
    const k = `${job} ${slot}`;
    if (seen.has(k)) dup++;
    seen.add(k);
    late.push(Number(t) * 1000 - slot);
    if (waitNs !== undefined && Number(waitNs) >= 0) wait.push(Number(waitNs) / 1e6);
  }
  return { late, wait: wait.length === late.length ? wait : null, dup, distinct: seen.size };
}

// ---- the machine ----------------------------------------------------------------------------

/** One WAL + synchronous=FULL commit of a one-row insert, in ms (wall): the disk's fsync floor. */
export async function fsyncCommitMs(dir, n = 200) {
  const { default: Database } = await import("better-sqlite3");
  const db = new Database(path.join(dir, "fsync.db"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)");
  const ins = db.prepare("INSERT INTO t (v) VALUES (?)");
  for (let i = 0; i < 20; i++) ins.run("warm");
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) ins.run(`v${i}`);
  const wall = (performance.now() - t0) / n;
  const c = process.cpuUsage(c0);
  db.close();
  return { wallMs: wall, cpuMs: (c.user + c.system) / 1000 / n };
}

export function machine() {
  const cpus = os.cpus();
  let disk = "?";
  try {
    const out = execFileSync("df", ["-hT", TMP], { encoding: "utf8" }).trim().split("\n");
    const f = (out[1] ?? "").split(/\s+/);
    disk = `${f[0]} (${f[1]}, ${f[2]}, ${f[5]} used) for ${TMP}`;
  } catch {
    // no df: leave it unknown
  }
  return {
    cores: cpus.length,
    model: cpus[0]?.model ?? "?",
    memGiB: os.totalmem() / 2 ** 30,
    kernel: os.release(),
    node: process.version,
    disk,
  };
}

/** One row of the table: cronvisor's figure next to its baseline's, and their ratio. */
export function row(what, cvx, base, baseName, target, pass, note = "", unit = "") {
  const ratio = Number.isFinite(cvx) && Number.isFinite(base) && base > 0 ? cvx / base : NaN;
  return { what, cvx, base, baseName, unit, ratio, target, pass, note };
}
