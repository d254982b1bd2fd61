// Health is a pure function of store rows and `now`: every word, every rule, no clock, no daemon.
import assert from "node:assert/strict";
import { test } from "node:test";
import { assessJob, beating, daemonState, UNRESPONSIVE_BEATS } from "../dist/health/health.js";
import { brokenFileNotice, checkCode, checkSummary } from "../dist/health/status.js";
import { digestRecent, percentile95 } from "./digest-oracle.js";

const NOW = Date.parse("2026-03-29T12:00:00.000Z");
const S = 1000;
const M = 60 * S;
const H = 60 * M;

let nextId = 1;
/** A finished run, `endedAgo` ms before NOW, that took `ms`. */
function run(status, { endedAgo = M, ms = 2 * S, reason = null, id = nextId++ } = {}) {
  const finished = NOW - endedAgo;
  return {
    id,
    status,
    reason,
    started_at: finished - ms,
    finished_at: finished,
    duration_ms: ms,
    progress_at: finished - ms,
  };
}
/** A live run started `startedAgo` ms ago whose last progress was `progressAgo` ms ago. */
function live({ startedAgo = M, progressAgo = startedAgo, id = nextId++ } = {}) {
  return {
    id,
    status: "running",
    reason: null,
    started_at: NOW - startedAgo,
    finished_at: null,
    duration_ms: null,
    progress_at: NOW - progressAgo,
  };
}

/** A job's facts; `recent`: its finished runs, newest first, digested as status reads them. */
function facts(over = {}) {
  const { health = {}, recent = [], ...rest } = over;
  return {
    now: NOW,
    job: {
      name: "j",
      health: { successWithinMs: null, progressWithinMs: null, repeatLimit: 3, ...health },
    },
    paused: false,
    firstSeenAt: NOW - 2 * H,
    lastSuccessAt: null,
    recent: digestRecent(recent),
    running: [],
    attempts: [],
    ...rest,
  };
}

test("never-run: no run yet and nothing else wrong; it is not listed as a problem", () => {
  const a = assessJob(facts());
  assert.equal(a.health, "never-run");
  assert.deepEqual(a.words, ["never-run"]);
  assert.deepEqual(a.problems, []);
});

test("ok: the last run succeeded", () => {
  const a = assessJob(facts({ recent: [run("ok")], lastSuccessAt: NOW - M }));
  assert.equal(a.health, "ok");
  assert.deepEqual(a.words, ["ok"]);
  assert.deepEqual(a.problems, []);
});

test("failing: the newest run with a verdict failed; the streak is counted", () => {
  const one = assessJob(facts({ recent: [run("failed", { reason: "exit 3", id: 9 }), run("ok")] }));
  assert.equal(one.health, "failing");
  assert.deepEqual(one.problems, ["the last run failed (run 9: failed, exit 3)"]);
  const three = assessJob(
    facts({
      recent: [
        run("timeout", { reason: "timeout after 30s", id: 12 }),
        run("spawn_failed"),
        run("failed"),
        run("ok"),
      ],
    }),
  );
  assert.equal(three.health, "failing");
  assert.deepEqual(three.problems, [
    "the last 3 runs failed (latest run 12: timeout, timeout after 30s)",
  ]);
  assert.equal(three.findings[0].runId, 12);
});

test("failing looks past killed and interrupted runs: they judge the operator or a crash, not the job", () => {
  const killedAfterOk = assessJob(
    facts({ recent: [run("killed", { reason: "killed: daemon stopping", id: 20 }), run("ok")] }),
  );
  assert.equal(killedAfterOk.health, "ok");
  assert.deepEqual(killedAfterOk.problems, [
    "the last run was killed (run 20: killed, killed: daemon stopping)",
  ]);
  const interruptedAfterFail = assessJob(
    facts({ recent: [run("interrupted"), run("failed", { id: 21 }), run("ok")] }),
  );
  assert.equal(interruptedAfterFail.health, "failing");
  assert.match(interruptedAfterFail.problems[0], /run 21: failed/);
  // While a run is going again the note about the interrupted one is not repeated.
  const resumed = assessJob(
    facts({ recent: [run("interrupted"), run("ok")], running: [live({ startedAgo: S })] }),
  );
  assert.deepEqual(resumed.problems, []);
});

