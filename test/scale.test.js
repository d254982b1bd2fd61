// Many jobs at once: the daemon keeps every slot of every job accounted for when a whole tick is
// late (a SIGSTOP stands in for a suspend or a slow start-up), and catches up instead of falling
// further behind. Speed is measured in `npm run bench`; this checks what must hold.
import assert from "node:assert/strict";
import { test } from "node:test";
import { startDaemon, stopDaemon, tmpdir, waitFor, writeConfig, readStore } from "./helpers.js";
import path from "node:path";

const JOBS = 600;

test(`${JOBS} paused per-second jobs: a late tick records every passed slot, one summary event, then keeps up`, async (t) => {
  const dir = tmpdir(t);
  const state = path.join(dir, ".cronvisor");
  let yaml = "heartbeat: 1s\njobs:\n";
  for (let i = 0; i < JOBS; i++)
    yaml += `  j${i}:\n    schedule: "* * * * * *"\n    command: "true"\n    paused: true\n    catchup: skip\n`;
  const cfg = writeConfig(dir, yaml);
  const d = startDaemon(t, cfg);

  // Keeping up: one slot with a disposition for every job (slots come from the database's clock
  // of record, the slot itself, so this cannot pass by accident of timing).
  const fullSlot = (after) => {
    const n = new Map();
    for (const r of readStore(state).runs({ slot: { gt: after } }))
      n.set(r.slot, (n.get(r.slot) ?? 0) + 1);
    return [...n]
      .filter(([, c]) => c === JOBS)
      .map(([slot]) => slot)
      .sort((a, b) => a - b)[0];
  };
  const before = await waitFor(() => fullSlot(0), "a slot recorded for every job", 60_000, 200);

  d.kill("SIGSTOP");
  const stoppedAt = Date.now();
  // The stop is the fault: long enough that the timer fires more than 5 s late (LATE_MS).
  await waitFor(() => Date.now() - stoppedAt > 6500, "the stop to last 6.5 s", 10_000, 100);
  d.kill("SIGCONT");
  const contAt = Date.now();
  const after = await waitFor(() => fullSlot(contAt), "keeping up after SIGCONT", 60_000, 200);
  await stopDaemon(d);

  // Every job: every second from the first full slot to the last has exactly one disposition.
  const byJob = new Map();
  for (const r of readStore(state).runs({ slot: { ge: before, le: after } })) {
    const c = byJob.get(r.job) ?? { job: r.job, n: 0, slots: new Set() };
    c.n++;
    c.slots.add(r.slot);
    byJob.set(r.job, c);
  }
  const counts = [...byJob.values()].map(({ job, n, slots }) => ({ job, n, d: slots.size }));
  assert.equal(counts.length, JOBS);
  const want = (after - before) / 1000 + 1;
  for (const c of counts) {
    assert.equal(c.d, c.n, `${c.job}: a slot recorded twice`);
    assert.equal(c.n, want, `${c.job}: ${c.n} dispositions for ${want} slots`);
  }
  const missed = readStore(state).runs({
    status: "missed",
    reason: "timer late (suspend or clock step)",
    slot: { gt: before },
  }).length;
  assert.ok(missed >= JOBS * 4, `${missed} slots recorded missed by the late tick`);

  // One event for the whole late tick, not one per job; it counts what was recorded missed.
  const late = readStore(state)
    .events({ kind: "late", at: { ge: contAt } })
    .map(({ job, detail }) => ({ job, detail }));
  assert.ok(late.length >= 1 && late.length <= 3, JSON.stringify(late.slice(0, 5)));
  const summary = late
    .map((e) =>
      /^timer fired up to \d+ ms after the slots of (\d+) jobs \(suspend, clock step or a slow start-up\); (\d+) older slot\(s\) recorded missed$/.exec(
        e.detail,
      ),
    )
    .find((m) => m && Number(m[1]) === JOBS);
  assert.ok(summary, JSON.stringify(late));
  assert.equal(late.find((e) => e.detail === summary[0]).job, null);
  assert.equal(Number(summary[2]), missed, "the event counts the missed rows");
});
