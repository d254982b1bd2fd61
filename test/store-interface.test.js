// The store's contract as the rest of cronvisor sees it: numbered migrations bring an older store
// forward in place (PRAGMA user_version as before), a newer one is refused untouched, and a Store
// method that is one transaction writes all of its batch or nothing.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import { LATEST, migrationFiles, migrationText } from "../dist/store/migrate.js";
import { SqliteStore } from "../dist/store/sqlite-store.js";
import { openStore, StoreError } from "../dist/store/store.js";
import { scheduledReserve, tmpdir } from "./helpers.js";
import { fromRuns } from "./status-oracle.js";

const SQL = new URL("../dist/store/migrations/sqlite/", import.meta.url);

/** A store file as an older cronvisor left it: only the first `upTo` migrations applied. */
function olderStore(stateDir, upTo) {
  fs.mkdirSync(stateDir, { recursive: true });
  const db = new Database(path.join(stateDir, "cronvisor.db"));
  db.pragma("journal_mode = WAL");
  for (const f of migrationFiles().slice(0, upTo))
    db.exec(fs.readFileSync(new URL(f, SQL), "utf8"));
  db.pragma(`user_version = ${upTo}`);
  db.prepare("INSERT INTO markers (job, key, created_at) VALUES ('a', 'kept', 1)").run();
  db.close();
}

test("migrations: one numbering, 001.. with no gap; a new store is at the last number", async (t) => {
  const files = migrationFiles();
  assert.deepEqual(files, [
    "001_init.sql",
    "002_alert_state.sql",
    "003_claim_command.sql",
    "004_running_config_http.sql",
    "005_nodes.sql",
    "006_job_summary.sql",
    "007_job_writes.sql",
    "008_job_verdicts.sql",
    "009_summary_columns.sql",
    "010_operable_store.sql",
    "011_containment.sql",
    "012_idle_work.sql",
    "013_holds.sql",
    "014_chains_drain.sql",
    "015_no_hot_row.sql",
    "016_digest_once.sql",
  ]);
  // A store at LATEST skips listing the folder: a new file with LATEST left behind would never run.
  assert.equal(LATEST, files.length, "bump LATEST in src/store/migrate.ts with a new migration");
  const store = SqliteStore.open(path.join(tmpdir(t), "s"), { create: true });
  t.after(() => store.close());
  assert.equal(store.db.pragma("user_version", { simple: true }), files.length);
});

test("a migration's \\include line is a definition written once; unexpanded, it is no SQL", (t) => {
  const file = "016_digest_once.sql";
  const raw = fs.readFileSync(new URL(file, SQL), "utf8");
  assert.match(raw, /^\\include job_verdicts$/m);
  const text = migrationText(SQL, file, "sqlite");
  assert.doesNotMatch(text, /\\include/);
  assert.match(text, /CREATE TRIGGER job_verdicts AFTER UPDATE OF recent_runs ON jobs/);
  // Fed by hand to SQLite as it is, the file fails instead of leaving the trigger out.
  const db = new Database(":memory:");
  t.after(() => db.close());
  assert.throws(() => db.exec(raw), /syntax error|unrecognized token/);
  // A name nothing defines is refused with the file's name.
  const dir = tmpdir(t);
  fs.writeFileSync(path.join(dir, "099_x.sql"), "SELECT 1;\n\\include no_such\n");
  assert.throws(
    () => migrationText(new URL(`file://${dir}/`), "099_x.sql", "sqlite"),
    /099_x\.sql: nothing to include as \\include no_such/,
  );
});

test("a store written at schema version 1 opens, is migrated in place and keeps its rows", async (t) => {
  const stateDir = path.join(tmpdir(t), "s");
  olderStore(stateDir, 1);
  const store = await openStore(stateDir, { create: false });
  t.after(() => store.close());
  assert.equal(await store.isMarked("a", "kept"), true);
  // 002 to 004 were applied: alert state and a claim's command can be written.
  await store.setAlertState("a", "failing", 5);
  assert.deepEqual(await store.alertState("a"), { active: "failing", since: 5 });
  const me = { pid: process.pid, start: null };
  const out = await store.takeClaim({ job: "a", run: null }, "k", me, 6, () => true);
  assert.deepEqual(out, { kind: "claimed" });
  await store.setClaimCommand("a", "k", process.pid, 4242, "x");
  assert.equal((await store.claimHolder("a", "k")).cmd_pid, 4242);
  const raw = new Database(path.join(stateDir, "cronvisor.db"), { readonly: true });
  assert.equal(raw.pragma("user_version", { simple: true }), LATEST);
  raw.close();
});

test("a store from a newer cronvisor is refused and left as it was", async (t) => {
  const stateDir = path.join(tmpdir(t), "s");
  olderStore(stateDir, 3);
  const file = path.join(stateDir, "cronvisor.db");
  const db = new Database(file);
  db.pragma("user_version = 99");
  db.close();
  const before = fs.readFileSync(file);
  await assert.rejects(
    openStore(stateDir, { create: false }),
    (e) =>
      e instanceof StoreError &&
      e.code === "corrupt" &&
      /newer than this cronvisor/.test(e.message),
  );
  assert.deepEqual(fs.readFileSync(file), before);
});

