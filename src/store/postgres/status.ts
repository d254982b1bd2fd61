// What health and `status` read on PostgreSQL: the same as ../sqlite/status.ts. Table-group
// functions: they run in their caller's transaction (PgStore reads them in one REPEATABLE READ
// snapshot) and never open one.
import type { Q } from "../pg-connection.js";
import type {
  AttemptRow,
  JobReadings,
  JobRow,
  RunRow,
  StatusJob,
  StatusJobRows,
  StatusRows,
  SummaryParses,
} from "../rows.js";
import { daemonRow, nodes } from "./daemon.js";
import { historyRow, lastRun, recentFinished, runningRuns } from "./history.js";
import { jobRow } from "./jobs.js";
import { markerCount, repeatingKeysAll, repeatingKeysSince } from "./markers.js";
import { latestRun, parseSummary, SUMMARY_RECENT } from "../summary.js";

/** One job's readings, by per-job queries. */
export async function jobReadings(
  q: Q,
  job: string,
  recentLimit: number,
  repeatLimit: number,
): Promise<JobReadings> {
  const recent = await recentFinished(q, job, recentLimit);
  const since = recent[0]?.started_at ?? 0;
  return {
    row: await jobRow(q, job),
    running: await runningRuns(q, job),
    recent,
    attempts: await repeatingKeysSince(q, job, repeatLimit, since),
  };
}

/** A jobs row with its summary columns (migration 006), as the status read takes it. */
interface SummaryRow extends JobRow {
  recent_runs: string;
  last_finished: string | null;
  marker_count: number;
}

/**
 * Everything `status` shows, as ../sqlite/status.ts reads it: one row per job (its summary, kept
 * by triggers), the running runs and the attempts, one query each for every job at once.
 */
export async function statusRows(
  q: Q,
  jobs: readonly StatusJob[],
  recentLimit: number,
  node: string,
  parses?: SummaryParses,
): Promise<StatusRows> {
  if (recentLimit > SUMMARY_RECENT) return statusRowsFromRuns(q, jobs, recentLimit, node);
  const out = new Map<string, StatusJobRows>();
  const daemon = await daemonRow(q, node);
  const one = jobs.length === 1 ? (jobs[0] as StatusJob).name : null;
  const running = new Map<string, RunRow[]>();
  for (const r of await runningRuns(q, one ?? undefined)) {
    const list = running.get(r.job);
    if (list) list.push(r);
    else running.set(r.job, [r]);
  }
  const rows = new Map(
    (
      await q.all<SummaryRow>(
        `SELECT name, paused, fence, scanned_to, reboot_boot_id, last_success_at, last_progress_at,
           first_seen_at, recent_runs, last_finished, marker_count FROM jobs
         WHERE $1::text IS NULL OR name = $1`,
        [one],
      )
    ).map((r) => [r.name, r]),
  );
  const minLimit = Math.min(...jobs.map((j) => j.repeatLimit));
  const attempts: Map<string, AttemptRow[]> =
    jobs.length > 0 ? await repeatingKeysAll(q, minLimit) : new Map();
  for (const job of jobs) {
    const s = rows.get(job.name);
    const { recent, lastFinished } = s
      ? parseSummary(job.name, s.recent_runs, s.last_finished, recentLimit, parses)
      : { recent: [], lastFinished: null };
    const since = recent[0]?.started_at ?? 0;
    const run = running.get(job.name) ?? [];
    out.set(job.name, {
      row: s ? jobOf(s) : null,
      running: run,
      recent,
      attempts: (attempts.get(job.name) ?? [])
        .filter((a) => a.count > job.repeatLimit && a.last_at >= since)
        .slice(0, 10),
      last: latestRun(lastFinished, run),
      lastFinished,
      // Markers of a job without a row (written before any run of it) are counted here.
      markers: s ? s.marker_count : await markerCount(q, job.name),
    });
  }
  return { daemon, nodes: await nodes(q), jobs: out };
}

/** The JobRow part of a summary row. */
function jobOf(s: SummaryRow): JobRow {
  const { recent_runs: _r, last_finished: _l, marker_count: _m, ...row } = s;
  return row;
}

/** statusRows from the runs table, one job at a time. */
async function statusRowsFromRuns(
  q: Q,
  jobs: readonly StatusJob[],
  recentLimit: number,
  node: string,
): Promise<StatusRows> {
  const out = new Map<string, StatusJobRows>();
  for (const job of jobs) {
    const r = await jobReadings(q, job.name, recentLimit, job.repeatLimit);
    const last = await lastRun(q, job.name);
    const newest = r.recent[0];
    const lastFinished =
      newest === undefined ? null : last?.id === newest.id ? last : await historyRow(q, newest.id);
    out.set(job.name, { ...r, last, lastFinished, markers: await markerCount(q, job.name) });
  }
  return { daemon: await daemonRow(q, node), nodes: await nodes(q), jobs: out };
}
