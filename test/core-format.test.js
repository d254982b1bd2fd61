// The one home of each formatter and of the exit-code table (src/core/duration.ts, exit.ts).
import assert from "node:assert/strict";
import test from "node:test";
import {
  formatDurationOneUnit,
  formatDurationRounded,
  formatSeconds,
  parseDuration,
} from "../dist/core/duration.js";
import { EXIT, signalExitCode, signalNumber } from "../dist/core/exit.js";

test("formatDurationOneUnit writes the largest exact unit, and reads back", () => {
  const cases = [
    [0, "0s"],
    [500, "500ms"],
    [90_000, "90s"],
    [300_000, "5m"],
    [5_400_000, "90m"],
    [7_200_000, "2h"],
    [172_800_000, "2d"],
  ];
  for (const [ms, text] of cases) {
    assert.equal(formatDurationOneUnit(ms), text, String(ms));
    assert.equal(parseDuration(text), ms, text);
  }
});

test("formatDurationRounded: seconds to 2m, minutes to 2h, hours to 2d, then days", () => {
  const cases = [
    [0, "0s"],
    [42_400, "42s"],
    [119_400, "119s"],
    [119_600, "2m"],
    [7 * 60_000, "7m"],
    [3 * 3_600_000, "3h"],
    [2 * 86_400_000, "2d"],
  ];
  for (const [ms, text] of cases) assert.equal(formatDurationRounded(ms), text, String(ms));
});

test("formatSeconds: one decimal by default", () => {
  assert.equal(formatSeconds(1234), "1.2s");
  assert.equal(formatSeconds(2000), "2.0s");
  assert.equal(formatSeconds(41_600, 0), "42s");
});

test("signal exit codes come from the platform's table", () => {
  assert.equal(signalNumber("SIGTERM"), 15);
  assert.equal(signalExitCode("SIGKILL"), 137);
  assert.equal(signalExitCode("SIGNOSUCH"), 128);
  assert.equal(EXIT.critical, 2);
  assert.equal(EXIT.warning, 1);
});
