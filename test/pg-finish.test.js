// Recording runs' ends on PostgreSQL (PgStore.finishRuns): one statement, no transaction around
// it. What it must keep of the transaction it replaced: the job's row locked before the run's (a
// takeover locks them in that order), a run ended by another writer meanwhile keeps that first
// end, and the log tails of this node's runs are kept with the ends, whichever store started them.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { openPgStore } from "../dist/store/store.js";
import { freshDatabase, pgMissing, rawClient, waitForLockWaiters } from "./pg.js";
import { scheduledReserve, tmpdir } from "./helpers.js";
import { needs } from "./needs.js";

// Both tests need a real PostgreSQL: skipped (with pgMissing's reason) only where its server is not
// installed and CI is not set; in CI, which installs it, never.
const skip = pgMissing();
const ME = { pid: process.pid, start: "me" };

/** Stores on one fresh database, closed at the test's end; `node` as each store writes. */
async function stores(t, ...nodes) {
  const url = await freshDatabase();
  const out = [];
  for (const node of nodes) out.push(await openPgStore(url, { create: true, node }));
  t.after(async () => {
    for (const s of out) await s.close();
  });
  return { url, stores: out };
}

const reserve = async (store, job, slot, logDir) => {
  const [o] = await store.reserveRuns([
    scheduledReserve(job, slot, { owner: ME, logPath: (id) => path.join(logDir, `${id}.log`) }),
  ]);
  assert.equal(o.kind, "started");
  return o.run;
};

const ended = (status, finishedAt) => ({
  status,
  reason: status === "ok" ? null : "exit 1",
  exitCode: status === "ok" ? 0 : 1,
  signal: null,
  startedAt: 1000,
  finishedAt,
  durationMs: finishedAt - 1000,
  logBytes: 5,
  logTruncated: false,
});

test(
  "postgresql: finishRuns keeps the log tails of this node's runs, known or read, with their ends",
  needs(skip),
  async (t) => {
    const dir = tmpdir(t);
    const { url, stores: s } = await stores(t, "n1", "n1", "n2");
    const [a, b, other] = s;
    // r1 and r2 started by a; r2 is recorded by b (another process of n1: its path is read);
    // r3 is n2's, recorded through n1's store: its log is n2's to keep, not read here.
    const r1 = await reserve(a, "j", 60_000, dir);
    const r2 = await reserve(a, "k", 60_000, dir);
    const r3 = await reserve(other, "m", 60_000, dir);
    for (const r of [r1, r2, r3]) fs.writeFileSync(r.log_path, `log of ${r.id}\n`);
    await a.finishRuns([
      { runId: r1.id, result: ended("ok", 2000) },
      { runId: r1.id, result: ended("failed", 3000) }, // twice in a batch: the first end is kept
      { runId: r3.id, result: ended("failed", 2500) },
    ]);
    await b.finishRuns([{ runId: r2.id, result: ended("ok", 2200) }]);
    assert.equal((await a.logTail(r1.id)).toString(), `log of ${r1.id}\n`);
    assert.equal((await a.logTail(r2.id)).toString(), `log of ${r2.id}\n`);
    assert.equal(await a.logTail(r3.id), null);
    const r1row = await a.run(r1.id);
    assert.deepEqual([r1row.status, r1row.finished_at, r1row.revoked], ["ok", 2000, 1]);
    assert.equal((await a.run(r3.id)).status, "failed");
    assert.equal((await a.job("j")).last_success_at, 2000);
    assert.equal((await a.job("k")).last_success_at, 2200);
    assert.equal((await a.job("m")).last_success_at, null);
    // The status summary (the runs' trigger) saw the ends.
    const raw = await rawClient(url, t);
    const sum = await raw.query("SELECT last_finished FROM jobs WHERE name = 'j'");
    assert.equal(JSON.parse(sum.rows[0].last_finished).id, r1.id);
    // A second end of a recorded run changes nothing, and its tail is not written twice.
    fs.writeFileSync(r1.log_path, "rewritten\n");
    await a.finishRuns([{ runId: r1.id, result: ended("failed", 4000) }]);
    assert.equal((await a.run(r1.id)).status, "ok");
    assert.equal((await a.logTail(r1.id)).toString(), `log of ${r1.id}\n`);
  },
);

test(
  "postgresql: finishRuns locks the job's row before the run's, and keeps an end made meanwhile",
  needs(skip),
  async (t) => {
    const dir = tmpdir(t);
    const { url, stores: s } = await stores(t, "n1");
    const [a] = s;
    const run = await reserve(a, "j", 60_000, dir);
    fs.writeFileSync(run.log_path, "the log\n");
    // A takeover in flight on another connection: it holds the job's row, as a tick does.
    const raw = await rawClient(url, t);
    await raw.query("SET lock_timeout = '10s'");
    await raw.query("BEGIN");
    await raw.query("SELECT 1 FROM jobs WHERE name = 'j' FOR UPDATE");
    const finish = a.finishRuns([{ runId: run.id, result: ended("ok", 2000) }]);
    await waitForLockWaiters(raw, 1);
    // The waiting finish has not touched the run's row: the takeover ends the run without
    // waiting (the other order would deadlock), and commits.
    await raw.query("UPDATE runs SET status = 'interrupted', finished_at = 1500 WHERE id = $1", [
      run.id,
    ]);
    await raw.query("COMMIT");
    await finish;
    const row = await a.run(run.id);
    assert.deepEqual([row.status, row.finished_at], ["interrupted", 1500], "the first end is kept");
    assert.equal((await a.job("j")).last_success_at, null, "the late ok moved no stamp");
    assert.equal((await a.logTail(run.id)).toString(), "the log\n", "its tail is kept");
  },
);
