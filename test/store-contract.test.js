// The Store's contract, run against both engines: each case below runs once on SQLite (a real
// file in a temp dir) and once on PostgreSQL (a fresh database on this process's throwaway
// cluster, test/pg.js), and where its results are deterministic a third test checks that the
// two engines gave the same ones. The PostgreSQL-only cases at the end race two PgStore
// instances (two pools) on the writes SQLite serialises with BEGIN IMMEDIATE.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import { migrationFiles } from "../dist/store/migrate.js";
import { PG_LATEST, pgMigrationFiles } from "../dist/store/pg-connection.js";
import { openPgStore, openStore, StoreError } from "../dist/store/store.js";
import { freshDatabase, pgMissing, rawClient, waitForLockWaiters } from "./pg.js";
import { tmpdir } from "./helpers.js";
import { fromRuns } from "./status-oracle.js";
import { needs } from "./needs.js";

const LATEST = 16;

test("migrations: one numbering, a file per engine for each step", () => {
  const names = migrationFiles();
  assert.equal(names.length, LATEST);
  assert.deepEqual(pgMigrationFiles(), names, "the same NNN_name.sql in sqlite/ and postgresql/");
  assert.equal(PG_LATEST, LATEST);
});

/** Each engine: a fresh, empty store place, and how to open a connection to it. */
const ENGINES = [
  {
    name: "sqlite",
    skip: false,
    async place(t) {
      const dir = path.join(tmpdir(t), "s");
      const file = path.join(dir, "cronvisor.db");
      return {
        open: (o = {}) => openStore(dir, { create: true, ...o }),
        async setVersion(v) {
          const db = new Database(file);
          db.pragma(`user_version = ${v}`);
          db.close();
        },
        async version() {
          const db = new Database(file, { readonly: true });
          const v = db.pragma("user_version", { simple: true });
          db.close();
          return v;
        },
      };
    },
  },
  {
    name: "postgresql",
    // Skipped (with pgMissing's reason) only where PostgreSQL is not installed and CI is not set.
    skip: pgMissing(),
    async place() {
      const url = await freshDatabase();
      return {
        url,
        open: (o = {}) => openPgStore(url, { create: true, ...o }),
        async setVersion(v) {
          const c = await rawClient(url);
          await c.query("UPDATE schema_version SET version = $1", [v]);
          await c.end();
        },
        async version() {
          const c = await rawClient(url);
          const r = await c.query("SELECT version FROM schema_version");
          await c.end();
          return r.rows[0].version;
        },
      };
    },
  },
];

/**
 * A case on both engines. `fn(t, env)` gets `env.store` (open, closed at the end),
 * `env.open()` (another connection, closed at the end) and the engine's place; what it returns
 * is compared across the engines (unless `compare` is false: its results are not deterministic).
 */
function contract(name, fn, { compare = true } = {}) {
  const results = new Map();
  for (const e of ENGINES) {
    test(`${e.name}: ${name}`, needs(e.skip), async (t) => {
      const place = await e.place(t);
      const opened = [];
      t.after(async () => {
        for (const s of opened) await s.close();
      });
      const open = async (o) => {
        const s = await place.open(o);
        opened.push(s);
        return s;
      };
      const store = await open();
      results.set(e.name, await fn(t, { store, open, place, engine: e.name }));
    });
  }
  if (!compare) return;
  test(`both engines: ${name}: the same results`, needs(ENGINES[1].skip), () => {
    assert.equal(results.size, 2, "both engines ran the case");
    assert.deepEqual(results.get("postgresql"), results.get("sqlite"));
  });
}

const NOT_COMPARED = { compare: false };
const ME = { pid: process.pid, start: "me" };
const OTHER = { pid: 999_999, start: "other" };

const req = (job, slot, over = {}) => ({
  job,
  slot,
  claimSlot: slot !== null,
  trigger: "schedule",
  attempt: 1,
  now: 1000,
  owner: ME,
  lock: true,
  holderAlive: () => true,
  logPath: (id) => `/logs/${job}/${id}.log`,
  ...over,
});
const result = (status, startedAt, finishedAt, over = {}) => ({
  status,
  reason: status === "ok" ? null : `exit 1`,
  exitCode: status === "ok" ? 0 : 1,
  signal: null,
  startedAt,
  finishedAt,
  durationMs: finishedAt - startedAt,
  logBytes: 10,
  logTruncated: false,
  ...over,
});
const writer = (run) => ({ job: run.job, run: { id: run.id, fence: run.fence } });

contract(
  "named locks and a group: judged and taken with the start, refused with the holder, freed by the end",
  async (_t, { store, open }) => {
    const { decideAdmission } = await import("../dist/daemon/admit.js");
    const holds = (locks, group, policy = "skip") => ({
      holds: {
        locks,
        group: group === null ? null : { name: group, maxRunning: 1 },
        admit: (f) => decideAdmission({ policy, trigger: "schedule", waiting: false }, f),
      },
    });
    const kind = (o) => (o.kind === "held" ? `${o.admission.kind}: ${o.admission.reason}` : o.kind);
    const a = await store.reserveRun(req("a", 1000, holds(["cache", "db"], null)));
    assert.equal(a.kind, "started");
    // Another connection (a second node's or `cronvisor run`'s) sees the holds.
    const other = await open();
    const out = {
      skip: kind(await other.reserveRun(req("b", 1000, holds(["db"], null)))),
      wait: kind(await other.reserveRun(req("c", 2000, holds(["db"], null, "queue")))),
      g1: kind(await store.reserveRun(req("g1", 1000, holds([], "heavy")))),
      g2: kind(await other.reserveRun(req("g2", 1000, holds([], "heavy")))),
    };
    // A skipped slot is recorded with its reason; a waiting one is not, and can be claimed later.
    out.recorded = (await store.history(null, 10)).map((r) => [r.job, r.status, r.reason]);
    out.held = (await store.holdsHeld()).map((h) => [h.hold_kind, h.hold_name, h.job]);
    for (const r of await store.runningRuns())
      await store.finishRun(r.id, result("ok", 1000, 1500));
    out.heldAfter = (await store.holdsHeld()).length;
    out.later = [
      kind(await other.reserveRun(req("c", 2000, holds(["db"], null, "queue")))),
      kind(await other.reserveRun(req("g2", 3000, holds([], "heavy")))),
    ];
    // A dead holder frees the lock at once: its run is recorded interrupted.
    out.dead = kind(
      await store.reserveRun(req("b", 4000, { ...holds(["db"], null), holderAlive: () => false })),
    );
    out.interrupted = (await store.history("c", 1)).map((r) => r.status);
    assert.equal(out.skip, `skip: lock db held by a (run ${a.run.id})`);
    assert.equal(out.wait, `wait: lock db held by a (run ${a.run.id})`);
    assert.deepEqual([out.g1, out.g2], ["started", "skip: group heavy full (1 of 1 running)"]);
    assert.deepEqual(out.held, [
      ["group", "heavy", "g1"],
      ["lock", "cache", "a"],
      ["lock", "db", "a"],
    ]);
    assert.deepEqual([out.heldAfter, out.later, out.dead], [0, ["started", "started"], "started"]);
    assert.deepEqual(out.interrupted, ["interrupted"]);
    return out;
  },
);

contract("daemon: claim, heartbeat, config record, release", async (_t, { store, open }) => {
  const other = await open();
  const out = {};
  out.empty = [await store.daemon(), await store.runningConfig()];
  const accepted = { json: '{"jobs":{}}', hash: "h1", at: 5 };
  out.claim = await store.claimDaemon(ME, 10, 1000, "/etc/jobs.yaml", () => true, accepted);
  // Another connection's daemon is refused while the holder lives, and told who holds it.
  out.refused = await other.claimDaemon(OTHER, 11, 1000, "/x.yaml", () => true);
  await store.heartbeat(ME.pid, 20, 2000);
  await other.heartbeat(OTHER.pid, 21, 1); // not the holder: nothing changes
  await store.setConfigError(ME.pid, "jobs.yaml:1:1: bad");
  await store.setHttpState(ME.pid, "EADDRINUSE", 15);
  out.row = await other.daemon();
  await store.acceptConfig(ME.pid, { json: '{"jobs":{"a":1}}', hash: "h2", at: 30 });
  out.running = await other.runningConfig();
  await store.releaseDaemon(ME.pid, 40);
  out.released = await other.daemon();
  // A stopped holder's claim is taken; so is a dead one's.
  out.taken = await other.claimDaemon(OTHER, 50, 1000, "/x.yaml", () => true);
  out.dead = await store.claimDaemon(ME, 60, 1000, "/y.yaml", () => false);
  out.final = [await other.daemon(), await other.runningConfig()];
  assert.equal(out.claim, null);
  assert.equal(out.refused.pid, ME.pid);
  assert.equal(out.row.heartbeat_at, 20);
  assert.equal(out.row.config_error, "jobs.yaml:1:1: bad");
  assert.equal(out.running.config_json, '{"jobs":{"a":1}}');
  assert.equal(out.released.stopped_at, 40);
  assert.equal(out.taken, null);
  assert.equal(out.dead, null);
  assert.equal(out.final[0].pid, ME.pid);
  assert.equal(out.final[1], null, "a claim without a config clears the earlier record");
  return out;
});

