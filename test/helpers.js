// Shared test helpers: real temp dirs, the built CLI as a real process, polling with a deadline,
// the daemon's lifecycle, reading its store, and cleaning up the process groups it leaves.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const BIN = path.join(ROOT, "bin", "cronvisor");

/** A fresh temp dir, removed when the test ends (pass the node:test context). */
export function tmpdir(t, prefix = "cvx-") {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t?.after?.(() => {
    // Never throws: a failed test's daemon (killed by a later hook) may still write here, and a
    // throw would skip the hooks after this one and leave that daemon hanging the test file.
    try {
      fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    } catch {
      // left behind in the temp dir
    }
  });
  return dir;
}

/** Write `jobs.yaml` (or `name`) into dir and return its path. */
export function writeConfig(dir, text, name = "jobs.yaml") {
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return file;
}

/**
 * Where the runs of this test process's daemons and `cronvisor run`s get their cgroups (as root,
 * on a cgroup2 mount): a subtree of its own, `MOUNT/cvx-test-PID`, removed when the process
 * exits, so that the tests leave nothing in the machine's cgroup tree. null without one.
 */
/** The cgroup2 mount (the first in /proc/self/mountinfo, as the daemon reads it), or null. */
export const CGROUP2_MOUNT = (() => {
  for (const line of fs.readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const [left, right] = line.split(" - ");
    if (right?.split(" ")[0] === "cgroup2") return left.split(" ")[4];
  }
  return null;
})();

const TEST_CGROUPS = (() => {
  if (process.getuid?.() !== 0 || CGROUP2_MOUNT === null) return null;
  const root = path.join(CGROUP2_MOUNT, `cvx-test-${process.pid}`);
  process.on("exit", () => removeCgroupTree(root));
  // A daemon a test starts in this very process (new Supervisor(...)) uses it too.
  process.env.CRONVISOR_CGROUP_ROOT ??= root;
  return root;
})();

/**
 * Kill what is left in a cgroup subtree this test process made (its jobs' processes only) and
 * remove it, bottom up. Synchronous, for an exit handler: a killed process leaves its cgroup
 * within milliseconds, and each rmdir is tried again for up to 3 s.
 */
export function removeCgroupTree(root) {
  if (!fs.existsSync(root)) return;
  const dirs = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true }))
      if (e.isDirectory()) walk(path.join(d, e.name));
    dirs.push(d);
  };
  walk(root);
  for (const d of dirs) {
    try {
      fs.writeFileSync(path.join(d, "cgroup.kill"), "1");
    } catch {
      // an older kernel, or gone
    }
  }
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (const d of dirs) {
    for (const deadline = Date.now() + 3000; ;) {
      try {
        fs.rmdirSync(d);
        break;
      } catch (e) {
        if (e.code === "ENOENT" || Date.now() > deadline) break;
        Atomics.wait(pause, 0, 0, 20); // a synchronous exit handler cannot poll any other way
      }
    }
  }
}

/** Base environment for CLI calls: no CRONVISOR_* leaking in from outside. */
export function cleanEnv(extra = {}) {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith("CRONVISOR_")) delete env[k];
  delete env.NODE_EXTRA_CA_CERTS; // triples Node start-up here and is irrelevant to tests
  // Runs' cgroups in this test process's own subtree (CRONVISOR_CGROUP_ROOT, src/run/cgroup.ts).
  if (TEST_CGROUPS !== null) env.CRONVISOR_CGROUP_ROOT = TEST_CGROUPS;
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

/** How long spawnCli's pipes may stay open after the exit before it stops reading (see there). */
const OUTPUT_GRACE_MS = 10_000;

/**
 * Start the CLI as a long-lived child (e.g. the daemon). Output is collected on .out/.err.
 * `opts.wrapper` is a command put in front of node (e.g. `["prlimit", "--nofile=64:64", "--"]`);
 * it must exec node, so that the child's pid stays the CLI's.
 */
