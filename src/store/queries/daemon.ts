// The daemon's rows: SQLite has one (id 1), PostgreSQL one per node with a lease (see sql.ts).
// The statements below are the same text but for the row's key (Dialect.daemonKey: SQLite binds
// 1, PostgreSQL the node's name); claiming the row and the beat differ (the lease, FOR UPDATE).
import type { Dialect } from "./sql.js";

/** Every column but config_json (see DaemonRow). */
export const DAEMON_COLUMNS = `pid, pid_start, started_at, heartbeat_at, heartbeat_ms, stopped_at,
  config_file, config_error, config_hash, config_accepted_at, http_error, http_error_since, node,
  containment, logs_bytes`;

/** Each node's hash of each job it defines. */
export const JOB_HASHES = "SELECT node, job, hash FROM node_jobs ORDER BY job, node";

/** The statements on one daemon row, by its key (Dialect.daemonKey). */
export function daemonSql(d: Dialect) {
  const k = d.daemonKey;
  return {
    row: `SELECT ${DAEMON_COLUMNS} FROM daemon WHERE ${k} = $1`,
    /** The config the daemon runs (or last ran), if it recorded one. */
    runningConfig: `SELECT config_file, config_json, config_hash, config_accepted_at, pid,
        pid_start, stopped_at
      FROM daemon
      WHERE ${k} = $1 AND config_file IS NOT NULL AND config_json IS NOT NULL
        AND config_accepted_at IS NOT NULL`,
    /** Each below: what is set, then the row's key and the daemon's pid. */
    setConfigError: `UPDATE daemon SET config_error = $1 WHERE ${k} = $2 AND pid = $3`,
    setHttpState: `UPDATE daemon SET http_error = $1, http_error_since = $2
      WHERE ${k} = $3 AND pid = $4`,
    acceptConfig: `UPDATE daemon SET config_json = $1, config_hash = $2, config_accepted_at = $3,
        config_error = NULL
      WHERE ${k} = $4 AND pid = $5`,
    release: `UPDATE daemon SET stopped_at = $1 WHERE ${k} = $2 AND pid = $3`,
  };
}
