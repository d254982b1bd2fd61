// Nodes on a shared PostgreSQL store when the store goes away: the server restarted for less and
// for more than the lease, one node's connection cut by a TCP proxy that stops forwarding, and a
// node whose clock is off (libfaketime). Real daemons, the throwaway cluster of test/pg.js.
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import test from "node:test";
import { cli, readPgStore, startDaemon, stopDaemon, tmpdir, waitFor } from "./helpers.js";
import { alive, assertEachSlotOnce, nodeConfig, started } from "./nodes-helpers.js";
import { freshDatabase, pgMissing, rawClient, serverDown, serverProxy } from "./pg.js";
import { needs } from "./needs.js";

// Skipped, with the reason, only where PostgreSQL's binaries are missing outside CI; under CI
// (.ci/run installs them) a missing server fails these tests instead (test/pg.js).
const skip = pgMissing();
const FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

const JOBS = `  tick:
    schedule: "* * * * * *"
    command: "true"
  long:
    schedule: "*/2 * * * * *"
    command: "sleep 4"
`;

test(
  "PostgreSQL down for less than the lease: the daemons reconnect, nothing is fenced, the running run goes on",
  needs(skip),
  async (t) => {
    const url = await freshDatabase();
    const raw = await rawClient(url, t);
    const dir = tmpdir(t);
    // A clean restart (no crash recovery to wait for) and a lease long enough for a busy machine.
    const ds = ["n1", "n2"].map((n) => startDaemon(t, nodeConfig(dir, n, url, JOBS, "12s")));
    await started(ds);
    const long = await waitFor(
      async () => (await readPgStore(raw).spawned({ job: "long" }))[0],
      "the long job running",
      30_000,
    );
    await raw.end();
    const up = await serverDown("fast");
    const downAt = Date.now();
    await waitFor(() => Date.now() - downAt >= 1500, "1.5 s of downtime", 5000, 50);
    await up();
    const raw2 = await rawClient(url, t);
    const [done] = await waitFor(
      async () =>
        readPgStore(raw2)
          .ended({ id: long.id })
          .then((r) => r[0] && r),
      "the long run's end",
      30_000,
    ).catch((e) => {
      throw new Error(`${e.message}\n${ds.map((d) => d.err).join("\n---\n")}`);
    });
    assert.equal(done.status, "ok", `${done.reason}\n${ds.map((d) => d.err).join("\n---\n")}`);
    // Both nodes run jobs again (each its share: the jobs are dealt round the live nodes).
    const since = Date.now();
    await waitFor(
      async () =>
        new Set(
          (await readPgStore(raw2).ran()).filter((r) => r.started_at > since).map((r) => r.node),
        ).size === 2,
      "both nodes running jobs after the restart",
      30_000,
    );
    assert.deepEqual(await readPgStore(raw2).runs({ status: "fenced" }), []);
    for (const d of ds) assert.doesNotMatch(d.err, /fenced: /);
    await assertEachSlotOnce(raw2);
    for (const d of ds) await stopDaemon(d);
  },
);

test(
  "PostgreSQL down for longer than the lease: every node fences itself and stops its run; afterwards no slot ran twice and the slots of the outage have their dispositions",
  needs(skip),
  async (t) => {
    const url = await freshDatabase();
    const raw = await rawClient(url, t);
    const dir = tmpdir(t);
    const jobs = `  tick:
    schedule: "* * * * * *"
    command: "true"
  long:
    schedule: "*/2 * * * * *"
    command: "sleep 30"
`;
    const ds = ["n1", "n2"].map((n) => startDaemon(t, nodeConfig(dir, n, url, jobs)));
    await started(ds);
    const long = await waitFor(
      async () => (await readPgStore(raw).spawned({ job: "long" }))[0],
      "the long job running",
      30_000,
    );
    t.after(() => {
      try {
        process.kill(-long.pgid, "SIGKILL");
      } catch {
        // gone already
      }
    });
    await raw.end();
    const up = await serverDown();
    const downAt = Date.now();
    // Every node fences itself within the lease: the long run's processes are killed.
    await waitFor(() => !alive(long.pid), "the long run stopped by its node's fence", 10_000);
    assert.ok(Date.now() - downAt < 3000 + 500, `stopped after ${Date.now() - downAt} ms`);
    await waitFor(
      () => ds.every((d) => /fenced: node n\d could not renew its lease/.test(d.err)),
      "both nodes fenced",
    );
    await waitFor(() => Date.now() - downAt >= 5000, "5 s of downtime", 10_000, 50);
    await up();
    const raw2 = await rawClient(url, t);
    const upAt = Date.now();
    await waitFor(
      async () =>
        (await readPgStore(raw2).runs({ job: "tick", status: "ok" })).some(
          (r) => r.started_at > upAt,
        ),
      "ticks again after the outage",
      30_000,
    );
    const [old] = await waitFor(
      async () =>
        readPgStore(raw2)
          .ended({ id: long.id })
          .then((r) => r[0] && r),
      "the long run's end recorded",
      30_000,
    );
    assert.equal(old.status, "fenced", old.reason);
    // Recorded by its own node once back, or by the other node taking the job over first.
    assert.match(
      old.reason,
      /^fenced: node n\d could not renew its lease|^node n\d's lease ran out; node n\d took the job over$/,
    );
    for (const d of ds) await stopDaemon(d);
    await assertEachSlotOnce(raw2);
    // Each tick slot of the outage has its one row (run, or a disposition recorded once back).
    const from = Math.ceil((downAt + 1000) / 1000) * 1000;
    const to = upAt - 1000;
    const rows = await readPgStore(raw2).runs({ job: "tick", slot: { ge: from, le: to } });
    const slots = new Set(rows.map((r) => r.slot));
    for (let s = from; s <= to; s += 1000)
      assert.ok(slots.has(s), `tick slot ${new Date(s).toISOString()} has no row`);
  },
);