test("stuck: a live run with no progress for longer than progress_within; progress resets the clock", () => {
  const health = { progressWithinMs: 10 * M };
  const stuck = assessJob(
    facts({ health, running: [live({ startedAgo: 30 * M, progressAgo: 11 * M, id: 5 })] }),
  );
  assert.equal(stuck.health, "stuck");
  assert.deepEqual(stuck.problems, ["run 5 has shown no progress for 11m (limit 10m)"]);
  const moving = assessJob(
    facts({ health, running: [live({ startedAgo: 30 * M, progressAgo: 9 * M })] }),
  );
  assert.equal(moving.health, "ok");
  // Exactly at the limit is not over it.
  assert.equal(assessJob(facts({ health, running: [live({ startedAgo: 10 * M })] })).health, "ok");
  // Not configured: never stuck.
  assert.equal(assessJob(facts({ running: [live({ startedAgo: 100 * H })] })).health, "ok");
});

test("repeating: a key attempted more than repeat_limit times, still being attempted", () => {
  const last = run("ok", { endedAgo: 5 * M, ms: M });
  const tried = (count, lastAgo) => ({ key: "invoice-7", count, last_at: NOW - lastAgo });
  const four = assessJob(facts({ recent: [last], attempts: [tried(4, 5 * M + 30 * S)] }));
  assert.equal(four.health, "repeating");
  assert.deepEqual(four.problems, [
    '1 key was attempted more than 3 times without being marked done (worst: "invoice-7", 4 times)',
  ]);
  // repeat_limit itself is allowed.
  assert.equal(
    assessJob(facts({ recent: [last], attempts: [tried(3, 5 * M + 30 * S)] })).health,
    "ok",
  );
  // A key last tried before the newest finished run started has been given up on.
  assert.equal(assessJob(facts({ recent: [last], attempts: [tried(9, 7 * M)] })).health, "ok");
  // Worst first, all counted.
  const two = assessJob(
    facts({
      recent: [last],
      attempts: [tried(4, 5 * M), { key: "b", count: 8, last_at: NOW - 5 * M }],
    }),
  );
  assert.match(two.problems[0], /^2 keys were attempted .*worst: "b", 8 times/);
});

test("late: no success within success_within, from the last success or from when the job was first seen", () => {
  const health = { successWithinMs: 26 * H };
  const lateAfterSuccess = assessJob(
    facts({ health, recent: [run("ok")], lastSuccessAt: NOW - 27 * H }),
  );
  assert.equal(lateAfterSuccess.health, "late");
  assert.deepEqual(lateAfterSuccess.problems, ["last success 27h ago (limit 26h)"]);
  const onTime = assessJob(facts({ health, recent: [run("ok")], lastSuccessAt: NOW - 25 * H }));
  assert.equal(onTime.health, "ok");
  const neverSince = assessJob(facts({ health, firstSeenAt: NOW - 3 * 24 * H }));
  assert.equal(neverSince.health, "late");
  assert.deepEqual(neverSince.problems, [
    "no successful run since it was first seen 3d ago (limit 26h)",
  ]);
  // Seen for less than the limit: not late yet, merely never run.
  assert.equal(assessJob(facts({ health, firstSeenAt: NOW - H })).health, "never-run");
  assert.equal(assessJob(facts({ health, firstSeenAt: null })).health, "never-run");
});

test("paused outranks every other word; the other problems are still listed", () => {
  const a = assessJob(
    facts({
      paused: true,
      recent: [run("failed")],
      health: { successWithinMs: H },
      lastSuccessAt: NOW - 2 * H,
    }),
  );
  assert.equal(a.health, "paused");
  assert.deepEqual(a.words, ["paused", "failing", "late"]);
  assert.equal(a.problems.length, 3);
  assert.match(a.problems[0], /^paused/);
});

test("worst first: stuck, failing, repeating, late", () => {
  const a = assessJob(
    facts({
      health: { successWithinMs: H, progressWithinMs: M },
      recent: [run("failed", { endedAgo: 2 * H })],
      lastSuccessAt: NOW - 3 * H,
      running: [live({ startedAgo: 5 * M })],
      attempts: [{ key: "k", count: 5, last_at: NOW - M }],
    }),
  );
  assert.deepEqual(a.words, ["stuck", "failing", "repeating", "late"]);
  assert.equal(a.health, "stuck");
  assert.deepEqual(
    a.findings.map((f) => f.word),
    ["stuck", "failing", "repeating", "late"],
  );
});

