// Alerts and pings: the transition rules and the delivery queue on their own, then real daemons
// sending to real receivers on 127.0.0.1: a webhook, an alert command, a healthchecks-style server.
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { test } from "node:test";
import { Outbox, pingUrl, runUuid, transitions } from "../dist/monitor/alerts.js";
import {
  cli,
  killDaemonAndSpawner,
  killGroup,
  killGroupsAfter,
  readStoreIn,
  startDaemon,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";

// ---- the rules, without a daemon ---------------------------------------------------------------

const assessment = (health, findings) => ({
  health,
  words: [health],
  problems: findings.map((f) => f.message),
  findings,
  p95DurationMs: null,
  slowRunIds: [],
});
const finding = (word, runId = null) => ({ word, runId, message: `${word} because` });
const OK = assessment("ok", []);

test("transitions: each condition is announced once on entry; recovered once when the last one clears", () => {
  const failing = assessment("failing", [finding("failing", 7)]);
  let t = transitions("j", [], failing, "failed");
  assert.deepEqual(t.after, ["failing"]);
  assert.deepEqual(t.events, [{ event: "failed", runId: 7, message: "j failed: failing because" }]);
  // Still failing: silent.
  t = transitions("j", t.after, failing, "failed");
  assert.deepEqual(t.events, []);
  // Late as well: `late` once; failing stays silent.
  const both = assessment("failing", [finding("failing", 8), finding("late")]);
  t = transitions("j", t.after, both, "failed");
  assert.deepEqual(
    t.events.map((e) => e.event),
    ["late"],
  );
  assert.deepEqual(t.after, ["failing", "late"]);
  // Failing clears, late remains: not recovered yet.
  t = transitions("j", t.after, assessment("late", [finding("late")]), null);
  assert.deepEqual(t.events, []);
  assert.deepEqual(t.after, ["late"]);
  // Healthy: recovered, naming what cleared.
  t = transitions("j", t.after, OK, null);
  assert.deepEqual(t.events, [
    { event: "recovered", runId: null, message: "j recovered: no longer late; health is ok" },
  ]);
  assert.deepEqual(t.after, []);
  // Healthy and nothing announced: silent.
  assert.deepEqual(transitions("j", [], OK, null).events, []);
});

test("transitions: a timeout says timeout; stuck and repeating are their own events; notes are not conditions", () => {
  assert.equal(
    transitions("j", [], assessment("failing", [finding("failing", 3)]), "timeout").events[0].event,
    "timeout",
  );
  assert.equal(
    transitions("j", [], assessment("failing", [finding("failing", 3)]), "spawn_failed").events[0]
      .event,
    "failed",
  );
  const t = transitions(
    "j",
    [],
    assessment("stuck", [finding("stuck", 4), finding("repeating", 4), finding(null, 4)]),
    null,
  );
  assert.deepEqual(
    t.events.map((e) => e.event),
    ["stuck", "repeating"],
  );
  // never-run and paused are states, not conditions an alert announces.
  assert.deepEqual(
    transitions("j", [], assessment("never-run", [finding("never-run")]), null).events,
    [],
  );
});

test("outbox: retries with backoff, keeps order, gives up and logs, drops the oldest when full", async () => {
  const log = [];
  const got = [];
  let failures = 2;
  const box = new Outbox(
    async (x) => {
      if (x === "b" && failures-- > 0) throw new Error("HTTP 503");
      got.push(x);
    },
    (x) => `item ${x}`,
    {
      name: "test",
      maxQueue: 10,
      attempts: 3,
      baseDelayMs: 5,
      maxDelayMs: 20,
      log: (l) => log.push(l),
    },
  );
  box.push("a");
  box.push("b");
  box.push("c");
  assert.equal(await box.drain(5000), 0);
  assert.deepEqual(got, ["a", "b", "c"], "b was retried in place: order kept");
  assert.deepEqual(box.counters, { sent: 3, failed: 0, dropped: 0 });
  assert.deepEqual(log, [
    "cronvisor: test: item b failed (HTTP 503); retry 1 in 5 ms",
    "cronvisor: test: item b failed (HTTP 503); retry 2 in 10 ms",
  ]);

  const dead = new Outbox(
    async () => {
      throw new Error("ECONNREFUSED");
    },
    (x) => `item ${x}`,
    {
      name: "dead",
      maxQueue: 2,
      attempts: 2,
      baseDelayMs: 5,
      maxDelayMs: 5,
      log: (l) => log.push(l),
    },
  );
  for (const x of ["1", "2", "3", "4"]) dead.push(x);
  assert.equal(await dead.drain(5000), 0);
  // "1" was in flight; of 2 3 4 the queue (2 places) kept the newest.
  assert.deepEqual(dead.counters, { sent: 0, failed: 3, dropped: 1 });
  assert.ok(log.includes("cronvisor: dead: queue full (2); dropped item 2"), log.join("\n"));
  assert.ok(
    log.includes("cronvisor: dead: giving up on item 4 after 2 attempt(s): ECONNREFUSED"),
    log.join("\n"),
  );
});

test("pings: healthchecks URLs with a UUID run id, stable per run", () => {
  const rid = runUuid("/var/lib/cronvisor", { id: 12, started_at: 1_700_000_000_000 });
  assert.match(rid, /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(runUuid("/var/lib/cronvisor", { id: 12, started_at: 1_700_000_000_000 }), rid);
  assert.notEqual(runUuid("/var/lib/cronvisor", { id: 13, started_at: 1_700_000_000_000 }), rid);
  assert.equal(
    pingUrl("https://hc-ping.com/u-1", "start", rid),
    `https://hc-ping.com/u-1/start?rid=${rid}`,
  );
  assert.equal(
    pingUrl("https://hc-ping.com/u-1/", "success", rid),
    `https://hc-ping.com/u-1?rid=${rid}`,
  );
  assert.equal(
    pingUrl("https://hc.example.com/ping/KEY/backup?create=1", "fail", rid),
    `https://hc.example.com/ping/KEY/backup/fail?create=1&rid=${rid}`,
  );
});

// ---- real daemons, real receivers -----------------------------------------------------------

/** An HTTP server on 127.0.0.1 that records every request; `answer` decides the status. */
async function receiver(t, answer = () => 200) {
  const got = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      const r = { method: req.method, url: req.url, headers: req.headers, body, at: Date.now() };
      const status = answer(r, got.length);
      got.push(r);
      res.writeHead(status, { "content-type": "text/plain" });
      res.end(status === 200 ? "OK" : "no");
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { got, url: `http://127.0.0.1:${server.address().port}` };
}

const count = (dir, where) => readStoreIn(dir).runs(where).length;
const heartbeat = (dir) => readStoreIn(dir).daemon()?.heartbeat_at ?? 0;

/** Wait until the daemon has beaten `n` more times: level alerts are judged on each beat. */
async function beats(dir, n) {
  let last = heartbeat(dir);
  let seen = 0;
  await waitFor(() => {
    const now = heartbeat(dir);
    if (now > last) {
      seen++;
      last = now;
    }
    return seen >= n;
  }, `${n} heartbeats`);
}

test("webhook: exactly one alert per transition (failed then recovered, late once), across a daemon restart", async (t) => {
  const dir = tmpdir(t);
  // The receiver refuses the very first delivery: the alert is retried, not lost.
  const hook = await receiver(t, (_r, i) => (i === 0 ? 500 : 200));
  const cfg = writeConfig(
    dir,
    [
      "heartbeat: 1s",
      "alerts:",
      `  - webhook: ${hook.url}/hook?token=secret`,
      "jobs:",
      "  flip:",
      '    schedule: "* * * * * *"',
      "    command: test -e fixed",
      "  nightly:",
      '    schedule: "@yearly"',
      '    command: "true"',
      "    health: { success_within: 2s }",
      "",
    ].join("\n"),
  );
  const delivered = () =>
    hook.got
      .filter((r) => r.method === "POST")
      .slice(1)
      .map((r) => JSON.parse(r.body));
  const events = (job) =>
    delivered()
      .filter((a) => a.job === job)
      .map((a) => a.event);

  let d = startDaemon(t, cfg);
  await waitFor(
    () => events("flip").includes("failed") && events("nightly").includes("late"),
    "failed and late alerts",
  );
  const failed = delivered().find((a) => a.event === "failed");
  assert.equal(failed.job, "flip");
  assert.equal(failed.health, "failing");
  assert.equal(typeof failed.run_id, "number");
  assert.equal(readStoreIn(dir).runs({ id: failed.run_id })[0].status, "failed");
  assert.match(
    failed.message,
    new RegExp(`^flip failed: the last run failed \\(run ${failed.run_id}: failed, exit 1\\)$`),
  );
  assert.deepEqual(failed.problems, [failed.message.replace("flip failed: ", "")]);
  assert.match(failed.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.equal(failed.text, `[cronvisor@${failed.host}] ${failed.message}`);
  const first = hook.got[0];
  assert.equal(first.url, "/hook?token=secret");
  assert.equal(first.headers["content-type"], "application/json");
  assert.match(first.headers["user-agent"], /^cronvisor\//);
  // The refused delivery was retried, and the log names the target by its origin only.
  assert.match(
    d.err,
    new RegExp(
      `alert webhook ${hook.url}: (failed alert for flip|late alert for nightly) failed \\(HTTP 500\\); retry 1 in 1000 ms`,
    ),
  );
  assert.ok(!d.err.includes("secret"), "no token in the log");

  // The job keeps failing and stays late: no more alerts.
  const after = count(dir, { job: "flip", status: "failed" });
  await waitFor(
    () => count(dir, { job: "flip", status: "failed" }) >= after + 3,
    "three more failed runs",
  );
  await beats(dir, 3);
  assert.deepEqual(events("flip"), ["failed"]);
  assert.deepEqual(events("nightly"), ["late"]);

  // A restart remembers what was announced.
  await stopDaemon(d);
  d = startDaemon(t, cfg);
  const restarted = count(dir, { job: "flip", status: "failed" });
  await waitFor(
    () => count(dir, { job: "flip", status: "failed" }) >= restarted + 3,
    "failing on after the restart",
  );
  await beats(dir, 3);
  assert.deepEqual(events("flip"), ["failed"], "no repeat after a restart");
  assert.deepEqual(events("nightly"), ["late"], "no repeat after a restart");

  // Fixed: recovered, once each.
  fs.writeFileSync(path.join(dir, "fixed"), "");
  await waitFor(() => events("flip").includes("recovered"), "flip recovered");
  assert.equal(cli(["run", "nightly", "-c", cfg]).code, 0);
  await waitFor(() => events("nightly").includes("recovered"), "nightly recovered");
  await beats(dir, 3);
  assert.deepEqual(events("flip"), ["failed", "recovered"]);
  // nightly succeeded once and is due again within 2 s: a fresh `late` is a new transition.
  assert.deepEqual(events("nightly").slice(0, 2), ["late", "recovered"]);
  assert.ok(
    events("nightly").length <= 3 && (events("nightly")[2] ?? "late") === "late",
    events("nightly").join(","),
  );
  const recovered = delivered().find((a) => a.job === "flip" && a.event === "recovered");
  assert.equal(recovered.message, "flip recovered: no longer failing; health is ok");
  assert.deepEqual(recovered.problems, []);
  await stopDaemon(d);
  assert.match(d.err, /cronvisor: alert: flip recovered/);
});

test("command alert: `interrupted` once, with the event in env vars and JSON on stdin, without the daemon's secrets", async (t) => {
  const dir = tmpdir(t);
  fs.writeFileSync(
    path.join(dir, "notify.sh"),
    '#!/bin/sh\n{ echo "event=$CRONVISOR_EVENT job=$CRONVISOR_JOB run=$CRONVISOR_RUN_ID health=$CRONVISOR_HEALTH"; echo "message=$CRONVISOR_MESSAGE"; echo "secret=${DAEMON_SECRET:-none} config=${FROM_CONFIG:-none}"; cat; } >> alerts.log\n',
    { mode: 0o755 },
  );
  const cfg = writeConfig(
    dir,
    [
      "heartbeat: 1s",
      "env: { FROM_CONFIG: yes }",
      "alerts:",
      "  - command: ./notify.sh",
      "jobs:",
      "  long:",
      '    schedule: "* * * * * *"',
      "    command: sleep 60",
      "    catchup: skip",
      "    kill_grace: 1s",
      "",
    ].join("\n"),
  );
  const env = { DAEMON_SECRET: "s3cret" };
  let d = startDaemon(t, cfg, env);
  const run = await waitFor(() => readStoreIn(dir).spawned({ job: "long" })[0], "a running run");
  killGroupsAfter(t, [run.pgid]);
  // The daemon (with its spawner) and the job die together: the next daemon finds the run dead
  // and records it interrupted.
  killDaemonAndSpawner(d);
  await d.exited;
  killGroup(run.pgid);
  d = startDaemon(t, cfg, env);
  const logFile = path.join(dir, "alerts.log");
  // Until the JSON line is whole: notify.sh's `cat` appends it while we poll, and a read that
  // sees only its start would hand JSON.parse half a line.
  const text = await waitFor(
    () =>
      fs.existsSync(logFile) &&
      /\n\{.*\}\n/.test(fs.readFileSync(logFile, "utf8")) &&
      fs.readFileSync(logFile, "utf8"),
    "the alert command ran (its JSON line whole)",
  );
  const lines = text.trim().split("\n");
  assert.equal(lines[0], `event=interrupted job=long run=${run.id} health=ok`);
  assert.equal(
    lines[1],
    `message=long interrupted: run ${run.id} (its processes died with the daemon)`,
  );
  assert.equal(lines[2], "secret=none config=yes");
  const json = JSON.parse(lines[3]);
  assert.equal(json.event, "interrupted");
  assert.equal(json.run_id, run.id);
  assert.equal(readStoreIn(dir).runs({ id: run.id })[0].status, "interrupted");
  await beats(dir, 3);
  assert.equal(
    fs.readFileSync(logFile, "utf8").match(/^event=/gm).length,
    1,
    "one alert for one interrupted run",
  );
  await stopDaemon(d);
});

test("pings: /start, success and /fail with the run's id; a hanging ping server blocks nothing", async (t) => {
  const dir = tmpdir(t);
  const hc = await receiver(t);
  // A server that accepts pings and never answers.
  const hung = http.createServer(() => {});
  await new Promise((resolve) => hung.listen(0, "127.0.0.1", resolve));
  t.after(() => {
    hung.closeAllConnections();
    hung.close();
  });
  const cfg = writeConfig(
    dir,
    [
      "heartbeat: 1s",
      "jobs:",
      "  hc:",
      '    schedule: "* * * * * *"',
      "    command: test ! -e broken",
      `    ping: ${hc.url}/ping/abc`,
      "  stalled:",
      '    schedule: "* * * * * *"',
      '    command: "true"',
      `    ping: http://127.0.0.1:${hung.address().port}/ping/never`,
      "",
    ].join("\n"),
  );
  const d = startDaemon(t, cfg);
  const stateDir = path.join(dir, ".cronvisor");
  /** Pings of one run, by its rid. */
  const pingsOf = (rid) =>
    hc.got.filter((r) => new URL(r.url, hc.url).searchParams.get("rid") === rid);
  const ridOf = (runId) => runUuid(stateDir, readStoreIn(dir).runs({ id: runId })[0]);

  const ok = await waitFor(() => {
    for (const r of readStoreIn(dir).runs({ job: "hc", status: "ok" })) {
      const got = pingsOf(ridOf(r.id)).map((p) => `${p.method} ${new URL(p.url, hc.url).pathname}`);
      if (got.length === 2) return { id: r.id, got };
    }
    return null;
  }, "start and success pings of one ok run");
  assert.deepEqual(ok.got, ["POST /ping/abc/start", "POST /ping/abc"]);
  const [start, end] = pingsOf(ridOf(ok.id));
  assert.match(
    start.body,
    new RegExp(`^cronvisor run ${ok.id} of hc \\(schedule, attempt 1\\) started\\n$`),
  );
  assert.match(
    end.body,
    new RegExp(`^cronvisor run ${ok.id} of hc \\(schedule, attempt 1\\): ok after \\d+\\.\\ds\\n$`),
  );

  fs.writeFileSync(path.join(dir, "broken"), "");
  const failed = await waitFor(() => {
    for (const r of readStoreIn(dir).runs({ job: "hc", status: "failed" })) {
      const got = pingsOf(ridOf(r.id)).map((p) => `${p.method} ${new URL(p.url, hc.url).pathname}`);
      if (got.length === 2) return { id: r.id, got, pings: pingsOf(ridOf(r.id)) };
    }
    return null;
  }, "start and fail pings of one failed run");
  assert.deepEqual(failed.got, ["POST /ping/abc/start", "POST /ping/abc/fail"]);
  assert.match(failed.pings[1].body, new RegExp(`run ${failed.id} of hc .*: failed, exit 1 after`));

  // Meanwhile the job whose ping server never answers ran on, every second.
  await waitFor(
    () => count(dir, { job: "stalled", status: "ok" }) >= 3,
    "stalled job keeps running",
  );
  const t0 = Date.now();
  await stopDaemon(d);
  assert.ok(Date.now() - t0 < 15_000, `stop took ${Date.now() - t0} ms with pings hanging`);
});
