// The daemon singleton row: who holds the state dir, its heartbeat, the config it runs (and why
// the last reload was refused).
// Table-group functions: they run in their caller's transaction and never open one.
import type { Conn } from "../connection.js";
import type { AcceptedConfig, Alive, DaemonRow, Owner, RunningConfig } from "../rows.js";

/** Every column but config_json (see DaemonRow). */
const ROW = `pid, pid_start, started_at, heartbeat_at, heartbeat_ms, stopped_at, config_file,
  config_error, config_hash, config_accepted_at, http_error, http_error_since`;

export function daemonRow(c: Conn): DaemonRow | null {
  return (c.q(`SELECT ${ROW} FROM daemon WHERE id = 1`).get() as DaemonRow | undefined) ?? null;
}

/** The config the daemon runs (or last ran), or null when no daemon has recorded one. */
export function runningConfig(c: Conn): RunningConfig | null {
  const r = c
    .q(
      `SELECT config_file, config_json, config_hash, config_accepted_at, pid, pid_start, stopped_at
       FROM daemon
       WHERE id = 1 AND config_file IS NOT NULL AND config_json IS NOT NULL
         AND config_accepted_at IS NOT NULL`,
    )
    .get() as RunningConfig | undefined;
  return r ?? null;
}

/**
 * Claim the state dir for this daemon; returns the live holder that keeps it, or null. A live
 * holder keeps it even when stopped by SIGSTOP: it is alive, only not beating. The claim records
 * the config the daemon starts with (`accepted`; null clears an earlier daemon's record), so the
 * row never pairs this daemon's config file with another daemon's config.
 */
export function claimDaemon(
  c: Conn,
  me: Owner,
  now: number,
  heartbeatMs: number,
  configFile: string,
  holderAlive: Alive,
  accepted: AcceptedConfig | null,
): DaemonRow | null {
  const cur = daemonRow(c);
  if (cur && cur.pid !== null && cur.stopped_at === null && cur.pid !== me.pid) {
    if (holderAlive(cur.pid, cur.pid_start)) return cur;
  }
  c.q(
    `INSERT INTO daemon (id, pid, pid_start, started_at, heartbeat_at, heartbeat_ms, stopped_at,
       config_file, config_error, config_json, config_hash, config_accepted_at)
     VALUES (1, ?, ?, ?, ?, ?, NULL, ?, NULL, ?, ?, ?)
     ON CONFLICT (id) DO UPDATE SET pid = excluded.pid, pid_start = excluded.pid_start,
       started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
       heartbeat_ms = excluded.heartbeat_ms, stopped_at = NULL,
       config_file = excluded.config_file, config_error = NULL,
       http_error = NULL, http_error_since = NULL,
       config_json = excluded.config_json, config_hash = excluded.config_hash,
       config_accepted_at = excluded.config_accepted_at`,
  ).run(
    me.pid,
    me.start,
    now,
    now,
    heartbeatMs,
    configFile,
    accepted?.json ?? null,
    accepted?.hash ?? null,
    accepted?.at ?? null,
  );
  return null;
}

export function heartbeat(c: Conn, pid: number, now: number, heartbeatMs: number): void {
  c.q("UPDATE daemon SET heartbeat_at = ?, heartbeat_ms = ? WHERE id = 1 AND pid = ?").run(
    now,
    heartbeatMs,
    pid,
  );
}

export function setConfigError(c: Conn, pid: number, message: string | null): void {
  c.q("UPDATE daemon SET config_error = ? WHERE id = 1 AND pid = ?").run(message, pid);
}

/** Why the daemon's http endpoint is not serving, and since when; null when it serves. */
export function setHttpState(
  c: Conn,
  pid: number,
  error: string | null,
  since: number | null,
): void {
  c.q("UPDATE daemon SET http_error = ?, http_error_since = ? WHERE id = 1 AND pid = ?").run(
    error,
    since,
    pid,
  );
}

/** A reload accepted `accepted`: record it as the running config and clear the last refusal. */
export function acceptConfig(c: Conn, pid: number, accepted: AcceptedConfig): void {
  c.q(
    `UPDATE daemon SET config_json = ?, config_hash = ?, config_accepted_at = ?, config_error = NULL
     WHERE id = 1 AND pid = ?`,
  ).run(accepted.json, accepted.hash, accepted.at, pid);
}

export function releaseDaemon(c: Conn, pid: number, now: number): void {
  c.q("UPDATE daemon SET stopped_at = ? WHERE id = 1 AND pid = ?").run(now, pid);
}
