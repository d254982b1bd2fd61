// The daemon singleton row on PostgreSQL: the same operations as ../sqlite/daemon.ts.
// Table-group functions: they run in their caller's transaction and never open one.
import type { Q } from "../pg-connection.js";
import type { AcceptedConfig, Alive, DaemonRow, Owner, RunningConfig } from "../rows.js";

/** Every column but config_json (see DaemonRow). */
const ROW = `pid, pid_start, started_at, heartbeat_at, heartbeat_ms, stopped_at, config_file,
  config_error, config_hash, config_accepted_at, http_error, http_error_since`;

export async function daemonRow(q: Q): Promise<DaemonRow | null> {
  return (await q.get<DaemonRow>(`SELECT ${ROW} FROM daemon WHERE id = 1`)) ?? null;
}

/** The config the daemon runs (or last ran), or null when no daemon has recorded one. */
export async function runningConfig(q: Q): Promise<RunningConfig | null> {
  const r = await q.get<RunningConfig>(
    `SELECT config_file, config_json, config_hash, config_accepted_at, pid, pid_start, stopped_at
     FROM daemon
     WHERE id = 1 AND config_file IS NOT NULL AND config_json IS NOT NULL
       AND config_accepted_at IS NOT NULL`,
  );
  return r ?? null;
}

/**
 * Claim the store for this daemon (see ../sqlite/daemon.ts); returns the live holder that keeps
 * it, or null. The row is made (empty) if missing and locked before it is judged, so two
 * daemons claiming at once are serialised: the second sees the first as the holder. An empty
 * row never outlives the transaction: it is filled in, or the holder's row was there already.
 */
export async function claimDaemon(
  q: Q,
  me: Owner,
  now: number,
  heartbeatMs: number,
  configFile: string,
  holderAlive: Alive,
  accepted: AcceptedConfig | null,
): Promise<DaemonRow | null> {
  await q.run("INSERT INTO daemon (id) VALUES (1) ON CONFLICT DO NOTHING");
  const cur = (await q.get<DaemonRow>(`SELECT ${ROW} FROM daemon WHERE id = 1 FOR UPDATE`)) ?? null;
  if (cur && cur.pid !== null && cur.stopped_at === null && cur.pid !== me.pid) {
    if (holderAlive(cur.pid, cur.pid_start)) return cur;
  }
  await q.run(
    `UPDATE daemon SET pid = $1, pid_start = $2, started_at = $3, heartbeat_at = $4,
       heartbeat_ms = $5, stopped_at = NULL, config_file = $6, config_error = NULL,
       http_error = NULL, http_error_since = NULL,
       config_json = $7, config_hash = $8, config_accepted_at = $9
     WHERE id = 1`,
    [
      me.pid,
      me.start,
      now,
      now,
      heartbeatMs,
      configFile,
      accepted?.json ?? null,
      accepted?.hash ?? null,
      accepted?.at ?? null,
    ],
  );
  return null;
}

export async function heartbeat(q: Q, pid: number, now: number, heartbeatMs: number) {
  await q.run("UPDATE daemon SET heartbeat_at = $1, heartbeat_ms = $2 WHERE id = 1 AND pid = $3", [
    now,
    heartbeatMs,
    pid,
  ]);
}

export async function setConfigError(q: Q, pid: number, message: string | null) {
  await q.run("UPDATE daemon SET config_error = $1 WHERE id = 1 AND pid = $2", [message, pid]);
}

/** Why the daemon's http endpoint is not serving, and since when; null when it serves. */
export async function setHttpState(q: Q, pid: number, error: string | null, since: number | null) {
  await q.run(
    "UPDATE daemon SET http_error = $1, http_error_since = $2 WHERE id = 1 AND pid = $3",
    [error, since, pid],
  );
}

/** A reload accepted `accepted`: record it as the running config and clear the last refusal. */
export async function acceptConfig(q: Q, pid: number, accepted: AcceptedConfig) {
  await q.run(
    `UPDATE daemon SET config_json = $1, config_hash = $2, config_accepted_at = $3,
       config_error = NULL
     WHERE id = 1 AND pid = $4`,
    [accepted.json, accepted.hash, accepted.at, pid],
  );
}

export async function releaseDaemon(q: Q, pid: number, now: number) {
  await q.run("UPDATE daemon SET stopped_at = $1 WHERE id = 1 AND pid = $2", [now, pid]);
}
