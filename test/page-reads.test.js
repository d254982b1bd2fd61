// The page's kept store reads (src/monitor/page-reads.ts) on a real SQLite store: a writer
// connection commits as the daemon does, the page's read-only connection keeps what it read
// until then, and never shows a row older than the last commit.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { openStore } from "../dist/store/store.js";
import { PageReads } from "../dist/monitor/page-reads.js";
import { tmpdir } from "./helpers.js";

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
