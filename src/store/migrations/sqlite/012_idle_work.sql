-- 12: success without work (health `idle`, docs/health.md). `last_work_at`: when the job last
-- recorded new work, a new marker or a `progress` call (a successful run's end is not work: it
-- moves last_progress_at, not this). `idle_runs`: the successful runs that ended since, each of
-- which started after the last work (did nothing new). Both written in the statements that write
-- the markers, the progress and the run's end (src/store/sqlite/markers.ts, runs.ts): no trigger.
-- Filled here from what the store already holds: the newest marker or progress call of each job.
ALTER TABLE jobs ADD COLUMN last_work_at INTEGER;
ALTER TABLE jobs ADD COLUMN idle_runs INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET last_work_at = (SELECT MAX(at) FROM (
    SELECT MAX(m.created_at) AS at FROM markers m WHERE m.job = jobs.name
    UNION ALL
    SELECT MAX(r.progress_at) FROM runs r WHERE r.job = jobs.name AND r.progress_count > 0));
UPDATE jobs SET idle_runs = (SELECT COUNT(*) FROM runs r WHERE r.job = jobs.name
  AND r.status = 'ok' AND r.started_at > COALESCE(jobs.last_work_at, 0));
