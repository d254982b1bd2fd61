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
      process.stderr.write("\\nPROBE " + JSON.stringify({ prom: loaded("prom-client"), http: process.moduleLoadList.includes("NativeModule http") }) + "\\n");
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

test("a daemon without http: loads neither prom-client nor node:http; one with it does", async (t) => {
  assert.deepEqual(await daemonLoads(t, ""), { prom: false, http: false });
  const port = await freePort();
  assert.deepEqual(await daemonLoads(t, `http: 127.0.0.1:${port}\n`), { prom: true, http: true });
});

test("a daemon collects its start-up garbage once started: its heap is then what a full collection leaves", async (t) => {
  const dir = tmpdir(t);
  let yaml = `state_dir: ${path.join(dir, "state")}\njobs:\n`;
  for (let i = 0; i < 2000; i++)
    yaml += `  j${i}: { schedule: "0 3 * * *", command: ["/bin/true"] }\n`;
  const file = writeConfig(dir, yaml);
  // The daemon in a child that answers for its heap over IPC: the major collections since its
  // "started" line, its heap now, and its heap after two forced full collections.
  const script = `
    import v8 from "node:v8";
    import vm from "node:vm";
    import { PerformanceObserver, constants } from "node:perf_hooks";
    let startedAt = null;
    const majors = [];
    new PerformanceObserver((l) => {
      for (const e of l.getEntries())
        if (e.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) majors.push(e.startTime);
    }).observe({ entryTypes: ["gc"] });
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = (s, ...rest) => {
      if (startedAt === null && /daemon \\d+ started/.test(String(s))) startedAt = performance.now();
      return write(s, ...rest);
    };
    const heap = () => v8.getHeapStatistics().total_heap_size;
    process.on("message", (m) => {
      if (m === "probe")
        process.send({ started: startedAt !== null, majors: majors.filter((t) => t >= startedAt).length, heap: heap() });
      if (m === "settle") {
        v8.setFlagsFromString("--expose-gc");
        const gc = vm.runInNewContext("gc");
        gc(); gc();
        process.send({ heap: heap() });
      }
    });
    const { main } = await import(${JSON.stringify(path.join(ROOT, "dist", "commands", "cli.js"))});
    await main([process.execPath, "cronvisor", "daemon", "-c", ${JSON.stringify(file)}]);
  `;
  // As the README says to run it (the systemd unit's NODE_OPTIONS).
  const child = spawn(
    process.execPath,
    ["--max-semi-space-size=1", "--input-type=module", "-e", script],
    { env: cleanEnv(), stdio: ["ignore", "ignore", "pipe", "ipc"] },
  );
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  t.after(() => child.kill("SIGKILL"));
  const ask = (m) =>
    new Promise((resolve) => {
      child.once("message", resolve);
      child.send(m);
    });
  const settled = await waitFor(
    async () => {
      const p = await ask("probe");
      return p.started && p.majors > 0 ? p : null;
    },
    `a full collection after the daemon's start: ${err}`,
    20_000,
    100,
  );
  const floor = await ask("settle");
  assert.ok(
    settled.heap <= floor.heap * 1.15,
    `heap ${(settled.heap / 2 ** 20).toFixed(1)} MiB, ${(floor.heap / 2 ** 20).toFixed(1)} MiB after two full collections`,
  );
});
