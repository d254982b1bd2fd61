-- 14: chains and the drain (issue 39, items 3 and 4). `chains`: a downstream job's start for an
-- upstream slot, written in the transaction that records the upstream run's end, so that a
-- daemon killed before starting it starts it after a restart; the row goes once the downstream
-- slot has its disposition (the slot's uniqueness keeps it from running twice meanwhile).
-- `drain`: `cronvisor pause --all`, one row while set; every node of the store reads it. IF NOT
-- EXISTS: a store set back to an older version by hand (test/newcomer.test.js) keeps them.
CREATE TABLE IF NOT EXISTS chains (job TEXT NOT NULL, slot INTEGER NOT NULL, upstream TEXT NOT NULL,
  upstream_run INTEGER NOT NULL, created_at INTEGER NOT NULL,
  PRIMARY KEY (job, slot)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS drain (id INTEGER PRIMARY KEY CHECK (id = 1), since INTEGER NOT NULL,
  until INTEGER, reason TEXT);
