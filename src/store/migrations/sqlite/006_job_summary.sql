-- 6: what `status` shows of each job's runs and markers, kept in the job's own row so that status
-- reads one row per job instead of 100,000 run rows. recent_runs: the newest 20 finished runs
-- with a process (not skipped, missed or running), newest first, each as the JSON array
-- [id, status, reason, started_at, finished_at, duration_ms, progress_at] (health's RunFacts);
-- last_finished: the newest of them as a JSON object of the history columns; marker_count: the
-- job's markers. Triggers keep them in the transaction of every write that changes them (a run's
-- end, a finished run's columns, a prune, a marker written or deleted, a job row created after
-- its markers), so no writer can forget one; a running run's writes (pids, marks, progress) and
-- dispositions do not fire them. job_summary is the one definition of the two run columns, for
-- the triggers and this backfill.
ALTER TABLE jobs ADD COLUMN recent_runs TEXT NOT NULL DEFAULT '[]';
ALTER TABLE jobs ADD COLUMN last_finished TEXT;
ALTER TABLE jobs ADD COLUMN marker_count INTEGER NOT NULL DEFAULT 0;
-- The status page's timelines read each shown job's runs finished in the range over this index,
-- in one query (runs_by_job would visit every row the job has kept).
CREATE INDEX runs_by_job_finish ON runs(job, finished_at);
CREATE VIEW job_summary AS
SELECT j.name AS job,
  (SELECT json_group_array(json_array(id, status, reason, started_at, finished_at, duration_ms,
       progress_at) ORDER BY id DESC)
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
CREATE TRIGGER job_summary_run_insert AFTER INSERT ON runs
WHEN NEW.status NOT IN ('running', 'skipped', 'missed')
BEGIN
  UPDATE jobs SET (recent_runs, last_finished) =
    (SELECT recent_runs, last_finished FROM job_summary WHERE job = NEW.job)
  WHERE name = NEW.job;
END;
CREATE TRIGGER job_summary_run_update AFTER UPDATE ON runs
WHEN NEW.status NOT IN ('running', 'skipped', 'missed')
  OR OLD.status NOT IN ('running', 'skipped', 'missed')
BEGIN
  UPDATE jobs SET (recent_runs, last_finished) =
    (SELECT recent_runs, last_finished FROM job_summary WHERE job = NEW.job)
  WHERE name = NEW.job;
END;
CREATE TRIGGER job_summary_run_delete AFTER DELETE ON runs
WHEN OLD.status NOT IN ('running', 'skipped', 'missed')
BEGIN
  UPDATE jobs SET (recent_runs, last_finished) =
    (SELECT recent_runs, last_finished FROM job_summary WHERE job = OLD.job)
  WHERE name = OLD.job;
END;
CREATE TRIGGER job_summary_marker_insert AFTER INSERT ON markers
BEGIN
  UPDATE jobs SET marker_count = marker_count + 1 WHERE name = NEW.job;
END;
CREATE TRIGGER job_summary_marker_delete AFTER DELETE ON markers
BEGIN
  UPDATE jobs SET marker_count = marker_count - 1 WHERE name = OLD.job;
END;
CREATE TRIGGER job_summary_job_insert AFTER INSERT ON jobs
BEGIN
  UPDATE jobs SET (recent_runs, last_finished, marker_count) =
    (SELECT recent_runs, last_finished, (SELECT COUNT(*) FROM markers WHERE job = NEW.name)
     FROM job_summary WHERE job = NEW.name)
  WHERE name = NEW.name;
END;
UPDATE jobs SET (recent_runs, last_finished, marker_count) =
  (SELECT s.recent_runs, s.last_finished, (SELECT COUNT(*) FROM markers m WHERE m.job = jobs.name)
   FROM job_summary s WHERE s.job = jobs.name);
