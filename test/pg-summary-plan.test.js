// The job summary's refresh on PostgreSQL (migration 006's trigger, run at every run's end):
// it reads the job's newest finished runs. A new store's `runs` has no statistics until
// autovacuum's first ANALYZE, and then the planner guessed a job has two rows and read all of
// them (a bitmap scan and a sort): about 3 ms per end at 1,000 runs of a job. The refresh must
// walk the (job, id) index backwards and stop at the newest 20, whatever the statistics say.
import assert from "node:assert/strict";
import { test } from "node:test";
import { openPgStore } from "../dist/store/store.js";
import { freshDatabase, pgSkip, rawClient } from "./pg.js";

// Needs a real PostgreSQL: skipped (with pgSkip's reason) only where its server is not installed
// and CI is not set; in CI, which installs it, never.
const skip = pgSkip();

test(
  "postgresql: a run's end refreshes its job's summary through the (job, id) index, without statistics",
  { skip },
  async (t) => {
    const url = await freshDatabase();
    const store = await openPgStore(url, { create: true, node: "n1" });
    t.after(() => store.close());
    await store.addJobs([{ name: "j", bootId: null }], 1000);
    const raw = await rawClient(url, t);
    // Enough finished runs that the planner's guess for a job without statistics (a few rows)
    // made it read them all; as many ends would have written them.
    await raw.query(
      `INSERT INTO runs (job, slot, trigger, status, attempt, started_at, finished_at, duration_ms)
       SELECT 'j', i * 1000, 'schedule', 'ok', 1, i * 1000, i * 1000 + 1, 1
       FROM generate_series(1, 2000) AS i`,
    );
    const stats = await raw.query("SELECT reltuples FROM pg_class WHERE oid = 'runs'::regclass");
    assert.equal(stats.rows[0].reltuples, -1, "runs was never analyzed (the case under test)");
    // The plans of the statements the trigger runs, as auto_explain reports them to this session.
    const plans = [];
    raw.on("notice", (n) => plans.push(n.message));
    await raw.query("LOAD 'auto_explain'");
    await raw.query("SET auto_explain.log_min_duration = 0");
    await raw.query("SET auto_explain.log_nested_statements = on");
    await raw.query("SET auto_explain.log_level = notice");
    // A finished run's column changed: the summary is refreshed, as at a run's end.
    await raw.query("UPDATE runs SET reason = 'again' WHERE id = (SELECT max(id) FROM runs)");
    const refresh = plans.find((p) => p.includes("UPDATE jobs SET (recent_runs, last_finished)"));
    assert.ok(refresh, `the refresh's plan was reported:\n${plans.join("\n")}`);
    const recent = refresh.slice(refresh.indexOf("SubPlan 1"), refresh.indexOf("SubPlan 2"));
    assert.match(recent, /Index Scan Backward using runs_by_job on runs/, refresh);
    assert.doesNotMatch(recent, /Sort|Bitmap|Seq Scan/, refresh);
    const summary = await raw.query("SELECT recent_runs FROM jobs WHERE name = 'j'");
    const ids = JSON.parse(summary.rows[0].recent_runs).map((r) => r[0]);
    assert.equal(ids.length, 20);
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => b - a),
      "the newest 20, newest first",
    );
  },
);
