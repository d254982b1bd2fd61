// What a tick costs PostgreSQL in commits (issue 41): a node whose claims all find their slots
// taken, a tick of dispositions already recorded and a prune of nothing write nothing (no
// transaction id is ever given out: nothing to commit, nothing to fsync); and the writes of a
// slot (claim and start, the run's pids, its end) cost at most 1.2 fsync'd commits with one slot
// per tick, 0.2 with 100, as the daemon makes them on a shared store: the pids and ends ride with
// the next tick's transaction (Store.reserveRuns' riders). Counted on a
// real cluster (test/pg.js, fsync on): the transaction ids given out (one per transaction that
// wrote), with pg_stat_wal's wal_sync beside them.
import assert from "node:assert/strict";
import { test } from "node:test";
import { openPgStore } from "../dist/store/store.js";
import { scheduledReserve, waitFor } from "./helpers.js";
import { freshDatabase, pgMissing, rawClient } from "./pg.js";
import { needs } from "./needs.js";

const skip = pgMissing();
const ME = { pid: process.pid, start: "me" };
const reserve = (job, slot) => scheduledReserve(job, slot, { now: () => 1000 + slot, owner: ME });
const ok = (at) => ({
  status: "ok",
  reason: null,
  exitCode: 0,
  signal: null,
  finishedAt: at,
  durationMs: 1,
  logBytes: 0,
  cpuS: null,
  memoryPeakBytes: null,
});

/** A fresh database and a raw client on it, autovacuum off there (no writes but the test's). */
async function quietDatabase(t) {
  const url = await freshDatabase();
  const raw = await rawClient(url, t);
  const first = await openPgStore(url, { create: true, node: "setup" });
  await first.close();
  for (const table of ["runs", "slots", "jobs", "events", "run_logs"])
    await raw.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
  return { url, raw };
}

/** The next transaction id to be given out: unchanged means no transaction wrote anything. */
const nextXid = async (raw) =>
  BigInt((await raw.query("SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS x")).rows[0].x);

/** The cluster's WAL syncs so far, once the counts of exited backends are in (stable twice). */
async function walSyncs(raw) {
  let last = -1;
  let n = -2;
  await waitFor(
    async () => {
      last = n;
      await raw.query("SELECT pg_stat_clear_snapshot()");
      n = Number((await raw.query("SELECT wal_sync FROM pg_stat_wal")).rows[0].wal_sync);
      return n === last;
    },
    "pg_stat_wal settled",
    10_000,
    300,
  );
  return n;
}

test(
  "postgresql: a node whose claims all find their slots taken, a tick of taken dispositions and a prune of nothing write nothing",
  needs(skip),
  async (t) => {
    const { url, raw } = await quietDatabase(t);
    const a = await openPgStore(url, { create: false, node: "a" });
    const b = await openPgStore(url, { create: false, node: "b" });
    t.after(() => Promise.all([a.close(), b.close()]));
    const jobs = Array.from({ length: 50 }, (_, i) => `j${i}`);
    const won = await a.reserveRuns(jobs.map((j) => reserve(j, 60_000)));
    assert.ok(won.every((o) => o.kind === "started"));
    await b.reserveRuns([reserve("warm", 1)]); // b's connection opened and its statements known
    const before = await nextXid(raw);
    const lost = await b.reserveRuns(jobs.map((j) => reserve(j, 60_000)));
    assert.ok(
      lost.every((o) => o.kind === "duplicate"),
      JSON.stringify(lost.map((o) => o.kind)),
    );
    const recorded = await b.recordDispositions(
      jobs.map((job) => ({ job, slot: 60_000, status: "skipped", reason: "paused" })),
      2000,
    );
    assert.deepEqual(new Set(recorded), new Set([false]));
    assert.deepEqual(await b.pruneRuns([{ job: "j0", keep: 100 }]), []);
    assert.equal(await nextXid(raw), before, "a write transaction was started");
  },
);

/** `ticks` ticks of `perTick` slots, the pids and ends of each riding with the next. */
async function commitsPerSlot(t, perTick, ticks) {
  const { url, raw } = await quietDatabase(t);
  const jobs = Array.from({ length: perTick }, (_, i) => `j${i}`);
  let riders = { procs: [], ends: [] };
  const tick = async (store, k) => {
    const out = await store.reserveRuns(
      jobs.map((j) => reserve(j, (k + 1) * 1000)),
      riders,
    );
    const ids = out.map((o) => {
      assert.equal(o.kind, "started", JSON.stringify(o));
      return o.run.id;
    });
    riders = {
      procs: ids.map((runId) => ({ runId, pid: process.pid, pidStart: "x", pgid: process.pid })),
      ends: ids.map((runId) => ({ runId, result: ok(2000 + k) })),
    };
  };
  // The jobs' rows made first, and the connections' statements prepared.
  const store = await openPgStore(url, { create: false, node: "n1" });
  t.after(() => store.close());
  await tick(store, 0);
  await store.reserveRuns([], riders);
  riders = { procs: [], ends: [] };
  const [xid0, sync0] = [await nextXid(raw), await walSyncs(raw)];
  for (let k = 1; k <= ticks; k++) await tick(store, k);
  await store.reserveRuns([], riders); // the last tick's riders, alone
  // Each transaction that wrote got one id, and commits with synchronous_commit on (none of
  // these is unsynced): the fsync'd commits, counted exactly. The cluster's WAL syncs (other
  // databases' autovacuum too) are reported beside them.
  const commits = Number((await nextXid(raw)) - xid0);
  await store.close();
  const syncs = (await walSyncs(raw)) - sync0;
  const left = await raw.query("SELECT count(*)::int AS n FROM runs WHERE status = 'running'");
  assert.equal(left.rows[0].n, 0, "every run's end recorded");
  const pids = await raw.query("SELECT count(*)::int AS n FROM runs WHERE pid IS NULL");
  assert.equal(pids.rows[0].n, 0, "every run's pid recorded");
  return { commits: commits / (perTick * ticks), syncs: syncs / (perTick * ticks) };
}

test(
  "postgresql: one slot per tick costs at most 1.2 fsync'd commits, a hundred at most 0.2 per slot",
  needs(skip),
  async (t) => {
    const one = await commitsPerSlot(t, 1, 40);
    const hundred = await commitsPerSlot(t, 100, 5);
    t.diagnostic(
      `fsync'd commits per slot: ${one.commits.toFixed(3)} (1 per tick), ${hundred.commits.toFixed(3)} (100 per tick); WAL syncs per slot ${one.syncs.toFixed(3)}, ${hundred.syncs.toFixed(3)}`,
    );
    assert.ok(one.commits <= 1.2, `${one.commits} per slot at one slot per tick`);
    assert.ok(hundred.commits <= 0.2, `${hundred.commits} per slot at 100 slots per tick`);
  },
);