contract("jobs: add, @reboot, pause, scanned_to, gauges", async (_t, { store }) => {
  const out = {};
  out.added = await store.addJobs(
    [
      { name: "b", bootId: null },
      { name: "a", bootId: "boot-1" },
    ],
    100,
  );
  out.again = await store.addJobs([{ name: "a", bootId: "boot-1" }], 200);
  out.reboot = [
    await store.claimReboot("a", "boot-1", 300),
    await store.claimReboot("a", "boot-2", 300),
  ];
  await store.setPaused("b", true, 400);
  await store.setPaused("c", true, 410); // a job the store has not seen
  await store.setPaused("c", false, 420);
  out.paused = [...(await store.pausedJobs())].sort();
  await store.setScannedTo("a", 5000);
  await store.setScannedTo("a", 4000); // never backwards
  out.ensured = await store.ensureJob("d", 500);
  out.jobs = await store.allJobs();
  out.one = [await store.job("a"), await store.job("nope")];
  out.events = await store.events(null, 10);
  out.gauges = await store.jobGauges();
  assert.equal(out.added[1].rebootClaimed, true);
  assert.equal(out.again[0].rebootClaimed, false);
  assert.deepEqual(out.reboot, [false, true]);
  assert.deepEqual(out.paused, ["b"]);
  assert.equal(out.one[0].scanned_to, 5000);
  assert.deepEqual(
    out.jobs.map((j) => j.name),
    ["a", "b", "c", "d"],
  );
  assert.deepEqual(
    out.events.map((e) => e.kind),
    ["resumed", "paused", "paused"],
  );
  return out;
});

contract(
  "reserveRun: slot once, lock held, fence grows, dead holder reaped",
  async (_t, { store }) => {
    const out = {};
    const a = await store.reserveRun(req("a", 60_000));
    out.first = a;
    out.dup = await store.reserveRun(req("a", 60_000));
    out.locked = await store.reserveRun(req("a", 120_000));
    out.lockedAgain = await store.reserveRun(req("a", 120_000)); // its skip is its disposition
    out.manualLocked = await store.reserveRun(req("a", null, { trigger: "manual" }));
    // overlap: allow takes no lock: a second run alongside, with the next fence.
    const allowed = await store.reserveRun(req("a", 180_000, { lock: false }));
    out.allowed = allowed;
    // A holder found dead is recorded interrupted and taken over at once.
    let clockRead = 0;
    const taken = await store.reserveRun(
      req("a", 240_000, { holderAlive: () => false, now: () => ++clockRead + 2000 }),
    );
    out.taken = taken;
    out.reaped = [await store.run(a.run.id), await store.run(allowed.run.id)];
    out.history = await store.history("a", 20);
    assert.equal(a.kind, "started");
    assert.deepEqual(out.dup, { kind: "duplicate", slotRunId: a.run.id });
    assert.equal(out.locked.kind, "locked");
    assert.equal(out.locked.holder.id, a.run.id);
    assert.deepEqual(out.lockedAgain, { kind: "duplicate", slotRunId: null });
    assert.equal(out.manualLocked.kind, "locked");
    assert.equal(allowed.run.fence, 2);
    assert.equal(taken.kind, "started");
    assert.equal(taken.run.fence, 3);
    assert.equal(taken.run.started_at, 2001, "the clock is read once the lock is held");
    assert.equal(out.reaped[0].status, "interrupted");
    assert.equal(out.reaped[0].revoked, 1);
    assert.equal((await store.job("a")).scanned_to, 240_000);
    return out;
  },
);

contract(
  "reserveRuns: a tick's batch, outcomes in order, all or nothing",
  async (_t, { store }) => {
    const out = {};
    const boom = () => {
      throw new Error("boom");
    };
    await assert.rejects(
      store.reserveRuns([
        { reserve: req("a", 60_000) },
        { dispose: { job: "b", slot: 60_000, status: "missed", reason: "daemon down" }, now: 1000 },
        { reserve: req("c", 60_000, { logPath: boom }) },
      ]),
      /boom/,
    );
    out.afterFailure = [await store.history(null, 10), await store.job("a"), await store.job("c")];
    assert.deepEqual(out.afterFailure, [[], null, null], "no run, no disposition, no job row");
    const batch = await store.reserveRuns([
      { reserve: req("a", 60_000) },
      { dispose: { job: "b", slot: 60_000, status: "missed", reason: "daemon down" }, now: 1000 },
      { reserve: req("a", 60_000) },
      { reserve: req("a", 120_000) },
      { dispose: { job: "b", slot: 60_000, status: "missed", reason: "daemon down" }, now: 1000 },
    ]);
    assert.deepEqual(
      batch.map((o) => o.kind),
      ["started", "recorded", "duplicate", "locked", "recorded"],
    );
    assert.equal(batch[4].recorded, false, "a slot's disposition is recorded once");
    assert.deepEqual(await store.reserveRuns([]), []);
    // Ids after a rolled-back batch differ (a PostgreSQL sequence is not rolled back): compare
    // the rows without them.
    const strip = ({ id: _id, log_path: _l, reason, ...r }) => ({
      ...r,
      reason: reason?.replace(/run \d+/, "run N") ?? null,
    });
    out.batch = batch.map((o) =>
      o.kind === "started" ? { kind: o.kind, run: strip(o.run) } : o.kind === "locked" ? o.kind : o,
    );
    out.batch[2] = batch[2].slotRunId === batch[0].run.id;
    out.history = (await store.history(null, 10)).map(strip);
    return out;
  },
);

contract("run rows: processes, adopt, revoke, finish, prune", async (_t, { store }) => {
  const out = {};
  const [r1, r2] = await store.reserveRuns([
    { reserve: req("a", 60_000) },
    { reserve: req("b", 60_000) },
  ]);
  await store.setRunProcess(r1.run.id, 4001, "s1", 4001);
  await store.setRunProcesses([{ runId: r2.run.id, pid: 4002, pidStart: "s2", pgid: 4002 }]);
  await store.setRunProcesses([]);
  await store.adoptRun(r2.run.id, OTHER);
  out.running = await store.runningRuns();
  out.runningA = await store.runningRuns("a");
  await store.finishRun(r1.run.id, result("ok", 1000, 1500));
  await store.finishRun(r1.run.id, result("failed", 1000, 9999)); // a second end is ignored
  await store.revokeRun(r2.run.id);
  await store.finishRuns([{ runId: r2.run.id, result: result("failed", 1000, 1700) }]);
  await store.finishRuns([]);
  out.rows = [await store.run(r1.run.id), await store.run(r2.run.id), await store.run(999)];
  out.jobs = [await store.job("a"), await store.job("b")];
  for (let i = 0; i < 5; i++) {
    const r = await store.reserveRun(req("a", null, { now: 2000 + i }));
    await store.finishRun(r.run.id, result("ok", 2000 + i, 2100 + i));
  }
  out.pruned = await store.pruneRuns([{ job: "a", keep: 3 }]);
  out.prunedNone = await store.pruneRuns([{ job: "a", keep: 3 }]);
  out.left = (await store.history("a", 10)).map((r) => r.id);
  assert.equal(out.rows[0].status, "ok");
  assert.equal(out.rows[0].finished_at, 1500);
  assert.equal(out.rows[1].owner_pid, OTHER.pid);
  assert.equal(out.rows[1].pid, 4002);
  assert.equal(out.jobs[0].last_success_at, 1500);
  assert.equal(out.jobs[1].last_success_at, null);
  assert.deepEqual(out.pruned, ["/logs/a/1.log", "/logs/a/3.log", "/logs/a/4.log"]);
  assert.deepEqual(out.left, [7, 6, 5]);
  // Several jobs in one call, each by its own keep; a job with nothing beyond it adds nothing.
  for (let i = 0; i < 3; i++) {
    const r = await store.reserveRun(req("b", null, { now: 3000 + i }));
    await store.finishRun(r.run.id, result("ok", 3000 + i, 3100 + i));
  }
  out.prunedTwo = await store.pruneRuns([
    { job: "a", keep: 1 },
    { job: "b", keep: 2 },
    { job: "c", keep: 1 },
  ]);
  out.leftTwo = [
    (await store.history("a", 10)).map((r) => r.id),
    (await store.history("b", 10)).map((r) => r.id),
  ];
  assert.deepEqual(out.prunedTwo, [
    "/logs/a/5.log",
    "/logs/a/6.log",
    "/logs/b/2.log",
    "/logs/b/8.log",
  ]);
  assert.deepEqual(out.leftTwo, [[7], [10, 9]]);
  return out;
});

