-- 16: health's digest of a job's recent runs (the columns migration 008 added, the trigger
-- migration 010 last wrote) is defined once for both engines, in src/store/digest.ts:
-- the line below is its trigger, put there when the migration runs (migrate.ts, migrationText).
-- The same columns and definitions as before; the rows are computed again from recent_runs.
\include job_verdicts
UPDATE jobs SET recent_runs = recent_runs;
