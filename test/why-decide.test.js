// `why` as pure functions on fixed inputs: which slot a TIME names (local times, offsets, DST gaps
// and repeats), and what the store's facts say became of it, for every disposition. No daemon,
// no store: time is an argument.
import assert from "node:assert/strict";
import { test } from "node:test";
import { explainWhy, resolveTarget } from "../dist/health/why.js";
import { localInstants, parseIsoTime } from "../dist/schedule/zone.js";

const T = (iso) => Date.parse(iso);

function job(over = {}) {
  return {
    name: "backup",
    schedule: "0 2 * * *",
    pattern: "0 2 * * *",
    timezone: "Europe/Berlin",
    overlap: "skip",
    catchup: "once",
    catchupWindowMs: 6 * 3_600_000,
    paused: false,
    log: { maxSizeBytes: 10_000_000, keepRuns: 100 },
    ...over,
  };
}

let nextId = 1;
function row(over = {}) {
  return {
    id: nextId++,
    job: "backup",
    slot: null,
    trigger: "schedule",
    status: "ok",
    reason: "exit 0",
    exit_code: 0,
    signal: null,
    attempt: 1,
    started_at: 0,
    finished_at: null,
    duration_ms: null,
    fence: 1,
    revoked: 0,
    owner_pid: 1,
    owner_start: null,
    pid: 4242,
    pid_start: null,
    pgid: 4242,
    log_path: null,
    log_bytes: 0,
    progress_at: null,
    progress_msg: null,
    progress_count: 0,
    markers_new: 0,
    markers_skipped: 0,
    ...over,
  };
}

function facts(over = {}) {
  return {
    job: {
      name: "backup",
      paused: 0,
      fence: 1,
      scanned_to: null,
      reboot_boot_id: null,
      last_success_at: null,
      last_progress_at: null,
      first_seen_at: T("2026-01-01T00:00:00Z"),
    },
    daemon: null,
    claim: null,
    runs: [],
    holder: null,
    running: [],
    pause: null,
    catchUps: [],
    missedEvent: null,
    lastBefore: null,
    firstAfter: null,
    ...over,
  };
}

// 2026-03-29 02:00 in Berlin is CET still: 01:00Z. (The clocks jump at 02:00 that night, so
// 02:00 itself is the gap's first minute; use the day before for a plain slot.)
const SLOT = T("2026-03-28T01:00:00Z");
const NOW = T("2026-03-28T12:00:00Z");

function why(j, f, { at = "2026-03-28T02:00", now = NOW, daemon = "running" } = {}) {
  const target = resolveTarget(j, at === null ? null : parseIsoTime(at), now);
  return explainWhy({ job: j, target, facts: f, daemon, now });
}

test("ran: run id, status, duration, markers; the first line names the slot in local time", () => {
  const r = row({
    slot: SLOT,
    started_at: SLOT + 12,
    finished_at: SLOT + 1512,
    duration_ms: 1500,
    markers_new: 3,
    markers_skipped: 2,
  });
  const w = why(job(), facts({ runs: [r], claim: { run_id: r.id } }));
  assert.equal(w.disposition, "ran");
  assert.equal(w.run_id, r.id);
  assert.equal(w.slot, "2026-03-28T01:00:00.000Z");
  assert.equal(w.node, null);
  assert.equal(w.explanation[0], "backup, slot 2026-03-28 02:00 Europe/Berlin (01:00Z): ran");
  assert.equal(
    w.explanation[1],
    `Run ${r.id} (schedule) ok, exit 0, took 1.5s: started 2026-03-28 02:00 (12 ms after the slot), ended 2026-03-28 02:00:01; markers: 3 new, 2 already done.`,
  );
  assert.equal(w.previous_slot, "2026-03-27T01:00:00.000Z");
  assert.equal(w.next_slot, "2026-03-29T01:00:00.000Z");
});

test("ran with a retry: every attempt is told, the latest is the run id", () => {
  const a = row({ slot: SLOT, started_at: SLOT, status: "failed", reason: "exit 3", exit_code: 3 });
  const b = row({ slot: SLOT, started_at: SLOT + 30_000, trigger: "retry", attempt: 2 });
  const w = why(job(), facts({ runs: [a, b] }));
  assert.equal(w.disposition, "ran");
  assert.equal(w.run_id, b.id);
  assert.match(w.explanation[1], /^Run \d+ \(schedule\) failed \(exit 3\)/);
  assert.match(w.explanation[2], /^Run \d+ \(retry, attempt 2\) ok/);
});