export function spawnCli(args, opts = {}) {
  const [cmd, ...argv] = [...(opts.wrapper ?? []), process.execPath, BIN, ...args];
  const child = spawn(cmd, argv, {
    env: cleanEnv(opts.env),
    cwd: opts.cwd,
    stdio: ["ignore", "pipe", "pipe"],
    detached: opts.detached ?? false,
  });
  child.out = "";
  child.err = "";
  child.stdout.on("data", (d) => (child.out += d));
  child.stderr.on("data", (d) => (child.err += d));
  // On 'close', not 'exit': Node can emit 'exit' before the last of the child's stdout/stderr
  // has been read, and callers read .out/.err once this resolves. 'close' waits for the pipes to
  // close too, which a process that inherited them would delay past the CLI's exit: none does
  // (jobs and alert commands get pipes of their own, detached runs /dev/null), but should one,
  // a test must not hang. So if the pipes are still open OUTPUT_GRACE_MS after 'exit', stop
  // reading (Node then emits 'close') and say so on .err: the output is incomplete.
  child.exited = new Promise((resolve) => {
    let grace = null;
    child.on("exit", () => {
      grace = setTimeout(() => {
        child.err += `\n[helpers.spawnCli: stdout/stderr still open ${OUTPUT_GRACE_MS} ms after the exit (inherited by another process?); stopped reading, output may be incomplete]\n`;
        child.stdout.destroy();
        child.stderr.destroy();
      }, OUTPUT_GRACE_MS);
    });
    child.on("close", (code, signal) => {
      clearTimeout(grace);
      resolve({ code, signal });
    });
  });
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

/** Is `p` a symbolic link (never followed; false when nothing is there)? */
export function isLink(p) {
  try {
    return fs.lstatSync(p).isSymbolicLink();
  } catch {
    return false;
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

/**
 * SIGKILL a daemon and its spawner (src/run/spawner.c, its child that forks and waits for its
 * runs) at once: a host reclaimed, a cgroup killed. The daemon alone SIGKILLed leaves the spawner
 * to wait for the runs and write their exit files; with both gone, nothing records how a run
 * that dies meanwhile ended, and the next daemon records it interrupted.
 */
export function killDaemonAndSpawner(d) {
  const spawner = spawnerOf(d.pid); // before the daemon dies: it is found as its child
  d.kill("SIGKILL");
  try {
    if (spawner !== null) process.kill(spawner, "SIGKILL");
  } catch {
    // gone meanwhile
  }
}

/** The live children of a process (every thread's list); none once it is gone. */
export function childrenOf(pid) {
  const out = [];
  try {
    for (const tid of fs.readdirSync(`/proc/${pid}/task`))
      for (const c of fs.readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").split(" "))
        if (c) out.push(Number(c));
  } catch {
    // gone
  }
  return out;
}

/**
 * The daemon's spawner (src/run/spawner.c): its child whose program is a `cronvisor-spawner`
 * (of whichever build it runs: the benchmarks measure others); null when it has none.
 */
export function spawnerOf(pid) {
  for (const c of childrenOf(pid)) {
    try {
      const program = fs.readFileSync(`/proc/${c}/cmdline`, "utf8").split("\0")[0];
      if (path.basename(program) === "cronvisor-spawner") return c;
    } catch {
      // gone meanwhile
    }
  }
  return null;
}

/** Job process groups outlive a SIGKILLed daemon: kill them (guarded, see killGroup) when the test ends. */
export function killGroupsAfter(t, pgids) {
  t.after(() => {
    for (const g of pgids) killGroup(g);
  });
}

/**
 * Rows straight from a state dir's store, read-only, while a daemon may be writing it: the busy
 * timeout rides out its write locks. No store yet is no rows, so it can be polled from the start.
 * Tests read the store's tables through readStore (below); this is its engine, and what is left
 * for a pragma or a test whose subject is the SQL itself.
 */
export function query(stateDir, sql, ...args) {
  const file = path.join(stateDir, "cronvisor.db");
  if (!fs.existsSync(file)) return [];
  const db = new Database(file, { readonly: true });
  db.pragma("busy_timeout = 2000");
  try {
    return db.prepare(sql).all(...args);
  } finally {
    db.close();
  }
}

/** The columns each table's named read may be asked by, for `where` (see readStore). */
const WHERE_KEYS = {
  runs: ["id", "job", "status", "trigger", "slot", "attempt", "node", "reason", "started_at"],
  events: ["job", "kind", "at"],
  markers: ["job", "key", "run_id"],
  slots: ["job", "slot"],
  chains: ["job", "slot"],
};

/** The comparisons a `where` value may be made of: `{ gt: 5, le: 9 }`. */
const RANGE = { gt: ">", ge: ">=", lt: "<", le: "<=" };

/**
 * `where` as SQL: each key equal to its value, an array its values (IN), null IS NULL, an object
 * of RANGE's comparisons all of them. The keys are checked against WHERE_KEYS so a misspelled one
 * throws instead of matching everything.
 */
function whereSql(table, where) {
  const parts = [];
  const args = [];
  for (const [k, v] of Object.entries(where)) {
    if (!WHERE_KEYS[table].includes(k)) throw new Error(`readStore: ${table} by ${k}?`);
    if (v === null) parts.push(`${k} IS NULL`);
    else if (typeof v === "object" && !Array.isArray(v)) {
      for (const [op, x] of Object.entries(v)) {
        if (!RANGE[op]) throw new Error(`readStore: ${table}.${k} ${op}?`);
        parts.push(`${k} ${RANGE[op]} ?`);
        args.push(x);
      }
    } else if (Array.isArray(v)) {
      // An empty list matches nothing (PostgreSQL has no `IN ()`).
      parts.push(v.length ? `${k} IN (${v.map(() => "?").join(", ")})` : "1 = 0");
      args.push(...v);
    } else {
      parts.push(`${k} = ?`);
      args.push(v);
    }
  }
  return { sql: parts.length ? ` WHERE ${parts.join(" AND ")}` : "", args };
}

/** f(x), or x.then(f) for a promise: one set of named reads over a sync or an async engine. */
const then = (x, f) => (x instanceof Promise ? x.then(f) : f(x));

/**
 * The named reads over `select(sql, args)` (`?` placeholders): sync when it is (SQLite),
 * promises when it gives promises (PostgreSQL). See readStore.
 */
function storeReads(select) {
  const table =
    (name, order) =>
    (where = {}) => {
      const w = whereSql(name, where);
      return select(`SELECT * FROM ${name}${w.sql} ORDER BY ${order}`, w.args);
    };
  const runs = table("runs", "id");
  const markers = table("markers", "job, key");
  return {
    runs,
    ended: (where) => then(runs(where), (rs) => rs.filter((r) => r.status !== "running")),
    spawned: (where) =>
      then(runs(where), (rs) => rs.filter((r) => r.status === "running" && r.pid !== null)),
    ran: (where) =>
      then(runs(where), (rs) => rs.filter((r) => r.status !== "skipped" && r.status !== "missed")),
    doubled: (where) =>
      then(runs(where), (rs) => {
        const n = new Map();
        for (const r of rs) {
          if (r.slot === null) continue;
          const k = JSON.stringify([r.job, r.slot]);
          n.set(k, (n.get(k) ?? 0) + 1);
        }
        return [...n]
          .filter(([, c]) => c > 1)
          .map(([k, c]) => ({ job: JSON.parse(k)[0], slot: JSON.parse(k)[1], n: c }))
          .sort((a, b) => (a.job < b.job ? -1 : a.job > b.job ? 1 : a.slot - b.slot));
      }),
    job: (name) => then(select("SELECT * FROM jobs WHERE name = ?", [name]), (rs) => rs[0] ?? null),
    events: table("events", "id"),
    markers,
    markerKeys: (job) =>
      then(markers(job === undefined ? {} : { job }), (rs) => rs.map((r) => r.key).sort()),
    claims: () => select("SELECT * FROM claims ORDER BY job, key", []),
    attempts: () => select("SELECT * FROM attempts ORDER BY job, key", []),
    slots: table("slots", "job, slot"),
    chains: table("chains", "job, slot"),
    daemon: () => then(select("SELECT * FROM daemon ORDER BY node", []), (rs) => rs[0] ?? null),
    daemons: () => select("SELECT * FROM daemon ORDER BY node", []),
  };
}

/**
 * A state dir's store as the tests read it: named reads, so that a test says what it looks for
 * and the SQL is written once, here (the schema is schema/sqlite.sql). Read-only, while a daemon
 * may be writing (`query`); no store yet reads as empty, so each can be polled from the start.
 * A `where` is { column: value } (an array: any of them; null: IS NULL; { gt, ge, lt, le }: in
 * that range), every key must match; what it cannot say (NOT, OR) the test filters from the rows.
 *   runs({ job: "a", status: "ok" })   the runs rows matching every key, oldest first
 *   ended(where)                       the same, but only runs no longer `running`
 *   spawned(where)                     the same, but only `running` ones with their child's pid
 *   ran(where)                         the same, but neither `skipped` nor `missed`
 *   doubled(where)                     [{ job, slot, n }] for each job's slot with n > 1 such runs
 *   job(name)                          the jobs row, or null
 *   events({ job, kind, at })          the events rows, oldest first
 *   markers({ job, key, run_id })      the markers rows, by job and key
 *   markerKeys(job)                    a job's done keys (every job's without one), sorted
 *   claims(), attempts()               every claims / attempts row, by job and key
 *   slots({ job, slot })               the slots rows (each claimed schedule slot), by job and slot
 *   chains({ job, slot })              the pending chain rows, by job and slot
 *   daemon(), daemons()                the daemon row (or null); every node's, by node
 */
export function readStore(stateDir) {
  return storeReads((sql, args) => query(stateDir, sql, ...args));
}

/** The int8 type of PostgreSQL: a raw client gives it as a string, SQLite as a number. */
const PG_INT8 = 20;

/**
 * readStore's named reads on a PostgreSQL store through a raw client (test/pg.js's rawClient),
 * each a promise; BIGINT columns come back as numbers, as SQLite gives them.
 */
export function readPgStore(raw) {
  return storeReads(async (sql, args) => {
    let i = 0;
    const r = await raw.query(
      sql.replace(/\?/g, () => `$${++i}`),
      args,
    );
    const big = r.fields.filter((f) => f.dataTypeID === PG_INT8).map((f) => f.name);
    return r.rows.map((row) => {
      for (const k of big) if (row[k] !== null) row[k] = Number(row[k]);
      return row;
    });
  });
}

/**
 * A tick's reservation of `job`'s scheduled `slot` (an item of Store.reserveRuns), as the daemon
 * writes one: the slot claimed with the job's lock; `over` replaces any field.
 */
export function scheduledReserve(job, slot, over = {}) {
  return {
    reserve: {
      job,
      slot,
      claimSlot: true,
      trigger: "schedule",
      attempt: 1,
      now: 1000,
      owner: { pid: process.pid, start: null },
      lock: true,
      holderAlive: () => true,
      logPath: (id) => `/nonexistent/${job}/${id}.log`,
      ...over,
    },
  };
}

/**
 * A manual run of `job` reserved in `store` (a SqliteStore of this build), owned by this process
 * so its fence is live: the run a marker command inside a job writes against.
 */
export async function reserveManualRun(store, stateDir, job) {
  const res = await store.reserveRun({
    job,
    slot: null,
    claimSlot: false,
    trigger: "manual",
    attempt: 1,
    now: Date.now(),
    owner: { pid: process.pid, start: null },
    lock: false,
    holderAlive: () => true,
    logPath: (id) => path.join(stateDir, `${id}.log`),
  });
  assert.equal(res.kind, "started");
  return res.run;
}

/**
 * The schedule slots of `job` (`* * * * * *`, one second apart) recorded in the store, in order,
 * and every step between two of them that is not one second ("from -> to"): a slot left out or
 * recorded twice. Tests assert on both with their own messages.
 */
export function scheduleSlots(stateDir, job) {
  const slots = query(
    stateDir,
    "SELECT slot FROM runs WHERE job = ? AND trigger = 'schedule' ORDER BY slot",
    job,
  ).map((r) => r.slot);
  const gaps = [];
  for (let i = 1; i < slots.length; i++) {
    if (slots[i] - slots[i - 1] !== 1000) {
      gaps.push(`${new Date(slots[i - 1]).toISOString()} -> ${new Date(slots[i]).toISOString()}`);
    }
  }
  return { slots, gaps };
}

/**
 * Writes by hand beside the store's API, for a state a test sets up on purpose (a run another
 * node recorded, a column moved back): their SQL lives here with readStore's. `db` is a
 * better-sqlite3 connection to a store's file (a SqliteStore's `.db`, or one opened on it).
 *   plantRun(db, { job, status, ... })   a runs row of those columns; its id
 *   setRun(db, id, { status, ... })      columns of a runs row
 *   setJob(db, name, { scanned_to, ... }) columns of a jobs row
 */
export function plantRun(db, row) {
  const cols = Object.keys(row);
  const sql = `INSERT INTO runs (${cols.join(", ")}) VALUES (${cols.map((c) => `@${c}`).join(", ")})`;
  return Number(db.prepare(sql).run(row).lastInsertRowid);
}

/** `UPDATE table SET cols WHERE key = value` (plantRun's doc comment). */
function setRow(db, table, key, value, cols) {
  const set = Object.keys(cols).map((c) => `${c} = @${c}`);
  db.prepare(`UPDATE ${table} SET ${set.join(", ")} WHERE ${key} = @__key`).run({
    ...cols,
    __key: value,
  });
}

export const setRun = (db, id, cols) => setRow(db, "runs", "id", id, cols);
export const setJob = (db, name, cols) => setRow(db, "jobs", "name", name, cols);

/** readStore on the default state dir of a config in `dir` (`dir/.cronvisor`). */
export function readStoreIn(dir) {
  return readStore(path.join(dir, ".cronvisor"));
}

/** `query` on the default state dir of a config in `dir` (`dir/.cronvisor`). */
export function rows(dir, sql, ...args) {
  return query(path.join(dir, ".cronvisor"), sql, ...args);
}

/**
 * SIGKILL a daemon child that is still running and wait for its exit: cleanup whatever state a
 * test left it in. SIGCONT first: a SIGSTOPped daemon dies of SIGKILL too, but never leave one stopped.
 */
export async function killDaemon(d) {
  if (d.exitCode === null && d.signalCode === null) {
    d.kill("SIGCONT");
    d.kill("SIGKILL");
    await d.exited;
  }
}

/**
 * `cronvisor daemon -c cfgFile` as a child, killed when the test ends if it still runs, so a
 * failed test leaves no daemon behind. `opts` goes to spawnCli (e.g. `wrapper`).
 */
export function startDaemon(t, cfgFile, env = {}, opts = {}) {
  const d = spawnCli(["daemon", "-c", cfgFile], { ...opts, env });
  t.after(() => killDaemon(d));
  return d;
}

/** Stop a daemon the way an operator does (SIGTERM) and assert that it shut down cleanly (exit 0). */
export async function stopDaemon(d) {
  d.kill("SIGTERM");
  const r = await d.exited;
  assert.equal(r.code, 0, `daemon exit: ${JSON.stringify(r)}\n${d.err}`);
}

/** `cronvisor status --json` for a config, asserting it exits 0. */
export function statusJson(cfg) {
  const r = cli(["status", "-c", cfg, "--json"]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

/** Write zeros to `file` until the file system says ENOSPC (down to the last byte). */
export function fillDisk(file) {
  const fd = fs.openSync(file, "w");
  try {
    for (const size of [1 << 16, 4096, 1]) {
      const buf = Buffer.alloc(size);
      try {
        for (;;) fs.writeSync(fd, buf);
      } catch (e) {
        if (e.code !== "ENOSPC") throw e;
      }
    }
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * A small tmpfs at `root/mnt`, for a state dir that fills up (mounting needs root). Returns
 * { root, mnt }, or { skip } saying why there is none here. When the test ends, `beforeUnmount`
 * runs first (stop whatever holds files on it), then the tmpfs is unmounted and `root` removed.
 * Callers pass `skip` to needs/needsNow (test/needs.js): a skip on a developer's machine, a
 * failure under CI, which runs as root with tmpfs and useradd.
 */
export function mountTmpfs(t, beforeUnmount = () => {}, size = "16m") {
  if (process.getuid?.() !== 0) return { skip: "mounting a tmpfs needs root" };
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "cvx-disk-"));
  const mnt = path.join(root, "mnt");
  fs.mkdirSync(mnt);
  const m = spawnSync("mount", ["-t", "tmpfs", "-o", `size=${size},mode=0700`, "tmpfs", mnt], {
    encoding: "utf8",
  });
  if (m.status !== 0) {
    fs.rmSync(root, { recursive: true, force: true });
    return { skip: `cannot mount a tmpfs here: ${m.stderr.trim() || m.error}` };
  }
  t.after(async () => {
    await beforeUnmount();
    if (spawnSync("umount", [mnt]).status !== 0) spawnSync("umount", ["-l", mnt]);
    fs.rmSync(root, { recursive: true, force: true });
  });
  return { root, mnt };
}

/** A port nobody listens on right now (the daemon binds it a moment later). */
export async function freePort() {
  const s = net.createServer();
  await new Promise((resolve) => s.listen(0, "127.0.0.1", resolve));
  const { port } = s.address();
  await new Promise((resolve) => s.close(resolve));
  return port;
}

/** One request with whatever Host header and method we like. */
export function request(
  port,
  { path: p = "/", method = "GET", host = `127.0.0.1:${port}`, timeoutMs = 10_000 } = {},
) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: "127.0.0.1", port, path: p, method, headers: { host }, agent: false },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body }));
      },
    );
    req.on("error", reject);
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)));
    req.end();
  });
}

