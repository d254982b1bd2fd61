// Success without work (`idle`) and the alert rules (`failures_before_alert`, `realert_every`):
// the pure decisions first (health/health.ts, health/alert-rules.ts), then one real daemon whose
// jobs go idle and fail, sending to a real webhook, with the page and `status --check` read.
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { test } from "node:test";
import { assessJob } from "../dist/health/health.js";
import {
  decideAlerts,
  formatAnnounced,
  nextRealertAt,
  parseAnnounced,
} from "../dist/health/alert-rules.js";
import { parseConfig } from "../dist/config/parse.js";
import {
  ROOT,
  cli,
  freePort,
  request,
  startDaemon,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
  readStoreIn,
} from "./helpers.js";

const D = 86_400_000;
const NOW = Date.parse("2026-04-10T12:00:00Z");
const NO_RUNS = { newest: null, okP95: null, failing: null };
const okRun = { id: 9, status: "ok", reason: "exit 0", started_at: NOW - D };

function facts(over = {}) {
  return {
    now: NOW,
    job: {
      name: "j",
      health: {
        successWithinMs: null,
        progressWithinMs: null,
        repeatLimit: 3,
        newWorkWithinMs: 2 * D,
      },
    },
    paused: false,
    firstSeenAt: NOW - 30 * D,
    lastSuccessAt: NOW - D,
    lastWorkAt: NOW - 3 * D,
    idleRuns: 4,
    recent: { ...NO_RUNS, newest: okRun },
    running: [],
    attempts: [],
    ...over,
  };
}

test("idle: successes with no new marker or progress for new_work_within, with how many did nothing new", () => {
  let a = assessJob(facts());
  assert.equal(a.health, "idle");
  assert.deepEqual(a.problems, [
    "4 successful runs all did nothing new: no new marker or progress call for 3d (limit 2d)",
  ]);
  a = assessJob(facts({ idleRuns: 1, lastWorkAt: null, firstSeenAt: NOW - 5 * D }));
  assert.equal(a.health, "idle");
  assert.deepEqual(a.problems, [
    "1 successful run did nothing new: no marker or progress call since it was first seen 5d ago (limit 2d)",
  ]);
  // New work within the limit, no success since the last work, or not checked: not idle.
  assert.equal(assessJob(facts({ lastWorkAt: NOW - 2 * D })).health, "ok");
  assert.equal(assessJob(facts({ idleRuns: 0 })).health, "ok");
  const unchecked = facts();
  unchecked.job.health.newWorkWithinMs = null;
  assert.equal(assessJob(unchecked).health, "ok");
  // A worse word wins; idle is still listed.
  const failing = assessJob(
    facts({ recent: { ...NO_RUNS, newest: okRun, failing: { run: okRun, streak: 1 } } }),
  );
  assert.deepEqual(failing.words, ["failing", "idle"]);
});

test("config: health.new_work_within, failures_before_alert and realert_every, per job and in defaults", () => {
  const { config, errors } = parseConfig(
    [
      "defaults: { failures_before_alert: 3, health: { new_work_within: 2d } }",
      "jobs:",
      '  a: { schedule: "@daily", command: "true", realert_every: 6h }',
      '  b: { schedule: "@daily", command: "true", failures_before_alert: 1, health: { new_work_within: 1h } }',
    ].join("\n"),
    "/srv/jobs.yaml",
  );
  assert.deepEqual(errors, []);
  const [a, b] = config.jobs;
  assert.deepEqual(
    [a.health.newWorkWithinMs, a.failuresBeforeAlert, a.realertEveryMs],
    [2 * D, 3, 6 * 3600_000],
  );
  assert.deepEqual(
    [b.health.newWorkWithinMs, b.failuresBeforeAlert, b.realertEveryMs],
    [3600_000, 1, null],
  );
  const bad = parseConfig(
    'jobs: { a: { schedule: "@daily", command: "true", failures_before_alert: 0, realert_every: soon } }',
    "/srv/jobs.yaml",
  ).errors.map((e) => e.path);
  assert.deepEqual(bad.sort(), ["jobs.a.failures_before_alert", "jobs.a.realert_every"]);
});

