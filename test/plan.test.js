// `cronvisor plan` and `cronvisor markers OLD --move-to NEW` (issue 40, items 1 and 2) through the
// built CLI, against a real daemon's store: a rename caught (markers left behind, the likely new
// name and the command to carry them over), a changed schedule whose catch-up starts at once (and
// the daemon then doing just that), clock changes ahead, the JSON shape, a bad file, a plan that
// writes nothing, and the move on both engines, refused while either job runs.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { dstCrossings } from "../dist/schedule/dst-ahead.js";
import { changedKeys, plan } from "../dist/daemon/plan.js";
import {
  ROOT,
  cli,
  spawnCli,
  startDaemon,
  statusJson,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
  readStore,
  readStoreIn,
} from "./helpers.js";
import { freshDatabase, pgMissing } from "./pg.js";
import { needs } from "./needs.js";

const PATH = `${path.join(ROOT, "bin")}:${path.dirname(process.execPath)}:/usr/bin:/bin`;
// Marks three items, each once: what a renamed job must not do again.
const ITEMS = `for i in 1 2 3; do cronvisor once "item-$i" -- echo "did item $i"; done`;

const config = (dir, jobs, name = "jobs.yaml", top = "") =>
  writeConfig(dir, `${top}env: { PATH: "${PATH}" }\njobs:\n${jobs}`, name);

/** Every file under the state dir with its bytes' hash and mtime: what a reader must not change. */
function snapshot(dir) {
  const out = {};
  for (const f of fs.readdirSync(dir, { recursive: true }).sort()) {
    const p = path.join(dir, f);
    const st = fs.statSync(p);
    out[f] = st.isFile()
      ? `${crypto.createHash("sha256").update(fs.readFileSync(p)).digest("hex")} ${st.mtimeMs}`
      : "dir";
  }
  return out;
}

