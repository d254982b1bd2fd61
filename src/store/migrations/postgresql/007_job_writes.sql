-- 7: nothing to do. SQLite's migration 007 counts the writes to the jobs table, so that a reader
-- that kept every job's row learns whether they still stand; on PostgreSQL every write
-- transaction already bumps `data_version` (pg-connection.ts), and the status page, which reads
-- a shared store whole at every load, keeps nothing to check.
SELECT 1;
