-- 1: the daemon singleton, per-job state, runs and slot dispositions, markers.
CREATE TABLE daemon (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  pid INTEGER, pid_start TEXT, started_at INTEGER, heartbeat_at INTEGER, heartbeat_ms INTEGER,
  stopped_at INTEGER, config_file TEXT, config_error TEXT
);
CREATE TABLE jobs (
  name TEXT PRIMARY KEY,
  paused INTEGER NOT NULL DEFAULT 0,
  fence INTEGER NOT NULL DEFAULT 0,
  scanned_to INTEGER,
  reboot_boot_id TEXT,
  last_success_at INTEGER,
  last_progress_at INTEGER,
  first_seen_at INTEGER
);
CREATE TABLE runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job TEXT NOT NULL,
  slot INTEGER,
  trigger TEXT,
  status TEXT NOT NULL,
  reason TEXT,
  exit_code INTEGER,
  signal TEXT,
  attempt INTEGER NOT NULL DEFAULT 1,
  started_at INTEGER NOT NULL,
  finished_at INTEGER,
  duration_ms INTEGER,
  fence INTEGER,
  revoked INTEGER NOT NULL DEFAULT 0,
  owner_pid INTEGER, owner_start TEXT,
  pid INTEGER, pid_start TEXT, pgid INTEGER,
  log_path TEXT, log_bytes INTEGER,
  progress_at INTEGER, progress_msg TEXT, progress_count INTEGER NOT NULL DEFAULT 0,
  markers_new INTEGER NOT NULL DEFAULT 0,
  markers_skipped INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_job ON runs(job, id);
CREATE INDEX runs_running ON runs(job) WHERE status = 'running';
CREATE TABLE slots (job TEXT NOT NULL, slot INTEGER NOT NULL, run_id INTEGER,
  PRIMARY KEY (job, slot)) WITHOUT ROWID;
CREATE TABLE markers (job TEXT NOT NULL, key TEXT NOT NULL, run_id INTEGER, fence INTEGER,
  created_at INTEGER NOT NULL, PRIMARY KEY (job, key)) WITHOUT ROWID;
CREATE TABLE claims (job TEXT NOT NULL, key TEXT NOT NULL, pid INTEGER NOT NULL,
  pid_start TEXT, run_id INTEGER, since INTEGER NOT NULL, PRIMARY KEY (job, key)) WITHOUT ROWID;
CREATE TABLE attempts (job TEXT NOT NULL, key TEXT NOT NULL, count INTEGER NOT NULL,
  last_at INTEGER NOT NULL, PRIMARY KEY (job, key)) WITHOUT ROWID;
CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, job TEXT,
  kind TEXT NOT NULL, detail TEXT);
CREATE INDEX events_by_job ON events(job, id);
