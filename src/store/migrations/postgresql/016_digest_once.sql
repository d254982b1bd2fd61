-- 16: as sqlite/016_digest_once.sql: the job_verdicts trigger and its function made from the one
-- definition in src/store/digest.ts (the line below), and every row computed again.
\include job_verdicts
UPDATE jobs SET recent_runs = recent_runs;
