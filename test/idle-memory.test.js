// What an idle daemon holds (issue 16). The metrics: a job's zeroed series are made when a scrape
// can see them, so they cost a daemon nobody scraped yet a name per job, not prom-client's label
// sets (about 1.7 KB a job, 17 MiB at 10,000 jobs), and a scrape shows what it showed when they
// were made at start; a daemon without `http:` never loads prom-client at all.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { Metrics } from "../dist/monitor/metrics.js";
import { SqliteStore } from "../dist/store/sqlite-store.js";
import { ROOT, cleanEnv, freePort, tmpdir, waitFor, writeConfig } from "./helpers.js";

const run = (job, status, extra = {}) => ({
  job,
  status,
  duration_ms: 2500,
  markers_new: 0,
  markers_skipped: 0,
  ...extra,
});

test("metrics: a scrape shows every added job's series at zero, and the rows counted before it", async (t) => {
  const dir = tmpdir(t);
  const store = SqliteStore.open(dir, { create: true });
  t.after(() => store.close());
  const jobs = ["a", "b", "c"];
  const m = new Metrics(() => ({
    store,
    jobs,
    health: () => null,
    pausedInConfig: new Set(),
  }));
  for (const j of jobs) m.addJob(j);
  // Counted before any scrape: the job's zeroes must not wipe these.
  m.countRow(run("a", "ok", { markers_new: 2 }));
  m.countRow(run("a", "failed"));
  m.countRow(run("b", "skipped"));
  m.addJob("a"); // a reload adds the jobs it keeps again: nothing is reset
  const text = await m.render(Date.now());
  const value = (series) => {
    const line = text.split("\n").find((l) => l.startsWith(`${series} `));
    assert.ok(line, `${series} in:\n${text}`);
    return Number(line.slice(series.length + 1));
  };
  assert.equal(value('cronvisor_runs_total{job_name="a",status="ok"}'), 1);
  assert.equal(value('cronvisor_runs_total{job_name="a",status="failed"}'), 1);
  assert.equal(value('cronvisor_markers_written_total{job_name="a"}'), 2);
  assert.equal(value('cronvisor_run_duration_seconds_count{job_name="a"}'), 2);
  assert.equal(value('cronvisor_run_duration_seconds_bucket{le="5",job_name="a"}'), 2);
  assert.equal(value('cronvisor_run_duration_seconds_bucket{le="1",job_name="a"}'), 0);
  assert.equal(value('cronvisor_slots_skipped_total{job_name="b"}'), 1);
  for (const j of ["b", "c"]) {
    for (const status of ["ok", "failed"])
      assert.equal(value(`cronvisor_runs_total{job_name="${j}",status="${status}"}`), 0);
    assert.equal(value(`cronvisor_run_duration_seconds_count{job_name="${j}"}`), 0);
    assert.equal(value(`cronvisor_run_duration_seconds_bucket{le="+Inf",job_name="${j}"}`), 0);
    assert.equal(value(`cronvisor_markers_skipped_total{job_name="${j}"}`), 0);
  }
  assert.equal(value('cronvisor_slots_missed_total{job_name="c"}'), 0);
  // A row counted after the scrape adds to the series the scrape made.
  m.countRow(run("c", "ok"));
  const again = await m.render(Date.now());
  assert.match(again, /^cronvisor_runs_total\{job_name="c",status="ok"\} 1$/m);
  assert.match(again, /^cronvisor_run_duration_seconds_count\{job_name="c"\} 1$/m);
});

test("metrics: 10,000 jobs nobody scraped cost under 200 bytes of heap each", () => {
  // In a child with --expose-gc, so the heap is measured after full collections.
  const script = `
    const { Metrics } = await import(${JSON.stringify(new URL("../dist/monitor/metrics.js", import.meta.url).href)});
    const names = Array.from({ length: 10000 }, (_, i) => "job-" + String(i).padStart(5, "0"));
    const m0 = new Metrics(() => null);
    gc(); gc();
    const before = process.memoryUsage().heapUsed;
    const m = new Metrics(() => null);
    for (const n of names) m.addJob(n);
    gc(); gc();
    const after = process.memoryUsage().heapUsed;
    console.log(JSON.stringify({ perJob: (after - before) / names.length, keep: [m0, m].length }));
  `;
  const r = spawnSync(process.execPath, ["--expose-gc", "--input-type=module", "-e", script], {
    encoding: "utf8",
  });
  assert.equal(r.status, 0, r.stderr);
  const { perJob } = JSON.parse(r.stdout);
  assert.ok(perJob < 200, `${perJob.toFixed(0)} bytes per job`);
});

/** Run `cronvisor daemon` in a fresh node until it has started; report the packages it loaded. */
async function daemonLoads(t, top) {
  const dir = tmpdir(t);
  const file = writeConfig(
    dir,
    `state_dir: ${path.join(dir, "state")}\n${top}jobs:\n  a: { schedule: "0 3 * * *", command: "true" }\n`,
  );
  const script = `
    import { createRequire } from "node:module";
    const require = createRequire(import.meta.url);
    process.on("exit", () => {
      const loaded = (name) => Object.keys(require.cache).some((k) => k.includes(\`/node_modules/\${name}/\`));
      process.stderr.write("\\nPROBE " + JSON.stringify({ prom: loaded("prom-client") }) + "\\n");
    });
    const { main } = await import(${JSON.stringify(path.join(ROOT, "dist", "commands", "cli.js"))});
    await main([process.execPath, "cronvisor", "daemon", "-c", ${JSON.stringify(file)}]);
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    env: cleanEnv(),
    stdio: ["ignore", "ignore", "pipe"],
  });
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  const exited = new Promise((resolve) => child.on("exit", resolve));
  t.after(() => child.kill("SIGKILL"));
  await waitFor(() => /daemon \d+ started/.test(err), `the daemon to start: ${err}`);
  child.kill("SIGTERM");
  assert.equal(await exited, 0, err);
  const m = /PROBE (\{.*\})/.exec(err);
  assert.ok(m, err);
  return JSON.parse(m[1]);
}

test("a daemon without http: never loads prom-client; one with it does", async (t) => {
  assert.equal((await daemonLoads(t, "")).prom, false);
  const port = await freePort();
  assert.equal((await daemonLoads(t, `http: 127.0.0.1:${port}\n`)).prom, true);
});
