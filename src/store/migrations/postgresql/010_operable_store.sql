-- 10: as sqlite/010_operable_store.sql. Its schema rewrite is SQLite's alone (a view and a
-- trigger that SQLite 3.31 could not parse); here only the bytes each node's run logs take on its
-- disk, written with its heartbeat, so that `status` shows them (daemon.disk).
ALTER TABLE daemon ADD COLUMN logs_bytes BIGINT;
