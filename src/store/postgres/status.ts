// What health and `status` read on PostgreSQL: the same as ../sqlite/status.ts (the rows made
// into what status shows by ../summary.ts). Table-group functions: they run in their caller's
// transaction (PgStore reads them in one REPEATABLE READ snapshot) and never open one.
import type { Q } from "../pg-connection.js";
import { holdsHeld as holdsHeldSql } from "../queries/holds.js";
import { POSTGRES } from "../queries/sql.js";
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
import { markerCount, repeatingKeysAll, repeatingKeysSince } from "./markers.js";

const HOLDS_HELD = holdsHeldSql(POSTGRES);

/** One job's readings, by per-job queries, as ../sqlite/status.ts's. */
export async function jobReadings(q: Q, job: string, repeatLimit: number): Promise<JobReadings> {
  const s = (await summaryRows(q, job, false)).get(job);
  const { readings, since } = summaryReadings(job, s, await runningRuns(q, job));
  return { ...readings, attempts: await repeatingKeysSince(q, job, repeatLimit, since) };
}

/**
 * Every job's row (`one` null), or one job's, with its summary (without recent_runs unless
 * `recent`). The row's values in column order (node-postgres keeps it) make its SummaryRow.
 */
async function summaryRows(
  q: Q,
  one: string | null,
  recent: boolean,
): Promise<Map<string, SummaryRow>> {
  const sql = `${summarySql(recent)} WHERE $1::text IS NULL OR name = $1`;
  const rows = await q.all<Record<string, unknown>>(sql, [one]);
  return new Map(rows.map((r) => [r.name as string, summaryRowOf(Object.values(r))]));
}

/**
 * Everything `status` shows, as ../sqlite/status.ts reads it: one row per job (its summary, kept
 * by triggers), the running runs and the attempts, one query each for every job at once;
 * `recentLimit` as there (0: no recent runs, none parsed).
 */
export async function statusRows(
  q: Q,
  jobs: readonly StatusJob[],
  recentLimit: number,
  node: string,
  parses?: SummaryParses,
): Promise<StatusRows> {
  if (recentLimit > SUMMARY_RECENT) throw new RangeError(`statusRows: ${recentLimit} recent runs`);
  const out = new Map<string, StatusJobRows>();
  const daemon = await daemonRow(q, node);
  const one = jobs.length === 1 ? (jobs[0] as StatusJob).name : null;
  const running = byJob(await runningRuns(q, one ?? undefined));
  const rows = await summaryRows(q, one, recentLimit > 0);
  const minLimit = Math.min(...jobs.map((j) => j.repeatLimit));
  const attempts = jobs.length > 0 ? await repeatingKeysAll(q, minLimit) : new Map();
  for (const job of jobs) {
    const s = rows.get(job.name);
    const run = running.get(job.name) ?? [];
    const tried = attempts.get(job.name) ?? [];
    const r = statusJobRows(job, s, run, tried, recentLimit, parses);
    // Markers of a job without a row (written before any run of it) are counted here.
    out.set(job.name, { ...r, markers: s ? s[3] : await markerCount(q, job.name) });
  }
  return { daemon, nodes: await nodes(q), jobs: out };
}

/** Every hold of a running run, with its run (status: `locks` and `groups`). */
export async function holdsHeld(q: Q): Promise<HeldRow[]> {
  return q.all<HeldRow>(HOLDS_HELD);
}
