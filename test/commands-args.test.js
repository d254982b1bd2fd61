// The CLI's pure parts: the hand-written argument parsers, the exit-code table, table output.
import assert from "node:assert/strict";
import os from "node:os";
import { test } from "node:test";
import { fastStatus, markerArgs, positiveInt } from "../dist/commands/args.js";
import { EXIT, runExitCode } from "../dist/core/exit.js";
import { renderTable } from "../dist/core/table.js";
import { CliError, when } from "../dist/commands/shared.js";

test("fastStatus reads a plain status call and hands anything else to commander", () => {
  assert.deepEqual(fastStatus(["status"]), { job: null, opts: {} });
  assert.deepEqual(fastStatus(["status", "backup", "--json", "--check", "-c", "a.yaml"]), {
    job: "backup",
    opts: { json: true, check: true, config: "a.yaml" },
  });
  assert.deepEqual(fastStatus(["status", "--config", "a.yaml"]).opts, { config: "a.yaml" });
  assert.deepEqual(fastStatus(["status", "--config=a.yaml", "j"]), {
    job: "j",
    opts: { config: "a.yaml" },
  });
  for (const args of [
    ["history"],
    [],
    ["status", "--help"],
    ["status", "-h"],
    ["status", "--json", "--json"],
    ["status", "--check", "--check"],
    ["status", "a", "b"],
    ["status", "-c"],
    ["status", "-c", ""],
    ["status", "-c", "-x"],
    ["status", "-c", "a.yaml", "--config", "b.yaml"],
    ["status", "--config="],
    ["status", "--"],
    ["status", ""],
    ["status", "--bogus"],
  ]) {
    assert.equal(fastStatus(args), null, JSON.stringify(args));
  }
});

test("markerArgs drops -c/--config and keeps everything after -- in order", () => {
  assert.deepEqual(markerArgs(["mark", "k1", "-c", "a.yaml", "k2", "--job", "j"]), [
    "k1",
    "k2",
    "--job",
    "j",
  ]);
  assert.deepEqual(markerArgs(["check", "--config=a.yaml", "k", "--config", "b.yaml"]), ["k"]);
  assert.deepEqual(markerArgs(["once", "k", "--", "sh", "-c", "true", "--config", "x"]), [
    "k",
    "--",
    "sh",
    "-c",
    "true",
    "--config",
    "x",
  ]);
  assert.deepEqual(markerArgs(["progress"]), []);
});

test("positiveInt takes whole numbers above zero; anything else is a usage error naming the flag", () => {
  assert.equal(positiveInt("5", "--limit"), 5);
  assert.equal(positiveInt("1e3", "--limit"), 1000);
  for (const v of ["0", "-1", "1.5", "x", ""]) {
    assert.throws(
      () => positiveInt(v, "--count"),
      (e) =>
        e instanceof CliError &&
        e.code === EXIT.usage &&
        e.message === `--count must be a positive integer, got ${JSON.stringify(v)}`,
    );
  }
});

test("the exit-code table holds the contract's numbers", () => {
  assert.deepEqual(
    { ...EXIT },
    {
      ok: 0,
      fail: 1,
      warning: 1,
      usage: 2,
      critical: 2,
      unknown: 3,
      unavailable: 69,
      busy: 75,
      timeout: 124,
      cannotExecute: 126,
      notFound: 127,
    },
  );
});

test("run's exit code: the job's own, else the one timeout(1) and shells use", () => {
  const code = (status, exitCode, signal) => runExitCode({ status, exitCode, signal });
  assert.equal(code("ok", 0, null), 0);
  assert.equal(code("failed", 3, null), 3);
  assert.equal(code("timeout", null, "SIGTERM"), 124);
  assert.equal(code("spawn_failed", null, null), 127);
  assert.equal(code("killed", null, "SIGKILL"), 137);
  assert.equal(code("killed", null, "SIGTERM"), 143);
  assert.equal(code("killed", null, "SIGINT"), 130);
  assert.equal(code("killed", null, "SIGHUP"), 129);
  // Any signal the platform knows is 128+N (the old table knew four: SIGUSR1 gave 128).
  assert.equal(code("killed", null, "SIGUSR1"), 128 + os.constants.signals.SIGUSR1);
  assert.equal(code("killed", null, "SIGNOSUCH"), 128);
  assert.equal(code("lost", null, null), 1);
});

test("table pads every column but the last; when prints whole-second UTC", () => {
  assert.equal(
    renderTable([
      ["A", "BB", "C"],
      ["ccc", "d", "e"],
    ]).join("\n"),
    "A    BB  C\nccc  d   e",
  );
  assert.equal(when("2026-01-02T03:04:05.678Z"), "2026-01-02 03:04:05Z");
  assert.equal(when(null), "-");
});
