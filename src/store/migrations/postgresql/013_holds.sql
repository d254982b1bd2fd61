-- 13: as sqlite/012_holds.sql: what a run holds besides its job's lock (named locks, its
-- group), released by its end. Takers serialise per name on a transaction-scoped advisory lock
-- (postgres/holds.ts), not on a row: a hold has no hot row shared by every tick.
CREATE TABLE holds (
  kind TEXT NOT NULL CHECK (kind IN ('lock', 'group')),
  name TEXT NOT NULL,
  run_id BIGINT NOT NULL,
  PRIMARY KEY (kind, name, run_id)
);
CREATE INDEX holds_by_run ON holds (run_id);