test("running: since when, pid and progress", () => {
  const r = row({
    slot: SLOT,
    status: "running",
    started_at: SLOT,
    progress_at: NOW - 60_000,
    progress_msg: "row 7",
  });
  const w = why(job(), facts({ runs: [r] }));
  assert.equal(w.disposition, "running");
  assert.equal(w.run_id, r.id);
  assert.match(
    w.explanation[1],
    /is running: started 2026-03-28 02:00 .*pid 4242, last progress 60s ago \(row 7\)/,
  );
});

test("queued: the lock holder and overlap: queue; or a slot not yet recorded", () => {
  const holder = row({ status: "running", started_at: SLOT - 5000 });
  const f = facts({ running: [holder] });
  f.job.scanned_to = SLOT - 86_400_000;
  const w = why(job({ overlap: "queue" }), f);
  assert.equal(w.disposition, "queued");
  assert.match(w.explanation[1], new RegExp(`run ${holder.id} holds the job's lock`));
  const fresh = why(job(), facts(), { now: SLOT + 200 });
  assert.equal(fresh.disposition, "queued");
  assert.match(fresh.explanation[1], /has not recorded its start yet/);
});

test("skipped by overlap: the lock holder, since when, and how it ended", () => {
  const h = row({
    started_at: SLOT - 3000,
    finished_at: SLOT + 500,
    duration_ms: 3500,
    slot: SLOT - 3000,
  });
  const d = row({
    slot: SLOT,
    status: "skipped",
    reason: `overlap: run ${h.id} holds the lock`,
    started_at: SLOT + 2,
    pid: null,
  });
  const w = why(job(), facts({ runs: [d], holder: h }));
  assert.equal(w.disposition, "skipped");
  assert.equal(w.run_id, null);
  assert.equal(w.reason, `overlap: run ${h.id} holds the lock`);
  assert.equal(
    w.explanation[1],
    `Skipped: run ${h.id} held the job's lock (running since 2026-03-28 01:59:57, pid 4242), and overlap is skip.`,
  );
  assert.match(w.explanation[2], /ok, exit 0, took 3.5s/);
});

test("skipped for another node's run: its lease, then the catch-up run, or the plan", () => {
  const reason = "lock held by node n1 (run 71, lease until 2026-03-28T00:00:04.500Z)";
  const d = row({
    slot: SLOT,
    status: "skipped",
    reason,
    started_at: SLOT + 2,
    pid: null,
    node: "n2",
  });
  const cu = row({
    slot: SLOT,
    trigger: "catchup",
    attempt: 2,
    started_at: SLOT + 4600,
    finished_at: SLOT + 4700,
    duration_ms: 100,
    node: "n2",
  });
  const w = why(job(), facts({ runs: [d, cu] }));
  assert.equal(w.disposition, "skipped");
  assert.equal(w.reason, reason);
  assert.equal(
    w.explanation[1],
    `Skipped: ${reason}: another node's run held the job's lock, and only that node's lease ending frees it.`,
  );
  assert.equal(w.explanation[2], "Caught up once the lease ended (catchup: once):");
  assert.match(w.explanation[3], new RegExp(`^Run ${cu.id} \\(catchup, attempt 2\\) ok, exit 0`));
  const notYet = why(job({ catchup: "skip" }), facts({ runs: [d] }));
  assert.match(
    notYet.explanation[2],
    /^Not run again: .*\(catchup: skip runs none of the slots it blocked\)/,
  );
});

test("skipped while paused: by `cronvisor pause` since when, or by the config", () => {
  const d = row({ slot: SLOT, status: "skipped", reason: "paused", started_at: SLOT });
  const pause = { id: 1, at: SLOT - 3_600_000, job: "backup", kind: "paused", detail: null };
  const byCommand = why(job(), facts({ runs: [d], pause }));
  assert.equal(byCommand.disposition, "skipped");
  assert.equal(
    byCommand.explanation[1],
    "Skipped: the job was paused by `cronvisor pause backup` at 2026-03-28 01:00 (`cronvisor resume backup` fires it again).",
  );
  const byConfig = why(job({ paused: true }), facts({ runs: [d] }));
  assert.equal(byConfig.explanation[1], "Skipped: the job is paused by its config (paused: true).");
});