contract("dispositions: once per slot, with events in one transaction", async (_t, { store }) => {
  const out = {};
  out.one = [
    await store.recordDisposition("a", 60_000, "skipped", "paused", 100),
    await store.recordDisposition("a", 60_000, "skipped", "paused", 101),
  ];
  out.many = await store.recordDispositions(
    [
      { job: "a", slot: 60_000, status: "missed", reason: "daemon down" },
      { job: "a", slot: 120_000, status: "missed", reason: "daemon down" },
      { job: "b", slot: 120_000, status: "missed", reason: "daemon down" },
    ],
    200,
    [{ job: "a", kind: "clock", detail: "stepped" }],
  );
  out.empty = await store.recordDispositions([], 300);
  out.reserveAfter = await store.reserveRun(req("a", 120_000));
  out.history = await store.history(null, 10);
  out.events = await store.events("a", 10);
  out.jobs = await store.allJobs();
  assert.deepEqual(out.one, [true, false]);
  assert.deepEqual(out.many, [false, true, true]);
  assert.deepEqual(out.reserveAfter, { kind: "duplicate", slotRunId: null });
  return out;
});

contract(
  "slotFacts (why): a skip's holder, the pause before it, the rows around it",
  async (_t, { store }) => {
    const holder = await store.reserveRun(req("a", 60_000, { now: 60_010 }));
    assert.equal(holder.kind, "started");
    await store.setPaused("a", true, 61_000);
    await store.setPaused("a", false, 62_000);
    const skip = await store.reserveRun(req("a", 120_000, { now: 120_005 }));
    assert.equal(skip.kind, "locked");
    await store.recordDisposition(
      "a",
      120_000,
      "skipped",
      `overlap: run ${holder.run.id} holds the lock`,
      120_005,
    );
    await store.finishRun(holder.run.id, result("ok", 60_010, 130_000));
    await store.recordDisposition("a", 180_000, "missed", "daemon down", 250_000);
    const skipped = await store.slotFacts("a", 120_000);
    assert.equal(skipped.runs.length, 1);
    assert.equal(skipped.runs[0].status, "skipped");
    assert.equal(skipped.holder?.id, holder.run.id);
    assert.equal(skipped.pause?.kind, "resumed");
    assert.equal(skipped.job?.name, "a");
    const missed = await store.slotFacts("a", 180_000);
    assert.equal(missed.runs[0].status, "missed");
    assert.equal(missed.lastBefore, 130_000, "the holder's end is the last sign before it");
    assert.equal(missed.firstAfter, 250_000);
    const none = await store.slotFacts("a", 999_000);
    assert.deepEqual([none.runs, none.claim, none.holder], [[], null, null]);
    return { skipped, missed, none };
  },
);

contract(
  "a tick's batch naming one slot twice, with a locked job's skip: as written one after another",
  async (_t, { store }) => {
    await store.addJobs(
      [
        { name: "a", bootId: null },
        { name: "b", bootId: null },
      ],
      1,
    );
    const held = (await store.reserveRun(req("b", null, { trigger: "manual" }))).run;
    const dispose = (job, slot, status = "skipped") => ({
      dispose: { job, slot, status, reason: "paused" },
      now: 5000,
    });
    const out = await store.reserveRuns([
      dispose("a", 60_000),
      { reserve: req("a", 60_000) },
      dispose("a", 60_000, "missed"),
      { reserve: req("b", 120_000) },
      { reserve: req("a", 180_000) },
      { reserve: req("a", 180_000) },
      dispose("a", 240_000, "missed"),
    ]);
    const started = out[4].run;
    const rows = (await store.history("a", 10)).map((r) => [r.slot, r.status, r.reason]);
    return {
      kinds: out.map((o) => o.kind),
      recorded: out.filter((o) => o.kind === "recorded").map((o) => o.recorded),
      duplicateOf: [out[1].slotRunId, out[5].slotRunId === started.id],
      locked: out[3].holder.id === held.id,
      rows: rows.sort((x, y) => x[0] - y[0]),
      skips: (await store.history("b", 10)).map((r) => [r.slot, r.status, r.reason]),
      scanned: [(await store.job("a")).scanned_to, (await store.job("b")).scanned_to],
    };
  },
);

contract("history: lastRun, historyRow, recentFinished, scans", async (_t, { store }) => {
  const out = {};
  const a1 = await store.reserveRun(req("a", 60_000));
  await store.finishRun(a1.run.id, result("failed", 1000, 1100));
  await store.recordDisposition("a", 120_000, "skipped", "paused", 1200);
  const a2 = await store.reserveRun(req("a", 180_000, { now: 1300 }));
  await store.event(1400, "b", "note", null);
  out.last = await store.lastRun("a");
  out.none = await store.lastRun("zzz");
  out.historyRow = [await store.historyRow(a1.run.id), await store.historyRow(12345)];
  out.recent = await store.recentFinished("a", 5);
  out.all = await store.history(null, 2);
  out.after = await store.runsAfter("a", a1.run.id, 10);
  out.since = await store.runsRunningOrFinishedSince("a", 1150);
  out.timelines = Object.fromEntries(await store.timelines(["a", "zzz"], 1150));
  out.maxRunId = [await store.maxRunId("a"), await store.maxRunId("zzz")];
  out.maxIds = await store.maxIds();
  out.changed = await store.jobsChangedSince(a1.run.id, 0);
  out.changed = { ...out.changed, jobs: [...out.changed.jobs].sort() };
  out.unchanged = await store.jobsChangedSince(out.maxIds.runId, out.maxIds.eventId);
  out.unchanged = { ...out.unchanged, jobs: [...out.unchanged.jobs] };
  assert.equal(out.last.id, a2.run.id);
  assert.deepEqual(
    out.recent.map((r) => r.id),
    [a1.run.id],
  );
  assert.deepEqual(out.changed.jobs, ["a", "b"]);
  // The timeline rows are the same rows as runsRunningOrFinishedSince, in its columns (the node
  // included: a bar on a shared store names it).
  const columns = Object.keys(out.timelines.a[0] ?? {}).sort();
  assert.deepEqual(columns, [
    "duration_ms",
    "exit_code",
    "finished_at",
    "id",
    "node",
    "reason",
    "signal",
    "slot",
    "started_at",
    "status",
    "trigger",
  ]);
  assert.deepEqual(
    out.timelines.a,
    out.since.map((r) => Object.fromEntries(columns.map((k) => [k, r[k]]))),
  );
  assert.deepEqual(out.timelines.zzz, []);
  assert.deepEqual(out.unchanged.jobs, []);
  return out;
});

