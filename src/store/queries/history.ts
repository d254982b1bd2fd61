// Reading runs: the statements both engines run (see sql.ts). The monitor's scans differ
// (SQLite names its indexes; PostgreSQL reads a snapshot horizon in the same statement).

const HISTORY_COLUMNS = `id, job, slot, trigger, status, reason, exit_code, signal, attempt, started_at,
  finished_at, duration_ms, markers_new, markers_skipped, pid, log_path, node, cpu_s,
  memory_peak_bytes`;
/** The columns health reads (RunFacts), in factsOf's order. */
const FACT_COLUMNS = "id, status, reason, started_at, finished_at, duration_ms, progress_at";
/** A TimelineRow's columns. */
export const TIMELINE_COLUMNS =
  "id, slot, trigger, status, reason, exit_code, signal, started_at, finished_at, duration_ms, node";

export const RUN_ROW = "SELECT * FROM runs WHERE id = $1";
export const RUNNING_OF_JOB =
  "SELECT * FROM runs WHERE status = 'running' AND job = $1 ORDER BY id";
export const HISTORY_ALL = "SELECT * FROM runs ORDER BY id DESC LIMIT $1";
export const HISTORY_OF_JOB = "SELECT * FROM runs WHERE job = $1 ORDER BY id DESC LIMIT $2";
/** The latest run that had a process (not a skipped/missed disposition), as a history entry. */
export const LAST_RUN = `SELECT ${HISTORY_COLUMNS} FROM runs
  WHERE job = $1 AND status NOT IN ('skipped', 'missed') ORDER BY id DESC LIMIT 1`;
export const HISTORY_ROW = `SELECT ${HISTORY_COLUMNS} FROM runs WHERE id = $1`;
/** Finished runs with a process, newest first: what health is derived from. */
export const RECENT_FINISHED = `SELECT ${FACT_COLUMNS} FROM runs
  WHERE job = $1 AND status NOT IN ('running', 'skipped', 'missed') ORDER BY id DESC LIMIT $2`;
export const RUNS_AFTER = "SELECT * FROM runs WHERE job = $1 AND id > $2 ORDER BY id LIMIT $3";
export const MAX_RUN_ID = "SELECT COALESCE(MAX(id), 0) AS n FROM runs WHERE job = $1";