test("a rename: plan names the markers left behind and the move; --move-to carries them over", async (t) => {
  const dir = tmpdir(t);
  const yearly = `    schedule: "0 0 1 1 *"\n    command: ${JSON.stringify(ITEMS)}\n`;
  const cfg = config(
    dir,
    `  enrich-old:\n${yearly}  report:\n    schedule: "0 6 * * *"\n    command: "true"\n`,
  );
  const d = startDaemon(t, cfg);
  await waitFor(() => statusJson(cfg).daemon.state === "running", "daemon running");
  const run = cli(["run", "enrich-old", "-c", cfg]);
  assert.equal(run.code, 0, run.stderr);
  const renamed = config(
    dir,
    `  enrich:\n${yearly}  report:\n    schedule: "0 7 * * *"\n    command: "true"\n`,
    "new.yaml",
  );

  // While the daemon runs, the baseline is the config it accepted.
  const live = JSON.parse(cli(["plan", "-c", renamed, "--json"]).stdout);
  assert.equal(live.baseline.source, "daemon");
  const by = Object.fromEntries(live.jobs.map((j) => [j.name, j]));
  assert.equal(by.enrich.change, "added");
  assert.equal(by["enrich-old"].change, "removed");
  assert.match(
    by["enrich-old"].never_again[0],
    /^enrich-old never runs again \(its next slot was /,
  );
  assert.deepEqual(by.report.keys, ["schedule"]);
  assert.match(by.report.next_before[0], /T06:00:00\.000Z$/);
  assert.match(by.report.next_after[0], /T07:00:00\.000Z$/);
  assert.deepEqual(live.markers_left, [{ job: "enrich-old", count: 3, renamed_to: "enrich" }]);
  await stopDaemon(d);

  // Stopped: the last accepted config, and not one byte of the state dir changes.
  const stateDir = path.join(dir, ".cronvisor");
  const before = snapshot(stateDir);
  const p = cli(["plan", "-c", renamed]);
  assert.equal(p.code, 0, p.stderr);
  assert.match(p.stdout, /^baseline: the config the last daemon accepted \(none runs now/);
  assert.match(p.stdout, /^changed {2}report: schedule$/m);
  assert.ok(
    p.stdout.includes(
      `enrich-old: 3 marker(s); likely renamed to enrich: cronvisor markers enrich-old --move-to enrich -c ${renamed}`,
    ),
    p.stdout,
  );
  assert.match(p.stdout, /^1 added, 1 removed, 1 changed, 0 unchanged$/m);
  assert.deepEqual(snapshot(stateDir), before, "plan wrote into the state dir");

  // The old namespace is listed though no job of the new file owns it; then carried over.
  const left = JSON.parse(cli(["markers", "enrich-old", "--json", "-c", renamed]).stdout);
  assert.deepEqual(
    left.map((m) => m.key),
    ["item-1", "item-2", "item-3"],
  );
  const mv = cli(["markers", "enrich-old", "--move-to", "enrich", "-c", renamed]);
  assert.equal(mv.code, 0, mv.stderr);
  assert.equal(mv.stdout, "moved 3 marker(s) from enrich-old to enrich\n");
  const moved = JSON.parse(cli(["markers", "enrich", "--json", "-c", renamed]).stdout);
  assert.deepEqual(
    moved.map((m) => [m.key, m.run_id]),
    left.map((m) => [m.key, m.run_id]),
  );
  assert.equal(cli(["markers", "enrich-old", "-c", renamed]).code, 2, "nothing left, no job: gone");
  // Recorded in both jobs' history.
  const events = readStore(stateDir)
    .events({ kind: "markers-moved" })
    .map(({ job, detail }) => ({ job, detail }))
    .sort((a, b) => (a.job < b.job ? -1 : a.job > b.job ? 1 : 0));
  assert.equal(events.length, 2);
  assert.deepEqual(
    events.map((e) => e.job),
    ["enrich", "enrich-old"],
  );
  assert.match(events[0].detail, /^3 marker\(s\) moved from enrich-old \(by .* pid \d+\)$/);
  assert.match(events[1].detail, /^3 marker\(s\) moved to enrich \(by /);
  assert.match(
    cli(["history", "enrich", "-c", renamed]).stdout,
    /markers-moved +3 marker\(s\) moved from enrich-old/,
  );
  // The renamed job finds its work done; plan no longer sees markers left behind.
  const again = cli(["run", "enrich", "-c", renamed]);
  assert.equal(again.code, 0, again.stderr);
  assert.doesNotMatch(again.stdout, /did item/);
  assert.deepEqual(JSON.parse(cli(["plan", "-c", renamed, "--json"]).stdout).markers_left, []);

  // `reload` prints the same summary of what it applies; then the daemon's record is the file.
  const d2 = startDaemon(t, cfg);
  await waitFor(() => statusJson(cfg).daemon.state === "running", "daemon running again");
  fs.copyFileSync(renamed, cfg);
  const rl = cli(["reload", "-c", cfg]);
  assert.equal(rl.code, 0, rl.stderr);
  assert.match(
    rl.stdout,
    /^sent SIGHUP to daemon \d+\nbaseline: the config the running daemon accepted at /,
  );
  assert.match(rl.stdout, /^added {4}enrich$/m);
  assert.match(rl.stdout, /^removed {2}enrich-old$/m);
  await waitFor(
    () => /^0 added, 0 removed, 0 changed, 2 unchanged$/m.test(cli(["plan", "-c", cfg]).stdout),
    "the reload accepted",
  );
  await stopDaemon(d2);
});

test("a changed schedule: plan shows the catch-up a start runs at once, and the daemon runs it", async (t) => {
  const dir = tmpdir(t);
  const job = (schedule) =>
    `  mail:\n    schedule: "${schedule}"\n    command: "true"\n    catchup: once\n    catchup_window: 1h\n`;
  const cfg = config(dir, job("0 0 1 1 *"));
  const d = startDaemon(t, cfg);
  await waitFor(() => statusJson(cfg).daemon.state === "running", "daemon running");
  await stopDaemon(d);
  // Every second now: slots pass while no daemon runs, and a start catches the latest up.
  const every = config(dir, job("* * * * * *"), "new.yaml");
  const p = await waitFor(() => {
    const j = JSON.parse(cli(["plan", "-c", every, "--json"]).stdout);
    return j.jobs[0].at_once.length > 0 && j;
  }, "a slot passed");
  const [mail] = p.jobs;
  assert.equal(p.baseline.source, "recorded");
  assert.equal(mail.change, "changed");
  assert.deepEqual(mail.keys, ["schedule"]);
  assert.match(
    mail.at_once[0],
    /^catch-up \(catchup: once\): 1 slot\(s\) since the last daemon stopped at \S+Z run at once, one after another: \S+Z; the baseline would run 0$/,
  );
  const text = cli(["plan", "-c", every]).stdout;
  assert.match(text, /^ {2}at once {6}catch-up \(catchup: once\)/m);
  // The prediction holds: the daemon started on the new file runs a catch-up first.
  const d2 = startDaemon(t, every);
  await waitFor(
    () => readStoreIn(dir).runs({ trigger: "catchup" }).length === 1,
    "the catch-up run",
  );
  await stopDaemon(d2);
});

test("clock changes ahead: a fixed time in a gap runs once at the change; a repeat runs once or twice", () => {
  const berlin = (pattern) => ({ pattern, timezone: "Europe/Berlin" });
  const from = Date.parse("2026-01-01T00:00:00Z");
  const year = from + 365 * 86_400_000;
  assert.deepEqual(dstCrossings(berlin("30 2 * * *"), from, year), [
    "2026-03-29: the clocks jump from 02:00 to 03:00 (Europe/Berlin); 02:30 does not exist that day: it runs once, at 03:00",
    "2026-10-25: the clocks go back from 03:00 to 02:00 (Europe/Berlin); 02:30 happens twice: it runs once, at the first",
  ]);
  assert.deepEqual(dstCrossings(berlin("*/20 * * * *"), from, year), [
    "2026-03-29: the clocks jump from 02:00 to 03:00 (Europe/Berlin); 3 slots (02:00 to 02:40) do not happen that day",
    "2026-10-25: the clocks go back from 03:00 to 02:00 (Europe/Berlin); 3 slots (02:00 to 02:40) happen twice: they run twice",
  ]);
  assert.deepEqual(dstCrossings(berlin("0 4 * * *"), from, year), [], "04:00 is never skipped");
  assert.deepEqual(dstCrossings({ pattern: "30 2 * * *", timezone: "UTC" }, from, year), []);
  assert.deepEqual(dstCrossings(berlin(null), from, year), [], "@reboot has no slot");
});

test("plan --json: the contract's shape; a DST crossing ahead; an invalid file exits 2", (t) => {
  const dir = tmpdir(t);
  const cfg = config(
    dir,
    `  night:\n    schedule: "30 2 * * *"\n    timezone: America/New_York\n    command: "true"\n  boot:\n    schedule: "@reboot"\n    command: "true"\n`,
  );
  const r = cli(["plan", "-c", cfg, "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const p = JSON.parse(r.stdout);
  assert.deepEqual(Object.keys(p).sort(), ["baseline", "jobs", "markers_left"]);
  assert.deepEqual(p.baseline, { source: "none", at: null });
  for (const j of p.jobs)
    for (const k of [
      "name",
      "change",
      "keys",
      "next_before",
      "next_after",
      "at_once",
      "running",
      "dst",
    ])
      assert.ok(k in j, `${j.name} has ${k}`);
  const [night, boot] = p.jobs;
  assert.equal(night.change, "added");
  assert.equal(night.next_after.length, 5);
  assert.deepEqual(night.next_before, []);
  assert.equal(night.running, null);
  // New York's clocks jump over 02:00-03:00 in March and repeat 01:00-02:00 in November:
  // 02:30 is in the gap, and not in the repeat.
  assert.equal(night.dst.length, 1, night.dst.join("\n"));
  assert.match(
    night.dst[0],
    /^\d{4}-03-\d\d: the clocks jump from 02:00 to 03:00 \(America\/New_York\); 02:30 does not exist that day: it runs once, at 03:00$/,
  );
  assert.match(cli(["plan", "-c", cfg]).stdout, /^ {2}DST {10}\d{4}-03-\d\d: the clocks jump/m);
  assert.deepEqual(boot.at_once, ["@reboot: runs at once (it has not run since this boot)"]);
  assert.equal(fs.existsSync(path.join(dir, ".cronvisor")), false, "plan made no state dir");

  const bad = writeConfig(
    dir,
    'jobs:\n  x:\n    schedule: "61 * * * *"\n    command: "true"\n',
    "bad.yaml",
  );
  const b = cli(["plan", "-c", bad]);
  assert.equal(b.code, 2);
  assert.match(b.stderr, new RegExp(`^${bad}:3:15: jobs\\.x\\.schedule: `));
  assert.equal(b.stdout, "");
});

test("plan's decisions: changed keys by their config names; a removed job's running run", () => {
  assert.deepEqual(
    changedKeys(
      {
        name: "a",
        line: 3,
        pattern: "x",
        timeoutMs: 1,
        retries: { attempts: 1, backoffMs: 5 },
        env: { MODE: "a" },
      },
      {
        name: "a",
        line: 9,
        pattern: "y",
        timeoutMs: 1,
        retries: { attempts: 1, backoffMs: 6 },
        env: { MODE: "b", NEW: "1" },
      },
    ),
    ["retries.backoff", "env.MODE", "env.NEW"],
  );
  const job = {
    name: "gone",
    schedule: "0 * * * *",
    pattern: "0 * * * *",
    timezone: "UTC",
    command: "x",
    paused: false,
  };
  const facts = {
    jobs: new Map(),
    running: [{ id: 7, job: "gone", slot: null, started_at: 0, attempt: 1, alive: true }],
    lastRuns: new Map(),
    markerCounts: new Map([["gone", 2]]),
    bootId: "b",
  };
  const reload = plan(
    { source: "daemon", at: 0, config: { jobs: [job] } },
    { jobs: [] },
    facts,
    1000,
  );
  assert.equal(reload.jobs[0].change, "removed");
  assert.equal(reload.jobs[0].running, 7);
  assert.match(
    reload.jobs[0].running_note,
    /^run 7 \(started .*\) runs on to its end under its lock and is recorded; nothing of gone starts after it$/,
  );
  assert.deepEqual(reload.markers_left, [{ job: "gone", count: 2, renamed_to: null }]);
  const start = plan(
    { source: "recorded", at: 0, config: { jobs: [job] } },
    { jobs: [] },
    facts,
    1000,
  );
  assert.match(start.jobs[0].running_note, /is left running and unwatched/);
});

/** The move refused (75) while either job runs, on the store `top` names; then done. */
async function moveWhileRunning(t, top) {
  const dir = tmpdir(t);
  const cfg = config(
    dir,
    `  slow:\n    schedule: "0 0 1 1 *"\n    command: "cronvisor mark k2; while [ ! -f ${dir}/done ]; do sleep 0.05; done"\n  other:\n    schedule: "0 0 1 1 *"\n    command: "cronvisor mark k1 k2"\n`,
    "jobs.yaml",
    top,
  );
  const other = cli(["run", "other", "-c", cfg]);
  assert.equal(other.code, 0, other.stderr);
  const run = spawnCli(["run", "slow", "-c", cfg]);
  // A failed assertion must not leave the run waiting: end it (and wait) before the dir goes.
  t.after(async () => {
    if (run.exitCode !== null) return;
    // tmpdir's own hook may have removed the dir already (hooks run in their order).
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, "done"), "");
    await run.exited;
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await waitFor(
    () => statusJson(cfg).jobs.find((j) => j.name === "slow").markers === 1,
    "slow running",
  );
  for (const [from, to] of [
    ["other", "slow"],
    ["slow", "other"],
  ]) {
    const r = cli(["markers", from, "--move-to", to, "-c", cfg]);
    assert.equal(r.code, 75, r.stdout + r.stderr);
    assert.match(
      r.stderr,
      /^cronvisor: slow is running \(run \d+\): nothing moved; try again once it has ended\n$/,
    );
  }
  assert.equal(JSON.parse(cli(["markers", "other", "--json", "-c", cfg]).stdout).length, 2);
  fs.writeFileSync(path.join(dir, "done"), "");
  assert.equal((await run.exited).code, 0, run.err);
  const r = cli(["markers", "other", "--move-to", "slow", "-c", cfg]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(
    r.stdout,
    "moved 1 marker(s) from other to slow (1 already marked in slow: dropped)\n",
  );
  const keys = JSON.parse(cli(["markers", "slow", "--json", "-c", cfg]).stdout).map((m) => m.key);
  assert.deepEqual(keys.sort(), ["k1", "k2"]);
  const statuses = statusJson(cfg).jobs.map((j) => [j.name, j.markers]);
  assert.deepEqual(
    statuses,
    [
      ["slow", 2],
      ["other", 0],
    ],
    "the summaries' counts follow",
  );
  assert.equal(cli(["markers", "other", "--move-to", "nope", "-c", cfg]).code, 2);
  assert.equal(cli(["markers", "slow", "--move-to", "slow", "-c", cfg]).code, 2);
}

test("markers --move-to on SQLite: 75 while either job runs, then moved", (t) =>
  moveWhileRunning(t, ""));

test(
  "markers --move-to on PostgreSQL: 75 while either job runs, then moved",
  needs(pgMissing()),
  async (t) => moveWhileRunning(t, `store: "${await freshDatabase()}"\n`),
);
