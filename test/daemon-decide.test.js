// The daemon's decisions as pure functions on a fake clock: what is due, what a late tick
// records, the overlap decision, the catch-up plan, the retry schedule, orphans. No daemon, no
// store, no timers: time is an argument.
import assert from "node:assert/strict";
import { test } from "node:test";
import { decideOverlap } from "../dist/daemon/overlap.js";
import { planCatchUp, planResume } from "../dist/daemon/catchup.js";
import { addBlocked, BLOCKED_MARGIN_MS, planBlocked } from "../dist/daemon/blocked.js";
import { clockSteppedBack, gapSlots, lateEvents, planDue, widenGap } from "../dist/daemon/due.js";
import { planRetry, retryDelay } from "../dist/daemon/retry.js";
import { orphanAction, orphanResult } from "../dist/daemon/adopt.js";
import { jobState } from "../dist/daemon/state.js";

const T = (hhmmss) => Date.parse(`2030-01-01T${hhmmss}Z`);
const MIN = 60_000;

function job(over = {}) {
  return {
    name: "j",
    pattern: "*/5 * * * *",
    timezone: "UTC",
    catchup: "once",
    catchupWindowMs: 3_600_000,
    overlap: "skip",
    retries: { attempts: 0, backoffMs: 1000 },
    ...over,
  };
}

// ---- what is due ---------------------------------------------------------------------------

test("a slot due on time fires alone, plans the next slot, and is not late", () => {
  assert.deepEqual(planDue(job(), T("10:00:00"), T("10:00:00.200")), {
    fire: T("10:00:00"),
    missed: [],
    next: T("10:05:00"),
    late: null,
  });
});

test("a tick more than 5 s late with one slot passed fires it and reports it late", () => {
  const p = planDue(job(), T("10:00:00"), T("10:00:09"));
  assert.equal(p.fire, T("10:00:00"));
  assert.deepEqual(p.missed, []);
  assert.deepEqual(p.late, { name: "j", slot: T("10:00:00"), missed: 0, capped: false });
});

test("a late tick fires the latest passed slot and records the older ones missed", () => {
  const p = planDue(job(), T("10:00:00"), T("10:17:00"));
  assert.equal(p.fire, T("10:15:00"));
  assert.deepEqual(p.missed, [T("10:00:00"), T("10:05:00"), T("10:10:00")]);
  assert.equal(p.next, T("10:20:00"));
  assert.deepEqual(p.late, { name: "j", slot: T("10:00:00"), missed: 3, capped: false });
});

test("a very late tick lists 99 missed slots and counts the rest", () => {
  const every = job({ pattern: "* * * * *" });
  const p = planDue(every, T("10:00:00"), T("10:00:00") + 200 * MIN);
  // 201 slots passed: the latest fires, 99 are listed, 101 older ones are only counted.
  assert.equal(p.fire, T("10:00:00") + 200 * MIN);
  assert.equal(p.missed.length, 99);
  assert.equal(p.missed[0], T("10:00:00") + 101 * MIN);
  assert.equal(p.late.missed, 200);
});

test("an @reboot job has no next slot", () => {
  assert.equal(jobState(job({ pattern: null }), null, T("10:00:00")).next, null);
});

test("the job state plans from the slot stamp, or from now if the stamp is older", () => {
  assert.equal(jobState(job(), T("10:07:00"), T("10:01:00")).next, T("10:10:00"));
  assert.equal(jobState(job(), T("09:00:00"), T("10:01:00")).next, T("10:05:00"));
  const gap = { from: T("10:00:00"), reason: "r" };
  const prev = { pending: [1], retryTimer: null, sincePrune: 3, gap };
  const kept = jobState(job(), null, T("10:01:00"), prev);
  assert.deepEqual([kept.pending, kept.sincePrune, kept.gap], [[1], 3, gap]);
});

