// A broken config file does not hide the daemon: the daemon records the config it accepted (its
// validated form, a hash of the file's bytes, when), and `status` (human, JSON, --check),
// `status JOB`, `history`, `next`, `logs` and `markers` work from that record while the file on
// disk is broken, saying so first on stderr. Without a record, or with a record of another config
// file, they fail as before (exit 2; --check UNKNOWN).
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import {
  cli,
  readStore,
  readStoreIn,
  startDaemon,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";

const GOOD = `heartbeat: 1s
jobs:
  a:
    schedule: "* * * * * *"
    command: echo hi
  b:
    schedule: "0 9 * * *"
    timezone: Asia/Tokyo
    command: "true"
`;
/** A YAML syntax error, and separately a schema error (a cron expression with 4 fields). */
const BROKEN = [
  { what: "a YAML syntax error", text: `${GOOD}  c: [unclosed\n`, error: /:11:1: jobs\.c/ },
  {
    what: "a bad cron expression",
    text: GOOD.replace('"0 9 * * *"', '"0 9 * *"'),
    error: /:7:15: jobs\.b\.schedule: schedule "0 9 \* \*" has 4 fields/,
  },
];
const NOTICE = /^the config file has errors; the daemon runs the config accepted at (\d\d:\d\d) /;

const sha256 = (file) => createHash("sha256").update(fs.readFileSync(file)).digest("hex");
/** HH:MM of an ISO time in this host's zone, as the notice says it. */
const hhmm = (iso) =>
  new Intl.DateTimeFormat("en-GB", { hour: "2-digit", minute: "2-digit", hourCycle: "h23" }).format(
    new Date(iso),
  );

function run(cfg, ...args) {
  return cli([...args, "-c", cfg]);
}

/** The notice, then the first error, are the first two lines on stderr. */
function assertNotice(r, error, what) {
  const [first, second] = r.stderr.split("\n");
  assert.match(first, NOTICE, `${what}: stderr: ${r.stderr}`);
  assert.match(second, error, `${what}: stderr: ${r.stderr}`);
  return first.match(NOTICE)[1];
}

async function daemonOnGood(t) {
  const dir = tmpdir(t);
  const cfg = writeConfig(dir, GOOD);
  const d = startDaemon(t, cfg);
  await waitFor(() => readStoreIn(dir).runs({ job: "a", status: "ok" }).length > 0, "a ran");
  return { dir, cfg, d };
}

test("the daemon records the config it accepted: at start, and again at each accepted reload", async (t) => {
  const { cfg, d } = await daemonOnGood(t);
  const before = JSON.parse(run(cfg, "status", "--json").stdout).daemon;
  assert.equal(before.config_hash, sha256(cfg));
  assert.match(before.config_accepted_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.equal(before.config_file_errors, null);
  fs.appendFileSync(cfg, `  c:\n    schedule: "@yearly"\n    command: "true"\n`);
  assert.equal(run(cfg, "reload").code, 0);
  const after = await waitFor(() => {
    const r = JSON.parse(run(cfg, "status", "--json").stdout).daemon;
    return r.config_hash === sha256(cfg) && r;
  }, "the reloaded config's hash");
  assert.ok(after.config_accepted_at >= before.config_accepted_at, JSON.stringify(after));
  await stopDaemon(d);
});

test("a broken config file: the readers work from the daemon's record and say so first", async (t) => {
  const { dir, cfg, d } = await daemonOnGood(t);
  const good = JSON.parse(run(cfg, "status", "--json").stdout).daemon;
  for (const broken of BROKEN) {
    const what = broken.what;
    fs.writeFileSync(cfg, broken.text);
    // `reload` itself refuses a broken file (exit 2) and sends nothing; SIGHUP makes the daemon
    // try, refuse, and record why (config_error).
    assert.equal(run(cfg, "reload").code, 2, what);
    d.kill("SIGHUP");
    await waitFor(
      () => broken.error.test(readStoreIn(dir).daemon()?.config_error ?? ""),
      `${what}: the refused reload recorded`,
    );

    const human = run(cfg, "status");
    assert.equal(human.code, 0, `${what}: ${human.stderr}`);
    assert.equal(
      assertNotice(human, broken.error, `${what}: status`),
      hhmm(good.config_accepted_at),
    );
    assert.match(human.stdout, /^daemon running/, what);
    assert.match(human.stdout, /\ba\b[\s\S]*\bb\b/, what);

    const json = run(cfg, "status", "--json");
    assert.equal(json.code, 0, `${what}: ${json.stderr}`);
    assertNotice(json, broken.error, `${what}: status --json`);
    const report = JSON.parse(json.stdout);
    assert.deepEqual(
      report.jobs.map((j) => j.name),
      ["a", "b"],
    );
    assert.equal(report.daemon.state, "running");
    assert.equal(report.daemon.config_accepted_at, good.config_accepted_at, what);
    assert.equal(report.daemon.config_hash, good.config_hash, what);
    assert.notEqual(report.daemon.config_hash, sha256(cfg), what);
    assert.ok(Array.isArray(report.daemon.config_file_errors), what);
    assert.match(report.daemon.config_file_errors[0], broken.error, what);
    assert.match(report.daemon.config_file_errors[0], /jobs\.yaml:\d+:\d+: /, what);
    assert.match(report.daemon.config_error, broken.error, what);

    const check = run(cfg, "status", "--check");
    assert.equal(check.code, 1, `${what}: ${check.stdout}${check.stderr}`);
    assert.match(
      check.stdout.split("\n")[0],
      /^WARNING: the config file has errors; the daemon runs the config accepted at \d\d:\d\d /,
      what,
    );
    const checkJson = run(cfg, "status", "--check", "--json");
    assert.equal(checkJson.code, 1, what);
    JSON.parse(checkJson.stdout);

    const one = run(cfg, "status", "b");
    assert.equal(one.code, 0, `${what}: ${one.stderr}`);
    assertNotice(one, broken.error, `${what}: status b`);
    assert.match(one.stdout, /\bb\b/, what);
    const oneJson = JSON.parse(run(cfg, "status", "b", "--json").stdout);
    assert.deepEqual(
      oneJson.jobs.map((j) => [j.name, j.schedule, j.timezone]),
      [["b", "0 9 * * *", "Asia/Tokyo"]],
      what,
    );

    const history = run(cfg, "history", "a", "--limit", "3");
    assert.equal(history.code, 0, `${what}: ${history.stderr}`);
    assertNotice(history, broken.error, `${what}: history`);
    assert.match(history.stdout, /\ba\b +ok\b/, what);
    const historyJson = run(cfg, "history", "--json");
    assert.equal(historyJson.code, 0, what);
    assert.ok(JSON.parse(historyJson.stdout).length > 0, what);

    const next = run(cfg, "next", "b", "--count", "1");
    assert.equal(next.code, 0, `${what}: ${next.stderr}`);
    assertNotice(next, broken.error, `${what}: next`);
    assert.match(
      next.stdout,
      /^b \(0 9 \* \* \*, Asia\/Tokyo\)\n {2}\d{4}-\d\d-\d\dT00:00:00\.000Z/,
      what,
    );

    // The newest run that has ended (the newest run may have just started, its log still
    // empty; the oldest may be pruned at any end: keep_runs).
    const ended = readStoreIn(dir).runs({ job: "a", status: "ok" }).at(-1);
    const logs = run(cfg, "logs", "a", "--run", String(ended.id));
    assert.equal(logs.code, 0, `${what}: ${logs.stderr}`);
    assertNotice(logs, broken.error, `${what}: logs`);
    assert.equal(logs.stdout, "hi\n", what);

    const markers = run(cfg, "markers", "a", "--json");
    assert.equal(markers.code, 0, `${what}: ${markers.stderr}`);
    assertNotice(markers, broken.error, `${what}: markers`);
    assert.deepEqual(JSON.parse(markers.stdout), [], what);

    // A job that is in neither the file nor the record is still a usage error.
    assert.equal(run(cfg, "status", "nope").code, 2, what);
  }
  // The daemon stopped: the record is what it last ran; status says so, --check is CRITICAL.
  await stopDaemon(d);
  const down = run(cfg, "status");
  assert.equal(down.code, 0, down.stderr);
  assert.match(
    down.stderr,
    /^the config file has errors; the daemon last ran the config accepted at/,
  );
  assert.match(down.stdout, /^daemon down/);
  const check = run(cfg, "status", "--check");
  assert.equal(check.code, 2, check.stdout);
  assert.match(check.stdout, /^CRITICAL: daemon down/);
});

test("a broken config file with no record (no store, a store without a daemon's record) fails as before", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(dir, GOOD);
  const cases = () => {
    for (const broken of BROKEN) {
      fs.writeFileSync(cfg, broken.text);
      for (const args of [
        ["status"],
        ["status", "--json"],
        ["history"],
        ["next"],
        ["status", "a"],
      ]) {
        const r = run(cfg, ...args);
        assert.equal(r.code, 2, `${broken.what}: ${args.join(" ")}: ${r.stdout}${r.stderr}`);
        assert.equal(r.stdout, "", args.join(" "));
        assert.match(r.stderr, broken.error, args.join(" "));
        assert.doesNotMatch(r.stderr, /the daemon runs/, args.join(" "));
      }
      const check = run(cfg, "status", "--check");
      assert.equal(check.code, 3, check.stdout);
      assert.match(check.stdout, /^UNKNOWN: the config cannot be read/);
    }
  };
  cases();
  // A store made by `cronvisor run` has no daemon row.
  fs.writeFileSync(cfg, GOOD);
  assert.equal(run(cfg, "run", "b").code, 0);
  assert.ok(fs.existsSync(path.join(dir, ".cronvisor", "cronvisor.db")));
  cases();
  // A daemon row written before the daemon recorded its config (config_json null).
  fs.writeFileSync(cfg, GOOD);
  const d = startDaemon(t, cfg);
  // A run ended: the daemon is past its start (and handles SIGTERM), its record written.
  await waitFor(() => readStoreIn(dir).runs({ job: "a", status: "ok" }).length, "a ran");
  assert.ok(readStoreIn(dir).daemon().config_json);
  await stopDaemon(d);
  const db = new Database(path.join(dir, ".cronvisor", "cronvisor.db"));
  db.prepare(
    "UPDATE daemon SET config_json = NULL, config_hash = NULL, config_accepted_at = NULL",
  ).run();
  db.close();
  cases();
});

test("the record of a daemon that runs another config file is not used", async (t) => {
  const dir = tmpdir(t);
  // Two config files naming the same state dir: the daemon runs `a.yaml`; `b.yaml` is broken.
  const text = `state_dir: ./state\n${GOOD}`;
  const a = writeConfig(dir, text, "a.yaml");
  const b = writeConfig(dir, `${text}  c: [unclosed\n`, "b.yaml");
  const d = startDaemon(t, a);
  const state = path.join(dir, "state");
  await waitFor(() => readStore(state).runs({ status: "ok" }).length, "a ran");
  assert.ok(readStore(state).daemon().config_json);
  assert.equal(run(a, "status").code, 0);
  for (const args of [["status"], ["status", "--json"], ["history"], ["next"]]) {
    const r = run(b, ...args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stdout}${r.stderr}`);
    assert.match(r.stderr, /b\.yaml:\d+:\d+: jobs\.c/);
    assert.doesNotMatch(r.stderr, /the daemon runs/);
  }
  const check = run(b, "status", "--check");
  assert.equal(check.code, 3, check.stdout);
  assert.match(check.stdout, /^UNKNOWN: the config cannot be read/);
  await stopDaemon(d);
});
