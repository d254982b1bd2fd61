// The daemon's monitor, in-process with an injected clock: it judges a job again only when its
// health can have changed, and it still sees every change that matters: a `late` deadline that
// passes with no new row, a pause and marker attempts written by another process.
import assert from "node:assert/strict";
import fs from "node:fs";
import { test } from "node:test";
import { parseConfig } from "../dist/config/config.js";
import { Monitor } from "../dist/monitor/monitor.js";
import { SqliteStore } from "../dist/store/sqlite-store.js";
import { tmpdir, writeConfig } from "./helpers.js";

test("monitor: an idle beat reads no job's rows; time, another process's pause and attempts still change the health", async (t) => {
  const dir = tmpdir(t);
  const file = writeConfig(
    dir,
    `jobs:
  nightly:
    schedule: "0 3 * * *"
    command: "true"
    health: { success_within: 1m }
  reports:
    schedule: "0 4 * * *"
    command: "true"
  items:
    schedule: "0 5 * * *"
    command: "true"
    health: { repeat_limit: 2 }
`,
  );
  const { config, errors } = parseConfig(fs.readFileSync(file, "utf8"), file, {
    hostTimezone: "UTC",
  });
  assert.deepEqual(errors, []);
  const store = SqliteStore.open(config.stateDir, { create: true });
  t.after(() => store.close());
  // Another connection stands in for another process (`cronvisor pause`, `once --job`).
  const other = SqliteStore.open(config.stateDir, {});
  t.after(() => other.close());
  const t0 = Date.now();
  for (const j of config.jobs) await store.ensureJob(j.name, t0);

  // Without alert targets or an HTTP endpoint, nobody reads a judgement: none is made.
  const silent = new Monitor(config, { log: () => {} });
  t.after(() => silent.stop());
  let reads = 0;
  const jobReadings = store.jobReadings.bind(store);
  store.jobReadings = (...a) => {
    reads++;
    return jobReadings(...a);
  };
  await silent.hooks.beat(store, config, t0);
  assert.equal(reads, 0, "no alerts, no http: no job is judged");

  // With the endpoint (port 0: any free one), /metrics shows the judgements.
  const served = { ...config, http: { host: "127.0.0.1", port: 0 } };
  const m = new Monitor(served, { log: () => {} });
  await m.start();
  t.after(() => m.stop());
  const health = async (now) => {
    const text = await m.metrics.render(now);
    const out = {};
    for (const [, job, word] of text.matchAll(
      /^cronvisor_job_health\{job_name="([^"]+)",health="([^"]+)"\} 1$/gm,
    ))
      out[job] = word;
    return out;
  };
  const beat = (now) => m.hooks.beat(store, served, now); // resolves when the beat is done

  await beat(t0);
  assert.equal(reads, 3, "the first beat judges every job");
  assert.deepEqual(await health(t0), {
    nightly: "never-run",
    reports: "never-run",
    items: "never-run",
  });

  reads = 0;
  await beat(t0 + 30_000);
  assert.equal(reads, 0, "nothing changed: no job's rows are read");

  // `late` by time alone: the deadline (first seen + success_within) passes with no new row.
  await beat(t0 + 61_000);
  assert.equal(reads, 1, "only the job whose deadline passed");
  assert.equal((await health(t0 + 61_000)).nightly, "late");

  // Another process pauses a job (an event row) and counts attempts outside a run (no row at all).
  await other.setPaused("reports", true, t0 + 62_000);
  const me = { pid: process.pid, start: null };
  for (let i = 0; i < 3; i++)
    await other.takeClaim({ job: "items", run: null }, "k1", me, t0 + 62_000, () => true);
  reads = 0;
  await beat(t0 + 63_000);
  assert.equal(reads, 2, "the paused job and the attempted one");
  assert.deepEqual(await health(t0 + 63_000), {
    nightly: "late",
    reports: "paused",
    items: "repeating",
  });

  reads = 0;
  await beat(t0 + 64_000);
  assert.equal(reads, 0, "idle again");
});
