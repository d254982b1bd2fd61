// The HTTP endpoint: /healthz /status /metrics from a real daemon, the metrics read by the official
// Prometheus client's text parser, foreign Host headers and writing methods refused.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { test } from "node:test";
import { allowedHosts, hostAllowed } from "../dist/monitor/http.js";
import { Monitor } from "../dist/monitor/monitor.js";
import { SqliteStore } from "../dist/store/sqlite-store.js";
import {
  BIN,
  cli,
  freePort,
  request,
  startDaemon,
  statusJson,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";

/**
 * Parse the exposition with the official Prometheus Python client (Debian: python3-prometheus-client),
 * a real parser that rejects malformed lines. Returns its families as JSON.
 */
function parseWithPrometheusClient(text) {
  const script = `
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for f in text_string_to_metric_families(sys.stdin.read()):
    out.append({"name": f.name, "type": f.type, "help": f.documentation,
                "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in f.samples]})
print(json.dumps(out))
`;
  const r = spawnSync("/usr/bin/python3", ["-c", script], { input: text, encoding: "utf8" });
  assert.equal(
    r.status,
    0,
    `the Prometheus parser rejected /metrics (is python3-prometheus-client installed?):\n${r.stderr}`,
  );
  return JSON.parse(r.stdout);
}

/** What the text format requires beyond single lines: HELP and TYPE first, sane histograms. */
function checkExposition(text) {
  const declared = new Map();
  for (const line of text.split("\n")) {
    const m = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line);
    if (m) {
      const e = declared.get(m[2]) ?? {};
      e[m[1]] = m[3];
      declared.set(m[2], e);
    } else if (line !== "" && !line.startsWith("#")) {
      const name = line.split(/[{ ]/)[0];
      const family = [name, name.replace(/_(bucket|sum|count)$/, "")].find((n) => declared.has(n));
      assert.ok(family, `sample before its HELP/TYPE: ${line}`);
      assert.ok(
        declared.get(family).HELP && declared.get(family).TYPE,
        `HELP and TYPE for ${family}`,
      );
    }
  }
}

test("Host header check and address matching (DNS rebinding)", () => {
  const loop = allowedHosts("127.0.0.1");
  assert.equal(hostAllowed("127.0.0.1:9464", loop, 9464), true);
  assert.equal(hostAllowed("localhost:9464", loop, 9464), true);
  assert.equal(hostAllowed("LOCALHOST:9464", loop, 9464), true);
  assert.equal(hostAllowed("localhost.:9464", loop, 9464), true);
  assert.equal(hostAllowed("[::1]:9464", loop, 9464), true);
  assert.equal(hostAllowed("localhost", loop, 9464), true);
  assert.equal(hostAllowed("evil.example:9464", loop, 9464), false);
  assert.equal(hostAllowed("127.0.0.1.evil.example:9464", loop, 9464), false);
  assert.equal(hostAllowed("localhost:80", loop, 9464), false);
  assert.equal(hostAllowed("localhost:9464:1", loop, 9464), false);
  assert.equal(hostAllowed("", loop, 9464), false);
  assert.equal(hostAllowed(undefined, loop, 9464), false);
  const v6 = allowedHosts("::1");
  assert.equal(hostAllowed("[::1]:9000", v6, 9000), true);
  const any = allowedHosts("0.0.0.0", ["10.1.2.3", "box.example"]);
  assert.equal(hostAllowed("10.1.2.3:9464", any, 9464), true);
  assert.equal(hostAllowed("box.example:9464", any, 9464), true);
  assert.equal(hostAllowed("other.example:9464", any, 9464), false);
});

test("a daemon serves /healthz, /status and /metrics (parsed by a real Prometheus parser); nothing else", async (t) => {
  const dir = tmpdir(t);
  const port = await freePort();
  const cfg = writeConfig(
    dir,
    [
      "heartbeat: 1s",
      `http: 127.0.0.1:${port}`,
      "jobs:",
      "  tick:",
      '    schedule: "* * * * * *"',
      `    command: ${process.execPath} ${BIN} once "k$CRONVISOR_RUN_ID" -- true`,
      "  bad:",
      '    schedule: "@yearly"',
      "    command: exit 2",
      "  busy:",
      '    schedule: "* * * * * *"',
      "    command: sleep 30",
      "    kill_grace: 1s",
      "",
    ].join("\n"),
  );
  const d = startDaemon(t, cfg);
  await waitFor(
    async () => (await request(port, { path: "/healthz" }).catch(() => ({}))).status === 200,
    "healthz 200",
  );
  assert.match(
    d.err,
    new RegExp(`cronvisor: http: serving /healthz /status /metrics on 127.0.0.1:${port}`),
  );
  assert.equal(cli(["run", "bad", "-c", cfg]).code, 2);

  const hz = await request(port, { path: "/healthz" });
  assert.equal(hz.status, 200);
  assert.match(hz.body, /^ok: beating, last heartbeat \d+s ago\n$/);
  assert.equal(hz.headers["cache-control"], "no-store");

  const st = await waitFor(async () => {
    const r = await request(port, { path: "/status" });
    const s = JSON.parse(r.body);
    return s.jobs.find((j) => j.name === "tick").last_success_at &&
      s.jobs.find((j) => j.name === "busy").running
      ? { r, s }
      : null;
  }, "status with a success and a running run");
  assert.equal(st.r.status, 200);
  assert.match(st.r.headers["content-type"], /^application\/json/);
  assert.equal(st.s.daemon.state, "running");
  assert.equal(st.s.daemon.pid, d.pid);
  // The same report as the CLI's.
  const cliStatus = JSON.parse(cli(["status", "--json", "-c", cfg]).stdout);
  assert.deepEqual(
    st.s.jobs.map((j) => [j.name, j.health]),
    cliStatus.jobs.map((j) => [j.name, j.health]),
  );

  // Metrics: wait until the monitor has counted a few tick runs with markers.
  const text = await waitFor(async () => {
    const r = await request(port, { path: "/metrics" });
    // Counters fed from run rows catch up at the daemon's next beat: wait for both facts.
    return /cronvisor_markers_written_total\{job_name="tick"\} [2-9]/.test(r.body) &&
      /cronvisor_slots_skipped_total\{job_name="busy"\} [1-9]/.test(r.body)
      ? r
      : null;
  }, "metrics counting tick's runs and busy's skipped slots");
  assert.match(text.headers["content-type"], /^text\/plain; version=0\.0\.4/);
  checkExposition(text.body);
  const families = new Map(parseWithPrometheusClient(text.body).map((f) => [f.name, f]));
  const sample = (family, name, labels = {}) =>
    families
      .get(family)
      ?.samples.find(
        (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
      )?.value;
  const nowS = Date.now() / 1000;

  assert.equal(families.get("cronvisor_up").type, "gauge");
  assert.equal(sample("cronvisor_up", "cronvisor_up"), 1);
  const beat = sample(
    "cronvisor_heartbeat_timestamp_seconds",
    "cronvisor_heartbeat_timestamp_seconds",
  );
  assert.ok(Math.abs(nowS - beat) < 5, `heartbeat ${beat} vs now ${nowS}`);
  const lastOk = sample(
    "cronvisor_job_last_success_timestamp_seconds",
    "cronvisor_job_last_success_timestamp_seconds",
    { job_name: "tick" },
  );
  assert.ok(Math.abs(nowS - lastOk) < 10, `tick last success ${lastOk}`);
  assert.equal(
    sample(
      "cronvisor_job_last_success_timestamp_seconds",
      "cronvisor_job_last_success_timestamp_seconds",
      { job_name: "bad" },
    ),
    undefined,
  );

  // The Python parser names a counter family without `_total`; its samples keep it.
  const runs = families.get("cronvisor_runs");
  assert.equal(runs.type, "counter");
  assert.ok(
    sample("cronvisor_runs", "cronvisor_runs_total", { job_name: "tick", status: "ok" }) >= 2,
  );
  assert.equal(
    sample("cronvisor_runs", "cronvisor_runs_total", { job_name: "bad", status: "failed" }),
    1,
  );
  assert.ok(
    sample("cronvisor_markers_written", "cronvisor_markers_written_total", { job_name: "tick" }) >=
      2,
  );
  assert.ok(
    sample("cronvisor_slots_skipped", "cronvisor_slots_skipped_total", { job_name: "busy" }) >= 1,
    "busy skips slots while it runs",
  );
  assert.equal(sample("cronvisor_job_running", "cronvisor_job_running", { job_name: "busy" }), 1);
  assert.ok(sample("cronvisor_job_markers", "cronvisor_job_markers", { job_name: "tick" }) >= 2);
  assert.equal(
    sample("cronvisor_job_health", "cronvisor_job_health", { job_name: "bad", health: "failing" }),
    1,
  );
  assert.equal(
    sample("cronvisor_job_health", "cronvisor_job_health", { job_name: "tick", health: "ok" }),
    1,
  );
  assert.equal(families.get("cronvisor_alerts_sent").type, "counter");

  const hist = families.get("cronvisor_run_duration_seconds");
  assert.equal(hist.type, "histogram");
  const buckets = hist.samples.filter(
    (s) => s.name.endsWith("_bucket") && s.labels.job_name === "tick",
  );
  assert.ok(buckets.length > 5);
  for (let i = 1; i < buckets.length; i++)
    assert.ok(buckets[i].value >= buckets[i - 1].value, "cumulative buckets");
  const inf = buckets.find((b) => b.labels.le === "+Inf").value;
  assert.equal(
    inf,
    sample("cronvisor_run_duration_seconds", "cronvisor_run_duration_seconds_count", {
      job_name: "tick",
    }),
  );
  assert.ok(inf >= 2);

  // HEAD: headers only.
  const head = await request(port, { path: "/metrics", method: "HEAD" });
  assert.equal(head.status, 200);
  assert.equal(head.body, "");

  // Refused: a foreign Host header (DNS rebinding), any method that is not GET/HEAD, unknown paths.
  for (const host of [
    "evil.example",
    `evil.example:${port}`,
    `127.0.0.1:${port + 1}`,
    `attacker.localhost.evil:${port}`,
  ]) {
    const r = await request(port, { path: "/status", host });
    assert.equal(r.status, 403, host);
    assert.ok(!r.body.includes("daemon"), "no data in a refusal");
  }
  assert.equal((await request(port, { path: "/status", host: `localhost:${port}` })).status, 200);
  for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
    const r = await request(port, { path: "/status", method });
    assert.equal(r.status, 405, method);
    assert.equal(r.headers.allow, "GET, HEAD");
  }
  assert.equal((await request(port, { path: "/nope" })).status, 404);

  d.kill("SIGTERM");
  assert.equal((await d.exited).code, 0, d.err);
  await assert.rejects(request(port, { path: "/healthz" }), /ECONNREFUSED/);
});

test("a taken port does not stop the jobs: status shows the endpoint down (WARNING), the bind is retried every beat", async (t) => {
  const dir = tmpdir(t);
  const taken = net.createServer();
  await new Promise((resolve) => taken.listen(0, "127.0.0.1", resolve));
  const port = taken.address().port;
  t.after(() => taken.close());
  const ran = path.join(dir, "ran");
  const cfg = writeConfig(
    dir,
    [
      "heartbeat: 1s",
      `http: 127.0.0.1:${port}`,
      "jobs:",
      "  tick:",
      '    schedule: "* * * * * *"',
      `    command: echo x >> ${ran}`,
      "",
    ].join("\n"),
  );
  const d = startDaemon(t, cfg);
  // The scheduler runs the jobs although the endpoint cannot listen.
  await waitFor(() => fs.existsSync(ran), "a run of tick", 30_000);
  assert.equal(d.exitCode, null, d.err);
  assert.match(
    d.err,
    new RegExp(`cannot serve http on 127\\.0\\.0\\.1:${port}: the address is in use`),
  );
  const down = await waitFor(() => {
    const s = statusJson(cfg);
    return s.daemon.http_error ? s : null;
  }, "status shows the endpoint down");
  assert.match(down.daemon.http_error, /the address is in use/);
  assert.ok(Date.parse(down.daemon.http_error_since) > 0);
  const check = cli(["status", "--check", "-c", cfg]);
  assert.equal(check.code, 1, check.stdout);
  assert.match(
    check.stdout.split("\n")[0],
    /^WARNING: .*http endpoint down \(cannot serve http on 127\.0\.0\.1:\d+: the address is in use/,
  );
  assert.match(
    cli(["status", "-c", cfg]).stdout,
    /http endpoint down since .*the address is in use/,
  );

  // The port comes free: the next beats bind it, and status says so.
  await new Promise((resolve) => taken.close(resolve));
  await waitFor(
    async () => (await request(port, { path: "/healthz" }).catch(() => ({}))).status === 200,
    "healthz 200 once the port is free",
  );
  await waitFor(() => statusJson(cfg).daemon.http_error === null, "status: endpoint up");
  assert.equal(cli(["status", "--check", "-c", cfg]).code, 0);
  assert.match(d.err, /cronvisor: http: serving \/healthz/);
});

test("/healthz answers 503 while the recorded heartbeat is stale, 200 once it beats (monitor in-process)", async (t) => {
  const dir = tmpdir(t);
  const port = await freePort();
  const file = writeConfig(dir, `jobs: {}\n`);
  const stateDir = path.join(dir, ".cronvisor");
  const store = SqliteStore.open(stateDir, { create: true });
  t.after(() => store.close());
  const now = Date.now();
  // This process plays the daemon: its last beat was a minute ago, at a 1 s interval.
  assert.equal(
    await store.claimDaemon(
      { pid: process.pid, start: null },
      now - 60_000,
      1000,
      file,
      () => false,
    ),
    null,
  );
  const config = {
    file,
    stateDir,
    timezone: "UTC",
    shell: "/bin/sh",
    env: {},
    heartbeatMs: 1000,
    http: { host: "127.0.0.1", port },
    alerts: [],
    jobs: [],
  };
  const m = new Monitor(config, { log: () => {} });
  await m.start();
  t.after(() => m.stop());
  assert.equal(
    (await request(port, { path: "/healthz" })).status,
    503,
    "no beat seen yet: starting",
  );
  await m.hooks.beat(store, config, now);
  const stale = await request(port, { path: "/healthz" });
  assert.equal(stale.status, 503);
  assert.match(stale.body, /^not beating: last heartbeat 60s ago \(every 1s\)\n$/);
  const metrics = await request(port, { path: "/metrics" });
  assert.match(metrics.body, /^cronvisor_up 0$/m);
  await store.heartbeat(process.pid, Date.now(), 1000);
  assert.equal((await request(port, { path: "/healthz" })).status, 200);
  assert.match((await request(port, { path: "/metrics" })).body, /^cronvisor_up 1$/m);
  assert.ok(fs.existsSync(path.join(stateDir, "cronvisor.db")));
});
