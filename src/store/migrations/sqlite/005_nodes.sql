-- 5: nodes. Each daemon is a node with a name (`node:`, default the host name). A SQLite store
-- has one node, its daemon row; a PostgreSQL store has a row per node (see postgresql/005).
-- renewed_at is the lease: the time of the node's last beat by the store's clock (SQLite: the
-- node's own), which other nodes judge it by; host and boot_id tell a restarted daemon on the
-- same machine from another machine with the same name. Runs and `once` claims carry their node;
-- node_jobs holds each node's hash of each job's definition (two nodes defining a job
-- differently is a warning in status).
ALTER TABLE daemon ADD COLUMN node TEXT;
ALTER TABLE daemon ADD COLUMN host TEXT;
ALTER TABLE daemon ADD COLUMN boot_id TEXT;
ALTER TABLE daemon ADD COLUMN lease_ms INTEGER;
ALTER TABLE daemon ADD COLUMN renewed_at INTEGER;
ALTER TABLE daemon ADD COLUMN version TEXT;
ALTER TABLE runs ADD COLUMN node TEXT;
ALTER TABLE claims ADD COLUMN node TEXT;
CREATE TABLE node_jobs (node TEXT NOT NULL, job TEXT NOT NULL, hash TEXT NOT NULL,
  PRIMARY KEY (node, job));
-- The last 64 KiB of each finished run's log, kept by a shared store so that `cronvisor logs`
-- works from any node (the node that ran it keeps the whole file). Unused with SQLite.
CREATE TABLE run_logs (run_id INTEGER PRIMARY KEY, tail BLOB NOT NULL);
