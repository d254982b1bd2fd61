// The daemon rows on PostgreSQL: one per node (migration 005), keyed by the node's name; the same
// operations as ../sqlite/daemon.ts, where a store has one. A node's lease is `renewed_at` (set
// from the database's clock at each beat) plus `lease_ms`: every node judges every other by that
// one clock, never by its own. Table-group functions: they run in their caller's transaction
// and never open one.
import type { Q } from "../pg-connection.js";
import { DAEMON_COLUMNS, daemonSql, JOB_HASHES } from "../queries/daemon.js";
import { POSTGRES } from "../queries/sql.js";
import type {
  AcceptedConfig,
  Alive,
  DaemonRow,
  NodeRow,
  NodeSelf,
  Owner,
  RunningConfig,
} from "../rows.js";

/** The database's clock, in epoch ms: clock_timestamp() moves within a transaction, now() not. */
export const DB_NOW = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

const SQL = daemonSql(POSTGRES);

export async function daemonRow(q: Q, node: string): Promise<DaemonRow | null> {
  return (await q.get<DaemonRow>(SQL.row, [node])) ?? null;
}

/** The config the node runs (or last ran), or null when it has recorded none. */
export async function runningConfig(q: Q, node: string): Promise<RunningConfig | null> {
  return (await q.get<RunningConfig>(SQL.runningConfig, [node])) ?? null;
}

/** Is node `node`'s lease still running, by the database's clock? */
export async function leaseLive(q: Q, node: string): Promise<boolean> {
  const r = await q.get(
    `SELECT 1 AS live FROM daemon WHERE node = $1 AND renewed_at + lease_ms > ${DB_NOW}`,
    [node],
  );
  return r !== undefined;
}

/**
 * Node `node`'s lease by the database's clock: when it ends, and how long it has left (so that
 * another node can wait that long on its own clock); null when it has run out. `here`: the node
 * runs on the machine (host and kernel boot) of the daemon `me` of node `mine`, the caller.
 */
export async function leaseLeft(
  q: Q,
  node: string,
  mine?: { node: string; me: Owner },
): Promise<{ until: number; leftMs: number; here: boolean } | null> {
  const r = await q.get<{ until: string; left: string; here: boolean | null }>(
    `SELECT d.renewed_at + d.lease_ms AS until, d.renewed_at + d.lease_ms - ${DB_NOW} AS left,
       d.host = m.host AND d.boot_id = m.boot_id AS here
     FROM daemon d LEFT JOIN daemon m
       ON m.node = $2 AND m.pid = $3 AND m.pid_start IS NOT DISTINCT FROM $4 AND m.stopped_at IS NULL
     WHERE d.node = $1 AND d.renewed_at + d.lease_ms > ${DB_NOW}`,
    [node, mine?.node ?? null, mine?.me.pid ?? null, mine?.me.start ?? null],
  );
  if (r === undefined) return null;
  return { until: Number(r.until), leftMs: Number(r.left), here: r.here === true };
}

/**
 * Claim the node's row for this daemon; returns the live holder that keeps it, or null. The row
 * is made if missing and locked before it is judged, so two daemons of one name claiming at once
 * are serialised. The holder is judged by its process when it ran on this machine since its
 * boot (a restarted daemon takes over at once from a dead one), else by its lease: a live daemon
 * of the same name elsewhere is refused, and so is one whose silence has not outlasted its lease.
 */
