// Blackout windows and the decisions of chains and the drain, as pure functions: the window
// parser, whether an instant is inside a window in a zone (DST included), what holds a start
// (hold.ts) and what a run's end chains (chains.ts).
import assert from "node:assert/strict";
import { test } from "node:test";
import { blackoutAt, inWindow, parseWindow } from "../dist/schedule/windows.js";
import { drainActive, holdReason } from "../dist/daemon/hold.js";
import { chainsAfter } from "../dist/daemon/chains.js";

const at = (s) => Date.parse(s);

test("parseWindow: dates, date-times and weekly windows; errors say why", () => {
  assert.deepEqual(parseWindow("2026-12-24..2026-12-26"), {
    kind: "dates",
    from: "2026-12-24 00:00",
    to: "2026-12-27 00:00",
  });
  assert.deepEqual(parseWindow("2026-12-31 22:00..2027-01-01 02:30"), {
    kind: "dates",
    from: "2026-12-31 22:00",
    to: "2027-01-01 02:30",
  });
  assert.deepEqual(parseWindow("Sat 00:00-06:00"), {
    kind: "weekly",
    days: [6],
    start: 0,
    end: 360,
  });
  assert.deepEqual(parseWindow("fri-mon 22:00-02:00"), {
    kind: "weekly",
    days: [5, 6, 0, 1],
    start: 1320,
    end: 120,
  });
  assert.deepEqual(parseWindow("02:00-24:00").days, [0, 1, 2, 3, 4, 5, 6]);
  for (const [text, why] of [
    ["2026-02-30..2026-03-01", /not a date of the calendar/],
    ["2026-12-26..2026-12-24", /ends before it starts/],
    ["2026-12-24", /is not a day or a range of days|is not a time range/],
    ["Sun 25:00-06:00", /is not a time range/],
    ["Sun 06:00-06:00", /empty/],
    ["Funday 01:00-02:00", /"Funday" is not a day/],
    ["Sat Sun 01:00-02:00", /expected/],
    ["2026-12-24 24:00..2026-12-25", /the time is not HH:MM/],
  ])
    assert.match(parseWindow(text).error ?? "parsed", why, text);
});

test("inWindow: judged on the zone's wall clock, across midnight and across a DST change", () => {
  const sat = parseWindow("Sat 00:00-06:00");
  // 2026-03-28 is a Saturday; Berlin is UTC+1 that day.
  assert.equal(inWindow(sat, "Europe/Berlin", at("2026-03-27T23:00:00Z")), true, "Sat 00:00 local");
  assert.equal(
    inWindow(sat, "Europe/Berlin", at("2026-03-27T22:59:59Z")),
    false,
    "Fri 23:59 local",
  );
  assert.equal(inWindow(sat, "Europe/Berlin", at("2026-03-28T04:59:00Z")), true);
  assert.equal(inWindow(sat, "Europe/Berlin", at("2026-03-28T05:00:00Z")), false, "06:00 is out");
  assert.equal(
    inWindow(sat, "UTC", at("2026-03-27T23:00:00Z")),
    false,
    "the same instant in UTC is Friday",
  );
  // Sunday 2026-03-29, Berlin springs forward at 02:00: "Sun 01:00-04:00" is 2 real hours.
  const sun = parseWindow("Sun 01:00-04:00");
  assert.equal(inWindow(sun, "Europe/Berlin", at("2026-03-29T00:30:00Z")), true, "01:30 CET");
  assert.equal(inWindow(sun, "Europe/Berlin", at("2026-03-29T01:30:00Z")), true, "03:30 CEST");
  assert.equal(inWindow(sun, "Europe/Berlin", at("2026-03-29T02:00:00Z")), false, "04:00 CEST");
  // Past midnight: Friday 22:00 to Saturday 02:00.
  const late = parseWindow("Fri 22:00-02:00");
  assert.equal(inWindow(late, "UTC", at("2026-03-27T23:00:00Z")), true, "Fri 23:00");
  assert.equal(inWindow(late, "UTC", at("2026-03-28T01:59:00Z")), true, "Sat 01:59");
  assert.equal(inWindow(late, "UTC", at("2026-03-28T02:00:00Z")), false, "Sat 02:00");
  assert.equal(inWindow(late, "UTC", at("2026-03-26T23:00:00Z")), false, "Thu 23:00");
  // Whole local days, in the zone.
  const xmas = parseWindow("2026-12-24..2026-12-26");
  assert.equal(
    inWindow(xmas, "Asia/Tokyo", at("2026-12-23T15:00:00Z")),
    true,
    "24th 00:00 in Tokyo",
  );
  assert.equal(inWindow(xmas, "UTC", at("2026-12-23T15:00:00Z")), false);
  assert.equal(inWindow(xmas, "UTC", at("2026-12-26T23:59:59Z")), true);
  assert.equal(inWindow(xmas, "UTC", at("2026-12-27T00:00:00Z")), false);
});

