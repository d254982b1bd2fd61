// Store.slotFacts on a real SQLite file with rows written by hand: the slot's rows, the lock
// holder when it was decided, the pause event, the catch-up runs of the start that recorded a
// slot missed, and the newest and oldest records around the slot.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { SqliteStore } from "../dist/store/sqlite-store.js";
import { plantRun, tmpdir } from "./helpers.js";

const S = 1_000_000_000_000; // the slot

test("slotFacts: an overlap skip, its holder and the pause event before it", async (t) => {
  const store = SqliteStore.open(path.join(tmpdir(t), "s"), { create: true });
  t.after(() => store.close());
  const db = store.db;
  await store.ensureJob("j", S - 10_000);
  const holder = plantRun(db, {
    job: "j",
    slot: S - 3000,
    status: "ok",
    started_at: S - 3000,
    finished_at: S + 500,
    trigger: "schedule",
  });
  plantRun(db, {
    job: "other",
    slot: S - 1,
    status: "ok",
    started_at: S - 100,
    finished_at: S + 9000,
    trigger: "schedule",
  });
  db.prepare("INSERT INTO slots (job, slot, run_id) VALUES ('j', ?, NULL)").run(S);
  const skip = plantRun(db, {
    job: "j",
    slot: S,
    status: "skipped",
    reason: `overlap: run ${holder} holds the lock`,
    started_at: S + 2,
    finished_at: S + 2,
    trigger: "schedule",
  });
  await store.setPaused("j", true, S - 5000);
  await store.setPaused("j", false, S + 60_000);
  const f = await store.slotFacts("j", S);
  assert.deepEqual(
    f.runs.map((r) => r.id),
    [skip],
  );
  assert.deepEqual(f.claim, { run_id: null });
  assert.equal(f.holder?.id, holder);
  assert.equal(
    f.pause?.kind,
    "paused",
    "the event at or before the slot's record, not the later resume",
  );
  assert.equal(f.pause?.at, S - 5000);
  assert.equal(f.lastBefore, S - 100, "the newest record of any job at or before the slot");
  assert.equal(f.firstAfter, S + 2);
  assert.deepEqual(f.catchUps, []);
});

test("slotFacts: a missed slot and the catch-up runs of the start that recorded it", async (t) => {
  const store = SqliteStore.open(path.join(tmpdir(t), "s"), { create: true });
  t.after(() => store.close());
  const db = store.db;
  const restart = S + 10_000;
  plantRun(db, {
    job: "j",
    slot: S - 1000,
    status: "ok",
    started_at: S - 1000,
    finished_at: S - 990,
    trigger: "schedule",
  });
  plantRun(db, {
    job: "j",
    slot: S,
    status: "missed",
    reason: "daemon down",
    started_at: restart,
    finished_at: restart,
    trigger: "schedule",
  });
  const cu = plantRun(db, {
    job: "j",
    slot: S + 9000,
    status: "ok",
    started_at: restart + 3,
    trigger: "catchup",
  });
  // A later downtime's catch-up is not this one's.
  plantRun(db, {
    job: "j",
    slot: S + 99_000,
    status: "ok",
    started_at: S + 100_000,
    trigger: "catchup",
  });
  const f = await store.slotFacts("j", S);
  assert.equal(f.runs[0].status, "missed");
  assert.deepEqual(
    f.catchUps.map((r) => r.id),
    [cu],
  );
  assert.equal(f.lastBefore, S - 990);
  assert.equal(f.holder, null);
  assert.equal(f.job, null);
});
