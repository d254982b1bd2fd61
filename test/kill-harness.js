// The seeds' kill test, shared by test/incidents.test.js (root jobs) and
// test/incidents-user.test.js (the same job as the throwaway test user, markers through the broker).
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {
  ROOT,
  alive,
  killDaemonAndSpawner,
  killGroup,
  readStoreIn,
  startDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";

/** The built CLI's bin/ and node's dir first: what the incidents' root jobs run with. */
export const PATH = `${path.join(ROOT, "bin")}:${path.dirname(process.execPath)}:/usr/bin:/bin`;

/** A file's non-empty lines; none while it does not exist yet. */
export const lines = (file) =>
  fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean) : [];

/**
 * The restarted-runner postmortem: a 200-item job using `once`, SIGKILLed together with its
 * daemon at random points, restarted until done. Every item is done; an item is repeated only
 * when a kill landed between its side effect and its marker, so repeats <= kills.
 *
 * The defaults are the root job of incidents.test.js. A `user:` job passes `dir` (a work dir its
 * user can traverse), `warehouse` (a file where that user can write), `path` (a PATH it can run)
 * and `jobKeys` (more YAML lines of the job, each indented four spaces, e.g. `user:`). A
 * PostgreSQL store passes `top` (top-level YAML lines: `store:`, `node:`) and `store` (its named
 * reads: readPgStore of a raw client on it; each read here is awaited, so both engines serve).
 * Returns { repeats, killed, dir }.
 */
export async function killTest(
  t,
  {
    kills,
    items,
    command,
    dir = tmpdir(t),
    warehouse = path.join(dir, "warehouse.txt"),
    path: jobPath = PATH,
    jobKeys = "",
    top = "",
    store = readStoreIn(dir),
  },
) {
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s
${top}
env: { PATH: "${jobPath}", WAREHOUSE: "${warehouse}", ITEMS: "${items}" }
jobs:
  enrich:
    schedule: "* * * * * *"
    command: ${command}
    catchup: once
${jobKeys}`,
  );

  let killed = 0;
  while (killed < kills) {
    const d = startDaemon(t, cfg);
    const run = await waitFor(async () => (await store.spawned())[0], "a running run");
    // A random point in the run: wait for a random number of new rows (items keep landing).
    const target = lines(warehouse).length + 1 + Math.floor((Math.random() * items) / 5);
    await waitFor(
      () => lines(warehouse).length >= target || !alive(run.pid),
      "the run to make progress",
      30_000,
      5,
    );
    // The daemon (and its spawner) first, so nothing can record the job's death: all die at
    // once, as on a reclaimed host.
    killDaemonAndSpawner(d);
    killGroup(run.pgid);
    await d.exited;
    await waitFor(() => !alive(run.pid), "the job's death");
    killed++;
  }
  const d = startDaemon(t, cfg);
  await waitFor(
    async () => (await store.markers({ job: "enrich" })).length === items,
    `all ${items} items marked`,
    60_000,
  );
  // A further full run does no work: every key found done.
  const idle = await waitFor(
    async () =>
      (await store.runs({ job: "enrich", status: "ok" })).find((r) => r.markers_skipped === items),
    "a full run that only skips",
    60_000,
  );
  d.kill("SIGTERM");
  await d.exited;
  assert.equal(idle.markers_new, 0);
  const written = lines(warehouse).map((l) => l.split(" ")[0]);
  const distinct = new Set(written);
  assert.equal(distinct.size, items, "every item done");
  const repeats = written.length - distinct.size;
  assert.ok(repeats <= killed, `repeats (${repeats}) <= kills (${killed})`);
  const interrupted = (await store.runs({ status: "interrupted" })).length;
  assert.ok(interrupted >= 1, "kills are recorded as interrupted runs");
  return { repeats, killed, dir };
}