contract("markers: markDone fenced, isDone, removeMarker, counts", async (_t, { store, open }) => {
  const out = {};
  const r = (await store.reserveRun(req("a", null))).run;
  out.marked = await store.markDone(writer(r), ["k2", "k1", "k2"], 2000);
  out.again = await store.markDone(writer(r), ["k1", "k3"], 2001);
  out.wrongFence = await store.markDone({ job: "a", run: { id: r.id, fence: 99 } }, ["x"], 2002);
  out.wrongJob = await store.markDone({ job: "b", run: { id: r.id, fence: r.fence } }, ["x"], 2002);
  out.operator = await store.markDone({ job: "b", run: null }, ["ops"], 2003);
  out.done = [await store.isDone(writer(r), "k1"), await store.isDone(writer(r), "nope")];
  out.marks = await store.markers("a");
  out.counts = [await store.markerCount("a"), [...(await store.markerCounts())]];
  out.isMarked = [await store.isMarked("a", "k3"), await store.isMarked("b", "k3")];
  // A run whose lock another took over (or that ended) writes nothing more.
  const other = await open();
  const next = await other.reserveRun(req("a", null, { holderAlive: () => false, now: 3000 }));
  out.stale = await store.markDone(writer(r), ["late"], 3001);
  out.current = await store.markDone(writer(next.run), ["new"], 3002);
  // Keys all marked before: no progress.
  out.noneNew = await store.markDone(writer(next.run), ["new", "k3"], 3500);
  out.nextRun = await store.run(next.run.id);
  out.removed = [
    await store.removeMarker("a", "k1", 4000, "root"),
    await store.removeMarker("a", "k1", 4001, "root"),
  ];
  out.runRow = await store.run(r.id);
  out.job = await store.job("a");
  out.events = await store.events("a", 5);
  assert.equal(out.marked, 2);
  assert.equal(out.again, 1);
  assert.equal(out.wrongFence, null);
  assert.equal(out.wrongJob, null);
  assert.equal(out.operator, 1);
  assert.deepEqual(out.done, [true, false]);
  assert.equal(out.runRow.markers_skipped, 1);
  assert.equal(out.runRow.markers_new, 3);
  // Counted once per call, at its time: the newest call that marked a new key.
  assert.equal(out.runRow.progress_at, 2001);
  assert.equal(out.noneNew, 0);
  assert.equal(out.nextRun.markers_new, 1);
  assert.equal(out.nextRun.progress_at, 3002);
  assert.equal(out.job.last_progress_at, 3002);
  assert.equal(out.stale, null);
  assert.equal(out.current, 1);
  assert.deepEqual(out.removed, [true, false]);
  assert.equal(await store.isMarked("a", "late"), false);
  assert.equal(out.events[0].detail, "k1 (by root)");
  return out;
});

contract("claims: take, held, command, complete, release, attempts", async (_t, { store }) => {
  const out = {};
  const r = (await store.reserveRun(req("a", null))).run;
  const w = writer(r);
  const alive = (live) => (pid) => live.includes(pid);
  out.take = await store.takeClaim(w, "k", ME, 100, alive([]));
  out.held = await store.takeClaim(w, "k", OTHER, 101, alive([ME.pid]));
  out.holder = await store.claimHolder("a", "k");
  await store.setClaimCommand("a", "k", ME.pid, 5555, "c1");
  out.byCommand = await store.takeClaim(w, "k", OTHER, 102, alive([5555]));
  out.takenOver = await store.takeClaim(w, "k", OTHER, 103, alive([]));
  out.completeWrongPid = await store.completeClaim(w, "k", ME.pid, 104);
  out.holderAfter = await store.claimHolder("a", "k"); // OTHER's claim was not dropped by ME
  await store.releaseClaim("a", "k", OTHER.pid);
  out.released = await store.claimHolder("a", "k");
  out.done = await store.takeClaim(w, "k", ME, 105, alive([]));
  for (let i = 0; i < 4; i++) await store.takeClaim(w, "r", ME, 200 + i, alive([]));
  await store.takeClaim({ job: "b", run: null }, "q", ME, 210, alive([]));
  out.repeating = await store.repeatingKeys("a", 2);
  out.since = [
    await store.repeatingKeysSince("a", 2, 203),
    await store.repeatingKeysSince("a", 2, 204),
  ];
  out.all = [...(await store.repeatingKeysAll(0))];
  out.attempted = (await store.jobsAttemptedSince(205)).sort();
  await store.revokeRun(r.id);
  out.stale = await store.takeClaim(w, "s", ME, 300, alive([]));
  out.staleComplete = await store.completeClaim(w, "r", ME.pid, 301);
  out.run = await store.run(r.id);
  assert.deepEqual(out.take, { kind: "claimed" });
  assert.equal(out.held.kind, "held");
  assert.equal(out.held.by, "once");
  assert.equal(out.byCommand.by, "command");
  assert.deepEqual(out.takenOver, { kind: "claimed" });
  assert.equal(out.completeWrongPid, true);
  assert.equal(out.holderAfter.pid, OTHER.pid);
  assert.equal(out.released, undefined);
  assert.deepEqual(out.done, { kind: "done" });
  assert.deepEqual(out.repeating, [{ key: "r", count: 4 }]);
  assert.deepEqual(out.stale, { kind: "stale" });
  assert.equal(out.staleComplete, false);
  assert.equal(await store.isMarked("a", "r"), false);
  return out;
});

contract(
  "summary: a finished run's later writes refresh it; a running run's marks do not need to",
  async (_t, { store }) => {
    const r = (await store.reserveRun(req("a", null))).run;
    await store.markDone(writer(r), ["k", "l"], 1100);
    await store.finishRun(r.id, result("ok", 1000, 1900));
    // A check by a process left over after the run counts skipped work on the finished run: a
    // column of its summary (last_finished), so the summary follows (migration 009's list).
    await store.isDone(writer(r), "k");
    const row = await store.run(r.id);
    const s = (await store.statusRows([{ name: "a", repeatLimit: 3 }], 0)).jobs.get("a");
    assert.equal(row.markers_skipped, 1);
    assert.deepEqual(
      [s.lastFinished.markers_new, s.lastFinished.markers_skipped, s.lastFinished.status],
      [2, 1, "ok"],
    );
    return { markers_skipped: row.markers_skipped, last: s.lastFinished.markers_skipped };
  },
);

contract("progress: only the job's live run reports it", async (_t, { store }) => {
  const out = {};
  const r = (await store.reserveRun(req("a", null))).run;
  out.half = await store.reportProgress(writer(r), "half", 1500);
  out.none = await store.reportProgress(writer(r), null, 1600);
  out.live = await store.reportProgress(writer(r), "more", 1700);
  out.noRun = await store.reportProgress({ job: "a", run: null }, "x", 1800);
  out.wrong = await store.reportProgress({ job: "a", run: { id: r.id, fence: 7 } }, "x", 1800);
  await store.finishRun(r.id, result("failed", 1000, 1900));
  out.ended = await store.reportProgress(writer(r), "late", 2000);
  out.run = await store.run(r.id);
  out.job = await store.job("a");
  assert.deepEqual([out.half, out.none, out.live], [true, true, true]);
  assert.deepEqual([out.noRun, out.wrong, out.ended], [false, false, false]);
  assert.equal(out.run.progress_count, 3);
  assert.equal(out.run.progress_msg, "more");
  assert.equal(out.run.progress_at, 1700);
  assert.equal(out.job.last_progress_at, 1700);
  return out;
});

contract("events and alert state", async (_t, { store }) => {
  const out = {};
  await store.event(1, null, "start", "daemon");
  await store.event(2, "a", "clock", "jumped");
  await store.event(3, "b", "late", null);
  out.all = await store.events(null, 2);
  out.a = await store.events("a", 10);
  out.none = await store.alertState("a");
  await store.setAlertState("a", "failing", 10);
  await store.setAlertState("a", "failing,stuck", 20);
  out.state = await store.alertState("a");
  assert.deepEqual(
    out.all.map((e) => e.at),
    [3, 2],
  );
  assert.deepEqual(out.state, { active: "failing,stuck", since: 20 });
  return out;
});

