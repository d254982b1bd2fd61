-- 9: as sqlite/009_summary_columns.sql: migration 006's trigger on a run's update fires by the
-- columns the summary reads, so that a running run's marks and progress (markers_new,
-- progress_at: written only while it runs, `AND status = 'running'`), its owner and its
-- revocation do not queue it. PostgreSQL evaluates WHEN before calling the function, so here it
-- saves less than on SQLite; the two engines keep one numbering and one rule.
DROP TRIGGER job_summary_run_update ON runs;
CREATE TRIGGER job_summary_run_update AFTER UPDATE OF id, job, slot, "trigger", status, reason,
  exit_code, signal, attempt, started_at, finished_at, duration_ms, markers_skipped, pid,
  log_path ON runs FOR EACH ROW
  WHEN (NEW.status NOT IN ('running', 'skipped', 'missed')
    OR OLD.status NOT IN ('running', 'skipped', 'missed')) EXECUTE FUNCTION job_summary_run();
