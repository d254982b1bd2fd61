-- 4: the config the daemon runs (its validated form, a hash of the file's bytes, when it was
-- accepted), so that commands can work from it while the file on disk is broken; and the http
-- endpoint's state (null: serving or not configured; else why it is down, and since when).
ALTER TABLE daemon ADD COLUMN config_json TEXT;
ALTER TABLE daemon ADD COLUMN config_hash TEXT;
ALTER TABLE daemon ADD COLUMN config_accepted_at BIGINT;
ALTER TABLE daemon ADD COLUMN http_error TEXT;
ALTER TABLE daemon ADD COLUMN http_error_since BIGINT;
