// Schedule maths: pure functions with time as an argument, checked across DST against an
// independent reference (Python's zoneinfo, brute-forced minute by minute).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { missedSlots, nextSlot, nextSlots } from "../dist/schedule/schedule.js";

const PY = "/usr/bin/python3";

/**
 * The reference: for each local day, the first UTC minute whose local wall time on that day is
 * at or after HH:MM. A time skipped by the spring change therefore lands on the first valid
 * instant after the gap; a time repeated in autumn lands on its first occurrence.
 */
const REFERENCE = String.raw`
import json, sys, datetime as dt
from zoneinfo import ZoneInfo
cases = json.load(sys.stdin)
out = []
for c in cases:
    tz = ZoneInfo(c["zone"])
    hh, mm = c["hour"], c["minute"]
    res = []
    day = dt.date.fromisoformat(c["from"])
    for _ in range(c["days"]):
        start = dt.datetime(day.year, day.month, day.day, tzinfo=tz).astimezone(dt.timezone.utc) - dt.timedelta(hours=3)
        m = start
        while True:
            loc = m.astimezone(tz)
            if loc.date() == day and (loc.hour, loc.minute) >= (hh, mm):
                res.append(m.strftime("%Y-%m-%dT%H:%M:00.000Z"))
                break
            if loc.date() > day:
                break
            m += dt.timedelta(minutes=1)
        day += dt.timedelta(days=1)
    out.append(res)
print(json.dumps(out))
`;

test("fixed-time jobs fire exactly once per local day across DST, as the reference says", () => {
  const transitions = [
    ["Europe/Berlin", "2026-03-26"],
    ["Europe/Berlin", "2026-10-22"],
    ["America/New_York", "2026-03-05"],
    ["America/New_York", "2026-10-29"],
    ["Australia/Lord_Howe", "2026-04-02"], // a 30-minute DST shift
    ["Australia/Lord_Howe", "2026-10-01"],
  ];
  const times = [
    [2, 30],
    [2, 0],
    [1, 45],
    [3, 0],
    [0, 0],
  ];
  const cases = [];
  for (const [zone, from] of transitions) {
    for (const [hour, minute] of times) cases.push({ zone, from, hour, minute, days: 8 });
  }
  const r = spawnSync(PY, ["-c", REFERENCE], { input: JSON.stringify(cases), encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  const expected = JSON.parse(r.stdout);
  cases.forEach((c, i) => {
    const job = { pattern: `${c.minute} ${c.hour} * * *`, timezone: c.zone };
    // Start just before the first day's local midnight (minus the reference's 3 h margin).
    const exp = expected[i];
    const first = new Date(Date.parse(exp[0]) - 1);
    const got = nextSlots(job, first, exp.length).map((d) => d.toISOString());
    assert.deepEqual(got, exp, `${c.zone} ${c.hour}:${c.minute} from ${c.from}`);
    const localDays = got.map((t) => new Date(t).toLocaleDateString("sv-SE", { timeZone: c.zone }));
    assert.equal(new Set(localDays).size, got.length, "once per local day");
  });
});

test("nextSlot is strictly after its argument and depends only on it (time is an argument)", () => {
  const job = { pattern: "*/15 * * * *", timezone: "UTC" };
  const at = new Date("2026-01-01T00:15:00.000Z");
  assert.equal(nextSlot(job, at).toISOString(), "2026-01-01T00:30:00.000Z");
  assert.equal(nextSlot(job, new Date(at.getTime() - 1)).toISOString(), "2026-01-01T00:15:00.000Z");
  // Moving the clock backwards gives earlier slots: the store's slot uniqueness, not this
  // function, is what prevents running them twice.
  assert.equal(
    nextSlot(job, new Date("2025-12-31T23:59:00Z")).toISOString(),
    "2026-01-01T00:00:00.000Z",
  );
  assert.equal(nextSlot({ pattern: null, timezone: "UTC" }, at), null, "@reboot has no slots");
  assert.equal(nextSlot({ pattern: "0 0 30 2 *", timezone: "UTC" }, at), null, "never fires");
});

test("day-of-month and day-of-week are OR'ed when both are restricted", () => {
  const got = nextSlots(
    { pattern: "0 0 1 * mon", timezone: "UTC" },
    new Date("2026-01-25T00:00:00Z"),
    4,
  );
  assert.deepEqual(
    got.map((d) => d.toISOString().slice(0, 10)),
    ["2026-01-26", "2026-02-01", "2026-02-02", "2026-02-09"],
  );
});

test("missedSlots: the latest N of a long downtime, oldest first, with a capped count of the rest", () => {
  const job = { pattern: "* * * * * *", timezone: "UTC" };
  const from = new Date("2026-01-01T00:00:00Z");
  const to = new Date("2026-01-01T01:00:00Z");
  const m = missedSlots(job, from, to, 100, 1000);
  assert.equal(m.slots.length, 100);
  assert.equal(m.slots.at(-1).toISOString(), "2026-01-01T01:00:00.000Z", "`to` itself counts");
  assert.equal(m.slots[0].toISOString(), "2026-01-01T00:58:21.000Z");
  assert.equal(m.earlierCapped, true);
  assert.equal(m.earlier, 1000);
  const small = missedSlots({ pattern: "*/10 * * * *", timezone: "UTC" }, from, to, 100);
  assert.deepEqual(
    small.slots.map((d) => d.toISOString().slice(11, 16)),
    ["00:10", "00:20", "00:30", "00:40", "00:50", "01:00"],
    "`from` itself does not count: it already has a disposition",
  );
  assert.equal(small.earlier, 0);
  // A year of per-second downtime stays cheap.
  const t0 = Date.now();
  missedSlots(job, new Date("2025-01-01T00:00:00Z"), to, 100);
  assert.ok(Date.now() - t0 < 5000);
});

test("missedSlots: the forward walk (few slots) and the walk back (many) agree with stepping one slot at a time", () => {
  // Every pattern and window is checked against the plainest reference: nextSlot from `from`
  // until past `to`, keeping the latest `max`. Windows straddle the switch between the two walks
  // (exactly max slots, max + 1) and DST changes in two zones.
  const cases = [
    ["* * * * * *", "UTC"],
    ["*/7 * * * * *", "UTC"],
    ["0 30 2 * * *", "Europe/Berlin"],
    ["0 0,30 * * * *", "America/New_York"],
    ["0 0 12 * * 1-5", "UTC"],
  ];
  let rng = 12345;
  const rand = () => (rng = (rng * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  for (const [pattern, timezone] of cases) {
    const job = { pattern, timezone };
    for (let k = 0; k < 25; k++) {
      const max = 1 + Math.floor(rand() * 8);
      const from = new Date(Date.UTC(2026, 2, 28) + Math.floor(rand() * 30 * 86_400_000));
      // The reference: step forward, keep everything.
      const all = [];
      let t = from;
      const want = max + Math.floor(rand() * 3) - 1; // max - 1, max or max + 1 slots in the window
      while (all.length < Math.max(want, 1)) {
        t = nextSlot(job, t);
        all.push(t);
      }
      const to = new Date(all.at(-1).getTime() + Math.floor(rand() * 500));
      const m = missedSlots(job, from, to, max, 1000);
      const label = `${pattern} ${timezone} from ${from.toISOString()} to ${to.toISOString()} max ${max}`;
      assert.deepEqual(
        m.slots.map((d) => d.toISOString()),
        all.slice(-max).map((d) => d.toISOString()),
        label,
      );
      assert.equal(m.earlier, Math.max(0, all.length - max), label);
      assert.equal(m.earlierCapped, false, label);
    }
  }
});
