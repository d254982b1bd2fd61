-- 10: last_finished (migration 006) carries the run's node, as every other history entry does:
-- without it, `status`'s last_run had no `node` and the page of a shared store said "on node
-- undefined". The view is 006's with the node added; its triggers name it and need no change
-- (a run's node is written when the run is inserted, never updated). Every job's last_finished
-- is made again from it.
DROP VIEW job_summary;
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
       'log_path', log_path, 'node', node)
   FROM runs r WHERE r.job = j.name AND r.status NOT IN ('running', 'skipped', 'missed')
   ORDER BY r.id DESC LIMIT 1
  ) AS last_finished
FROM jobs j;
UPDATE jobs SET last_finished = (SELECT s.last_finished FROM job_summary s WHERE s.job = jobs.name)
WHERE last_finished IS NOT NULL;