test("slow: a run past 2 x the p95 of recent successes is a problem, not a health word", () => {
  const usual = [1, 2, 2, 3, 4].map((s) => run("ok", { ms: s * S }));
  const p95 = percentile95(usual.map((r) => r.duration_ms));
  assert.equal(p95, 4 * S);
  const slow = assessJob(
    facts({
      recent: usual,
      lastSuccessAt: NOW - M,
      running: [live({ startedAgo: 9 * S, progressAgo: S, id: 77 })],
    }),
  );
  assert.equal(slow.health, "ok");
  assert.deepEqual(slow.slowRunIds, [77]);
  assert.deepEqual(slow.problems, [
    "run 77 has run 9s, over 2× its usual 4s (p95 of recent successes)",
  ]);
  const inTime = assessJob(facts({ recent: usual, running: [live({ startedAgo: 8 * S })] }));
  assert.deepEqual(inTime.slowRunIds, []);
  // Four samples say nothing about what is usual.
  assert.equal(percentile95([1, 2, 3, 4]), null);
  assert.deepEqual(
    assessJob(facts({ recent: usual.slice(1), running: [live({ startedAgo: H })] })).slowRunIds,
    [],
  );
  // Failed runs do not count towards "usual".
  const failedOnly = [1, 1, 1, 1, 1].map(() => run("failed", { ms: S }));
  assert.equal(
    assessJob(facts({ recent: failedOnly, running: [live({ startedAgo: H })] })).p95DurationMs,
    null,
  );
  // Sub-second jobs are measured against a 1 s floor: 50 ms vs a 20 ms p95 is noise.
  const quick = [20, 20, 20, 20, 20].map((ms) => run("ok", { ms }));
  assert.deepEqual(
    assessJob(facts({ recent: quick, running: [live({ startedAgo: 1500 })] })).slowRunIds,
    [],
  );
});

test("daemon state: running while beating, unresponsive after more than 3 missed beats, down without a process", () => {
  const row = (heartbeatAgo, extra = {}) => ({
    pid: 42,
    pid_start: "1",
    started_at: NOW - H,
    heartbeat_at: heartbeatAgo === null ? null : NOW - heartbeatAgo,
    heartbeat_ms: 10 * S,
    stopped_at: null,
    config_file: "/x",
    config_error: null,
    ...extra,
  });
  assert.equal(UNRESPONSIVE_BEATS, 3);
  assert.equal(daemonState(row(2 * S), true, NOW), "running");
  assert.equal(daemonState(row(30 * S), true, NOW), "running");
  assert.equal(daemonState(row(30 * S + 1), true, NOW), "unresponsive");
  assert.equal(daemonState(row(null), true, NOW), "unresponsive");
  assert.equal(daemonState(row(2 * S), false, NOW), "down");
  assert.equal(daemonState(row(2 * S, { stopped_at: NOW - S }), true, NOW), "down");
  assert.equal(daemonState(row(2 * S, { pid: null }), true, NOW), "down");
  assert.equal(daemonState(null, false, NOW), "down");
  assert.equal(beating({ heartbeat_at: NOW - 3 * S, heartbeat_ms: S }, NOW), true);
  assert.equal(beating({ heartbeat_at: NOW - 4 * S, heartbeat_ms: S }, NOW), false);
});

test("--check: 2 when the daemon is not beating, 1 for a warning word, a failed reload or a down endpoint, else 0", () => {
  const report = (state, healths, configError = null, httpError = null) => ({
    daemon: {
      state,
      pid: 1,
      started_at: null,
      heartbeat_at: null,
      heartbeat_age_s: 1,
      heartbeat_interval_s: 10,
      config_error: configError,
      http_error: httpError,
      http_error_since: httpError === null ? null : "2026-03-29T01:00:00.000Z",
    },
    nodes: [],
    shared: false,
    jobs: healths.map((health, i) => ({ name: `j${i}`, health, definition_differs_on: [] })),
  });
  assert.equal(checkCode(report("running", ["ok", "paused", "never-run"])), 0);
  assert.match(checkSummary(report("running", ["ok"])), /^OK: /);
  for (const w of ["late", "stuck", "failing", "repeating"]) {
    assert.equal(checkCode(report("running", ["ok", w])), 1, w);
  }
  assert.equal(
    checkSummary(report("running", ["ok", "late", "stuck"])),
    "WARNING: j1 late, j2 stuck",
  );
  assert.equal(checkCode(report("running", ["ok"], "jobs.yaml:3:1: bad")), 1);
  const taken = "cannot serve http on 127.0.0.1:9464: the address is in use";
  assert.equal(checkCode(report("running", ["ok"], null, taken)), 1);
  assert.equal(
    checkSummary(report("running", ["ok"], null, taken)),
    `WARNING: http endpoint down (${taken})`,
  );
  assert.equal(checkCode(report("unresponsive", ["ok"])), 2);
  assert.equal(checkCode(report("down", ["failing"])), 2);
  assert.equal(checkSummary(report("down", [])), "CRITICAL: daemon down (last heartbeat 1s ago)");
});