const assessment = (health, findings) => ({
  health,
  words: [health],
  problems: findings.map((f) => f.message),
  findings,
  p95DurationMs: null,
  slowRunIds: [],
});
const failingAfter = (n) =>
  assessment("failing", [
    { word: "failing", runId: 40 + n, message: `the last ${n} runs failed`, count: n },
  ]);

test("alert rules: failures_before_alert waits for the Nth failure in a row; realert_every repeats while the condition lasts", () => {
  const rules = { failuresBeforeAlert: 3, realertEveryMs: 6 * 3600_000 };
  const none = new Map();
  // 1 and 2 failures: silent, nothing announced (so their later success is no recovery).
  let d = decideAlerts("j", none, failingAfter(2), "failed", rules, NOW);
  assert.deepEqual(d.events, []);
  assert.equal(d.announced.size, 0);
  d = decideAlerts("j", none, assessment("ok", []), null, rules, NOW);
  assert.deepEqual(d.events, []);
  // The third: `failed`.
  d = decideAlerts("j", none, failingAfter(3), "failed", rules, NOW);
  assert.deepEqual(d.events, [
    { event: "failed", runId: 43, message: "j failed: the last 3 runs failed" },
  ]);
  // Still failing an hour later: silent; six hours after the announcement: again, marked a repeat.
  const later = decideAlerts("j", d.announced, failingAfter(5), "failed", rules, NOW + 3600_000);
  assert.deepEqual(later.events, []);
  assert.equal(nextRealertAt(later.announced, rules), NOW + 6 * 3600_000);
  const again = decideAlerts(
    "j",
    later.announced,
    failingAfter(9),
    "timeout",
    rules,
    NOW + 6 * 3600_000,
  );
  assert.deepEqual(again.events, [
    {
      event: "timeout",
      runId: 49,
      message: "j timeout (still): the last 9 runs failed",
      repeat: true,
    },
  ]);
  assert.equal(nextRealertAt(again.announced, rules), NOW + 12 * 3600_000);
  // Idle is a condition of its own, with its own event; then recovered names what cleared.
  const idle = assessment("idle", [
    { word: "idle", runId: null, message: "2 successful runs all did nothing new" },
  ]);
  const both = decideAlerts(
    "j",
    again.announced,
    { ...idle, findings: [...failingAfter(10).findings, ...idle.findings] },
    "failed",
    rules,
    NOW + 7 * 3600_000,
  );
  assert.deepEqual(
    both.events.map((e) => e.event),
    ["idle"],
  );
  const ok = decideAlerts(
    "j",
    both.announced,
    assessment("ok", []),
    null,
    rules,
    NOW + 8 * 3600_000,
  );
  assert.deepEqual(ok.events, [
    {
      event: "recovered",
      runId: null,
      message: "j recovered: no longer failing, idle; health is ok",
    },
  ]);
  // Without realert_every: once. N above the 20 runs the streak is counted over acts as 20.
  const once = { failuresBeforeAlert: 50, realertEveryMs: null };
  d = decideAlerts("j", none, failingAfter(20), "failed", once, NOW);
  assert.equal(d.events.length, 1);
  assert.deepEqual(
    decideAlerts("j", d.announced, failingAfter(20), "failed", once, NOW + 365 * D).events,
    [],
  );
  assert.equal(nextRealertAt(d.announced, once), null);
});

test("alert state: each condition with when it was announced; a bare name (older stores) was announced at `since`", () => {
  const a = parseAnnounced("failing,late", 1000);
  assert.deepEqual(
    [...a],
    [
      ["failing", 1000],
      ["late", 1000],
    ],
  );
  assert.equal(formatAnnounced(a), "failing@1000,late@1000");
  assert.deepEqual(
    [...parseAnnounced("idle@2500,failing@bad,nonsense", 7)],
    [
      ["idle", 2500],
      ["failing", 7],
    ],
  );
  assert.deepEqual([...parseAnnounced("", 7)], []);
});

async function receiver(t) {
  const got = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      got.push({ ...JSON.parse(body), received: Date.now() });
      res.end("OK");
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { got, url: `http://127.0.0.1:${server.address().port}/hook` };
}

