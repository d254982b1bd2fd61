// The PostgreSQL store's door (issue 36): a root daemon refuses to start on a database that lets
// any local user connect as its role without a credential, found by trying it as an unprivileged
// uid; `allow_open_database: true` runs anyway and status warns. Against the real server of
// test/pg.js (trust authentication, as initdb --auth=trust makes it): its socket directory is
// 0700 (closed to others) until a test opens it; then peer authentication mapped to root closes it
// again, as docs/safety.md tells an operator to do.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { cli, spawnCli, startDaemon, stopDaemon, tmpdir, waitFor } from "./helpers.js";
import { nodeConfig } from "./nodes-helpers.js";
import { freshDatabase, pgCluster, pgMissing, rawClient } from "./pg.js";
import { needs } from "./needs.js";

const skip = pgMissing() || (process.getuid?.() === 0 ? false : "the door is tried as root");

/** `daemon -c cfg` until it exits or says it is running: { code, stderr } or the live daemon. */
async function daemonStart(t, cfg) {
  const d = startDaemon(t, cfg);
  await waitFor(
    () => {
      if (d.exitCode !== null) return true;
      const st = cli(["status", "--json", "-c", cfg]);
      return st.code === 0 && JSON.parse(st.stdout).daemon.state === "running";
    },
    "the daemon to start or exit",
    30_000,
  );
  return d;
}

const JOBS = `  tick:\n    schedule: "@reboot"\n    command: "true"\n`;

test(
  "root: trust on a socket others can reach is refused (exit 2); allow_open_database runs and status warns; peer mapped to root starts clean",
  needs(skip),
  async (t) => {
    const c = await pgCluster();
    const url = await freshDatabase();
    const dir = tmpdir(t);
    // Closed: the test cluster's socket directory is its user's, 0700.
    const closed = nodeConfig(dir, "n1", url, JOBS, "30s");
    const d1 = await daemonStart(t, closed);
    assert.equal(d1.exitCode, null, d1.err);
    await waitFor(() => /started/.test(d1.err), "the daemon's start line");
    assert.doesNotMatch(d1.err, /warning/);
    const ok = cli(["status", "--json", "-c", closed]);
    assert.equal(JSON.parse(ok.stdout).daemon.open_database, null);
    await stopDaemon(d1);

    // Open: the directory reachable by anyone, and trust in pg_hba.conf.
    fs.chmodSync(c.dir, 0o755);
    t.after(() => fs.chmodSync(c.dir, 0o700));
    const refused = spawnCli(["daemon", "-c", closed]);
    const { code } = await refused.exited;
    assert.equal(code, 2, refused.err);
    const sock = path.join(c.dir, ".s.PGSQL.5432");
    assert.match(
      refused.err,
      new RegExp(
        `^refusing to run as root: the database of postgresql://cronvisor@localhost/t_\\S+ lets any local user connect as cronvisor without a credential \\(tried as uid 65534 through ${sock}\\); use peer authentication mapped to root, or scram-sha-256 with a 0600 password_file`,
      ),
    );
    assert.equal(refused.err.trim().split("\n").length, 1, refused.err);

    const allowed = nodeConfig(dir, "n2", url, JOBS, "30s", "allow_open_database: true");
    const d2 = await daemonStart(t, allowed);
    assert.equal(d2.exitCode, null, d2.err);
    // Its stderr is read between polls: waited for, not read at once.
    await waitFor(
      () => /cronvisor: warning: the database of .* lets any local user connect/.test(d2.err),
      "the daemon's warning",
    );
    const st = cli(["status", "--json", "-c", allowed]);
    assert.match(JSON.parse(st.stdout).daemon.open_database, /lets any local user connect/);
    const check = cli(["status", "--check", "-c", allowed]);
    assert.equal(check.code, 1, check.stdout);
    assert.match(check.stdout, /^WARNING: .*open database: the database of/);
    await stopDaemon(d2);

    // Peer authentication mapped to root (and to the cluster's own user, for its tools).
    const hba = path.join(c.dataDir, "pg_hba.conf");
    const ident = path.join(c.dataDir, "pg_ident.conf");
    const saved = [fs.readFileSync(hba), fs.readFileSync(ident)];
    const admin = await rawClient(c.url("postgres"));
    t.after(async () => {
      fs.writeFileSync(hba, saved[0]);
      fs.writeFileSync(ident, saved[1]);
      await admin.query("SELECT pg_reload_conf()");
      await admin.end();
    });
    fs.writeFileSync(hba, "local all all peer map=cronvisor\n");
    fs.writeFileSync(ident, "cronvisor root cronvisor\ncronvisor cronvisor-pg cronvisor\n");
    await admin.query("SELECT pg_reload_conf()");
    const d3 = await daemonStart(t, closed);
    assert.equal(d3.exitCode, null, d3.err);
    await waitFor(() => /started/.test(d3.err), "the daemon's start line");
    assert.doesNotMatch(d3.err, /warning/);
    await stopDaemon(d3);
  },
);

test(
  "log_tails: false keeps no log tail in the database; logs of that node's run from another node says where the log is",
  needs(pgMissing()),
  async (t) => {
    const url = await freshDatabase();
    const raw = await rawClient(url, t);
    const dir = tmpdir(t);
    const jobs = `  talk:\n    schedule: "@reboot"\n    command: "echo a-secret-line"\n    hosts: [n2]\n`;
    const c1 = nodeConfig(dir, "n1", url, jobs, "30s");
    const c2 = nodeConfig(dir, "n2", url, jobs, "30s", "log_tails: false");
    const d1 = startDaemon(t, c1);
    const d2 = startDaemon(t, c2);
    await waitFor(
      async () =>
        (await raw.query("SELECT 1 FROM runs WHERE job = 'talk' AND status = 'ok'")).rowCount > 0,
      "the run on n2",
      30_000,
    );
    assert.deepEqual((await raw.query("SELECT run_id FROM run_logs")).rows, []);
    const r = cli(["logs", "talk", "-c", c1]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(
      r.stderr,
      /^cronvisor: run \d+ of talk ran on node n2; its log is there \(.*state-n2.*\), and the store has none of it \(that node keeps none with log_tails: false\)\n$/,
    );
    const own = cli(["logs", "talk", "-c", c2]);
    assert.equal(own.stdout, "a-secret-line\n");
    await stopDaemon(d2);
    await stopDaemon(d1);
  },
);