contract("statusRows and jobReadings: one snapshot of everything", async (_t, { store }) => {
  await store.claimDaemon(ME, 1, 1000, "/jobs.yaml", () => true);
  const a1 = await store.reserveRun(req("a", 60_000));
  await store.finishRun(a1.run.id, result("ok", 1000, 1200));
  await store.reserveRun(req("a", 120_000, { now: 1300 }));
  const b1 = await store.reserveRun(req("b", 60_000));
  await store.markDone(writer(b1.run), ["x", "y"], 1400);
  for (let i = 0; i < 3; i++) await store.takeClaim(writer(b1.run), "z", ME, 1500 + i, () => false);
  const out = {};
  out.readings = await store.jobReadings("b", 1);
  const list = [
    { name: "a", repeatLimit: 3 },
    { name: "b", repeatLimit: 1 },
    { name: "c", repeatLimit: 3 },
  ];
  const many = await store.statusRows(list, 5);
  out.many = { daemon: many.daemon, jobs: [...many.jobs] };
  const one = await store.statusRows([list[0]], 5);
  out.one = { daemon: one.daemon, jobs: [...one.jobs] };
  const none = await store.statusRows([], 5);
  out.none = { daemon: none.daemon, jobs: [...none.jobs] };
  assert.deepEqual(out.one.jobs[0][1], out.many.jobs[0][1], "one job reads as the many path does");
  assert.equal(out.many.jobs[1][1].markers, 2);
  assert.deepEqual(out.many.jobs[1][1].attempts, [{ key: "z", count: 3, last_at: 1502 }]);
  assert.equal(out.many.jobs[2][1].row, null);
  return out;
});

contract(
  "dataVersion changes when another connection commits",
  async (_t, { store, open }) => {
    const other = await open();
    const v0 = await store.dataVersion();
    assert.equal(await store.dataVersion(), v0, "no commit, no change");
    await other.ensureJob("a", 1);
    const v1 = await store.dataVersion();
    assert.notEqual(v1, v0);
    await other.markDone({ job: "a", run: null }, ["k"], 2);
    assert.notEqual(await store.dataVersion(), v1);
  },
  NOT_COMPARED,
);

contract(
  "migrations: applied from empty, idempotent on reopen",
  async (_t, { store, open, place }) => {
    assert.equal(await place.version(), LATEST);
    await store.markDone({ job: "a", run: null }, ["kept"], 1);
    await store.close();
    const again = await open();
    assert.equal(await place.version(), LATEST);
    assert.equal(await again.isMarked("a", "kept"), true);
    const reader = await open({ create: false, readonly: true });
    assert.equal(await reader.isMarked("a", "kept"), true);
  },
  NOT_COMPARED,
);

contract(
  "a store at a newer schema version is refused",
  async (_t, { store, place }) => {
    await store.close();
    await place.setVersion(99);
    await assert.rejects(
      place.open({ create: false }),
      (e) =>
        e instanceof StoreError &&
        e.code === "corrupt" &&
        /newer than this cronvisor/.test(e.message),
    );
    assert.equal(await place.version(), 99, "left as it was");
  },
  NOT_COMPARED,
);

// ---- PostgreSQL only: two stores (two pools) racing on what SQLite serialises ---------------

// Its `skip` is pgMissing()'s reason (PostgreSQL not installed, CI not set); in CI never.
const pgEngine = ENGINES[1];

async function twoStores(t) {
  const place = await pgEngine.place(t);
  const a = await place.open();
  const b = await place.open();
  t.after(async () => {
    await a.close();
    await b.close();
  });
  return { a, b, url: place.url };
}

test(
  "postgresql: two stores reserving the same slot at once: one runs it",
  needs(pgEngine.skip),
  async (t) => {
    const { a, b, url } = await twoStores(t);
    await a.ensureJob("j", 1);
    // Hold the job's row lock from a third connection so that both reservations are in flight,
    // waiting, before either proceeds.
    const raw = await rawClient(url, t);
    await raw.query("BEGIN");
    await raw.query("SELECT 1 FROM jobs WHERE name = 'j' FOR UPDATE");
    const both = Promise.all([a.reserveRun(req("j", 60_000)), b.reserveRun(req("j", 60_000))]);
    await waitForLockWaiters(raw, 2);
    await raw.query("COMMIT");
    const kinds = (await both).map((o) => o.kind).sort();
    assert.deepEqual(kinds, ["duplicate", "started"]);
    // Many slots raced without the gate: every slot exactly one run, fences 1..N, no two alike.
    const slots = Array.from({ length: 20 }, (_, i) => 120_000 + i * 60_000);
    const out = await Promise.all(
      slots.flatMap((s) => [
        a.reserveRun(req("j", s, { lock: false })),
        b.reserveRun(req("j", s, { lock: false })),
      ]),
    );
    const started = out.filter((o) => o.kind === "started");
    assert.equal(started.length, slots.length);
    assert.equal(out.filter((o) => o.kind === "duplicate").length, slots.length);
    const fences = started.map((o) => o.run.fence).sort((x, y) => x - y);
    assert.deepEqual(
      fences,
      slots.map((_, i) => i + 2),
    );
    // The lock: two manual runs at once, one starts, the other finds it held.
    const [m1, m2] = await Promise.all([
      a.reserveRun(req("k", null, { trigger: "manual" })),
      b.reserveRun(req("k", null, { trigger: "manual" })),
    ]);
    assert.deepEqual([m1.kind, m2.kind].sort(), ["locked", "started"]);
  },
);

test(
  "postgresql: markDone waiting behind a takeover is refused once it commits",
  needs(pgEngine.skip),
  async (t) => {
    const { a, b, url } = await twoStores(t);
    const old = (await a.reserveRun(req("j", null))).run;
    // A takeover in flight on a third connection: it holds the job row and has ended the old run.
    const raw = await rawClient(url, t);
    await raw.query("BEGIN");
    await raw.query("SELECT 1 FROM jobs WHERE name = 'j' FOR UPDATE");
    await raw.query("UPDATE runs SET status = 'interrupted', revoked = 1 WHERE id = $1", [old.id]);
    const late = a.markDone(writer(old), ["after-takeover"], 2000);
    await waitForLockWaiters(raw, 1);
    await raw.query("COMMIT");
    assert.equal(await late, null, "the stale writer is refused");
    assert.equal(await b.isMarked("j", "after-takeover"), false);
    // The same through the store: marks and a takeover racing; every applied mark precedes it.
    const cur = (await a.reserveRun(req("j", null, { now: 3000 }))).run;
    const marks = Array.from({ length: 10 }, (_, i) =>
      a.markDone(writer(cur), [`m${i}`], 3100 + i),
    );
    const takeover = b.reserveRun(req("j", null, { holderAlive: () => false, now: 4000 }));
    const results = await Promise.all(marks);
    const next = (await takeover).run;
    const applied = results.filter((n) => n === 1).length;
    assert.equal(applied + results.filter((n) => n === null).length, 10);
    assert.equal((await b.run(cur.id)).markers_new, applied);
    assert.equal((await b.run(cur.id)).status, "interrupted");
    assert.equal(await b.markDone(writer(cur), ["later"], 5000), null);
    assert.equal(await b.markDone(writer(next), ["later"], 5000), 1);
  },
);