test("a daemon: a job that succeeds without new work goes idle (status, --check, the page, alert `idle`) and recovers on new work; `failed` only from the 3rd failure, repeated every realert_every", async (t) => {
  const dir = tmpdir(t);
  const hook = await receiver(t);
  const port = await freePort();
  const NODE_DIR = path.dirname(process.execPath);
  // `idler` marks its key only when the file `new` exists (new work); else it finds nothing new.
  const cfg = writeConfig(
    dir,
    [
      "heartbeat: 1s",
      `http: 127.0.0.1:${port}`,
      `env: { PATH: "${path.join(ROOT, "bin")}:${NODE_DIR}:/usr/bin:/bin" }`,
      "alerts:",
      `  - webhook: ${hook.url}`,
      "defaults: { failures_before_alert: 3 }",
      "jobs:",
      "  idler:",
      '    schedule: "* * * * * *"',
      '    command: "if test -e new; then cronvisor mark item-$(date +%s%N); fi"',
      "    health: { new_work_within: 3s }",
      "  broken:",
      '    schedule: "* * * * * *"',
      "    command: exit 4",
      "    realert_every: 2s",
      "",
    ].join("\n"),
  );
  fs.writeFileSync(path.join(dir, "new"), "");
  const d = startDaemon(t, cfg);
  const events = (job) => hook.got.filter((a) => a.job === job);

  // broken: its first `failed` alert comes with the third failure in a row, not before.
  await waitFor(() => events("broken").length > 0, "broken's first alert", 30_000);
  const first = events("broken")[0];
  assert.equal(first.event, "failed");
  assert.equal(first.repeat, false);
  assert.match(first.message, /^broken failed: the last (\d+) runs failed/);
  assert.ok(Number(/the last (\d+) runs/.exec(first.message)[1]) >= 3, first.message);
  // ... and again, marked a repeat, about realert_every later.
  await waitFor(() => events("broken").length >= 2, "broken's repeated alert", 30_000);
  const second = events("broken")[1];
  assert.equal(second.event, "failed");
  assert.equal(second.repeat, true);
  assert.match(second.message, /^broken failed \(still\): the last \d+ runs failed/);
  // Judged at least realert_every after the first was announced (the daemon's clock).
  const apart = Date.parse(second.at) - Date.parse(first.at);
  assert.ok(apart >= 2000, `${apart} ms apart`);

  // idler: new work while `new` exists; then none: idle after 3 s of successes that do nothing.
  await waitFor(() => readStoreIn(dir).job("idler")?.last_work_at, "idler's work");
  fs.rmSync(path.join(dir, "new"));
  await waitFor(() => events("idler").some((a) => a.event === "idle"), "the idle alert", 30_000);
  const idle = events("idler").find((a) => a.event === "idle");
  assert.equal(idle.health, "idle");
  assert.match(
    idle.message,
    /^idler idle: \d+ successful runs all did nothing new: no new marker or progress call for \d+s \(limit 3s\)$/,
  );

  const st = cli(["status", "idler", "--json", "-c", cfg]);
  const job = JSON.parse(st.stdout).jobs[0];
  assert.equal(job.health, "idle");
  assert.match(job.problems[0], /successful runs all did nothing new/);
  const check = cli(["status", "--check", "-c", cfg]);
  assert.equal(check.code, 1, check.stdout);
  assert.match(check.stdout, /WARNING/);
  assert.match(check.stdout, /idle/);

  // The page shows it: the health word and the sentence, without JavaScript.
  const page = await request(port, { path: "/" });
  assert.equal(page.status, 200);
  assert.match(page.body, /<span class="health h-idle">idle<\/span>/);
  assert.match(page.body, /successful runs all did nothing new/);

  // New work again: recovered.
  fs.writeFileSync(path.join(dir, "new"), "");
  await waitFor(
    () => events("idler").some((a) => a.event === "recovered"),
    "idler recovered",
    30_000,
  );
  assert.deepEqual(
    events("idler").map((a) => a.event),
    ["idle", "recovered"],
  );
  await stopDaemon(d);
});