const reserve = (job, slot, logPath = (id) => `/tmp/${id}.log`) =>
  scheduledReserve(job, slot, { logPath });

test("reserveRuns is one transaction: a failure in its batch writes none of it", async (t) => {
  const store = SqliteStore.open(path.join(tmpdir(t), "s"), { create: true });
  t.after(() => store.close());
  const boom = () => {
    throw new Error("boom");
  };
  await assert.rejects(
    store.reserveRuns([
      reserve("a", 60_000),
      { dispose: { job: "b", slot: 60_000, status: "missed", reason: "daemon down" }, now: 1000 },
      reserve("c", 60_000, boom),
    ]),
    /boom/,
  );
  assert.deepEqual(await store.history(null, 10), [], "no run, no disposition");
  assert.equal(await store.job("a"), null, "not even the job row");
  // The same batch without the failure commits every part of it, outcomes in order.
  const out = await store.reserveRuns([
    reserve("a", 60_000),
    { dispose: { job: "b", slot: 60_000, status: "missed", reason: "daemon down" }, now: 1000 },
    reserve("a", 60_000),
  ]);
  assert.deepEqual(
    out.map((o) => o.kind),
    ["started", "recorded", "duplicate"],
  );
  assert.equal((await store.history(null, 10)).length, 2);
});

test("markDone writes every key or, with a stale fence, none; a nested transaction is refused", async (t) => {
  const store = SqliteStore.open(path.join(tmpdir(t), "s"), { create: true });
  t.after(() => store.close());
  const [started] = await store.reserveRuns([reserve("a", null)]);
  const w = { job: "a", run: { id: started.run.id, fence: started.run.fence } };
  assert.equal(await store.markDone(w, ["k1", "k2"], 2000), 2);
  await store.revokeRun(started.run.id);
  assert.equal(await store.markDone(w, ["k3", "k4"], 2001), null);
  assert.deepEqual(
    (await store.markers("a")).map((m) => m.key),
    ["k1", "k2"],
  );
  // A store call from inside another's transaction (here: the lock check's callback) would
  // commit with its caller's batch: the store refuses it instead of nesting.
  let inner = null;
  const req = {
    ...reserve("b", null).reserve,
    holderAlive: () => {
      inner = store.ensureJob("x", 1);
      return true;
    },
  };
  assert.equal((await store.reserveRun(req)).kind, "started"); // no holder yet: not called
  assert.equal((await store.reserveRun(req)).kind, "locked");
  await assert.rejects(inner, /inside another/);
  assert.equal(await store.job("x"), null);
});

test("migration 006 backfills the jobs' summary rows: an old store's status is as before", async (t) => {
  const stateDir = path.join(tmpdir(t), "s");
  olderStore(stateDir, 5);
  const db = new Database(path.join(stateDir, "cronvisor.db"));
  const ins = db.prepare(`INSERT INTO runs (job, slot, trigger, status, reason, exit_code, attempt,
    started_at, finished_at, duration_ms, pid, log_path, progress_at, markers_new, markers_skipped)
    VALUES (?, ?, 'schedule', ?, ?, ?, ?, ?, ?, ?, 7, ?, ?, ?, ?)`);
  db.transaction(() => {
    for (const job of ["a", "b", "c"])
      db.prepare("INSERT INTO jobs (name, first_seen_at) VALUES (?, 1)").run(job);
    for (let i = 0; i < 30; i++) {
      const job = ["a", "b"][i % 2];
      const status = i % 5 === 0 ? "failed" : i % 7 === 0 ? "skipped" : i === 29 ? "running" : "ok";
      const end = status === "running" ? null : i * 1000 + 900;
      ins.run(
        job,
        i * 1000,
        status,
        status === "ok" ? null : "exit 1",
        status === "ok" ? 0 : 1,
        1 + (i % 3 === 0),
        i * 1000,
        end,
        end === null ? null : 900 - i,
        `/l/${i}`,
        i * 1000 + 5,
        i % 4,
        i % 2,
      );
    }
    for (const k of ["x", "y"])
      db.prepare("INSERT INTO markers (job, key, created_at) VALUES ('b', ?, 1)").run(k);
  })();
  db.close();
  const store = await openStore(stateDir, { create: false });
  t.after(() => store.close());
  const { parseConfig } = await import("../dist/config/parse.js");
  const { buildStatus } = await import("../dist/health/status.js");
  const text = `state_dir: ${stateDir}\njobs:\n${["a", "b", "c", "d"].map((j) => `  ${j}: { schedule: "* * * * *", command: "true" }`).join("\n")}\n`;
  const { config } = parseConfig(text, path.join(stateDir, "jobs.yaml"), { hostTimezone: "UTC" });
  const now = 100_000;
  const want = JSON.stringify(await buildStatus(config, fromRuns(store), now), null, 2);
  assert.equal(JSON.stringify(await buildStatus(config, store, now), null, 2), want);
  const got = JSON.parse(want).jobs;
  assert.deepEqual(
    got.map((j) => j.markers),
    [1, 2, 0, 0],
  ); // a's "kept" from olderStore
  assert.equal(got[0].last_finished_run.run_id, 27);
  assert.equal(got[1].last_run.status, "running");
});
