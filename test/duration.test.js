import assert from "node:assert/strict";
import { test } from "node:test";
import { formatDuration, parseDuration, parseSize } from "../dist/core/duration.js";

test("parseDuration reads each unit and compounds", () => {
  const cases = {
    "0s": 0,
    "500ms": 500,
    "30s": 30_000,
    "10m": 600_000,
    "2h": 7_200_000,
    "1d": 86_400_000,
    "1h30m": 5_400_000,
    "1d2h3m4s5ms": 93_784_005,
    "1.5h": 5_400_000,
    "0.5s": 500,
  };
  for (const [text, ms] of Object.entries(cases)) assert.equal(parseDuration(text), ms, text);
});

test("parseDuration says what is wrong", () => {
  const cases = {
    30: 'bad duration "30": needs a unit, e.g. 30s',
    "1h30": 'bad duration "1h30": needs a unit, e.g. 30s',
    "5w": 'bad duration "5w": unknown unit "w" (use ms, s, m, h or d)',
    "10S": 'bad duration "10S": unknown unit "S" (use ms, s, m, h or d)',
    "": 'bad duration "": expected a number and a unit, e.g. 30s',
    soon: 'bad duration "soon": expected a number and a unit, e.g. 30s',
    "-5s": 'bad duration "-5s": expected a number and a unit, e.g. 30s',
    "1h 30m": 'bad duration "1h 30m": expected a number and a unit, e.g. 30s',
    "99999999999999999999d": 'bad duration "99999999999999999999d": too large',
  };
  for (const [text, message] of Object.entries(cases)) {
    assert.throws(() => parseDuration(text), { name: "RangeError", message }, text);
  }
});

test("parseSize is 1024-based and wants a unit", () => {
  assert.equal(parseSize("100B"), 100);
  assert.equal(parseSize("512KB"), 512 * 1024);
  assert.equal(parseSize("10MB"), 10 * 1024 * 1024);
  assert.equal(parseSize("1GB"), 1024 ** 3);
  assert.equal(parseSize("1.5KB"), 1536);
  assert.throws(() => parseSize("10"), { message: 'bad size "10": needs a unit, e.g. 10MB' });
  assert.throws(() => parseSize("10mb"), {
    message: 'bad size "10mb": unknown unit "mb" (use B, KB, MB, GB or TB)',
  });
  assert.throws(() => parseSize("1MB1KB"), {
    message: 'bad size "1MB1KB": expected one number and a unit, e.g. 10MB',
  });
});

test("formatDuration writes the largest units first and reads back exactly", () => {
  const cases = [
    [0, "0s"],
    [1, "1ms"],
    [500, "500ms"],
    [1500, "1s500ms"],
    [60_000, "1m"],
    [5_400_000, "1h30m"],
    [93_784_005, "1d2h3m4s5ms"],
    [-30_000, "-30s"],
  ];
  for (const [ms, text] of cases) assert.equal(formatDuration(ms), text, String(ms));
  for (let ms = 0; ms < 200_000_000; ms += 7_777_777) {
    assert.equal(parseDuration(formatDuration(ms)), ms, String(ms));
  }
});