test("late events: one per job up to five, one summary beyond", () => {
  const now = T("10:00:10");
  const few = [{ name: "a", slot: T("10:00:00"), missed: 2, capped: false }];
  assert.deepEqual(lateEvents(few, now), [
    {
      job: "a",
      detail:
        "timer fired 10000 ms after slot 2030-01-01T10:00:00.000Z (suspend or clock step); 2 older slot(s) recorded missed",
    },
  ]);
  const many = Array.from({ length: 6 }, (_, i) => ({
    name: `j${i}`,
    slot: T("10:00:00") + i * 1000,
    missed: 1,
    capped: i === 0,
  }));
  const ev = lateEvents(many, now);
  assert.equal(ev.length, 1);
  assert.equal(ev[0].job, null);
  assert.match(
    ev[0].detail,
    /^timer fired up to 10000 ms after the slots of 6 jobs .*; more than 6 older slot\(s\) recorded missed$/,
  );
});

test("a gap is the slots from the first one the store could not record to the due slot", () => {
  // The slot stamp plays no part: on a shared store another node's later rows move it past a
  // slot that no node recorded, and that slot must still get its row (the store keeps a slot
  // that has one as it is).
  const gap = widenGap(null, T("10:05:00"), new Error("x"));
  assert.deepEqual(gapSlots(job(), gap, T("10:20:00")), [
    T("10:05:00"),
    T("10:10:00"),
    T("10:15:00"),
  ]);
  // A later failure keeps the first slot; an earlier one (a retried batch) moves it back.
  assert.equal(widenGap(gap, T("10:15:00"), new Error("y")).from, T("10:05:00"));
  assert.equal(widenGap(gap, T("10:00:00"), new Error("y")).from, T("10:00:00"));
  assert.deepEqual(gapSlots(job(), widenGap(null, T("10:20:00"), null), T("10:20:00")), []);
});

test("a gap's reason says what kind of failure it was", () => {
  const err = (message, code) => Object.assign(new Error(message), code ? { code } : {});
  const reasons = [
    err("cannot use state store /s/cronvisor.db: database or disk is full", "io"),
    err("state store x was busy (deadlock detected); try again", "busy"),
    err("cannot use state store postgresql://u@h/db: Query read timeout", "io"),
    err("cannot use state store postgresql://u@h/db: connect ECONNREFUSED 127.0.0.1:5432", "io"),
    err("cannot use state store postgresql://u@h/db: Connection terminated unexpectedly", "io"),
    err("state store /s/cronvisor.db is read-only (attempt to write a readonly database)", "io"),
    err("cannot use state store /s/cronvisor.db: disk I/O error", "io"),
  ].map((e) => widenGap(null, T("10:00:00"), e).reason);
  assert.deepEqual(reasons, [
    "the store could not be written (disk full)",
    "the store stayed busy (another writer held its lock)",
    "the store did not answer in time (timeout)",
    "the store could not be reached (connection lost)",
    "the store could not be reached (connection lost)",
    "the store could not be written (read-only)",
    "the store could not be written (I/O error)",
  ]);
});

test("a wall clock stepped back more than 5 s is noticed; a small jitter is not", () => {
  assert.equal(clockSteppedBack(T("10:00:00"), T("09:59:56")), false);
  assert.equal(clockSteppedBack(T("10:00:00"), T("09:59:54")), true);
});

// ---- overlap -----------------------------------------------------------------------------

const sched = { slot: T("10:00:00"), claimSlot: true, trigger: "schedule", attempt: 1 };
const retry = { slot: T("10:00:00"), claimSlot: false, trigger: "retry", attempt: 2 };
const idle = { running: [], inBatch: false, queued: 0 };
const busy = { running: [7], inBatch: false, queued: 0 };

test("overlap: an idle job starts under every policy", () => {
  for (const policy of ["skip", "queue", "replace", "allow"]) {
    assert.deepEqual(decideOverlap(policy, sched, idle), { kind: "start" }, policy);
    assert.deepEqual(decideOverlap(policy, retry, idle), { kind: "start" }, policy);
  }
});

