// `cronvisor why` end to end: a real daemon running real per-second jobs, the built CLI, the real
// store. What became of a slot that ran, one skipped by overlap, one skipped while paused, one
// missed across a restart (and the catch-up run that followed), a time that is no slot, a slot
// not due yet; a bad TIME, an unknown job, and every JSON field. No sleeps: each wait polls the
// store with a deadline.
import assert from "node:assert/strict";
import fs from "node:fs";
import { test } from "node:test";
import {
  BIN,
  cli,
  readStoreIn,
  startDaemon,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";

const FIELDS = [
  "job",
  "slot",
  "disposition",
  "run_id",
  "node",
  "reason",
  "explanation",
  "timezone",
  "previous_slot",
  "next_slot",
];

const iso = (t) => new Date(t).toISOString();

function config(dir) {
  const mark = `'"${process.execPath}" "${BIN}" mark "k-$CRONVISOR_SLOT"'`;
  return writeConfig(
    dir,
    `heartbeat: 1s
timezone: Europe/Berlin
jobs:
  tick: { schedule: "* * * * * *", command: ${mark}, catchup: once }
  slow: { schedule: "* * * * * *", command: "sleep 3", overlap: skip }
  held: { schedule: "* * * * * *", command: "true" }
  daily: { schedule: "0 2 * * *", command: "true" }
`,
  );
}

function why(cfg, ...args) {
  const r = cli(["why", ...args, "-c", cfg]);
  return r;
}

function whyJson(cfg, ...args) {
  const r = why(cfg, ...args, "--json");
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

test("why: ran, skipped by overlap, paused, not_a_slot, not_due, a bad TIME, an unknown job", async (t) => {
  const dir = tmpdir(t);
  const cfg = config(dir);
  const d = startDaemon(t, cfg);

  // ran: a tick run that wrote its marker.
  const ran = await waitFor(
    () =>
      readStoreIn(dir)
        .runs({ job: "tick", status: "ok" })
        .find((r) => r.markers_new === 1),
    "a tick run with its marker",
  );
  const w = whyJson(cfg, "tick", "--at", iso(ran.slot));
  assert.deepEqual(Object.keys(w), FIELDS);
  assert.equal(w.job, "tick");
  assert.equal(w.slot, iso(ran.slot));
  assert.equal(w.disposition, "ran");
  assert.equal(w.run_id, ran.id);
  // The node that ran it (on SQLite, the store's one node: the host's name or `node:`).
  assert.ok(ran.node, "runs carry their node");
  assert.equal(w.node, ran.node);
  assert.equal(w.reason, null);
  assert.equal(w.timezone, "Europe/Berlin");
  assert.equal(w.previous_slot, iso(ran.slot - 1000));
  assert.equal(w.next_slot, iso(ran.slot + 1000));
  assert.match(
    w.explanation[1],
    new RegExp(`^Run ${ran.id} \\(schedule\\) ok, exit 0.*markers: 1 new, 0 already done\\.$`),
  );
  const human = why(cfg, "tick", "--at", iso(ran.slot));
  assert.equal(human.code, 0, human.stderr);
  const lines = human.stdout.trimEnd().split("\n");
  // The UTC time beside the local one carries its date when the two dates differ (late evening
  // in Berlin is the next day in no zone, but 23:00-24:00 UTC is already tomorrow in Berlin).
  const wall = (t, zone) =>
    new Intl.DateTimeFormat("sv-SE", {
      timeZone: zone,
      dateStyle: "short",
      timeStyle: "medium",
      hourCycle: "h23",
    }).format(t);
  const local = wall(ran.slot, "Europe/Berlin");
  const u = wall(ran.slot, "UTC");
  const beside = u.slice(0, 10) === local.slice(0, 10) ? u.slice(11) : u;
  assert.equal(lines[0], `tick, slot ${local} Europe/Berlin (${beside}Z): ran`);
  assert.deepEqual(lines, w.explanation);

  // skipped by overlap: the run holding the lock is named.
  const skip = await waitFor(
    () => readStoreIn(dir).runs({ job: "slow", status: "skipped" })[0],
    "an overlap-skipped slot",
  );
  const s = whyJson(cfg, "slow", "--at", iso(skip.slot));
  assert.equal(s.disposition, "skipped");
  assert.equal(s.run_id, null);
  assert.match(s.reason, /^overlap: run \d+ holds the lock$/);
  const holder = Number(/run (\d+)/.exec(s.reason)[1]);
  assert.match(
    s.explanation[1],
    new RegExp(
      `^Skipped: run ${holder} held the job's lock \\(running since .*\\), and overlap is skip\\.$`,
    ),
  );

  // paused by `cronvisor pause`: by which command, and since when.
  assert.equal(cli(["pause", "held", "-c", cfg]).code, 0);
  const paused = await waitFor(
    () => readStoreIn(dir).runs({ job: "held", status: "skipped", reason: "paused" })[0],
    "a slot skipped while paused",
  );
  const p = whyJson(cfg, "held", "--at", iso(paused.slot));
  assert.equal(p.disposition, "skipped");
  assert.equal(p.reason, "paused");
  assert.match(
    p.explanation[1],
    /^Skipped: the job was paused by `cronvisor pause held` at \d{4}-\d\d-\d\d \d\d:\d\d/,
  );

  // not_a_slot, in a DST gap: the neighbours, and a note.
  const gap = whyJson(cfg, "daily", "--at", "2026-03-29T02:30");
  assert.equal(gap.disposition, "not_a_slot");
  assert.equal(gap.slot, null);
  assert.equal(
    gap.explanation[1],
    "2026-03-29 02:30 does not exist in Europe/Berlin: the clocks jump from 02:00 to 03:00 that night.",
  );
  assert.equal(gap.previous_slot, "2026-03-28T01:00:00.000Z");
  assert.equal(gap.next_slot, "2026-03-29T01:00:00.000Z");
  const off = whyJson(cfg, "daily", "--at", "2026-06-10T12:00");
  assert.equal(off.disposition, "not_a_slot");
  assert.match(
    off.explanation[1],
    /^No slot of "0 2 \* \* \*" then: the one before is 2026-06-10 02:00 \(00:00Z\), the one after 2026-06-11 02:00 \(00:00Z\)\.$/,
  );

  // not_due: the slot's time.
  const due = whyJson(cfg, "daily", "--at", "2099-01-01T02:00");
  assert.equal(due.disposition, "not_due");
  assert.equal(due.slot, "2099-01-01T01:00:00.000Z");
  assert.match(due.explanation[1], /^Not due yet: the slot comes in \d+d\.$/);

  // A bad TIME: exit 2, one line naming it, no stack. A control character in it is escaped.
  const bad = why(cfg, "tick", "--at", "tomorrow\x1b[2J");
  assert.equal(bad.code, 2);
  assert.equal(bad.stdout, "");
  assert.equal(bad.stderr.split("\n").length, 2, bad.stderr);
  assert.match(bad.stderr, /^--at "tomorrow\\u001b\[2J": not an ISO-8601 time/);
  assert.ok(!bad.stderr.includes("\x1b"), "no raw escape");
  assert.doesNotMatch(bad.stderr, /at .*\.js/);

  // An unknown job: exit 1.
  const unknown = why(cfg, "nope");
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /^no job named "nope"/);

  await stopDaemon(d);
});

test("why: a slot missed while the daemon was down names the catch-up run; works while down and with a broken file", async (t) => {
  const dir = tmpdir(t);
  const cfg = config(dir);
  const d1 = startDaemon(t, cfg);
  await waitFor(() => readStoreIn(dir).runs({ job: "tick", status: "ok" })[0], "a first tick run");
  await stopDaemon(d1);
  const stoppedAt = readStoreIn(dir).daemon().stopped_at;

  // While the daemon is down, a slot that passed is missed, not yet recorded.
  await waitFor(() => Date.now() > stoppedAt + 1500, "a slot to pass with the daemon down");
  const down = whyJson(cfg, "tick");
  assert.equal(down.disposition, "missed");
  assert.match(
    down.explanation[1],
    /^Missed: the daemon is down \(it stopped at .*\)\. When it starts, catchup: once runs the latest slot/,
  );

  // At least two slots pass: catchup: once runs the latest, the others are recorded missed.
  await waitFor(() => Date.now() > stoppedAt + 3000, "three slots to pass with the daemon down");
  const d2 = startDaemon(t, cfg);
  const catchUp = await waitFor(
    () => readStoreIn(dir).runs({ job: "tick", trigger: "catchup", status: "ok" })[0],
    "the catch-up run",
  );
  const missed = readStoreIn(dir)
    .runs({ job: "tick", status: "missed" })
    .sort((a, b) => a.slot - b.slot);
  assert.ok(missed.length >= 1, "slots recorded missed");
  const m = whyJson(cfg, "tick", "--at", iso(missed[0].slot));
  assert.equal(m.disposition, "missed");
  assert.equal(m.reason, "daemon down");
  assert.equal(m.run_id, null);
  assert.match(
    m.explanation[1],
    /^Missed: the daemon was down at the slot: its last record before the slot is from .*, and it started again at .*, when it recorded the slot missed\.$/,
  );
  assert.match(
    m.explanation[2],
    new RegExp(`^Catch-up \\(catchup: once\\): run ${catchUp.id} for the slot `),
  );

  const c = whyJson(cfg, "tick", "--at", iso(catchUp.slot));
  assert.equal(c.disposition, "caught_up");
  assert.equal(c.run_id, catchUp.id);

  // A broken config file: why works from the daemon's record of the config it runs.
  fs.writeFileSync(cfg, "jobs: [\n");
  const broken = why(cfg, "tick", "--at", iso(missed[0].slot), "--json");
  assert.equal(broken.code, 0, broken.stderr);
  assert.equal(JSON.parse(broken.stdout).disposition, "missed");
  assert.match(broken.stderr, /the daemon runs the config accepted at/);
  await stopDaemon(d2);
});