test("blackoutAt names the first window holding the slot; holdReason puts the drain first", () => {
  const job = {
    timezone: "UTC",
    blackouts: [
      { name: "xmas", window: parseWindow("2026-12-24..2026-12-26") },
      { name: "Sat 00:00-06:00", window: parseWindow("Sat 00:00-06:00") },
    ],
  };
  assert.equal(blackoutAt(job, at("2026-12-25T12:00:00Z")), "xmas");
  assert.equal(blackoutAt(job, at("2026-03-28T01:00:00Z")), "Sat 00:00-06:00");
  assert.equal(blackoutAt(job, at("2026-03-27T01:00:00Z")), null);
  assert.equal(blackoutAt({ timezone: "UTC" }, 0), null, "a config record without blackouts");
  const now = at("2026-12-25T12:00:00Z");
  assert.equal(holdReason(job, now, null, now), "blackout xmas");
  assert.equal(holdReason(job, null, null, now), null, "a start with no slot is not blacked out");
  const drain = { since: now - 1000, until: null, reason: "db upgrade" };
  assert.equal(holdReason(job, now, drain, now), "paused (maintenance: db upgrade)");
  assert.equal(holdReason(job, null, { ...drain, reason: null }, now), "paused (maintenance)");
  assert.equal(drainActive({ ...drain, until: now }, now), false, "--until ends it");
  assert.equal(drainActive({ ...drain, until: now + 1 }, now), true);
  assert.equal(drainActive({ ...drain, since: now + 1 }, now), false);
  assert.equal(drainActive(null, now), false);
});

test("chainsAfter: then on ok, then_on_failure on a failure with no retry left, nothing without a slot", () => {
  const job = {
    name: "extract",
    then: ["report", "index"],
    thenOnFailure: ["cleanup"],
    overlap: "skip",
    retries: { attempts: 1, backoffMs: 1000 },
  };
  const run = { id: 41, slot: 60_000, attempt: 1 };
  assert.deepEqual(chainsAfter(job, run, "ok", null, 0), [
    { job: "report", slot: 60_000, upstream: "extract", upstreamRun: 41 },
    { job: "index", slot: 60_000, upstream: "extract", upstreamRun: 41 },
  ]);
  assert.deepEqual(chainsAfter(job, run, "failed", null, 0), [], "a retry follows: no chain yet");
  assert.deepEqual(chainsAfter(job, { ...run, attempt: 2 }, "timeout", null, 0), [
    { job: "cleanup", slot: 60_000, upstream: "extract", upstreamRun: 41 },
  ]);
  // The retry would start after the next slot: dropped, so this failure is final.
  assert.equal(chainsAfter(job, run, "failed", 500, 0).length, 1);
  for (const status of ["killed", "interrupted", "fenced", "skipped"])
    assert.deepEqual(chainsAfter(job, run, status, null, 0), [], status);
  assert.deepEqual(chainsAfter(job, { ...run, slot: null }, "ok", null, 0), [], "`cronvisor run`");
});
