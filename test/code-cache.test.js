// bin/cronvisor compiles the CLI's fast chunk with the V8 code cache the build made
// (scripts/code-cache.js). The cache must be one V8 takes, and must never run code other than
// the chunk's: V8 checks a cache against the source's length only, so bin/cronvisor does not
// offer one older than the chunk, and a cache V8 refuses leaves the call as it was.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { BIN, ROOT, cleanEnv, cli, copyBuild, tmpdir, writeConfig } from "./helpers.js";

const FAST = path.join("dist", "bundle", "cli-fast.cjs");

/** bin/cronvisor's requireCached on `bin`'s fast chunk in a fresh node: was its cache taken? */
function cacheTaken(bin) {
  const script =
    "const { requireCached, CLI_FAST } = require(process.argv[1]);" +
    "process.stdout.write(String(!requireCached(CLI_FAST).cachedDataRejected));";
  const r = spawnSync(process.execPath, ["-e", script, bin], { encoding: "utf8", env: cleanEnv() });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout === "true";
}

/** A copy of the build, mtimes kept (helpers.js). */
function build(t) {
  const root = tmpdir(t, "cvx-codecache-");
  return { root, bin: copyBuild(root) };
}

function statusJson(bin, cfg) {
  const r = spawnSync(process.execPath, [bin, "status", "--json", "-c", cfg], {
    encoding: "utf8",
    env: cleanEnv(),
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, "");
  return r.stdout;
}

/** A config whose job has run once (status reads an existing store). */
function config(t) {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `state_dir: ./state\njobs:\n  a: { schedule: "0 2 * * *", command: "true" }\n`,
  );
  assert.equal(cli(["run", "a", "-c", cfg]).code, 0);
  return cfg;
}

test("the build leaves a code cache of the CLI's fast chunk that V8 takes", () => {
  const cache = path.join(ROOT, `${FAST}.v8cache`);
  assert.ok(fs.statSync(cache).size > 0, `${cache}: npm run build makes it`);
  assert.ok(
    fs.statSync(cache).mtimeMs >= fs.statSync(path.join(ROOT, FAST)).mtimeMs,
    "made after the chunk",
  );
  assert.equal(cacheTaken(BIN), true, "V8 takes the cache for a plain node");
});

test("a chunk edited after the build runs as edited: its older cache is not offered", (t) => {
  const { root, bin } = build(t);
  const cfg = config(t);
  assert.match(statusJson(bin, cfg), /"next_slot": "/);
  // The same length: V8 alone would take the cache and run the bytecode of the code before.
  const fast = path.join(root, FAST);
  const text = fs.readFileSync(fast, "utf8");
  assert.ok(text.includes("next_slot:"), "the chunk builds the report's next_slot");
  fs.writeFileSync(fast, text.replaceAll("next_slot:", "next_slxt:"));
  const later = new Date(fs.statSync(`${fast}.v8cache`).mtimeMs + 2000);
  fs.utimesSync(fast, later, later);
  const out = statusJson(bin, cfg);
  assert.match(out, /"next_slxt": "/);
  assert.doesNotMatch(out, /"next_slot"/);
});

test("a cache V8 refuses, or none, leaves status as it was", (t) => {
  const { root, bin } = build(t);
  const cfg = config(t);
  const cache = path.join(root, `${FAST}.v8cache`);
  const heartbeatless = (s) => JSON.stringify({ ...JSON.parse(s), daemon: null });
  const before = heartbeatless(statusJson(bin, cfg));
  // Same size, not V8's: refused by its checks, the chunk compiled from source.
  fs.writeFileSync(cache, Buffer.alloc(fs.statSync(cache).size, 0x5a));
  const later = new Date(Date.now() + 2000);
  fs.utimesSync(cache, later, later);
  assert.equal(cacheTaken(bin), false);
  assert.equal(heartbeatless(statusJson(bin, cfg)), before);
  fs.rmSync(cache);
  assert.equal(heartbeatless(statusJson(bin, cfg)), before);
});