test(
  "postgresql: another node's run holds the lock by its lease; once it ran out, one takeover (takeOver or a reservation) fences it and returns the slots it blocked; on one machine, a daemon ends a dead node's dead run at once",
  needs(pgEngine.skip),
  async (t) => {
    const place = await pgEngine.place(t);
    const a = await place.open({ node: "n1" });
    const b = await place.open({ node: "n2" });
    t.after(async () => {
      await a.close();
      await b.close();
    });
    const raw = await rawClient(place.url, t);
    const lease = (sql) => raw.query(`UPDATE daemon SET renewed_at = ${sql} WHERE node = 'n1'`);
    const dbNow = "(extract(epoch from clock_timestamp()) * 1000)::bigint";
    assert.equal(await a.claimDaemon(ME, 1, 1000, "/n1.yaml", () => true), null);
    const held = (await a.reserveRun(req("j", 1000))).run;
    // n1's lease runs: n2's slots are skipped, saying whose run and until when.
    for (const slot of [2000, 3000]) {
      const [out] = await b.reserveRuns([{ reserve: req("j", slot, { owner: OTHER }) }]);
      assert.equal(out.kind, "locked");
      assert.equal(out.holder.id, held.id);
      assert.equal(out.lease.node, "n1");
      assert.ok(out.lease.leftMs > 25_000 && out.lease.leftMs <= 30_000, String(out.lease.leftMs));
      const [row] = (await b.history("j", 1)).filter((r) => r.slot === slot);
      assert.equal(row.status, "skipped");
      assert.equal(
        row.reason,
        `lock held by node n1 (run ${held.id}, lease until ${new Date(out.lease.until).toISOString()})`,
      );
    }
    const live = await b.takeOver("j", 4000);
    assert.deepEqual(live.tookOver, []);
    assert.equal(live.held.node, "n1");
    assert.equal((await b.run(held.id)).status, "running");
    // The lease runs out: the first takeover fences the run and gets both slots; a second, none.
    await lease(`${dbNow} - 60000`);
    assert.deepEqual(await b.takeOver("j", 5000), {
      held: null,
      tookOver: [{ node: "n1", runId: held.id, slots: [2000, 3000], diedHere: false }],
    });
    const fenced = await b.run(held.id);
    assert.equal(fenced.status, "fenced");
    assert.equal(fenced.reason, "node n1's lease ran out; node n2 took the job over");
    assert.deepEqual(await b.takeOver("j", 5000), { held: null, tookOver: [] });
    // The same through a reservation: it starts its run and returns the slots the old one blocked.
    await lease(dbNow);
    const second = (await a.reserveRun(req("j", 6000))).run;
    assert.equal((await b.reserveRun(req("j", 7000, { owner: OTHER }))).kind, "locked");
    await lease(`${dbNow} - 60000`);
    const took = await b.reserveRun(req("j", 8000, { owner: OTHER }));
    assert.equal(took.kind, "started");
    assert.deepEqual(took.tookOver, [
      { node: "n1", runId: second.id, slots: [7000], diedHere: false },
    ]);
    // Both nodes' daemons on one machine: n2's daemon ends a run of n1 whose processes and
    // daemon are gone at once, lease or not; another process of n2 (`cronvisor run`) waits for it.
    await b.finishRun(took.run.id, result("ok", 8000, 8100));
    assert.equal(await b.claimDaemon(OTHER, 1, 1000, "/n2.yaml", () => true), null);
    await raw.query("UPDATE daemon SET host = 'm', boot_id = 'boot'");
    await lease(dbNow);
    const third = (await a.reserveRun(req("j", 9000))).run;
    const dead = { holderAlive: () => false };
    const cli = { pid: 4242, start: "cli" };
    const waits = await b.reserveRun(req("j", 10_000, { ...dead, owner: cli }));
    assert.equal(waits.kind, "locked");
    const now = await b.reserveRun(req("j", 11_000, { ...dead, owner: OTHER }));
    assert.equal(now.kind, "started");
    assert.deepEqual(now.tookOver, [
      { node: "n1", runId: third.id, slots: [10_000], diedHere: true },
    ]);
    const ended = await b.run(third.id);
    assert.equal(ended.status, "interrupted");
    assert.equal(
      ended.reason,
      "its processes and node n1's daemon died on this machine; node n2 took the job over",
    );
  },
);

test("sqlite: takeOver: one node, nothing to take over", async (t) => {
  const store = await openStore(tmpdir(t), { create: true });
  t.after(() => store.close());
  assert.deepEqual(await store.takeOver("j", 1000), { held: null, tookOver: [] });
});

test(
  "postgresql: two once claims and two daemons at once: one wins each",
  needs(pgEngine.skip),
  async (t) => {
    const { a, b } = await twoStores(t);
    const w = { job: "j", run: null };
    const claims = await Promise.all([
      a.takeClaim(w, "k", ME, 1, () => true),
      b.takeClaim(w, "k", OTHER, 1, () => true),
    ]);
    assert.deepEqual(claims.map((c) => c.kind).sort(), ["claimed", "held"]);
    const daemons = await Promise.all([
      a.claimDaemon(ME, 1, 1000, "/a.yaml", () => true),
      b.claimDaemon(OTHER, 1, 1000, "/b.yaml", () => true),
    ]);
    assert.equal(
      daemons.filter((d) => d === null).length,
      1,
      "exactly one daemon claims the store",
    );
    const holder = await a.daemon();
    assert.equal(daemons.find((d) => d !== null).pid, holder.pid);
  },
);

test(
  "postgresql: an empty database is missing to a reader and to create: false",
  needs(pgEngine.skip),
  async (t) => {
    const url = await freshDatabase();
    for (const opts of [{ create: false }, { create: true, readonly: true }]) {
      await assert.rejects(
        openPgStore(url, opts),
        (e) => e instanceof StoreError && e.code === "missing",
      );
    }
    const raw = await rawClient(url, t);
    const tables = await raw.query(
      "SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'",
    );
    assert.equal(tables.rows[0].n, 0, "nothing written");
  },
);

// ---- issue 16: status from the jobs' own rows ------------------------------------------------

const SUMMARY_CONFIG = `state_dir: /nonexistent
jobs:
  many: { schedule: "* * * * *", command: "true" }
  allow: { schedule: "* * * * *", command: "true", overlap: allow }
  marked: { schedule: "* * * * *", command: "true", health: { repeat_limit: 1 } }
  unrun: { schedule: "* * * * *", command: "true" }
  dispositions: { schedule: "* * * * *", command: "true" }
  pruned: { schedule: "* * * * *", command: "true" }
  reaped: { schedule: "* * * * *", command: "true" }
`;

/** A history with every kind of row status reads: the summary must give what the runs gave. */
async function variedHistory(store) {
  let t = 100_000;
  const start = async (job, slot, over = {}) => {
    const r = await store.reserveRun(req(job, slot, { now: (t += 1000), ...over }));
    if (r.kind === "started") await store.setRunProcess(r.run.id, 4242, "s", 4242);
    return r.run;
  };
  const end = (run, status, over = {}) =>
    store.finishRuns([{ runId: run.id, result: result(status, run.started_at, (t += 500), over) }]);
  // 25 runs, some failed, a timeout, a retry: more than the summary keeps.
  for (let i = 0; i < 25; i++) {
    const run = await start("many", i * 60_000, { attempt: i % 7 === 3 ? 2 : 1 });
    const status = i % 6 === 5 ? "failed" : i === 11 ? "timeout" : "ok";
    await end(
      run,
      status,
      i === 11 ? { reason: "timeout 1s", signal: "SIGKILL", exitCode: null } : {},
    );
  }
  // A finished run's summary column written after its end: a check by a process left over from
  // it counts a done key as skipped work on it.
  const lastMany = await store.lastRun("many");
  await store.markDone({ job: "many", run: null }, ["k-many"], (t += 1));
  await store.isDone({ job: "many", run: { id: lastMany.id, fence: lastMany.fence } }, "k-many");
  await start("many", 25 * 60_000); // still running: last_run is it, last_finished_run is not
  // overlap: allow: two running at once, ending out of order.
  const a1 = await start("allow", 60_000, { lock: false });
  const a2 = await start("allow", 120_000, { lock: false });
  const a3 = await start("allow", 180_000, { lock: false });
  await end(a2, "ok");
  await end(a1, "failed");
  void a3;
  // Markers: new, skipped, removed, attempts; and markers of a job that never ran.
  const m = await start("marked", 60_000);
  await store.markDone(writer(m), ["k1", "k2", "k3"], (t += 1));
  await store.isDone(writer(m), "k1");
  await store.removeMarker("marked", "k2", (t += 1), "test");
  for (let i = 0; i < 3; i++) await store.takeClaim?.(writer(m), "hard", ME, (t += 1), () => false);
  await end(m, "ok");
  await store.markDone({ job: "unrun", run: null }, ["outside"], (t += 1));
  // Dispositions only, then a run among them.
  await store.recordDisposition("dispositions", 60_000, "missed", "daemon down", (t += 1));
  await store.recordDisposition("dispositions", 120_000, "skipped", "paused", (t += 1));
  await end(await start("dispositions", 180_000), "ok");
  await store.recordDisposition("dispositions", 240_000, "skipped", "paused", (t += 1));
  // Pruned down to dispositions: the last finished run is gone.
  await end(await start("pruned", 60_000), "ok");
  await end(await start("pruned", 120_000), "failed");
  await store.recordDisposition("pruned", 180_000, "skipped", "paused", (t += 1));
  await store.pruneRuns([{ job: "pruned", keep: 1 }]);
  // A dead holder reaped (interrupted) by the next reservation, which is then fenced.
  await start("reaped", 60_000);
  const r2 = await start("reaped", 120_000, { holderAlive: () => false });
  await end(r2, "fenced", { reason: "its node lost its lease", exitCode: null });
  return t + 1000;
}