test("missed while the daemon was down: the down window and the catch-up run", () => {
  const restart = SLOT + 3 * 3_600_000;
  const m = row({ slot: SLOT, status: "missed", reason: "daemon down", started_at: restart });
  const cu = row({ slot: SLOT + 86_400_000 - 1, trigger: "catchup", started_at: restart + 5 });
  const w = why(
    job(),
    facts({ runs: [m], catchUps: [cu], lastBefore: SLOT - 600_000, firstAfter: restart }),
  );
  assert.equal(w.disposition, "missed");
  assert.equal(w.reason, "daemon down");
  assert.equal(
    w.explanation[1],
    "Missed: the daemon was down at the slot: its last record before the slot is from 2026-03-28 01:50, and it started again at 2026-03-28 05:00, when it recorded the slot missed.",
  );
  assert.match(
    w.explanation[2],
    new RegExp(`^Catch-up \\(catchup: once\\): run ${cu.id} for the slot`),
  );
  const none = why(job({ catchup: "skip" }), facts({ runs: [m] }));
  assert.equal(none.explanation[2], "Catch-up: none (catchup: skip).");
});

test("missed by a late timer, and missed while the daemon is down now (not yet recorded)", () => {
  const m = row({
    slot: SLOT,
    status: "missed",
    reason: "timer late (suspend or clock step)",
    started_at: SLOT + 60_000,
  });
  assert.match(why(job(), facts({ runs: [m] })).explanation[1], /timer fired late/);
  const f = facts({ daemon: { stopped_at: SLOT - 60_000 }, lastBefore: SLOT - 60_000 });
  f.job.scanned_to = SLOT - 120_000;
  const w = why(job(), f, { daemon: "down" });
  assert.equal(w.disposition, "missed");
  assert.equal(
    w.explanation[1],
    "Missed: the daemon is down (it stopped at 2026-03-28 01:59). When it starts, catchup: once runs the latest slot within catchup_window (6h) and records the others missed.",
  );
});

test("caught_up: the catch-up run of a slot that passed while the daemon was down", () => {
  const r = row({ slot: SLOT, trigger: "catchup", started_at: SLOT + 60_000, duration_ms: 10 });
  const w = why(job(), facts({ runs: [r], lastBefore: SLOT - 1000, firstAfter: SLOT + 59_000 }));
  assert.equal(w.disposition, "caught_up");
  assert.equal(w.run_id, r.id);
  assert.match(
    w.explanation[1],
    /^The daemon was down at the slot: .*catchup: once ran the slot\.$/,
  );
});

test("a pruned slot: the slots table still knows its run", () => {
  const w = why(job(), facts({ claim: { run_id: 7 } }));
  assert.equal(w.disposition, "ran");
  assert.equal(w.run_id, 7);
  assert.match(w.explanation[1], /pruned/);
});

test("not_a_slot: the neighbours in local time; before the job was watched", () => {
  const w = why(job(), facts(), { at: "2026-03-28T02:30" });
  assert.equal(w.disposition, "not_a_slot");
  assert.equal(w.slot, null);
  assert.equal(w.explanation[0], "backup, 2026-03-28 02:30 Europe/Berlin (01:30Z): not_a_slot");
  assert.equal(
    w.explanation[1],
    'No slot of "0 2 * * *" then: the one before is 2026-03-28 02:00 (01:00Z), the one after 2026-03-29 03:00 (01:00Z).',
  );
  const f = facts();
  f.job.first_seen_at = NOW - 1000;
  const early = why(job(), f);
  assert.equal(early.disposition, "not_a_slot");
  assert.match(early.explanation[1], /first watched this job at 2026-03-28 12:59:59/);
});

test("DST gap: Europe/Berlin 2026-03-29 02:30 does not exist", () => {
  const w = why(job({ schedule: "30 2 * * *", pattern: "30 2 * * *" }), null, {
    at: "2026-03-29T02:30",
    now: T("2026-04-01T00:00:00Z"),
  });
  assert.equal(w.disposition, "not_a_slot");
  assert.equal(
    w.explanation[0],
    "backup, 2026-03-29 02:30 Europe/Berlin (no such local time): not_a_slot",
  );
  assert.equal(
    w.explanation[1],
    "2026-03-29 02:30 does not exist in Europe/Berlin: the clocks jump from 02:00 to 03:00 that night.",
  );
  // croner runs that night's 02:30 right after the change, at 03:00 CEST.
  assert.equal(w.next_slot, "2026-03-29T01:00:00.000Z");
  assert.equal(w.previous_slot, "2026-03-28T01:30:00.000Z");
  assert.deepEqual(localInstants(parseIsoTime("2026-03-29T02:30").wall, "Europe/Berlin"), []);
});

