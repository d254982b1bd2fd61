-- 6: each job's status summary in its own row, as sqlite/006_job_summary.sql (the same columns,
-- JSON kept as text, and the same triggers): recent_runs, the newest 20 finished runs with a
-- process as [id, status, reason, started_at, finished_at, duration_ms, progress_at] arrays,
-- newest first; last_finished, the newest as an object of the history columns; marker_count.
-- job_summary_refresh first locks the job's row, then computes the two run columns in a
-- statement of its own: under READ COMMITTED that statement's snapshot is taken after the lock,
-- so two transactions ending runs of one job cannot leave the older one's view of the runs.
ALTER TABLE jobs ADD COLUMN recent_runs TEXT NOT NULL DEFAULT '[]';
ALTER TABLE jobs ADD COLUMN last_finished TEXT;
ALTER TABLE jobs ADD COLUMN marker_count BIGINT NOT NULL DEFAULT 0;
-- The status page's timelines (see sqlite/006_job_summary.sql).
CREATE INDEX runs_by_job_finish ON runs(job, finished_at);
CREATE VIEW job_summary AS
SELECT j.name AS job,
  COALESCE((SELECT json_agg(json_build_array(id, status, reason, started_at, finished_at,
       duration_ms, progress_at) ORDER BY id DESC)::text
   FROM (SELECT * FROM runs r WHERE r.job = j.name
         AND r.status NOT IN ('running', 'skipped', 'missed') ORDER BY r.id DESC LIMIT 20) t
  ), '[]') AS recent_runs,
  (SELECT json_build_object('id', id, 'job', job, 'slot', slot, 'trigger', trigger,
       'status', status, 'reason', reason, 'exit_code', exit_code, 'signal', signal,
       'attempt', attempt, 'started_at', started_at, 'finished_at', finished_at,
       'duration_ms', duration_ms, 'markers_new', markers_new,
       'markers_skipped', markers_skipped, 'pid', pid, 'log_path', log_path)::text
   FROM runs r WHERE r.job = j.name AND r.status NOT IN ('running', 'skipped', 'missed')
   ORDER BY r.id DESC LIMIT 1
  ) AS last_finished
FROM jobs j;
CREATE FUNCTION job_summary_refresh(name_ TEXT) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM jobs WHERE name = name_ FOR UPDATE;
  UPDATE jobs SET (recent_runs, last_finished) =
    (SELECT s.recent_runs, s.last_finished FROM job_summary s WHERE s.job = name_)
  WHERE name = name_;
END $$;
CREATE FUNCTION job_summary_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM job_summary_refresh(OLD.job);
  ELSE
    PERFORM job_summary_refresh(NEW.job);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER job_summary_run_insert AFTER INSERT ON runs FOR EACH ROW
  WHEN (NEW.status NOT IN ('running', 'skipped', 'missed')) EXECUTE FUNCTION job_summary_run();
CREATE TRIGGER job_summary_run_update AFTER UPDATE ON runs FOR EACH ROW
  WHEN (NEW.status NOT IN ('running', 'skipped', 'missed')
    OR OLD.status NOT IN ('running', 'skipped', 'missed')) EXECUTE FUNCTION job_summary_run();
CREATE TRIGGER job_summary_run_delete AFTER DELETE ON runs FOR EACH ROW
  WHEN (OLD.status NOT IN ('running', 'skipped', 'missed')) EXECUTE FUNCTION job_summary_run();
CREATE FUNCTION job_summary_marker() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    UPDATE jobs SET marker_count = marker_count - 1 WHERE name = OLD.job;
  ELSE
    UPDATE jobs SET marker_count = marker_count + 1 WHERE name = NEW.job;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER job_summary_marker AFTER INSERT OR DELETE ON markers FOR EACH ROW
  EXECUTE FUNCTION job_summary_marker();
CREATE FUNCTION job_summary_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE jobs SET (recent_runs, last_finished, marker_count) =
    (SELECT s.recent_runs, s.last_finished,
       (SELECT COUNT(*) FROM markers m WHERE m.job = NEW.name)
     FROM job_summary s WHERE s.job = NEW.name)
  WHERE name = NEW.name;
  RETURN NULL;
END $$;
CREATE TRIGGER job_summary_job AFTER INSERT ON jobs FOR EACH ROW
  EXECUTE FUNCTION job_summary_job();
UPDATE jobs SET (recent_runs, last_finished, marker_count) =
  (SELECT s.recent_runs, s.last_finished,
     (SELECT COUNT(*) FROM markers m WHERE m.job = jobs.name)
   FROM job_summary s WHERE s.job = jobs.name);
