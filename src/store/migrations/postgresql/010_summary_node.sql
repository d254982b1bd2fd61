-- 10: as sqlite/010_summary_node.sql: last_finished carries the run's node. The view keeps its
-- columns and their types, so it is replaced in place (job_summary_refresh reads it by name).
CREATE OR REPLACE VIEW job_summary AS
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
       'markers_skipped', markers_skipped, 'pid', pid, 'log_path', log_path,
       'node', node)::text
   FROM runs r WHERE r.job = j.name AND r.status NOT IN ('running', 'skipped', 'missed')
   ORDER BY r.id DESC LIMIT 1
  ) AS last_finished
FROM jobs j;
UPDATE jobs SET last_finished = (SELECT s.last_finished FROM job_summary s WHERE s.job = jobs.name)
WHERE last_finished IS NOT NULL;