test("DST repeat: Europe/Berlin 2026-10-25 02:30 happens twice; the first is meant, an offset names the second", () => {
  const j = job({ schedule: "30 * * * *", pattern: "30 * * * *" });
  const now = T("2026-11-01T00:00:00Z");
  const first = why(j, facts(), { at: "2026-10-25T02:30", now });
  assert.equal(first.slot, "2026-10-25T00:30:00.000Z");
  assert.equal(
    first.explanation[1],
    "2026-10-25 02:30 happens twice in Europe/Berlin (the clocks go back): at 2026-10-25 00:30Z (UTC+02:00) and at 2026-10-25 01:30Z (UTC+01:00); this is the first (the second is 2026-10-25T02:30+01:00).",
  );
  const second = why(j, facts(), { at: "2026-10-25T02:30+01:00", now });
  assert.equal(second.slot, "2026-10-25T01:30:00.000Z");
  assert.equal(
    second.explanation[0],
    "backup, slot 2026-10-25 02:30 Europe/Berlin (01:30Z): ran".replace("ran", second.disposition),
  );
  assert.equal(localInstants(parseIsoTime("2026-10-25T02:30").wall, "Europe/Berlin").length, 2);
});

test("not_due: a slot after now says when it comes; paused and a down daemon are noted", () => {
  const w = why(job({ paused: true }), facts(), { at: "2026-03-30T02:00", daemon: "down" });
  assert.equal(w.disposition, "not_due");
  assert.deepEqual(w.explanation.slice(1), [
    "Not due yet: the slot comes in 36h.",
    "The job is paused: unless it is resumed first, the slot will be skipped.",
    "The daemon is not running now.",
  ]);
});

test("the default is the latest slot at or before now; TIME with Z or an offset is absolute", () => {
  assert.equal(why(job(), facts(), { at: null }).slot, "2026-03-28T01:00:00.000Z");
  assert.equal(why(job(), facts(), { at: "2026-03-28T01:00Z" }).slot, "2026-03-28T01:00:00.000Z");
  assert.equal(
    why(job(), facts(), { at: "2026-03-28 03:00+02:00" }).slot,
    "2026-03-28T01:00:00.000Z",
  );
});

test("parseIsoTime refuses what is not an ISO-8601 time", () => {
  for (const bad of [
    "",
    "yesterday",
    "2026-02-30",
    "2026-13-01T00:00",
    "2026-03-28T24:00",
    "2026-03-28T02:00+25:00",
    "02:00",
    "2026-03-28T2:00",
  ])
    assert.equal(parseIsoTime(bad), null, bad);
  assert.deepEqual(parseIsoTime("2026-03-28T02:00:05.5Z"), {
    wall: { year: 2026, month: 3, day: 28, hour: 2, minute: 0, second: 5, ms: 500 },
    offsetMs: 0,
  });
});

test("fenced, taken over: the run's node in JSON, and a sentence naming the node that took the job over", () => {
  const r = row({
    slot: SLOT,
    started_at: SLOT + 5,
    finished_at: SLOT + 4005,
    duration_ms: 4000,
    status: "fenced",
    reason: "node n2's lease ran out; node n1 took the job over",
    exit_code: null,
    node: "n2",
  });
  const w = why(job(), facts({ runs: [r], claim: { run_id: r.id } }));
  assert.deepEqual([w.disposition, w.run_id, w.node], ["ran", r.id, "n2"]);
  assert.match(w.explanation[1], /^Run \d+ \(schedule\) fenced \(node n2's lease ran out; node n1/);
  assert.equal(
    w.explanation[2],
    `Fenced: node n2's lease ran out while run ${r.id} ran, and node n1 took the job over; from then on none of the run's marker writes was applied (health, alerts and catch-up count it as interrupted).`,
  );
});

test("fenced by its own node: the node that could not renew its lease stopped the run", () => {
  const r = row({
    slot: SLOT,
    started_at: SLOT,
    finished_at: SLOT + 3000,
    duration_ms: 3000,
    status: "fenced",
    reason: "fenced: node n2 could not renew its lease for 2s",
    exit_code: null,
    signal: "SIGTERM",
    node: "n2",
  });
  const w = why(job(), facts({ runs: [r] }));
  assert.equal(w.node, "n2");
  assert.equal(
    w.explanation[2],
    `Fenced: node n2 could not renew its lease for 2s, so it stopped run ${r.id} before the lease ran out, leaving the job to the nodes that hold theirs (health, alerts and catch-up count it as interrupted).`,
  );
});

test("a disposition's node: the node that recorded the skipped slot", () => {
  const r = row({ slot: SLOT, started_at: SLOT, status: "skipped", reason: "paused", node: "n3" });
  const w = why(job({ paused: true }), facts({ runs: [r] }));
  assert.deepEqual([w.disposition, w.node], ["skipped", "n3"]);
});