contract("status: the jobs' summary rows give the status the runs gave", async (_t, { store }) => {
  const { parseConfig } = await import("../dist/config/parse.js");
  const { buildStatus } = await import("../dist/health/status.js");
  const { renderStatus } = await import("../dist/health/render.js");
  const { config } = parseConfig(SUMMARY_CONFIG, "/nonexistent/jobs.yaml", { hostTimezone: "UTC" });
  assert.ok(config, "the test's config parses");
  const now = await variedHistory(store);
  const out = {};
  for (const only of [null, "many", "allow", "marked", "unrun", "pruned"]) {
    const want = await buildStatus(config, fromRuns(store), now, only);
    const got = await buildStatus(config, store, now, only);
    assert.equal(JSON.stringify(got, null, 2), JSON.stringify(want, null, 2), `status ${only}`);
    const detail = only ? await store.history(only, 10) : [];
    assert.equal(
      renderStatus(got, detail, { color: false, now }),
      renderStatus(want, detail, { color: false, now }),
    );
    out[only ?? "all"] = got.jobs.map((j) => [j.name, j.health, j.markers, j.last_run?.run_id]);
  }
  // The history is what it should be, so that the comparison above is not between two empties.
  const all = (await buildStatus(config, store, now)).jobs;
  const job = (n) => all.find((j) => j.name === n);
  assert.equal(job("many").last_run.status, "running");
  assert.equal(job("many").last_finished_run.status, "ok");
  assert.equal(job("marked").markers, 2);
  assert.equal(job("unrun").markers, 1);
  assert.equal(job("pruned").last_finished_run, null);
  assert.ok(job("many").p95_duration_ms !== null);
  return out;
});