export async function claimDaemon(
  q: Q,
  me: Owner,
  now: number,
  heartbeatMs: number,
  configFile: string,
  holderAlive: Alive,
  accepted: AcceptedConfig | null,
  self: NodeSelf,
): Promise<DaemonRow | null> {
  await q.run("INSERT INTO daemon (node) VALUES ($1) ON CONFLICT (node) DO NOTHING", [self.name]);
  const cur = await q.get<DaemonRow & { host: string | null; boot_id: string | null }>(
    `SELECT ${DAEMON_COLUMNS}, host, boot_id FROM daemon WHERE node = $1 FOR UPDATE`,
    [self.name],
  );
  if (cur && cur.pid !== null && cur.stopped_at === null) {
    const { host, boot_id, ...holder } = cur;
    const here = host === self.host && boot_id === self.bootId;
    if (
      here
        ? cur.pid !== me.pid && holderAlive(cur.pid, cur.pid_start)
        : await leaseLive(q, self.name)
    )
      return holder;
  }
  await q.run(
    `UPDATE daemon SET pid = $1, pid_start = $2, started_at = $3, heartbeat_at = $4,
       heartbeat_ms = $5, stopped_at = NULL, config_file = $6, config_error = NULL,
       http_error = NULL, http_error_since = NULL,
       config_json = $7, config_hash = $8, config_accepted_at = $9,
       host = $10, boot_id = $11, lease_ms = $12, version = $13, renewed_at = ${DB_NOW},
       containment = $15
     WHERE node = $14`,
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
      self.host,
      self.bootId,
      self.leaseMs,
      self.version,
      self.name,
      self.containment ?? null,
    ],
  );
  return null;
}

/**
 * The node's beat, which renews its lease. False when the row is no longer this daemon's (another
 * daemon of the same name took it after the lease ran out): the caller has lost its node.
 */
export async function heartbeat(
  q: Q,
  node: string,
  pid: number,
  now: number,
  heartbeatMs: number,
  logsBytes: number | null,
): Promise<boolean> {
  const n = await q.run(
    `UPDATE daemon SET heartbeat_at = $1, heartbeat_ms = $2, renewed_at = ${DB_NOW},
       logs_bytes = coalesce($5, logs_bytes)
     WHERE node = $3 AND pid = $4 AND stopped_at IS NULL`,
    [now, heartbeatMs, node, pid, logsBytes],
  );
  return n > 0;
}

export async function setConfigError(q: Q, node: string, pid: number, message: string | null) {
  await q.run(SQL.setConfigError, [message, node, pid]);
}

/** Why the daemon's http endpoint is not serving, and since when; null when it serves. */
export async function setHttpState(
  q: Q,
  node: string,
  pid: number,
  error: string | null,
  since: number | null,
) {
  await q.run(SQL.setHttpState, [error, since, node, pid]);
}

/** A reload accepted `accepted`: record it as the running config and clear the last refusal. */
export async function acceptConfig(q: Q, node: string, pid: number, accepted: AcceptedConfig) {
  await q.run(SQL.acceptConfig, [accepted.json, accepted.hash, accepted.at, node, pid]);
}

export async function releaseDaemon(q: Q, node: string, pid: number, now: number) {
  await q.run(SQL.release, [now, node, pid]);
}

/** Every node that has claimed the store, by name, with the database's clock at the read. */
export async function nodes(q: Q): Promise<NodeRow[]> {
  return q.all<NodeRow>(
    `SELECT node AS name, pid, host, started_at, heartbeat_at, heartbeat_ms, renewed_at, lease_ms,
       stopped_at, version, ${DB_NOW} AS db_now
     FROM daemon WHERE node IS NOT NULL AND pid IS NOT NULL ORDER BY node`,
  );
}

/** Record the hash of each job this node defines, dropping the jobs it no longer does. */
export async function setJobHashes(q: Q, node: string, hashes: ReadonlyMap<string, string>) {
  await q.run("DELETE FROM node_jobs WHERE node = $1", [node]);
  if (hashes.size === 0) return;
  await q.run(
    "INSERT INTO node_jobs (node, job, hash) SELECT $1, * FROM unnest($2::text[], $3::text[])",
    [node, [...hashes.keys()], [...hashes.values()]],
  );
}

/** Each node's job hashes. */
export async function jobHashes(q: Q): Promise<{ node: string; job: string; hash: string }[]> {
  return q.all(JOB_HASHES);
}
