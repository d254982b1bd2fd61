// A throwaway PostgreSQL cluster for the tests of this process: Debian's postgresql-15 binaries,
// initdb'd in a temp dir, run as an unprivileged user (initdb and postgres refuse root: as root,
// the system user `cronvisor-pg` is made once, idempotently), listening only on a Unix socket in
// that dir (no port to collide with another test process), stopped and removed at exit (also when
// a test fails or the process is told to stop). Each test gets a fresh database (`freshDatabase`).
//
// Durability is what the store promises, so the server keeps fsync=on and synchronous_commit=on
// (a commit is on disk when it returns, as SQLite's synchronous=FULL); only initdb runs with
// --no-sync, since a cluster that dies with its test process need not survive a power cut.
//
// Without the binaries the PostgreSQL cases are skipped with the reason (`needs(pgMissing())`,
// test/needs.js), except under CI, where .ci/run installs them: there the cases fail saying so.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import pg from "pg";

export const PG_BIN = process.env.CRONVISOR_PG_BIN ?? "/usr/lib/postgresql/15/bin";
const USER = "cronvisor-pg";
const SUPERUSER = "cronvisor";
const START_DEADLINE_MS = 30_000;

/** Why the PostgreSQL cases cannot run here, or null when they can. */
export function pgMissing() {
  for (const b of ["initdb", "postgres", "pg_ctl"]) {
    if (!fs.existsSync(path.join(PG_BIN, b)))
      return `PostgreSQL binaries not found (${path.join(PG_BIN, b)}): install Debian's postgresql (apt-get install postgresql)`;
  }
  return null;
}

/** The uid and gid to run the cluster as: ours, or (as root) the `cronvisor-pg` system user's. */
function clusterUser() {
  if (process.getuid() !== 0) return { uid: process.getuid(), gid: process.getgid() };
  const ids = () => {
    const u = spawnSync("id", ["-u", USER], { encoding: "utf8" });
    const g = spawnSync("id", ["-g", USER], { encoding: "utf8" });
    return u.status === 0 && g.status === 0
      ? { uid: Number(u.stdout.trim()), gid: Number(g.stdout.trim()) }
      : null;
  };
  const deadline = Date.now() + 10_000;
  for (;;) {
    const have = ids();
    if (have) return have;
    // Two test processes may race here: useradd then fails (exists, or /etc/passwd locked) and
    // the next round finds the user the other one made.
    const r = spawnSync(
      "useradd",
      [
        "--system",
        "--no-create-home",
        "--home-dir",
        "/nonexistent",
        "--shell",
        "/usr/sbin/nologin",
        USER,
      ],
      { encoding: "utf8" },
    );
    if (r.status === 0) continue;
    if (Date.now() > deadline) throw new Error(`useradd ${USER} failed: ${r.stderr || r.error}`);
  }
}

let cluster = null;

/** The cluster of this process, started on first use. */
export function pgCluster() {
  cluster ??= startCluster();
  return cluster;
}

function runAs(who, bin, args, opts = {}) {
  return spawnSync(path.join(PG_BIN, bin), args, {
    uid: who.uid,
    gid: who.gid,
    encoding: "utf8",
    env: { PATH: "/usr/bin:/bin", LANG: "C", LC_ALL: "C" },
    cwd: opts.cwd,
    timeout: 60_000,
  });
}

async function startCluster() {
  const missing = pgMissing();
  if (missing) throw new Error(missing);
  const who = clusterUser();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cvx-pg-"));
  fs.chownSync(dir, who.uid, who.gid);
  fs.chmodSync(dir, 0o700);
  const data = path.join(dir, "data");
  const init = runAs(
    who,
    "initdb",
    ["-D", data, "-U", SUPERUSER, "--auth=trust", "--no-sync", "--no-locale", "-E", "UTF8"],
    { cwd: dir },
  );
  if (init.status !== 0) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed (${init.status}): ${init.stderr || init.error}`);
  }
  const url = (db) => `postgresql://${SUPERUSER}@localhost/${db}?host=${encodeURIComponent(dir)}`;
  const c = { dir, url, who, dataDir: data, server: null };
  process.on("exit", () => {
    stopServer(c, "immediate");
    fs.rmSync(dir, { recursive: true, force: true });
  });
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"])
    process.once(sig, () => process.exit(128 + os.constants.signals[sig]));
  await startServer(c);
  return c;
}