/** A seeded PRNG (mulberry32): the same random history on both engines, and on every run. */
function seeded(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

contract(
  "health's digest kept in the jobs' rows (digest.ts) is the rule's plain reading of their runs, in status's and one job's readings, on random histories",
  async (_t, { store }) => {
    const { digestRecent } = await import("./digest-oracle.js");
    const rand = seeded(8);
    const tries = seeded(9);
    const pick = (xs) => xs[Math.floor(rand() * xs.length)];
    const STATUSES = ["ok", "ok", "ok", "ok", "failed", "timeout", "spawn_failed", "killed"];
    const jobs = ["j0", "j1", "j2", "j3", "j4", "j5"];
    const list = jobs.map((name) => ({ name, repeatLimit: 3 }));
    const slots = new Map(jobs.map((j) => [j, 0]));
    const left = new Set();
    let t = 1_000_000;
    const checked = [];
    let attempted = 0;
    for (let step = 0; step < 240; step++) {
      const job = pick(jobs);
      const slot = (slots.get(job) ?? 0) + 60_000;
      slots.set(job, slot);
      const roll = rand();
      if (roll < 0.06) {
        await store.recordDisposition(job, slot, pick(["skipped", "missed"]), "test", (t += 1));
      } else if (roll < 0.1) {
        await store.pruneRuns([{ job, keep: 1 + Math.floor(rand() * 8) }]);
      } else {
        // A run left running is reaped (interrupted) by its job's next reservation.
        const r = await store.reserveRun(
          req(job, slot, { now: (t += 10), holderAlive: () => !left.delete(job) }),
        );
        assert.equal(r.kind, "started");
        // Keys tried again and again (attempts), so that which of them count as still being
        // tried (since the newest finished run's start) is compared below.
        // Their own random numbers: the histories above stay what they were.
        if (tries() < 0.3) {
          const key = tries() < 0.5 ? "k1" : "k2";
          for (let i = 1 + Math.floor(tries() * 3); i > 0; i--)
            await store.takeClaim(writer(r.run), key, ME, (t += 1), () => false);
        }
        if (rand() < 0.05) left.add(job);
        else {
          // Durations of every size, equal ones, and a few missing (counted as 0).
          const ms = pick([0, 5, 5, 100, 1000, 2500, Math.floor(rand() * 100_000)]);
          const over = rand() < 0.05 ? { durationMs: null } : {};
          const end = r.run.started_at + ms;
          await store.finishRuns([
            { runId: r.run.id, result: result(pick(STATUSES), r.run.started_at, end, over) },
          ]);
        }
      }
      if (step % 20 !== 19) continue;
      const rows = await store.statusRows(list, 0);
      for (const j of jobs) {
        const got = rows.jobs.get(j);
        assert.deepEqual(got.recent, [], "asked for no recent runs, none are returned");
        const finished = await store.recentFinished(j, 20);
        const want = digestRecent(finished);
        const norm = (d) => ({
          newest: d.newest && {
            id: d.newest.id,
            status: d.newest.status,
            reason: d.newest.reason,
            started_at: d.newest.started_at,
          },
          okP95: d.okP95,
          failing: d.failing && {
            run: {
              id: d.failing.run.id,
              status: d.failing.run.status,
              reason: d.failing.run.reason,
            },
            streak: d.failing.streak,
          },
        });
        assert.deepEqual(norm(got.digest), norm(want), `${j} at step ${step}`);
        // One job's readings (the monitor's inspectJob) judge from the same digest, and read the
        // rest as reads of the job, its runs and its attempts do (those still being tried: since
        // the newest finished run's start).
        const one = await store.jobReadings(j, 3);
        assert.deepEqual(one.recent, [], "no recent runs are read");
        assert.ok(one.digest, `${j}: the row's digest is returned`);
        assert.deepEqual(norm(one.digest), norm(want), `${j} at step ${step}: jobReadings`);
        assert.deepEqual(
          { row: one.row, running: one.running, attempts: one.attempts },
          {
            row: await store.job(j),
            running: await store.runningRuns(j),
            attempts: await store.repeatingKeysSince(j, 3, finished[0]?.started_at ?? 0),
          },
        );
        if (one.attempts.length > 0) attempted++;
        checked.push(norm(want));
      }
    }
    // The histories reached what the digest is for: a p95, failing streaks, long and short.
    assert.ok(checked.some((d) => d.okP95 !== null && d.okP95 > 0));
    assert.ok(checked.some((d) => d.failing?.streak >= 2));
    assert.ok(checked.some((d) => d.failing?.run.status === "timeout"));
    assert.ok(checked.some((d) => d.newest?.status === "killed"));
    assert.ok(checked.some((d) => d.newest?.status === "interrupted"));
    assert.ok(attempted > 0, "some readings compared had keys still being tried");
    return checked;
  },
);

/** An old store's rows, as literal SQL both engines take: runs of every kind, markers. */
function oldRows() {
  const sql = ["INSERT INTO jobs (name, first_seen_at) VALUES ('a', 1), ('b', 1), ('c', 1)"];
  for (let i = 0; i < 30; i++) {
    const job = ["a", "b"][i % 2];
    const status = i % 5 === 0 ? "failed" : i % 7 === 0 ? "skipped" : i === 29 ? "running" : "ok";
    const end = status === "running" ? "NULL" : i * 1000 + 900;
    const dur = status === "running" ? "NULL" : 900 - i;
    const reason = status === "ok" ? "NULL" : "'exit 1'";
    sql.push(`INSERT INTO runs (job, slot, trigger, status, reason, exit_code, attempt, started_at,
      finished_at, duration_ms, pid, log_path, progress_at, markers_new, markers_skipped)
      VALUES ('${job}', ${i * 1000}, 'schedule', '${status}', ${reason}, ${status === "ok" ? 0 : 1},
      ${1 + (i % 3)}, ${i * 1000}, ${end}, ${dur}, 7, '/l/${i}', ${i * 1000 + 5}, ${i % 4}, ${i % 2})`);
  }
  sql.push("INSERT INTO markers (job, key, created_at) VALUES ('b', 'x', 1), ('b', 'y', 1)");
  return sql;
}

const OLD_ENGINES = [
  {
    name: "sqlite",
    skip: false,
    async old(t) {
      const dir = path.join(tmpdir(t), "s");
      fs.mkdirSync(dir, { recursive: true });
      const db = new Database(path.join(dir, "cronvisor.db"));
      const sqlDir = new URL("../dist/store/migrations/sqlite/", import.meta.url);
      for (const f of migrationFiles().slice(0, 5))
        db.exec(fs.readFileSync(new URL(f, sqlDir), "utf8"));
      for (const s of oldRows()) db.exec(s);
      db.pragma("user_version = 5");
      db.close();
      return () => openStore(dir, { create: false });
    },
  },
  {
    name: "postgresql",
    // Skipped (with pgMissing's reason) only where PostgreSQL is not installed and CI is not set.
    skip: pgMissing(),
    async old() {
      const url = await freshDatabase();
      const c = await rawClient(url);
      const sqlDir = new URL("../dist/store/migrations/postgresql/", import.meta.url);
      await c.query(
        "CREATE TABLE schema_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)",
      );
      await c.query(
        "CREATE TABLE data_version (id INTEGER PRIMARY KEY CHECK (id = 1), n BIGINT NOT NULL)",
      );
      await c.query("INSERT INTO data_version (id, n) VALUES (1, 0)");
      for (const f of pgMigrationFiles().slice(0, 5))
        await c.query(fs.readFileSync(new URL(f, sqlDir), "utf8"));
      for (const s of oldRows()) await c.query(s);
      await c.query("INSERT INTO schema_version (id, version) VALUES (1, 5)");
      await c.end();
      return () => openPgStore(url, { create: true });
    },
  },
];

const backfilled = new Map();
for (const e of OLD_ENGINES) {
  test(
    `${e.name}: migration 006 backfills the jobs' summary rows: status as before`,
    needs(e.skip),
    async (t) => {
      const open = await e.old(t);
      const store = await open();
      t.after(() => store.close());
      const { parseConfig } = await import("../dist/config/parse.js");
      const { buildStatus } = await import("../dist/health/status.js");
      const text = `state_dir: /nonexistent\njobs:\n${["a", "b", "c", "d"].map((j) => `  ${j}: { schedule: "* * * * *", command: "true" }`).join("\n")}\n`;
      const { config } = parseConfig(text, "/nonexistent/jobs.yaml", { hostTimezone: "UTC" });
      const want = JSON.stringify(
        (await buildStatus(config, fromRuns(store), 100_000)).jobs,
        null,
        2,
      );
      assert.equal(JSON.stringify((await buildStatus(config, store, 100_000)).jobs, null, 2), want);
      const jobs = JSON.parse(want);
      assert.deepEqual(
        jobs.map((j) => j.markers),
        [0, 2, 0, 0],
      );
      assert.equal(jobs[1].last_run.status, "running");
      assert.ok(jobs[0].last_finished_run.run_id > 0);
      backfilled.set(
        e.name,
        jobs.map((j) => [j.name, j.health, j.problems, j.p95_duration_ms, j.markers]),
      );
    },
  );
}
test("both engines: migration 006's backfill: the same status", needs(OLD_ENGINES[1].skip), () => {
  assert.deepEqual(backfilled.get("postgresql"), backfilled.get("sqlite"));
});

test(
  "postgresql: a tick whose slots another node recorded waits on no job row",
  needs(pgEngine.skip),
  async (t) => {
    const { a, b, url } = await twoStores(t);
    const names = Array.from({ length: 20 }, (_, i) => `j${i}`);
    await a.addJobs(
      names.map((name) => ({ name, bootId: null })),
      1,
    );
    const slots = names.map((job) => ({ job, slot: 60_000, status: "skipped", reason: "paused" }));
    assert.deepEqual(
      await a.recordDispositions(slots, 2000),
      slots.map(() => true),
    );
    // Every job row locked by a third connection (as a reservation, a `mark` or a slow tick of
    // another node would hold them): the node that finds its slots taken must not wait for it.
    const raw = await rawClient(url, t);
    await raw.query("BEGIN");
    await raw.query("SELECT 1 FROM jobs FOR UPDATE");
    const tick = b.reserveRuns([
      ...slots.map((s) => ({ dispose: s, now: 2001 })),
      { reserve: req("j0", 60_000) },
    ]);
    const waited = waitForLockWaiters(raw, 1, 3000).then(
      () => "waited",
      () => "never waited",
    );
    const first = await Promise.race([tick.then(() => "done"), waited]);
    await raw.query("COMMIT");
    assert.equal(first, "done", "the tick did not wait for the job rows");
    const out = await tick;
    assert.deepEqual(
      out.map((o) => (o.kind === "recorded" ? o.recorded : o.kind)),
      [...slots.map(() => false), "duplicate"],
    );
  },
);

test(
  "postgresql: two nodes' ticks over the same slots in opposite orders: each slot once, no deadlock",
  needs(pgEngine.skip),
  async (t) => {
    const { a, b } = await twoStores(t);
    const names = Array.from({ length: 50 }, (_, i) => `j${String(i).padStart(2, "0")}`);
    await a.addJobs(
      names.map((name) => ({ name, bootId: null })),
      1,
    );
    // j00..j09 run (each slot a reservation on both nodes); the rest are paused on one node and
    // missed by the other (a late node), so a slot is a reservation on one and a disposition on
    // the other; each node writes its batch in its own order.
    const tickOf = (slot, order, paused) =>
      order.map((job, i) =>
        i % 5 === 0 && job < "j10"
          ? { reserve: req(job, slot, { lock: false }) }
          : job < "j10"
            ? { reserve: req(job, slot) }
            : { dispose: { job, slot, status: paused, reason: paused }, now: slot },
      );
    const rounds = Array.from({ length: 10 }, (_, r) => 60_000 * (r + 1));
    const ticks = await Promise.all(
      rounds.flatMap((slot) => [
        a.reserveRuns(tickOf(slot, names, "skipped")),
        b.reserveRuns(tickOf(slot, [...names].reverse(), "missed")),
      ]),
    );
    const won = ticks
      .flat()
      .filter((o) => o.kind === "started" || o.kind === "locked" || o.recorded);
    assert.equal(won.length, names.length * rounds.length, "each slot claimed once");
    for (const job of names) {
      const rows = await a.history(job, 100);
      assert.deepEqual(
        rows.map((r) => r.slot).sort((x, y) => x - y),
        rounds,
        `${job}: one row per slot`,
      );
      assert.equal((await a.job(job)).scanned_to, rounds.at(-1), `${job}: scanned_to`);
    }
  },
);

test(
  "postgresql: a reader's cursor never passes an id still to commit, and no writer waits for another's commit",
  needs(pgEngine.skip),
  async (t) => {
    const { a, b, url } = await twoStores(t);
    const reader = await openPgStore(url, { create: false, node: "reader" });
    t.after(() => reader.close());
    const old = (await a.reserveRun(req("j", null, { trigger: "manual" }))).run;
    // Transaction A starts a run of k (its row gets an id) and then, taking j over from a dead
    // holder, waits on j's old run row, which a third connection holds.
    const raw = await rawClient(url, t);
    await raw.query("BEGIN");
    await raw.query("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", [old.id]);
    const txA = a.reserveRuns([
      { reserve: req("k", 60_000) },
      { reserve: req("j", 60_000, { holderAlive: () => false }) },
    ]);
    await waitForLockWaiters(raw, 1);
    // Transaction B starts a run of another job meanwhile, and commits if it may.
    const txB = b.reserveRun(req("z", null, { trigger: "manual" }));
    const bDone = await Promise.race([
      txB.then(() => true),
      waitForLockWaiters(raw, 2).then(() => false),
    ]);
    // What a reader (the monitor's jobsChangedSince / runsAfter cursors) sees now.
    const seen = await reader.jobsChangedSince(old.id, 0);
    const zSeen = await reader.runsAfter("z", old.id, 10);
    await raw.query("COMMIT");
    const [k, j] = await txA;
    const z = (await txB).run;
    assert.equal(k.kind, "started");
    assert.equal(j.kind, "started");
    // Whatever the reader saw, no id below its cursor may commit after the read.
    const late = [k.run.id, j.run.id].filter((id) => id <= seen.runId);
    assert.deepEqual(late, [], `runs ${late} committed after a reader's cursor passed them`);
    // No global row orders the commits: B's start (a later id than k's) committed while A waited.
    assert.ok(bDone, "a start of another job waited for an unrelated transaction's commit");
    assert.ok(z.id > k.run.id, "z's id was taken after k's");
    assert.deepEqual(
      zSeen.map((r) => r.id),
      [z.id],
      "the reader sees z once it committed",
    );
    // From the cursor it moved to, the reader finds k and j, which committed after z.
    const next = await reader.jobsChangedSince(seen.runId, 0);
    for (const name of ["k", "j"]) assert.ok(next.jobs.has(name), `${name} found after commit`);
  },
);
