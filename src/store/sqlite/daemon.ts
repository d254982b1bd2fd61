// The daemon singleton row: who holds the state dir, its heartbeat and its config error.
// Table-group functions: they run in their caller's transaction and never open one.
import type { Conn } from "../connection.js";
import type { Alive, DaemonRow, Owner } from "../rows.js";

export function daemonRow(c: Conn): DaemonRow | null {
  return (c.q("SELECT * FROM daemon WHERE id = 1").get() as DaemonRow | undefined) ?? null;
}

/**
 * Claim the state dir for this daemon; returns the live holder that keeps it, or null. A live
 * holder keeps it even when stopped by SIGSTOP: it is alive, only not beating.
 */
export function claimDaemon(
  c: Conn,
  me: Owner,
  now: number,
  heartbeatMs: number,
  configFile: string,
  holderAlive: Alive,
): DaemonRow | null {
  const cur = daemonRow(c);
  if (cur && cur.pid !== null && cur.stopped_at === null && cur.pid !== me.pid) {
    if (holderAlive(cur.pid, cur.pid_start)) return cur;
  }
  c.q(
    `INSERT INTO daemon (id, pid, pid_start, started_at, heartbeat_at, heartbeat_ms, stopped_at, config_file, config_error)
     VALUES (1, ?, ?, ?, ?, ?, NULL, ?, NULL)
     ON CONFLICT (id) DO UPDATE SET pid = excluded.pid, pid_start = excluded.pid_start,
       started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
       heartbeat_ms = excluded.heartbeat_ms, stopped_at = NULL,
       config_file = excluded.config_file, config_error = NULL,
       http_error = NULL, http_error_since = NULL`,
  ).run(me.pid, me.start, now, now, heartbeatMs, configFile);
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

export function releaseDaemon(c: Conn, pid: number, now: number): void {
  c.q("UPDATE daemon SET stopped_at = ? WHERE id = 1 AND pid = ?").run(now, pid);
}
