-- 10: a schema the distribution's sqlite3 can read (SQLite 3.31, Ubuntu 20.04, and later), so an
-- operator can `PRAGMA integrity_check`, `.backup`, `.recover` and query a store with it (and
-- with Python's sqlite3): SQLite parses every view and trigger when it opens a file, and one it
-- cannot parse makes the whole file unreadable ("malformed database schema"). Two constructs of
-- migrations 006 and 008 were newer: an aggregate's own ORDER BY (3.44) in job_summary, and the
-- ->> operator (3.38) in job_verdicts. Statements the code runs may still use newer SQL
-- (better-sqlite3 bundles its own SQLite); test/store-sqlite3.test.js checks the stored schema.
--   job_summary: the same columns. json_group_array takes the 20 runs in the order its FROM
--   subquery gives them: a subquery with LIMIT is never flattened into an aggregate query, so
--   SQLite runs it as a co-routine in its ORDER BY (test/store-contract.test.js compares the
--   summary with the runs on both engines).
--   job_verdicts: X ->> N is json_extract(X, '$[N]') for the scalars these arrays hold.
-- The triggers of 006 and 009 name the view, not its text: they are left as they are.
DROP VIEW job_summary;
CREATE VIEW job_summary AS
SELECT j.name AS job,
  (SELECT json_group_array(json_array(id, status, reason, started_at, finished_at, duration_ms,
       progress_at))
   FROM (SELECT * FROM runs r WHERE r.job = j.name
         AND r.status NOT IN ('running', 'skipped', 'missed') ORDER BY r.id DESC LIMIT 20)
  ) AS recent_runs,
  (SELECT json_object('id', id, 'job', job, 'slot', slot, 'trigger', trigger, 'status', status,
       'reason', reason, 'exit_code', exit_code, 'signal', signal, 'attempt', attempt,
       'started_at', started_at, 'finished_at', finished_at, 'duration_ms', duration_ms,
       'markers_new', markers_new, 'markers_skipped', markers_skipped, 'pid', pid,
       'log_path', log_path)
   FROM runs r WHERE r.job = j.name AND r.status NOT IN ('running', 'skipped', 'missed')
   ORDER BY r.id DESC LIMIT 1
  ) AS last_finished
FROM jobs j;
DROP TRIGGER job_verdicts;
CREATE TRIGGER job_verdicts AFTER UPDATE OF recent_runs ON jobs
BEGIN
  UPDATE jobs SET (recent_ok_p95_ms, failing_streak, failing_run_id, failing_status,
      failing_reason) = (
    SELECT
      (SELECT d FROM (SELECT d, row_number() OVER (ORDER BY d) AS rank, count(*) OVER () AS n
          FROM (SELECT coalesce(json_extract(value, '$[5]'), 0) AS d
                FROM json_each(NEW.recent_runs) WHERE json_extract(value, '$[1]') = 'ok'))
       WHERE n >= 5 AND rank = (95 * n + 99) / 100),
      CASE WHEN json_extract(v, '$[1]') = 'ok' OR v IS NULL THEN 0 ELSE
        (SELECT count(*) FROM json_each(NEW.recent_runs)
         WHERE json_extract(value, '$[1]') IN ('failed', 'timeout', 'spawn_failed')
           AND key < (SELECT coalesce(min(key), 1000000) FROM json_each(NEW.recent_runs)
                      WHERE json_extract(value, '$[1]') = 'ok'))
      END,
      CASE WHEN json_extract(v, '$[1]') <> 'ok' THEN json_extract(v, '$[0]') END,
      CASE WHEN json_extract(v, '$[1]') <> 'ok' THEN json_extract(v, '$[1]') END,
      CASE WHEN json_extract(v, '$[1]') <> 'ok' THEN json_extract(v, '$[2]') END
    FROM (SELECT (SELECT value FROM json_each(NEW.recent_runs)
                  WHERE json_extract(value, '$[1]') IN ('ok', 'failed', 'timeout', 'spawn_failed')
                  ORDER BY key LIMIT 1) AS v))
  WHERE name = NEW.name;
END;
-- The bytes the daemon's run logs take on its disk (logs/ in the state dir), written with each
-- heartbeat, so that `status` shows them without walking the directory (daemon.disk).
ALTER TABLE daemon ADD COLUMN logs_bytes INTEGER;