test("overlap: a scheduled slot of a busy job, per policy", () => {
  // skip: started, so that the store's lock records `skipped` in the same transaction.
  assert.deepEqual(decideOverlap("skip", sched, busy), { kind: "start" });
  assert.deepEqual(decideOverlap("allow", sched, busy), { kind: "start" });
  assert.deepEqual(decideOverlap("replace", sched, { ...busy, running: [7, 8] }), {
    kind: "replace",
    runs: [7, 8],
  });
  assert.deepEqual(decideOverlap("queue", sched, busy), { kind: "queue" });
  assert.deepEqual(decideOverlap("queue", sched, { ...busy, queued: 1 }), {
    kind: "skip",
    reason: "overlap: run 7 holds the lock and a slot is already queued",
  });
});

test("overlap: a retry, resume, catch-up or @reboot run waits behind a busy job unless allow", () => {
  for (const trigger of ["retry", "resume", "catchup", "reboot"]) {
    const p = { ...retry, trigger };
    for (const policy of ["skip", "queue", "replace"]) {
      assert.deepEqual(decideOverlap(policy, p, busy), { kind: "queue" }, `${trigger} ${policy}`);
      assert.deepEqual(decideOverlap(policy, p, { ...idle, inBatch: true }), { kind: "queue" });
    }
    assert.deepEqual(decideOverlap("allow", p, busy), { kind: "start" });
  }
});

test("overlap: a run queued behind one that exited (its end not yet handled) starts before a later slot takes the lock again", () => {
  // On a shared store a run's end rides the next tick's write, so that tick's slot would win the
  // lock every time and a queued catch-up or retry would never start (test/nodes-failover.test.js).
  const exited = { running: [], inBatch: false, queued: 1 };
  for (const policy of ["skip", "queue", "replace"]) {
    assert.deepEqual(decideOverlap(policy, sched, exited), { kind: "queued-first" }, policy);
    assert.deepEqual(decideOverlap(policy, retry, exited), { kind: "queued-first" }, policy);
  }
});

// ---- catch-up ------------------------------------------------------------------------------

test("catch-up: nothing passed, or a first start (no stamp), plans nothing", () => {
  assert.deepEqual(planCatchUp(job(), T("10:01:00"), T("10:04:00")), { kind: "none" });
  assert.deepEqual(planCatchUp(job(), null, T("10:04:00")), { kind: "none" });
});

test("catch-up per policy: once runs the latest, all runs each, skip runs none", () => {
  const down = [T("10:01:00"), T("10:16:00")];
  const slots = [T("10:05:00"), T("10:10:00"), T("10:15:00")];
  const once = planCatchUp(job({ catchup: "once" }), ...down);
  assert.deepEqual([once.run, once.missed], [[T("10:15:00")], slots.slice(0, 2)]);
  const all = planCatchUp(job({ catchup: "all" }), ...down);
  assert.deepEqual([all.run, all.missed], [slots, []]);
  const skip = planCatchUp(job({ catchup: "skip" }), ...down);
  assert.deepEqual([skip.run, skip.missed], [[], slots]);
});

test("catch-up window: slots older than catchup_window are missed, not run", () => {
  const p = planCatchUp(
    job({ catchup: "all", catchupWindowMs: 7 * MIN }),
    T("10:01:00"),
    T("10:16:00"),
  );
  assert.deepEqual(p.run, [T("10:10:00"), T("10:15:00")]);
  assert.deepEqual(p.missed, [T("10:05:00")]);
  const none = planCatchUp(job({ catchupWindowMs: 30_000 }), T("10:01:00"), T("10:16:00"));
  assert.deepEqual(none.run, []);
});

