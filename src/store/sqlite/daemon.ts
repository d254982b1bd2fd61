// The daemon singleton row: who holds the state dir, its heartbeat, the config it runs (and why
// the last reload was refused).
// Table-group functions: they run in their caller's transaction and never open one.
import type { Conn } from "../connection.js";
import { daemonSql, JOB_HASHES } from "../queries/daemon.js";
import { SQLITE } from "../queries/sql.js";
import type {
  AcceptedConfig,
  Alive,
  DaemonRow,
  NodeRow,
  NodeSelf,
  Owner,
  RunningConfig,
} from "../rows.js";

const SQL = daemonSql(SQLITE);
/** The key of the store's one daemon row. */
const ONE = 1;

export function daemonRow(c: Conn): DaemonRow | null {
  return (c.q(SQL.row).get(ONE) as DaemonRow | undefined) ?? null;
}

/** The config the daemon runs (or last ran), or null when no daemon has recorded one. */
export function runningConfig(c: Conn): RunningConfig | null {
  return (c.q(SQL.runningConfig).get(ONE) as RunningConfig | undefined) ?? null;
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
  self: NodeSelf,
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
  // One node: the store's clock is this machine's, so the lease is renewed at `now`.
  c.q(
    `UPDATE daemon SET node = ?, host = ?, boot_id = ?, lease_ms = ?, version = ?, renewed_at = ?,
       containment = ? WHERE id = 1`,
  ).run(
    self.name,
    self.host,
    self.bootId,
    self.leaseMs,
    self.version,
    now,
    self.containment ?? null,
  );
  return null;
}

/** The beat (and the lease); false if the row is no longer this daemon's. */
export function heartbeat(
  c: Conn,
  pid: number,
  now: number,
  heartbeatMs: number,
  logsBytes: number | null,
): boolean {
  const r = c
    .q(
      "UPDATE daemon SET heartbeat_at = ?, heartbeat_ms = ?, renewed_at = ?, logs_bytes = coalesce(?, logs_bytes) WHERE id = 1 AND pid = ?",
    )
    .run(now, heartbeatMs, now, logsBytes, pid);
  return r.changes > 0;
}

/** The store's one node (none before a daemon claimed it), judged by this machine's clock. */
export function nodes(c: Conn, now: number): NodeRow[] {
  const rows = c
    .q(
      `SELECT COALESCE(node, '') AS name, pid, host, started_at, heartbeat_at, heartbeat_ms,
         renewed_at, lease_ms, stopped_at, version
       FROM daemon WHERE pid IS NOT NULL`,
    )
    .all() as Omit<NodeRow, "db_now">[];
  return rows.map((r) => ({ ...r, db_now: now }));
}

/** Record the hash of each job this node defines, dropping the jobs it no longer does. */
export function setJobHashes(c: Conn, node: string, hashes: ReadonlyMap<string, string>): void {
  c.q("DELETE FROM node_jobs").run(); // one node: an earlier name's rows go too
  const put = c.q("INSERT INTO node_jobs (node, job, hash) VALUES (?, ?, ?)");
  for (const [job, hash] of hashes) put.run(node, job, hash);
}

export function jobHashes(c: Conn): { node: string; job: string; hash: string }[] {
  return c.q(JOB_HASHES).all() as {
    node: string;
    job: string;
    hash: string;
  }[];
}

export function setConfigError(c: Conn, pid: number, message: string | null): void {
  c.q(SQL.setConfigError).run(message, ONE, pid);
}

/** Why the daemon's http endpoint is not serving, and since when; null when it serves. */
export function setHttpState(
  c: Conn,
  pid: number,
  error: string | null,
  since: number | null,
): void {
  c.q(SQL.setHttpState).run(error, since, ONE, pid);
}

/** A reload accepted `accepted`: record it as the running config and clear the last refusal. */
export function acceptConfig(c: Conn, pid: number, accepted: AcceptedConfig): void {
  c.q(SQL.acceptConfig).run(accepted.json, accepted.hash, accepted.at, ONE, pid);
}

export function releaseDaemon(c: Conn, pid: number, now: number): void {
  c.q(SQL.release).run(now, ONE, pid);
}
