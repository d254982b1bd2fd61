-- 15: no row that every write transaction updates. The data_version counter serialised the
-- commits of every node (each writer held its row until its commit was on disk); readers now
-- tell which ids are final from their snapshots (src/store/postgres/horizon.ts), and
-- dataVersion() hashes the current snapshot. A cronvisor older than this one refuses the store
-- (it would bump the counter), so the table goes.
DROP TABLE IF EXISTS data_version;