test("catch-up after a long downtime lists the latest 100 and counts the rest", () => {
  const p = planCatchUp(
    job({ pattern: "* * * * *", catchup: "skip" }),
    T("00:00:30"),
    T("10:00:30"),
  );
  assert.equal(p.missed.length, 100);
  assert.equal(p.earlier, 500);
  assert.equal(p.missed.at(-1), T("10:00:00"));
});

test("catch-up: a slot stamp in the future (a wrong clock) continues from now", () => {
  assert.deepEqual(planCatchUp(job(), T("11:00:00"), T("10:00:00")), {
    kind: "future",
    stamp: T("11:00:00"),
  });
  assert.equal(planCatchUp(job(), T("10:00:04"), T("10:00:00")).kind, "none");
});

test("an interrupted run resumes (next attempt, its slot kept) unless skip or out of the window", () => {
  const run = { slot: T("10:00:00"), started_at: T("10:00:01"), attempt: 1 };
  assert.deepEqual(planResume(job(), run, T("10:30:00")), {
    slot: T("10:00:00"),
    claimSlot: false,
    trigger: "resume",
    attempt: 2,
  });
  assert.equal(planResume(job({ catchup: "skip" }), run, T("10:30:00")), null);
  assert.equal(planResume(job({ catchupWindowMs: 10 * MIN }), run, T("10:30:00")), null);
  // A manual run has no slot: its start time stands in.
  const manual = { slot: null, started_at: T("10:25:00"), attempt: 1 };
  assert.equal(planResume(job({ catchupWindowMs: 10 * MIN }), manual, T("10:30:00"))?.slot, null);
});

// ---- retries -------------------------------------------------------------------------------

test("slots another node's run blocked: looked at when the lease first seen ends (or at the job's slot just after); a new holder starts over", () => {
  const lease = (leftMs) => ({ node: "n1", until: 0, leftMs });
  const b = addBlocked(job(), null, 7, lease(4000), T("10:00:01"));
  assert.deepEqual(b, { node: "n1", runId: 7, at: T("10:00:05") + BLOCKED_MARGIN_MS });
  // The node renewed meanwhile: the look stays at the first lease's end (a live node's skips stand).
  assert.equal(addBlocked(job(), b, 7, lease(4900), T("10:00:02")), b);
  assert.deepEqual(addBlocked(job(), b, 8, lease(3000), T("10:00:02")), {
    node: "n1",
    runId: 8,
    at: T("10:00:05") + BLOCKED_MARGIN_MS,
  });
  // A per-second job: the look waits for the slot after the lease's end, then the catch-up
  // queues behind that slot's run.
  const everySecond = job({ pattern: "* * * * * *" });
  assert.equal(addBlocked(everySecond, null, 7, lease(4000), T("10:00:01")).at, T("10:00:06"));
  assert.equal(addBlocked(everySecond, null, 7, lease(3900), T("10:00:01")).at, T("10:00:05"));
});

test("blocked slots caught up per policy, as their second attempt, within catchup_window", () => {
  const slots = [T("10:00:01"), T("10:00:02"), T("10:00:03")];
  const now = T("10:00:05");
  const p = (slot) => ({ slot, claimSlot: false, trigger: "catchup", attempt: 2 });
  assert.deepEqual(planBlocked(job(), slots, now), [p(T("10:00:03"))]);
  assert.deepEqual(planBlocked(job({ catchup: "all" }), slots, now), slots.map(p));
  assert.deepEqual(planBlocked(job({ catchup: "skip" }), slots, now), []);
  assert.deepEqual(planBlocked(job(), [], now), []);
  const window = job({ catchup: "all", catchupWindowMs: 2500 });
  assert.deepEqual(planBlocked(window, slots, now), [p(T("10:00:03"))]);
});

test("retry delays double from the backoff", () => {
  assert.deepEqual(
    [1, 2, 3, 4].map((n) => retryDelay(1000, n)),
    [1000, 2000, 4000, 8000],
  );
});

