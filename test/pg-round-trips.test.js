// Round trips of the PostgreSQL store's hot writes: each is a wait for the server (about 0.2 ms
// on a local socket, a network's latency between hosts), so the number of them is what the
// store can keep down. Counted by a proxy between the store and the server: a turn is the client
// speaking again after the server answered (messages sent together, pipelined, are one turn).
import assert from "node:assert/strict";
import net from "node:net";
import { test } from "node:test";
import { openPgStore, StoreError } from "../dist/store/store.js";
import { freshDatabase, pgSkip, serverSocket } from "./pg.js";

// Needs a real PostgreSQL: skipped (with pgSkip's reason) only where its server is not installed
// and CI is not set; in CI, which installs it, never.
const skip = pgSkip();
const ME = { pid: process.pid, start: "me" };

/** A proxy to the cluster's socket that counts turns over all its connections. */
async function turnCounter(t) {
  const target = await serverSocket();
  const pairs = [];
  const counter = { turns: 0 };
  const server = net.createServer((c) => {
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
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => {
    for (const [c, u] of pairs) {
      c.destroy();
      u.destroy();
    }
    server.close();
  });
  return { port: server.address().port, counter };
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
  return { store, turns };
}

const reserve = (job, slot, over = {}) => ({
  reserve: {
    job,
    slot,
    claimSlot: true,
    trigger: "schedule",
    attempt: 1,
    now: () => 1000 + slot,
    owner: ME,
    lock: true,
    holderAlive: () => true,
    logPath: (id) => `/nonexistent/${job}/${id}.log`,
    ...over,
  },
});

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
  "postgresql: a slot's claim and run start take 3 round trips (BEGIN goes with the claim), its end 1",
  { skip },
  async (t) => {
    const { store, turns } = await proxiedStore(t);
    await store.addJobs([{ name: "a", bootId: null }], 1000);
    // Warm: the connection made and the statements prepared (a first use sends its Parse too,
    // in the same turn, but the first connect is turns of its own).
    const [w] = await store.reserveRuns([reserve("a", 1000)]);
    await store.finishRuns([ok(w.run)]);
    let o;
    // BEGIN + the slot's claim and the job's lock; the run's start; COMMIT.
    assert.equal(await turns(async () => ([o] = await store.reserveRuns([reserve("a", 2000)]))), 3);
    assert.equal(o.kind, "started");
    assert.equal(o.run.started_at, 3000, "the clock read once the lock is held");
    assert.equal(await turns(() => store.finishRuns([ok(o.run)])), 1);
    // A slot another write took: BEGIN + the claim; the slot's run; COMMIT.
    let dup;
    assert.equal(
      await turns(async () => ([dup] = await store.reserveRuns([reserve("a", 2000)]))),
      3,
    );
    assert.deepEqual(dup, { kind: "duplicate", slotRunId: o.run.id });
  },
);

test(
  "postgresql: a statement that fails right after its pipelined BEGIN rolls the transaction back; the connection goes on",
  { skip },
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
