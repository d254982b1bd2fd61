-- 9: migration 006's trigger on a run's update fires by the columns the summary reads. As an
-- `AFTER UPDATE ON runs` trigger it was part of every UPDATE of runs, and SQLite enters a row
-- trigger's program (its WHEN is evaluated inside it) for each row: 50 to 130 µs a statement on
-- this machine even when WHEN is false, for a running run's marks, pids, owner and revocation,
-- against 2 µs without it (BENCHMARKS.md). With a column list, an UPDATE that sets none of
-- those columns does not include the trigger at all.
--   markers_new and progress_at are not listed: they are written only to a running run (marks,
--   progress; those writers say `AND status = 'running'`), whose summary they cannot be part of,
--   and the end, which makes a run part of it, sets status.
-- Every other column of job_summary (migration 006) is listed, so a finished run's columns
-- written later (a skipped key counted, a pid) still refresh its job's summary. The body is
-- 006's, unchanged: SQLite cannot alter a trigger, only drop and create it again.
DROP TRIGGER job_summary_run_update;
CREATE TRIGGER job_summary_run_update AFTER UPDATE OF id, job, slot, "trigger", status, reason,
  exit_code, signal, attempt, started_at, finished_at, duration_ms, markers_skipped, pid,
  log_path ON runs
WHEN NEW.status NOT IN ('running', 'skipped', 'missed')
  OR OLD.status NOT IN ('running', 'skipped', 'missed')
BEGIN
  UPDATE jobs SET (recent_runs, last_finished) =
    (SELECT recent_runs, last_finished FROM job_summary WHERE job = NEW.job)
  WHERE name = NEW.job;
END;
