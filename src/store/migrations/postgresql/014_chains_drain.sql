-- 14: as sqlite/012_chains_drain.sql: pending chain starts, and the drain of `pause --all`.
CREATE TABLE IF NOT EXISTS chains (job TEXT NOT NULL, slot BIGINT NOT NULL, upstream TEXT NOT NULL,
  upstream_run BIGINT NOT NULL, created_at BIGINT NOT NULL, PRIMARY KEY (job, slot));
CREATE TABLE IF NOT EXISTS drain (id INTEGER PRIMARY KEY CHECK (id = 1), since BIGINT NOT NULL,
  until BIGINT, reason TEXT);
