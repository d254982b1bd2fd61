-- 12: as sqlite/012_idle_work.sql: each job's last new work (a new marker or a `progress` call)
-- and the successful runs since that did nothing new (health `idle`).
ALTER TABLE jobs ADD COLUMN last_work_at BIGINT;
ALTER TABLE jobs ADD COLUMN idle_runs INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET last_work_at = (SELECT MAX(at) FROM (
    SELECT MAX(m.created_at) AS at FROM markers m WHERE m.job = jobs.name
    UNION ALL
    SELECT MAX(r.progress_at) FROM runs r WHERE r.job = jobs.name AND r.progress_count > 0) t);
UPDATE jobs SET idle_runs = (SELECT COUNT(*) FROM runs r WHERE r.job = jobs.name
  AND r.status = 'ok' AND r.started_at > COALESCE(jobs.last_work_at, 0));
