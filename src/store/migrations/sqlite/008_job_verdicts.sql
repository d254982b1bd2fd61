-- 8: what health judges of a job's recent runs, kept in its row beside recent_runs (migration
-- 006), so that `status` judges each job without parsing its runs. Since migration 016 the one
-- definition of these columns is src/store/digest.ts (it was health's digestRecent, kept in step
-- with this trigger by a test).
--   recent_ok_p95_ms  the nearest-rank p95 of the durations of the ok runs in recent_runs (a
--                     missing duration counts as 0); NULL with fewer than 5 of them
--   failing_streak    when the newest run with a verdict (ok, failed, timeout, spawn_failed) did
--                     not succeed: how many verdicts in a row, newest first, did not; else 0
--   failing_run_id, failing_status, failing_reason: that newest failed verdict, or NULL
-- One trigger on recent_runs keeps them: each write of recent_runs (006's triggers on runs,
-- markers and jobs) fires it in the same transaction. The backfill below rewrites recent_runs
-- as it is, so that the trigger computes every row.
ALTER TABLE jobs ADD COLUMN recent_ok_p95_ms INTEGER;
ALTER TABLE jobs ADD COLUMN failing_streak INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN failing_run_id INTEGER;
ALTER TABLE jobs ADD COLUMN failing_status TEXT;
ALTER TABLE jobs ADD COLUMN failing_reason TEXT;
CREATE TRIGGER job_verdicts AFTER UPDATE OF recent_runs ON jobs
BEGIN
  UPDATE jobs SET (recent_ok_p95_ms, failing_streak, failing_run_id, failing_status,
      failing_reason) = (
    SELECT
      (SELECT d FROM (SELECT d, row_number() OVER (ORDER BY d) AS rank, count(*) OVER () AS n
          FROM (SELECT coalesce(value ->> 5, 0) AS d FROM json_each(NEW.recent_runs)
                WHERE value ->> 1 = 'ok'))
       WHERE n >= 5 AND rank = (95 * n + 99) / 100),
      CASE WHEN v ->> 1 = 'ok' OR v IS NULL THEN 0 ELSE
        (SELECT count(*) FROM json_each(NEW.recent_runs)
         WHERE value ->> 1 IN ('failed', 'timeout', 'spawn_failed')
           AND key < (SELECT coalesce(min(key), 1000000) FROM json_each(NEW.recent_runs)
                      WHERE value ->> 1 = 'ok'))
      END,
      CASE WHEN v ->> 1 <> 'ok' THEN v ->> 0 END,
      CASE WHEN v ->> 1 <> 'ok' THEN v ->> 1 END,
      CASE WHEN v ->> 1 <> 'ok' THEN v ->> 2 END
    FROM (SELECT (SELECT value FROM json_each(NEW.recent_runs)
                  WHERE value ->> 1 IN ('ok', 'failed', 'timeout', 'spawn_failed')
                  ORDER BY key LIMIT 1) AS v))
  WHERE name = NEW.name;
END;
UPDATE jobs SET recent_runs = recent_runs;