test("retries: failed and timed-out runs retry up to `attempts` extra runs", () => {
  const j = job({ retries: { attempts: 2, backoffMs: 1000 } });
  const run = (status, attempt) => ({ id: 9, slot: T("10:00:00"), status, attempt });
  const now = T("10:00:10");
  assert.deepEqual(planRetry(j, run("failed", 1), T("10:05:00"), now), {
    kind: "retry",
    delayMs: 1000,
    pending: { slot: T("10:00:00"), claimSlot: false, trigger: "retry", attempt: 2 },
  });
  assert.equal(planRetry(j, run("timeout", 2), T("10:05:00"), now).delayMs, 2000);
  assert.deepEqual(planRetry(j, run("failed", 3), T("10:05:00"), now), { kind: "none" });
  for (const s of ["ok", "interrupted", "killed"])
    assert.deepEqual(planRetry(j, run(s, 1), T("10:05:00"), now), { kind: "none" }, s);
});

test("retries: never after the next slot, unless overlap is allow", () => {
  const j = job({ retries: { attempts: 3, backoffMs: 60_000 } });
  const r = { id: 9, slot: T("10:00:00"), status: "failed", attempt: 3 };
  // attempt 3 waits 4 min: 10:04:30 + 4 min is past 10:05.
  assert.deepEqual(planRetry(j, r, T("10:05:00"), T("10:04:30")), {
    kind: "drop",
    detail: "retry 3 of run 9 dropped: it would start after the next slot",
  });
  assert.equal(
    planRetry({ ...j, overlap: "allow" }, r, T("10:05:00"), T("10:04:30")).kind,
    "retry",
  );
  assert.equal(planRetry(j, r, null, T("10:04:30")).kind, "retry");
});

// ---- orphans -------------------------------------------------------------------------------

test("orphans: watched or owned by a live process are ignored; a live group is adopted", () => {
  const f = { watched: false, ownerAlive: false, groupAlive: false, jobKnown: true };
  assert.equal(orphanAction({ ...f, watched: true }), "ignore");
  assert.equal(orphanAction({ ...f, ownerAlive: true, groupAlive: true }), "ignore");
  assert.equal(orphanAction({ ...f, groupAlive: true }), "adopt");
  assert.equal(orphanAction({ ...f, groupAlive: true, jobKnown: false }), "leave");
  assert.equal(orphanAction(f), "reap");
  assert.equal(orphanAction({ ...f, jobKnown: false }), "reap");
});

test("an orphan's result comes from its exit file, or is interrupted without one", () => {
  const r = { started_at: T("10:00:00"), log_bytes: 12 };
  const now = T("10:00:30");
  const dead = orphanResult(r, null, now, "found-dead");
  assert.deepEqual(
    [dead.status, dead.reason, dead.exitCode, dead.durationMs, dead.logBytes],
    ["interrupted", "its processes died with the daemon", null, 30_000, 12],
  );
  assert.deepEqual(
    [orphanResult(r, 3, now, "found-dead").status, orphanResult(r, 3, now, "found-dead").reason],
    ["failed", "exit 3 (recorded late, from its exit file)"],
  );
  assert.equal(orphanResult(r, 0, now, "found-dead").status, "ok");
  assert.equal(orphanResult(r, 0, now, "adopted").reason, null);
  assert.equal(orphanResult(r, 2, now, "adopted").reason, "exit 2");
  assert.equal(
    orphanResult(r, null, now, "adopted").reason,
    "adopted after a daemon restart; exit status unknown",
  );
  // An adopted run this daemon stopped is killed, whether it exited at TERM or died of KILL.
  for (const code of [0, 143, null]) {
    const r2 = orphanResult(r, code, now, "adopted", "killed: daemon stopping");
    assert.deepEqual(
      [r2.status, r2.reason, r2.exitCode],
      ["killed", "killed: daemon stopping", code],
    );
  }
});
