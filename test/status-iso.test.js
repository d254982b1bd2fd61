// status formats its times without a Date per call (health/iso.ts `iso`): the same strings as
// toISOString, at the edges of a day, of the years it handles, and outside them.
import assert from "node:assert/strict";
import { test } from "node:test";
import { iso } from "../dist/health/status.js";

test("iso gives toISOString's string for any time, null for none", () => {
  assert.equal(iso(null), null);
  assert.equal(iso(undefined), null);
  const edges = [0, 1, 999, 1000, 59_999, 3_599_999, 86_399_999, 86_400_000, 951_782_400_000];
  const far = [253_402_300_799_999, 253_402_300_800_000, -1, -86_400_001, 1.5, 8.64e15];
  const random = Array.from({ length: 50_000 }, () => Math.floor(Math.random() * 2.6e14));
  for (const t of [...edges, ...far, ...random])
    assert.equal(iso(t), new Date(t).toISOString(), `at ${t}`);
  // The same day twice (its prefix cached), then another day.
  assert.equal(iso(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
  assert.equal(iso(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
  assert.equal(iso(1_700_086_400_000), "2023-11-15T22:13:20.000Z");
});
