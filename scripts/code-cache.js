// The build's step after the bundle: V8's code cache for the CLI's fast chunk,
// dist/bundle/cli-fast.cjs.v8cache, which bin/cronvisor compiles the chunk with. A status call
// then neither parses the chunk's 190 KB nor compiles the functions it runs: about 6 ms of each
// call (BENCHMARKS.md, "Issue 16: a code cache for the CLI's fast chunk"). Still paying (issue 38,
// side by side, `status --json` on 1,000 jobs, 40 to 60 alternating calls each, three runs):
// 4.0 to 4.7 ms less CPU per call with the cache (e.g. 75.7 against 80.4 ms, medians).
//
// A cache holds the bytecode of what was compiled when it was made, so it is made by a process
// that has run `status` (text, --json, --check) on a throwaway config and store with a run that
// succeeded and one that failed, made by `cronvisor run`. It is made without NODE_OPTIONS: V8
// refuses a cache made under other V8 flags, and a plain call has none.
//
// The cache is an optimisation: if it cannot be made, the build says so and goes on, and
// bin/cronvisor compiles the chunk as require() would (a test checks that the build made one
// V8 accepts).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const SELF = fileURLToPath(import.meta.url);
const ROOT = path.resolve(path.dirname(SELF), "..");
const BIN = path.join(ROOT, "bin", "cronvisor");
const require = createRequire(import.meta.url);

// Paths in the config are relative to it (state_dir).
const CONFIG = `state_dir: ./state
timezone: UTC
jobs:
  ok:
    schedule: "*/5 * * * *"
    command: ["/bin/true"]
    health: { success_within: 1h, progress_within: 10m }
  fails:
    schedule: "0 3 * * *"
    timezone: Europe/Berlin
    command: "exit 3"
  later:
    schedule: "@reboot"
    command: ["/bin/true"]
    paused: true
`;

const STATUS_CALLS = [[], ["--json"], ["--check"]];

function env() {
  const e = { ...process.env };
  delete e.NODE_OPTIONS;
  // A build step: its one throwaway run needs no cgroup, and the build writes none (as root).
  e.CRONVISOR_CGROUP_ROOT = "off";
  return e;
}

/** The build step: a throwaway config and store, then a child that runs status and records. */
function build() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cronvisor-code-cache-"));
  try {
    const config = path.join(dir, "jobs.yaml");
    fs.writeFileSync(config, CONFIG);
    for (const [job, code] of [
      ["ok", 0],
      ["fails", 3],
    ]) {
      const r = spawnSync(process.execPath, [BIN, "run", job, "-c", config], {
        encoding: "utf8",
        env: env(),
      });
      if (r.status !== code) return `cronvisor run ${job}: exit ${r.status}: ${r.stderr.trim()}`;
    }
    const r = spawnSync(process.execPath, [SELF, "--record", config], {
      encoding: "utf8",
      env: env(),
      stdio: ["ignore", "ignore", "pipe"],
    });
    if (r.status !== 0) return `recording: exit ${r.status}: ${r.stderr.trim()}`;
    return null;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** In the child: the chunk loaded as bin/cronvisor loads it, status run, its cache written. */
async function record(config) {
  const { requireCached, CLI_FAST } = require(BIN);
  const cache = `${CLI_FAST}.v8cache`;
  fs.rmSync(cache, { force: true });
  const script = requireCached(CLI_FAST);
  const { main } = require(CLI_FAST);
  for (const args of STATUS_CALLS)
    await main([process.execPath, BIN, "status", ...args, "-c", config]);
  // Written after the chunk, so bin/cronvisor's check (the cache not older than it) holds.
  fs.writeFileSync(cache, script.createCachedData());
  process.exitCode = 0; // status --check's code is not ours
}

if (process.argv[2] === "--record") await record(process.argv[3]);
else {
  const failed = build();
  if (failed !== null)
    process.stderr.write(`code-cache: no code cache made (${failed}); status starts without it\n`);
}
