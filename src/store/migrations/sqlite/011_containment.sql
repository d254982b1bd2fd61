-- 11: a run is every process it started (src/run/cgroup.ts). What a finished run cost: the CPU
-- seconds (user + system) of all its processes and its peak memory in bytes, null for runs
-- recorded before this or where nothing was measured (interrupted, spawn failed). How the daemon
-- contains its runs, as it said at its claim: {"mode", "reason"} as JSON. And last_finished
-- (migration 006, 010's form) carries the run's node, CPU and memory, as every other history
-- entry does: without the node, `status`'s last_run had none and the page of a shared store said
-- "on node undefined". The triggers of 006 and 009 name the view and need no change (a run's
-- node is written when it is inserted; its CPU and memory with its end, which sets status).
ALTER TABLE runs ADD COLUMN cpu_s REAL;
ALTER TABLE runs ADD COLUMN memory_peak_bytes INTEGER;
ALTER TABLE daemon ADD COLUMN containment TEXT;
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
       'log_path', log_path, 'node', node, 'cpu_s', cpu_s,
       'memory_peak_bytes', memory_peak_bytes)
   FROM runs r WHERE r.job = j.name AND r.status NOT IN ('running', 'skipped', 'missed')
   ORDER BY r.id DESC LIMIT 1
  ) AS last_finished
FROM jobs j;
UPDATE jobs SET last_finished = (SELECT s.last_finished FROM job_summary s WHERE s.job = jobs.name)
WHERE last_finished IS NOT NULL;
