-- 13: named locks and concurrency groups (docs/locks.md). What a run holds besides its job's
-- lock: each named lock of its `locks:` (kind 'lock') and its `group:` (kind 'group'), written
-- in the transaction that starts it. A hold lasts while its run is `running` (its end, recorded
-- once nothing of the run is left, releases it with no write of its own, as it does the job's
-- lock); a later take of the same name deletes the rows of runs that ended.
CREATE TABLE holds (
  kind TEXT NOT NULL CHECK (kind IN ('lock', 'group')),
  name TEXT NOT NULL,
  run_id INTEGER NOT NULL,
  PRIMARY KEY (kind, name, run_id)
);
CREATE INDEX holds_by_run ON holds (run_id);
