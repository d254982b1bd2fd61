// The page's kept store reads (src/monitor/page-reads.ts) on a real SQLite store: a writer
// connection commits as the daemon does, the page's read-only connection keeps what it read
// until then, and never shows a row older than the last commit.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import { openPgStore, openStore } from "../dist/store/store.js";
import { PageReads } from "../dist/monitor/page-reads.js";
import { setJob, tmpdir } from "./helpers.js";
import { freshDatabase, pgMissing } from "./pg.js";
import { needs } from "./needs.js";

const ME = { pid: process.pid, start: "me" };
const req = (job, slot, now) => ({
  job,
  slot,
  claimSlot: true,
  trigger: "schedule",
  attempt: 1,
  now,
  owner: ME,
  lock: true,
  holderAlive: () => true,
  logPath: (id) => `/logs/${job}/${id}.log`,
});
const result = (status, startedAt, finishedAt) => ({
  status,
  reason: status === "ok" ? null : "exit 1",
  exitCode: status === "ok" ? 0 : 1,
  signal: null,
  startedAt,
  finishedAt,
  durationMs: finishedAt - startedAt,
  logBytes: 10,
  logTruncated: false,
});

async function run(store, job, slot, status) {
  const r = await store.reserveRun(req(job, slot, slot + 5));
  await store.finishRun(r.run.id, result(status, slot + 5, slot + 1005));
  return r.run.id;
}

test("kept reads: the same rows while nothing commits, fresh ones after any commit, the range cut in memory as a new read would", async (t) => {
  const dir = path.join(tmpdir(t), "state");
  const writer = await openStore(dir, { create: true });
  t.after(() => writer.close());
  const H = 3_600_000;
  const base = 1_800_000_000_000;
  for (let k = 0; k < 6; k++)
    for (const job of ["a", "b"]) await run(writer, job, base + k * H, "ok");
  const reader = await openStore(dir, { create: false, readonly: true });
  t.after(() => reader.close());
  const reads = new PageReads(reader);
  const list = [
    { name: "a", repeatLimit: 3 },
    { name: "b", repeatLimit: 3 },
  ];

  await reads.check();
  const s = reads.statusStore();
  const first = await s.statusRows(list, 20);
  const lines = await reads.timelines(["a", "b"], base + 2 * H);
  await reads.check(); // nothing committed: what was read is kept
  assert.equal(await s.statusRows(list, 20), first, "kept, not read again");
  assert.deepEqual(
    await s.statusRows(list, 20),
    await reader.statusRows(list, 20),
    "and what a read gives",
  );
  assert.notEqual(await s.statusRows(list.slice(0, 1), 20), first, "other jobs: read");
  // A later start of the range: the kept rows cut in memory, as the query would cut them.
  for (const since of [base + 2 * H, base + 3 * H + 1005, base + 4 * H + 1006, base + 9 * H]) {
    await reads.check();
    const fresh = await reader.timelines(["a", "b"], since);
    for (const rows of fresh.values()) for (const r of rows) r.node = null;
    assert.deepEqual(await reads.timelines(["a", "b"], since), fresh, `since ${since}`);
  }
  assert.equal(lines.get("a").length, 4);

  // A commit by another connection (the daemon's): the next page reads again.
  const id = await run(writer, "a", base + 6 * H, "failed");
  await reads.check();
  const after = await s.statusRows(list, 20);
  assert.notEqual(after, first);
  assert.equal(after.jobs.get("a").lastFinished.id, id);
  assert.equal(after.jobs.get("a").recent[0].status, "failed");
  const lines2 = await reads.timelines(["a", "b"], base + 6 * H);
  assert.deepEqual(
    lines2.get("a").map((r) => [r.id, r.status]),
    [[id, "failed"]],
  );
  // A running run (no end yet) is in every range, as in the query.
  const running = await writer.reserveRun(req("b", base + 7 * H, base + 7 * H + 5));
  await reads.check();
  const lines3 = await reads.timelines(["a", "b"], base + 9 * H);
  assert.deepEqual(
    lines3.get("b").map((r) => [r.id, r.status]),
    [[running.run.id, "running"]],
  );
  await reads.check();
  assert.deepEqual(
    (await reads.timelines(["a", "b"], base + 10 * H)).get("b").map((r) => r.id),
    [running.run.id],
  );
});