test("--check on a shared store: CRITICAL when no running node may run a job; WARNING for a late or gone node, a clock off by more than 2 s, or a job defined differently", () => {
  const node = (name, state, off = 0) => ({ name, state, clock_offset_ms: off });
  const report = (nodes, differs = []) => ({
    daemon: { state: "down", config_error: null, http_error: null, config_file_errors: null },
    nodes,
    shared: true,
    jobs: [
      { name: "a", health: "ok", definition_differs_on: differs },
      { name: "b", health: "ok", definition_differs_on: [] },
    ],
  });
  const config = {
    jobs: [
      { name: "a", hosts: null },
      { name: "b", hosts: ["n2"] },
    ],
  };
  const both = [node("n1", "running"), node("n2", "running")];
  // This node's own daemon is down, but the others run every job: no CRITICAL.
  assert.equal(checkCode(report(both), config), 0);
  assert.equal(
    checkSummary(report(both), config),
    "OK: 2 node(s) running, 2 job(s) without a warning",
  );
  const n2gone = [node("n1", "running"), node("n2", "gone")];
  assert.equal(checkCode(report(n2gone), config), 2);
  assert.equal(checkSummary(report(n2gone), config), "CRITICAL: no running node may run b");
  const n1late = [node("n1", "late"), node("n2", "running")];
  assert.equal(checkCode(report(n1late), config), 1);
  assert.equal(checkSummary(report(n1late), config), "WARNING: node n1 late");
  const skewed = [node("n1", "running", 2500), node("n2", "running", -1900)];
  assert.equal(checkSummary(report(skewed), config), "WARNING: node n1's clock is off by 2.5 s");
  assert.equal(
    checkSummary(report(both, ["n1", "n2"]), config),
    "WARNING: a defined differently on n1, n2",
  );
  assert.equal(checkCode(report([]), config), 2);
});

test("--check: 1 while status works from the daemon's record of its config (the file has errors), said first", () => {
  const report = (state, healths) => ({
    daemon: {
      state,
      pid: 1,
      heartbeat_age_s: 1,
      config_error: "jobs.yaml:3:1: bad",
      config_accepted_at: "2026-11-29T22:23:40.119Z",
      config_file_errors: ["jobs.yaml:3:1: bad"],
      http_error: null,
      http_error_since: null,
    },
    nodes: [],
    shared: false,
    jobs: healths.map((health, i) => ({ name: `j${i}`, health, definition_differs_on: [] })),
  });
  assert.equal(checkCode(report("running", ["ok"])), 1);
  const at = brokenFileNotice(Date.parse("2026-11-29T22:23:40.119Z"), true);
  assert.equal(checkSummary(report("running", ["ok"])), `WARNING: ${at}`);
  assert.equal(checkSummary(report("running", ["failing"])), `WARNING: ${at}, j0 failing`);
  assert.equal(checkCode(report("down", ["ok"])), 2);
});

test("the broken-file notice: HH:MM with the zone's name and the date, in the zone given", () => {
  const at = Date.parse("2026-11-29T22:23:40.119Z");
  assert.equal(
    brokenFileNotice(at, true, "UTC"),
    "the config file has errors; the daemon runs the config accepted at 22:23 UTC on 2026-11-29",
  );
  assert.equal(
    brokenFileNotice(at, false, "Asia/Tokyo"),
    "the config file has errors; the daemon last ran the config accepted at 07:23 GMT+9 on 2026-11-30",
  );
});

test("failing: a streak as long as the summary keeps (20) is not called exactly 20: it says since when", () => {
  const twenty = Array.from({ length: 20 }, (_, i) =>
    run("failed", { id: 100 - i, reason: "exit 1" }),
  );
  const since = assessJob(
    facts({ recent: twenty, lastSuccessAt: Date.parse("2026-03-28T06:30:00Z") }),
  );
  assert.deepEqual(since.problems, [
    "the last 20 or more runs failed: none has succeeded since 2026-03-28 06:30Z (latest run 100: failed, exit 1)",
  ]);
  const never = assessJob(facts({ recent: twenty }));
  assert.deepEqual(never.problems, [
    "the last 20 or more runs failed: none has ever succeeded (latest run 100: failed, exit 1)",
  ]);
  // Under the cap the count is exact.
  const nineteen = assessJob(facts({ recent: [...twenty.slice(0, 19), run("ok")] }));
  assert.deepEqual(nineteen.problems, ["the last 19 runs failed (latest run 100: failed, exit 1)"]);
});
