// What health and `status` read, gathered per job or for every job at once (the rows made into
// what status shows by ../summary.ts, as on PostgreSQL). Table-group functions: they run in
// their caller's transaction (SqliteStore reads them in one snapshot) and never open one.
import type { Conn } from "../connection.js";
import type { DrainRow } from "../chain-rows.js";
import { DRAIN } from "../queries/chains.js";
import { holdsHeld as holdsHeldSql } from "../queries/holds.js";
import { SQLITE } from "../queries/sql.js";
import { summarySql } from "../queries/status.js";
import type { HeldRow } from "../rows.js";
import type {
  JobReadings,
  StatusJob,
  StatusJobRows,
  StatusRows,
  SummaryParses,
  SummaryRow,
} from "../status-rows.js";
import { byJob, statusJobRows, SUMMARY_RECENT, summaryReadings, summaryRowOf } from "../summary.js";
import { daemonRow, nodes } from "./daemon.js";
import { runningRuns } from "./history.js";
import { jobWrites } from "./jobs.js";
import { markerCount, repeatingKeysAll, repeatingKeysSince } from "./markers.js";

const HOLDS_HELD = holdsHeldSql(SQLITE);

/**
 * One job's readings, by per-job queries: judged from the digest its row keeps (digest.ts)
 * and no run read, as `status` judges; the monitor judges each job so.
 */
export function jobReadings(c: Conn, job: string, repeatLimit: number): JobReadings {
  const s = summaryRows(c, job, false).get(job);
  const { readings, since } = summaryReadings(job, s, runningRuns(c, job));
  return { ...readings, attempts: repeatingKeysSince(c, job, repeatLimit, since) };
}

/**
 * Every job's row, or one job's, with its summary (without recent_runs unless `recent`); raw
 * rows made into SummaryRows (better-sqlite3 builds an object key by key).
 */
function summaryRows(c: Conn, one: string | null, recent = true): Map<string, SummaryRow> {
  const sql = summarySql(recent);
  const q = c.q(one === null ? sql : `${sql} WHERE name = $1`, true);
  const raw = (one === null ? q.all() : q.all(one)) as unknown[][];
  return new Map(raw.map((r) => [r[0] as string, summaryRowOf(r)]));
}

/**
 * Every job's row, or one job's: the rows kept in `parses` while no write to the jobs table
 * has counted since they were read (every job's only), else read (and kept).
 */
function jobTable(
  c: Conn,
  one: string | null,
  recentLimit: number,
  parses: SummaryParses | undefined,
): ReadonlyMap<string, SummaryRow> {
  if (one !== null || !parses) return summaryRows(c, one, recentLimit > 0);
  const writes = jobWrites(c);
  if (parses.table?.writes === writes) return parses.table.rows;
  const rows = summaryRows(c, null);
  parses.table = { writes, rows };
  return rows;
}

/**
 * Everything `status` shows: one row per job (its summary, kept by triggers in the transaction
 * of each write that changes it), plus the running runs and the attempts, one query each for
 * every job at once. Health judges from the rows' digests (../digest.ts); `recentLimit` is how
 * many recent runs to return besides (0: none, and none is parsed). Asked for more recent runs
 * than the summary keeps, the runs are read.
 * `parses`: the jobs' rows and their summaries' parses kept from an earlier read (summary.ts),
 * used as far as they still stand and brought up to date.
 */
export function statusRows(
  c: Conn,
  jobs: readonly StatusJob[],
  recentLimit: number,
  parses?: SummaryParses,
): StatusRows {
  if (recentLimit > SUMMARY_RECENT) throw new RangeError(`statusRows: ${recentLimit} recent runs`);
  const out = new Map<string, StatusJobRows>();
  const daemon = daemonRow(c);
  const one = jobs.length === 1 ? (jobs[0] as StatusJob).name : null;
  const running = byJob(runningRuns(c, one ?? undefined));
  const rows = jobTable(c, one, recentLimit, parses);
  const minLimit = Math.min(...jobs.map((j) => j.repeatLimit));
  const attempts = jobs.length > 0 ? repeatingKeysAll(c, minLimit) : new Map();
  for (const job of jobs) {
    const s = rows.get(job.name);
    const run = running.get(job.name) ?? [];
    const tried = attempts.get(job.name) ?? [];
    const r = statusJobRows(job, s, run, tried, recentLimit, parses);
    // Markers of a job without a row (written before any run of it) are counted here.
    out.set(job.name, { ...r, markers: s ? s[3] : markerCount(c, job.name) });
  }
  return { daemon, nodes: nodes(c, Date.now()), jobs: out };
}

/** Every hold of a running run, with its run (status: `locks` and `groups`). */
export function holdsHeld(c: Conn): HeldRow[] {
  return c.q(HOLDS_HELD).all() as HeldRow[];
}

/** `cronvisor pause --all` as set (migration 014); status judges it against now. */
export function drain(c: Conn): DrainRow | null {
  return (c.q(DRAIN).get() as DrainRow | undefined) ?? null;
}