test("a commit that writes no job's row (the daemon's heartbeat) reads no summary again; any write to a job's row does (SQLite)", async (t) => {
  const dir = path.join(tmpdir(t), "state");
  const writer = await openStore(dir, { create: true });
  t.after(() => writer.close());
  const H = 3_600_000;
  const base = 1_800_000_000_000;
  for (let k = 0; k < 3; k++)
    for (const job of ["a", "b"]) await run(writer, job, base + k * H, "ok");
  await writer.claimDaemon(ME, base, 1000, "/etc/jobs.yaml", () => true);
  const reader = await openStore(dir, { create: false, readonly: true });
  t.after(() => reader.close());
  const reads = new PageReads(reader);
  const list = ["a", "b"].map((name) => ({ name, repeatLimit: 3 }));
  const rowsNow = async () => {
    await reads.check();
    const kept = await reads.statusStore().statusRows(list, 20);
    const whole = await reader.statusRows(list, 20);
    assert.deepEqual(kept.jobs, whole.jobs, "what a whole read gives");
    assert.deepEqual(kept.daemon, whole.daemon, "the daemon row, read again");
    return kept;
  };
  let before = await rowsNow();
  // The jobs' rows as objects: the same objects when the jobs table was not read again.
  const sameRows = (after, label) => {
    for (const name of ["a", "b"])
      assert.equal(after.jobs.get(name).row, before.jobs.get(name).row, `${label}: ${name} kept`);
  };
  const readAgain = (after, label) =>
    assert.notEqual(after.jobs.get("a").row, before.jobs.get("a").row, `${label}: read again`);

  await writer.heartbeat(ME.pid, base + 4 * H, 1000);
  let after = await rowsNow();
  assert.notEqual(after, before, "a commit: the rows are not kept whole");
  assert.equal(after.daemon.heartbeat_at, base + 4 * H);
  sameRows(after, "a heartbeat");
  await writer.event(base + 4 * H, "a", "note", null);
  after = await rowsNow();
  sameRows(after, "an event");

  // Each kind of write to a job's row, by the store or by anyone else's SQL: read again.
  const writes = [
    [
      "a run started (the job's fence)",
      () => writer.reserveRun(req("a", base + 5 * H, base + 5 * H + 5)),
    ],
    ["a pause", () => writer.setPaused("b", true, base + 5 * H)],
    ["the scan moved on", () => writer.setScannedTo("a", base + 6 * H)],
    ["a marker", () => writer.markDone({ job: "a", run: null }, ["k"], base + 6 * H)],
    [
      "a column written by other SQL",
      async () => {
        const db = new Database(path.join(dir, "cronvisor.db"));
        setJob(db, "a", { last_progress_at: base + 7 * H });
        db.close();
      },
    ],
  ];
  for (const [label, write] of writes) {
    before = after;
    await write();
    after = await rowsNow();
    readAgain(after, label);
  }
});

/** A store whose timeline reads are counted: which path a page took (whole or changes). */
function counted(store) {
  const n = { timelines: 0, timelineChanges: 0 };
  const proxy = new Proxy(store, {
    get(target, key) {
      const v = Reflect.get(target, key, target);
      if (typeof v !== "function") return v;
      return (...a) => {
        if (key in n) n[key]++;
        return v.apply(target, a);
      };
    },
  });
  return { proxy, n };
}

/** The page's rows, kept and brought up to date, next to a whole read on the same connection. */
async function sameAsWhole(reads, reader, list, since, label) {
  await reads.check();
  const kept = await reads.statusStore().statusRows(list, 20);
  const whole = await reader.statusRows(list, 20);
  assert.deepEqual(kept.jobs, whole.jobs, `${label}: the status rows`);
  assert.deepEqual(kept.daemon, whole.daemon, `${label}: the daemon row`);
  const names = list.map((j) => j.name);
  const lines = await reads.timelines(names, since);
  const full = await reader.timelines(names, since);
  if (!reader.shared) for (const rows of full.values()) for (const r of rows) r.node = null;
  assert.deepEqual(lines, full, `${label}: the timelines`);
}

