-- 7: a count of the writes to the jobs table, kept by triggers in the transaction of each write
-- (the summary's triggers of migration 006 included, and any other program's SQL), so that a
-- reader that kept every job's row (the status page's worker, between the daemon's heartbeats,
-- which write none) learns with one read of one row whether a new read would return the same
-- rows. A write that leaves a row as it was still counts: the count may move without a change,
-- never stay without one.
CREATE TABLE job_writes (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL);
INSERT INTO job_writes (id, n) VALUES (1, 0);
CREATE TRIGGER job_writes_insert AFTER INSERT ON jobs
BEGIN
  UPDATE job_writes SET n = n + 1 WHERE id = 1;
END;
CREATE TRIGGER job_writes_update AFTER UPDATE ON jobs
BEGIN
  UPDATE job_writes SET n = n + 1 WHERE id = 1;
END;
CREATE TRIGGER job_writes_delete AFTER DELETE ON jobs
BEGIN
  UPDATE job_writes SET n = n + 1 WHERE id = 1;
END;
