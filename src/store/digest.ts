// Health's digest of a job's recent runs, defined once (issue 38): what `status` judges a job
// by, kept in its row so that a status read parses no run. Migration 008 added the columns; the
// trigger that keeps them is made from this text for each engine (the migration line
// `\include job_verdicts`, expanded by migrationText in ../migrate.ts), so a change to the rule
// is a change here plus a new migration holding that line again. test/store-contract.test.js
// checks the columns against a plain reading of the rule (test/digest-oracle.js) on random
// histories, on both engines.
//   recent_ok_p95_ms  the nearest-rank p95 of the durations of the ok runs among the newest
//                     SUMMARY_RECENT finished ones (recent_runs, migration 006; a missing
//                     duration counts as 0); NULL with fewer than P95_MIN_SAMPLES of them
//   failing_streak    when the newest run with a verdict (VERDICT_STATUSES) did not succeed:
//                     how many verdicts in a row, newest first, did not; else 0
//   failing_run_id, failing_status, failing_reason: that newest failed verdict, or NULL
// recent_runs holds RunFacts as JSON arrays (id, status, reason, started_at, finished_at,
// duration_ms, progress_at), newest first.

/** Statuses that judge the job's own code; the others (killed, interrupted) are looked past. */
export const VERDICT_STATUSES = ["ok", "failed", "timeout", "spawn_failed"] as const;
/** Fewer successful runs than this say nothing about what is usual: no p95. */
export const P95_MIN_SAMPLES = 5;

const list = (xs: readonly string[]): string => xs.map((x) => `'${x}'`).join(", ");
const VERDICTS = list(VERDICT_STATUSES);
const FAILED = list(VERDICT_STATUSES.filter((s) => s !== "ok"));

/** How an engine reads recent_runs: its elements (columns `key`, in order, and `value`). */
interface JsonWords {
  /** The table of the array's elements. */
  elements: string;
  /** The scalar at index `n` of the array `x`, as SQL (text or number; see `bigint`). */
  at: (x: string, n: number) => string;
}

/** The five columns, in the order above, of the JSON array the words read. */
function digestSelect(w: JsonWords): string {
  const at = w.at;
  const num = (x: string, n: number): string => `CAST(${at(x, n)} AS BIGINT)`;
  return `SELECT
  (SELECT d FROM (SELECT d, row_number() OVER (ORDER BY d) AS rank, count(*) OVER () AS n
      FROM (SELECT coalesce(${num("value", 5)}, 0) AS d FROM ${w.elements}
            WHERE ${at("value", 1)} = 'ok') o) r
   WHERE n >= ${P95_MIN_SAMPLES} AND rank = (95 * n + 99) / 100),
  CASE WHEN v IS NULL OR ${at("v", 1)} = 'ok' THEN 0 ELSE
    (SELECT count(*) FROM ${w.elements}
     WHERE ${at("value", 1)} IN (${FAILED})
       AND key < (SELECT coalesce(min(key), 1000000) FROM ${w.elements}
                  WHERE ${at("value", 1)} = 'ok'))
  END,
  CASE WHEN ${at("v", 1)} <> 'ok' THEN ${num("v", 0)} END,
  CASE WHEN ${at("v", 1)} <> 'ok' THEN ${at("v", 1)} END,
  CASE WHEN ${at("v", 1)} <> 'ok' THEN ${at("v", 2)} END
FROM (SELECT (SELECT value FROM ${w.elements} WHERE ${at("value", 1)} IN (${VERDICTS})
              ORDER BY key LIMIT 1) AS v) newest`;
}

const COLUMNS = "recent_ok_p95_ms, failing_streak, failing_run_id, failing_status, failing_reason";

/**
 * SQLite's trigger: after each write of recent_runs, the row's columns from it. json_extract,
 * not ->>: the distribution's sqlite3 (3.31 and later) must parse every stored trigger
 * (migration 010).
 */
const SQLITE_TRIGGER = `DROP TRIGGER IF EXISTS job_verdicts;
CREATE TRIGGER job_verdicts AFTER UPDATE OF recent_runs ON jobs
BEGIN
  UPDATE jobs SET (${COLUMNS}) = (
${digestSelect({ elements: "json_each(NEW.recent_runs)", at: (x, n) => `json_extract(${x}, '$[${n}]')` })})
  WHERE name = NEW.name;
END;`;

/** PostgreSQL's: a BEFORE trigger setting them in the row being written, the JSON parsed once. */
const POSTGRES_TRIGGER = `DROP TRIGGER IF EXISTS job_verdicts ON jobs;
CREATE OR REPLACE FUNCTION job_verdicts() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  runs jsonb := NEW.recent_runs::jsonb;
BEGIN
  ${digestSelect({ elements: "jsonb_array_elements(runs) WITH ORDINALITY AS e(value, key)", at: (x, n) => `(${x} ->> ${n})` })}
  INTO ${COLUMNS.split(", ")
    .map((c) => `NEW.${c}`)
    .join(", ")};
  RETURN NEW;
END $$;
CREATE TRIGGER job_verdicts BEFORE UPDATE OF recent_runs ON jobs FOR EACH ROW
  EXECUTE FUNCTION job_verdicts();`;

/** What a migration's `\include NAME` line stands for, per engine. */
export const INCLUDES: Readonly<Record<string, { sqlite: string; postgresql: string }>> = {
  job_verdicts: { sqlite: SQLITE_TRIGGER, postgresql: POSTGRES_TRIGGER },
};
