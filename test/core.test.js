// src/core: the pieces every stage shares, one of each.
import assert from "node:assert/strict";
import fs from "node:fs";
import test from "node:test";
import { VERSION } from "../dist/core/version.js";
import { renderTable } from "../dist/core/table.js";
import { ENV_NAME } from "../dist/core/env-name.js";

test("the version written in src/core/version.ts is package.json's", () => {
  const pkg = JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  assert.equal(VERSION, pkg.version);
});

test("renderTable pads every column but the last, paints after padding, indents", () => {
  const rows = [
    ["JOB", "STATUS", "NOTE"],
    ["a-long-name", "ok", ""],
    ["b", "failed", "exit 3"],
  ];
  assert.deepEqual(renderTable(rows), [
    "JOB          STATUS  NOTE",
    "a-long-name  ok",
    "b            failed  exit 3",
  ]);
  const painted = renderTable(rows, {
    indent: "  ",
    paint: (c, row, col) => (row > 0 && col === 1 ? `<${c}>` : c),
  });
  assert.deepEqual(painted, [
    "  JOB          STATUS  NOTE",
    "  a-long-name  <ok>",
    "  b            <failed>  exit 3",
  ]);
});

test("ENV_NAME is the shell's rule", () => {
  for (const ok of ["PATH", "_x", "a1_B"]) assert.ok(ENV_NAME.test(ok), ok);
  for (const bad of ["1A", "A-B", "", "A B", "é"]) assert.ok(!ENV_NAME.test(bad), bad);
});

test("config record: packed and read back whole; a plain JSON record reads too; 10,000 jobs pack small", async () => {
  const { packConfig, unpackConfig } = await import("../dist/core/config-record.js");
  const jobs = {};
  for (let i = 0; i < 10_000; i++)
    jobs[`j${i}`] = {
      schedule: `${i % 60} * * * *`,
      command: "true",
      timeoutMs: 3_600_000,
      overlap: "skip",
    };
  const config = { stateDir: "/var/lib/cronvisor", jobs, note: "ünïcödé 'quotes' \"and\" \\ \n" };
  const packed = packConfig(config);
  assert.ok(packed.startsWith("z:"));
  assert.deepEqual(unpackConfig(packed), config);
  assert.ok(packed.length * 10 < JSON.stringify(config).length, `${packed.length} bytes packed`);
  assert.deepEqual(
    unpackConfig(JSON.stringify(config)),
    config,
    "a record from before the packing",
  );
  assert.throws(() => unpackConfig("z:not deflate"));
});