/** A TCP proxy to the cluster's socket that can stop forwarding (a cut network: no FIN, no RST). */
async function blackholeProxy(t) {
  let cut = false;
  const { port, pairs } = await serverProxy(t, (c, target, pairs) => {
    c.on("error", () => {});
    if (cut) return c.pause();
    const u = net.connect(target);
    u.on("error", () => {});
    c.pipe(u);
    u.pipe(c);
    pairs.push([c, u]);
  });
  return {
    port,
    cut() {
      cut = true;
      for (const [c, u] of pairs) {
        c.unpipe(u);
        u.unpipe(c);
        c.pause();
        u.pause();
      }
    },
  };
}

test(
  "one node's connection cut (a proxy that stops forwarding): it fences itself and its run is dead before another node takes the job over after the lease",
  needs(skip),
  async (t) => {
    const url = await freshDatabase();
    const raw = await rawClient(url, t);
    const dir = tmpdir(t);
    const proxy = await blackholeProxy(t);
    const db = new URL(url).pathname.slice(1);
    const viaProxy = `postgresql://cronvisor@127.0.0.1:${proxy.port}/${db}`;
    const jobs = `  long:
    schedule: "*/2 * * * * *"
    command: "sleep 60"
`;
    // The proxy lets any local user reach the cluster's trust socket: the door is open, on
    // purpose here (docs/safety.md), and the daemon runs on it only when told to.
    const open = "allow_open_database: true";
    const d1 = startDaemon(t, nodeConfig(dir, "n1", viaProxy, jobs, "6s", open));
    const first = await waitFor(
      async () => (await readPgStore(raw).spawned({ job: "long" }))[0],
      "the long job running on n1",
      30_000,
    );
    t.after(() => {
      try {
        process.kill(-first.pgid, "SIGKILL");
      } catch {
        // gone already
      }
    });
    assert.equal(first.node, "n1");
    const d2 = startDaemon(t, nodeConfig(dir, "n2", url, jobs, "6s"));
    await waitFor(
      async () =>
        (await readPgStore(raw).daemons()).some((r) => r.node === "n2" && r.renewed_at !== null),
      "n2 up",
    );
    proxy.cut();
    let deadAt = null;
    const next = await waitFor(
      async () => {
        if (deadAt === null && !alive(first.pid)) deadAt = Date.now();
        return (
          await readPgStore(raw).runs({ job: "long", status: "running", id: { gt: first.id } })
        )[0];
      },
      "the job taken over by n2",
      30_000,
      10,
    );
    assert.equal(next.node, "n2");
    assert.ok(deadAt !== null, "n1's run was still alive when n2 took the job over");
    assert.ok(
      deadAt <= next.started_at,
      `n1's run died at ${deadAt}, n2's started at ${next.started_at}`,
    );
    assert.match(d1.err, /fenced: node n1 could not renew its lease/);
    const [old] = await readPgStore(raw).runs({ id: first.id });
    assert.equal(old.status, "fenced");
    assert.equal(d1.exitCode, null, "the cut node keeps running (fenced), it does not crash");
    await stopDaemon(d2);
  },
);

test(
  "a node whose clock is 2 s ahead runs no slot twice; 5 s off is a WARNING in status",
  // Also skipped without libfaketime (the node's clock is moved with it); .ci/run installs it.
  needs(skip || (!fs.existsSync(FAKETIME) && "libfaketime not installed")),
  async (t) => {
    const url = await freshDatabase();
    const raw = await rawClient(url, t);
    const dir = tmpdir(t);
    const jobs = Array.from(
      { length: 5 },
      (_, i) => `  j${i}:\n    schedule: "* * * * * *"\n    command: "true"\n`,
    ).join("");
    const c1 = nodeConfig(dir, "n1", url, jobs);
    const skewed = (offset) => ({
      LD_PRELOAD: FAKETIME,
      FAKETIME: offset,
      FAKETIME_DONT_FAKE_MONOTONIC: "1",
      FAKETIME_NO_CACHE: "1",
    });
    const d1 = startDaemon(t, c1);
    const d2 = startDaemon(t, nodeConfig(dir, "n2", url, jobs), skewed("+2s"));
    const since = Date.now();
    // The node ahead sees each slot due first and claims it: the other one finds it taken.
    await waitFor(
      async () =>
        (await readPgStore(raw).runs({ node: "n2", status: "ok" })).some(
          (r) => r.started_at > since - 5000,
        ),
      "the skewed node running",
      30_000,
    );
    await waitFor(() => Date.now() - since > 6000, "6 s of both", 10_000, 100);
    await assertEachSlotOnce(raw);
    await stopDaemon(d2);
    const d3 = startDaemon(t, nodeConfig(dir, "n2", url, jobs), skewed("+5s"));
    const s = await waitFor(() => {
      const r = cli(["status", "-c", c1, "--json"]);
      const j = r.code === 0 ? JSON.parse(r.stdout) : null;
      const n2 = j?.nodes.find((n) => n.name === "n2");
      return n2?.state === "running" && n2.clock_offset_ms > 4000 ? j : null;
    }, "n2's clock offset seen");
    assert.ok(Math.abs(s.nodes.find((n) => n.name === "n1").clock_offset_ms) < 2000);
    const check = cli(["status", "-c", c1, "--check"]);
    assert.equal(check.code, 1, check.stdout);
    assert.match(check.stdout.split("\n")[0], /^WARNING: .*node n2's clock is off by [45]\.\d s/);
    await assertEachSlotOnce(raw);
    await stopDaemon(d3);
    await stopDaemon(d1);
  },
);