/** Start the cluster's server and wait until it takes connections (polled, with a deadline). */
async function startServer(c) {
  const log = fs.openSync(path.join(c.dir, "postgres.log"), "a");
  const child = spawn(
    path.join(PG_BIN, "postgres"),
    [
      "-D",
      c.dataDir,
      "-k",
      c.dir,
      "-c",
      "listen_addresses=",
      "-c",
      "port=5432",
      "-c",
      "fsync=on",
      "-c",
      "synchronous_commit=on",
      "-c",
      "max_connections=80",
      "-c",
      "shared_buffers=16MB",
      "-c",
      "max_wal_size=64MB",
    ],
    {
      uid: c.who.uid,
      gid: c.who.gid,
      cwd: c.dir,
      stdio: ["ignore", log, log],
      env: { LANG: "C", LC_ALL: "C" },
    },
  );
  fs.closeSync(log);
  child.unref(); // the cluster must not keep the test process alive: `exit` stops it
  const server = { child, exited: null };
  child.on("exit", (code, signal) => (server.exited = { code, signal }));
  c.server = server;
  const deadline = Date.now() + START_DEADLINE_MS;
  for (;;) {
    if (server.exited !== null) {
      const tail = fs.readFileSync(path.join(c.dir, "postgres.log"), "utf8").slice(-2000);
      throw new Error(`postgres exited at start (${JSON.stringify(server.exited)}):\n${tail}`);
    }
    const client = new pg.Client({ connectionString: c.url("postgres") });
    try {
      await client.connect();
      await client.query("SELECT 1");
      await client.end();
      return;
    } catch (e) {
      await client.end().catch(() => {});
      if (Date.now() > deadline)
        throw new Error(
          `postgres did not accept connections in ${START_DEADLINE_MS} ms: ${e.message}`,
          { cause: e },
        );
      await new Promise((r) => setTimeout(r, 25));
    }
  }
}

/** Stop the server (pg_ctl -m MODE, waiting), SIGKILL if it is still there. */
function stopServer(c, mode = "fast") {
  const server = c.server;
  if (!server || server.exited !== null) return;
  runAs(c.who, "pg_ctl", ["stop", "-D", c.dataDir, "-m", mode, "-w"], { cwd: c.dir });
  if (server.exited === null) server.child.kill("SIGKILL");
}

/**
 * Take the cluster's server down (every connection dropped) until the returned function starts
 * it again: `immediate` is a crash (the start then recovers), `fast` a clean restart. The data
 * stays; databases are kept.
 */
export async function serverDown(mode = "immediate") {
  const c = await pgCluster();
  stopServer(c, mode);
  await waitForExit(c.server);
  return () => startServer(c);
}

async function waitForExit(server) {
  const deadline = Date.now() + 30_000;
  while (server.exited === null) {
    if (Date.now() > deadline) throw new Error("postgres did not stop");
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The path of the cluster's Unix socket (for serverProxy). */
async function serverSocket() {
  return path.join((await pgCluster()).dir, ".s.PGSQL.5432");
}

/**
 * A TCP proxy on loopback to the cluster's socket: `serve(client, pairs)` wires each client
 * connection (to its own connection to the server, pushed on `pairs` as [client, server]); when
 * the test ends every pair is destroyed and the proxy closed. Returns its port and the pairs.
 */
export async function serverProxy(t, serve) {
  const target = await serverSocket();
  const pairs = [];
  const server = net.createServer((c) => serve(c, target, pairs));
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => {
    for (const [c, u] of pairs) {
      c.destroy();
      u.destroy();
    }
    server.close();
  });
  return { port: server.address().port, pairs };
}

let seq = 0;

/** A new, empty database on this process's cluster; returns its URL. */
export async function freshDatabase() {
  const c = await pgCluster();
  const name = `t_${process.pid}_${++seq}`;
  const admin = new pg.Client({ connectionString: c.url("postgres") });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name} TEMPLATE template1`);
  } finally {
    await admin.end();
  }
  return c.url(name);
}

/** A raw client on a database (closed by the test's end when `t` is given). */
export async function rawClient(url, t) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  t?.after?.(() => c.end().catch(() => {}));
  return c;
}

/**
 * Poll until `n` backends of this database wait on a lock (a transaction blocked behind another's
 * row lock): how a race test knows both sides are in place before it lets them go.
 */
export async function waitForLockWaiters(raw, n, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await raw.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    if (r.rows[0].n >= n) return;
    if (Date.now() > deadline) throw new Error(`${n} lock waiters expected, ${r.rows[0].n} seen`);
    await new Promise((res) => setTimeout(res, 10));
  }
}