/**
 * After each kind of change, the incremental read (kept parses, the timelines' changes) gives
 * what a whole read gives; `others` writes as another node where the store is shared.
 */
async function everyKindOfChange(writer, reader, others) {
  const H = 3_600_000;
  const base = 1_800_000_000_000;
  for (let k = 0; k < 6; k++)
    for (const job of ["a", "b"]) await run(writer, job, base + k * H, k === 3 ? "failed" : "ok");
  const { proxy, n } = counted(reader);
  const reads = new PageReads(proxy);
  const ab = ["a", "b"].map((name) => ({ name, repeatLimit: 3 }));
  let since = base + 2 * H;
  const same = (label, list = ab) => sameAsWhole(reads, reader, list, since, label);
  const changesOnly = async (label, fn, list = ab) => {
    const whole = n.timelines;
    await fn();
    await same(label, list);
    assert.equal(n.timelines, whole, `${label}: read as changes, not whole`);
  };

  await same("the first read");
  assert.equal(n.timelines, 1);
  let started;
  await changesOnly("a run started", async () => {
    started = await writer.reserveRun(req("a", base + 6 * H, base + 6 * H + 5));
  });
  await changesOnly("the run ended", () =>
    writer.finishRun(started.run.id, result("failed", base + 6 * H + 5, base + 6 * H + 905)),
  );
  await changesOnly("a disposition", () =>
    writer.recordDisposition("b", base + 6 * H, "skipped", "overlap", base + 6 * H + 1),
  );
  await changesOnly("a marker", () =>
    writer.markDone({ job: "a", run: null }, ["k1", "k2"], base + 6 * H + 2),
  );
  await changesOnly("a pause", () => writer.setPaused("b", true, base + 6 * H + 3));
  await changesOnly("a commit that changes no job", () => writer.setScannedTo("zz", base));
  await changesOnly("the range moved on: old runs leave it", async () => {
    since = base + 3 * H + 1005;
  });
  await changesOnly("the range moved on again", async () => {
    since = base + 4 * H + 1006;
  });
  if (others) {
    let theirs;
    await changesOnly("another node's run", async () => {
      theirs = await others.reserveRun(req("b", base + 7 * H, base + 7 * H + 5));
    });
    await changesOnly("another node's run ended", () =>
      others.finishRun(theirs.run.id, result("ok", base + 7 * H + 5, base + 7 * H + 50)),
    );
  }
  // A prune deletes rows inside the range: the counts tell, and the range is read whole.
  since = base + 2 * H;
  await same("the range back to its start (a wider range: read whole)");
  const whole = n.timelines;
  await writer.pruneRuns([{ job: "a", keep: 3 }]);
  await same("a prune");
  assert.equal(n.timelines, whole + 1, "a prune: read whole");
  // A reload: a job added, then removed.
  const abc = [...ab, { name: "c", repeatLimit: 3 }];
  await run(writer, "c", base + 6 * H, "ok");
  await same("a job added", abc);
  await changesOnly("a run of the added job", () => run(writer, "c", base + 7 * H, "failed"), abc);
  await same("the job removed", ab);
}

test("after each kind of change, the kept rows brought up to date are what a whole read gives (SQLite)", async (t) => {
  const dir = path.join(tmpdir(t), "state");
  const writer = await openStore(dir, { create: true });
  t.after(() => writer.close());
  await run(writer, "a", 1_700_000_000_000, "ok"); // the WAL exists: the reader reads the file
  const reader = await openStore(dir, { create: false, readonly: true });
  t.after(() => reader.close());
  await everyKindOfChange(writer, reader, null);
});

test(
  "after each kind of change, including another node's runs, the same on PostgreSQL",
  // Skipped only where no PostgreSQL server binary is installed and CI is not set (pgMissing's
  // reason says which); in CI, which installs it, never.
  needs(pgMissing()),
  async (t) => {
    const url = await freshDatabase();
    const writer = await openPgStore(url, { create: true, node: "one" });
    t.after(() => writer.close());
    const other = await openPgStore(url, { create: false, node: "two" });
    t.after(() => other.close());
    const reader = await openPgStore(url, { create: false, node: "one" });
    t.after(() => reader.close());
    await everyKindOfChange(writer, reader, other);
  },
);
