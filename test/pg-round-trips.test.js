// Round trips of the PostgreSQL store's hot writes: each is a wait for the server (about 0.2 ms
// on a local socket, a network's latency between hosts), so the number of them is what the
// store can keep down. Counted by a proxy between the store and the server: a turn is the client
// speaking again after the server answered (messages sent together, pipelined, are one turn).
import assert from "node:assert/strict";
import net from "node:net";
import { test } from "node:test";
import { openPgStore, StoreError } from "../dist/store/store.js";
import { scheduledReserve } from "./helpers.js";
import { freshDatabase, pgMissing, rawClient, serverProxy, waitForLockWaiters } from "./pg.js";
import { needs } from "./needs.js";

// Needs a real PostgreSQL: skipped (with pgMissing's reason) only where its server is not installed
// and CI is not set; in CI, which installs it, never.
const skip = pgMissing();
const ME = { pid: process.pid, start: "me" };

/** A proxy to the cluster's socket that counts turns over all its connections. */
async function turnCounter(t) {
  const counter = { turns: 0 };
  const { port } = await serverProxy(t, (c, target, pairs) => {
    const u = net.connect(target);
    let last = "server";
    c.on("error", () => {});
    u.on("error", () => {});
    c.on("data", (b) => {
      if (last === "server") counter.turns++;
      last = "client";
      u.write(b);
    });
    u.on("data", (b) => {
      last = "server";
      c.write(b);
    });
    pairs.push([c, u]);
  });
  return { port, counter };
}

async function proxiedStore(t) {
  const url = await freshDatabase();
  const { port, counter } = await turnCounter(t);
  const db = new URL(url).pathname.slice(1);
  // One connection, so that every call below takes the same (warm) one.
  const store = await openPgStore(`postgresql://cronvisor@127.0.0.1:${port}/${db}`, {
    create: true,
    node: "n1",
    poolSize: 1,
  });
  t.after(() => store.close());
  /** The turns `fn` took. */
  const turns = async (fn) => {
    const before = counter.turns;
    await fn();
    return counter.turns - before;
  };
  return { store, turns, url };
}

const reserve = (job, slot, over = {}) =>
  scheduledReserve(job, slot, { now: () => 1000 + slot, owner: ME, ...over });

const ok = (run) => ({
  runId: run.id,
  result: {
    status: "ok",
    reason: null,
    exitCode: 0,
    signal: null,
    startedAt: run.started_at,
    finishedAt: run.started_at + 5,
    durationMs: 5,
    logBytes: 0,
    logTruncated: false,
  },
});

test(
  "postgresql: a slot's claim and run start take 2 round trips (BEGIN with the claim, COMMIT with the start), its end 1",
  needs(skip),
  async (t) => {
    const { store, turns } = await proxiedStore(t);
    await store.addJobs([{ name: "a", bootId: null }], 1000);
    // Warm: the connection made and the statements prepared (a first use sends its Parse too,
    // in the same turn, but the first connect is turns of its own).
    const [w] = await store.reserveRuns([reserve("a", 1000)]);
    await store.finishRuns([ok(w.run)]);
    let o;
    // BEGIN + the slot's claim and the job's lock; the run's start + COMMIT.
    assert.equal(await turns(async () => ([o] = await store.reserveRuns([reserve("a", 2000)]))), 2);
    assert.equal(o.kind, "started");
    assert.equal(o.run.started_at, 3000, "the clock read once the lock is held");
    assert.equal(await turns(() => store.finishRuns([ok(o.run)])), 1);
    // A slot another write took: BEGIN + the claim; the slot's run + COMMIT.
    let dup;
    assert.equal(
      await turns(async () => ([dup] = await store.reserveRuns([reserve("a", 2000)]))),
      2,
    );
    assert.deepEqual(dup, { kind: "duplicate", slotRunId: o.run.id });
    // overlap: allow (no lock to judge): the same.
    let allowed;
    const free = reserve("a", 4000, { lock: false });
    assert.equal(await turns(async () => ([allowed] = await store.reserveRuns([free]))), 2);
    assert.equal(allowed.kind, "started");
    // A run is running and the job's lock is asked for: its holder is judged before anything
    // is written (the start, then the holder read, then the skip, then COMMIT).
    let locked;
    assert.ok(
      (await turns(async () => ([locked] = await store.reserveRuns([reserve("a", 5000)])))) > 2,
    );
    assert.equal(locked.kind, "locked");
    assert.equal(locked.holder.id, allowed.run.id);
  },
);

test(
  "postgresql: a run started while the reservation waited for the job's lock holds it: the slot is skipped, not started",
  needs(skip),
  async (t) => {
    const { store, url } = await proxiedStore(t);
    await store.addJobs([{ name: "a", bootId: null }], 1000);
    const [w] = await store.reserveRuns([reserve("a", 1000)]);
    await store.finishRuns([ok(w.run)]);
    const raw = await rawClient(url, t);
    // Another writer holds the job's row and starts a run under it (as a start does: the fence
    // bumped), after the reservation read its snapshot and before it gets the lock.
    await raw.query("BEGIN");
    await raw.query("SELECT 1 FROM jobs WHERE name = 'a' FOR UPDATE");
    const reserving = store.reserveRuns([reserve("a", 2000)]);
    await waitForLockWaiters(raw, 1);
    const held = await raw.query(
      `WITH f AS (UPDATE jobs SET fence = fence + 1 WHERE name = 'a' RETURNING fence)
       INSERT INTO runs (job, trigger, status, attempt, started_at, fence, owner_pid, node)
       SELECT 'a', 'manual', 'running', 1, 2500, f.fence, $1, 'n1' FROM f RETURNING id`,
      [process.pid],
    );
    await raw.query("COMMIT");
    const holder = Number(held.rows[0].id);
    const [o] = await reserving;
    assert.equal(o.kind, "locked");
    assert.equal(o.holder.id, holder);
    const slot = await raw.query("SELECT status, reason FROM runs WHERE job = 'a' AND slot = 2000");
    assert.deepEqual(slot.rows, [
      { status: "skipped", reason: `overlap: run ${holder} holds the lock` },
    ]);
    assert.equal((await store.runningRuns("a")).length, 1);
  },
);

test(
  "postgresql: a statement that fails right after its pipelined BEGIN rolls the transaction back; the connection goes on",
  needs(skip),
  async (t) => {
    const { store } = await proxiedStore(t);
    await store.addJobs([{ name: "a", bootId: null }], 1000);
    // A NUL in a text parameter is refused by the server at the claim, the first statement.
    await assert.rejects(store.reserveRuns([reserve("a\u0000b", 1000)]), StoreError);
    const [o] = await store.reserveRuns([reserve("a", 1000)]);
    assert.equal(o.kind, "started");
    assert.equal((await store.runningRuns("a")).length, 1);
    assert.equal(await store.job("a\u0000b").catch(() => "refused"), "refused");
  },
);