/**
 * The throwaway unprivileged user of the tests that run jobs as another user (`user:`), created
 * once and idempotently (every such test shares it; a test that needs two names a second).
 * Returns { name, uid, gid }, or { skip } saying why there is none: creating a user and running
 * as it need root.
 * Callers pass `skip` to needs/needsNow (test/needs.js): a skip on a developer's machine, a
 * failure under CI, which runs as root with tmpfs and useradd.
 */
export function testUser(name = "cvx-test") {
  if (process.getuid?.() !== 0) return { skip: "running jobs as another user needs root" };
  const id = (flag) => spawnSync("id", [flag, name], { encoding: "utf8" });
  if (id("-u").status !== 0) {
    const add = spawnSync(
      "useradd",
      ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
      { encoding: "utf8" },
    );
    // 9: it exists (a test in another process created it a moment ago).
    if (add.status !== 0 && add.status !== 9)
      return { skip: `cannot create the test user ${name}: ${add.stderr.trim() || add.error}` };
  }
  return { name, uid: Number(id("-u").stdout), gid: Number(id("-g").stdout) };
}

/** Run argv as `user` (from testUser), synchronously: { code, stdout, stderr }. */
export function runAs(user, argv, opts = {}) {
  const r = spawnSync(
    "setpriv",
    [`--reuid=${user.uid}`, `--regid=${user.gid}`, "--clear-groups", "--", ...argv],
    { encoding: "utf8", env: opts.env ?? cleanEnv(), cwd: opts.cwd ?? "/" },
  );
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const MODULES = () => fs.realpathSync(path.join(ROOT, "node_modules"));

/**
 * A copy of the build in `dir`: bin/, dist/ and package.json, their mtimes kept (bin/cronvisor
 * takes the code cache only if it is not older than its chunk), and node_modules linked (or
 * copied). Returns the copy's bin/cronvisor.
 */
export function copyBuild(dir, { linkModules = true } = {}) {
  for (const part of ["bin", "dist", "package.json"])
    fs.cpSync(path.join(ROOT, part), path.join(dir, part), {
      recursive: true,
      preserveTimestamps: true,
    });
  if (linkModules) fs.symlinkSync(MODULES(), path.join(dir, "node_modules"));
  else fs.cpSync(MODULES(), path.join(dir, "node_modules"), { recursive: true });
  return path.join(dir, "bin", "cronvisor");
}

let userCliDir = null;
/**
 * A copy of the built CLI that any user can run: bin/, dist/ and package.json in a 0755 temp
 * dir, with node_modules linked (or copied, when `user` cannot read the clone's). The clone may
 * sit where a test user cannot read. One per test process, removed when it exits. Returns the
 * copy's bin/ (for a job's PATH), or { skip } when `user` cannot run node at all.
 * Callers pass `skip` to needs/needsNow (test/needs.js): a skip on a developer's machine, a
 * failure under CI, which runs as root with tmpfs and useradd.
 */
export function userCli(user) {
  const node = runAs(user, [process.execPath, "-e", "0"]);
  if (node.code !== 0)
    return { skip: `${user.name} cannot run ${process.execPath}: ${node.stderr.trim()}` };
  if (userCliDir === null) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cvx-cli-"));
    process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
    fs.chmodSync(dir, 0o755);
    const probe = path.join(MODULES(), "better-sqlite3", "package.json");
    copyBuild(dir, { linkModules: runAs(user, ["test", "-r", probe]).code === 0 });
    spawnSync("chmod", ["-R", "a+rX", dir]);
    userCliDir = dir;
  }
  return { bin: path.join(userCliDir, "bin") };
}
