// What health and `status` read on PostgreSQL: the same as ../sqlite/status.ts. Table-group
// functions: they run in their caller's transaction (PgStore reads them in one REPEATABLE READ
// snapshot) and never open one.
import type { Q } from "../pg-connection.js";
import type { AttemptRow, HeldRow, JobRow, RunRow } from "../rows.js";
import type {
  JobReadings,
  StatusJob,
  StatusJobRows,
  StatusRows,
  SummaryParses,
} from "../status-rows.js";
import { daemonRow, nodes } from "./daemon.js";
import { historyRow, lastRun, recentFinished, runningRuns } from "./history.js";
import { jobRow } from "./jobs.js";
import { markerCount, repeatingKeysAll, repeatingKeysSince } from "./markers.js";
import {
  latestRun,
  NO_RUNS,
  parseSummary,
  SUMMARY_RECENT,
  summaryDigest,
  verdictsOf,
} from "../summary.js";

/** One job's readings, by per-job queries; `recentLimit` 0 as ../sqlite/status.ts's. */
export async function jobReadings(
  q: Q,
  job: string,
  recentLimit: number,
  repeatLimit: number,
): Promise<JobReadings> {
  if (recentLimit === 0) {
    const s = await q.get<SummaryRow>(`${summarySql(false)} WHERE name = $1`, [job]);
    const lastFinished = s
      ? parseSummary(job, s.recent_runs, s.last_finished, 0).lastFinished
      : null;
    return {
      row: s ? jobOf(s) : null,
      running: await runningRuns(q, job),
      recent: [],
      digest: s ? summaryDigest(verdicts(s), lastFinished) : NO_RUNS,
      attempts: await repeatingKeysSince(q, job, repeatLimit, lastFinished?.started_at ?? 0),
    };
  }
  const recent = await recentFinished(q, job, recentLimit);
  const since = recent[0]?.started_at ?? 0;
  return {
    row: await jobRow(q, job),
    running: await runningRuns(q, job),
    recent,
    attempts: await repeatingKeysSince(q, job, repeatLimit, since),
  };
}

/** A jobs row with its summary columns (migrations 006 and 008), as the status read takes it. */
interface SummaryRow extends JobRow {
  recent_runs: string;
  last_finished: string | null;
  marker_count: number;
  recent_ok_p95_ms: number | null;
  failing_streak: number;
  failing_run_id: number | null;
  failing_status: string | null;
  failing_reason: string | null;
}

/** The jobs' rows with their summaries; recent_runs only if `recent`, else '[]'. */
const summarySql = (recent: boolean): string =>
  `SELECT name, paused, fence, scanned_to, reboot_boot_id, last_success_at, last_progress_at,
     first_seen_at, ${recent ? "recent_runs" : "'[]' AS recent_runs"}, last_finished,
     marker_count, recent_ok_p95_ms, failing_streak, failing_run_id, failing_status,
     failing_reason, last_work_at, idle_runs FROM jobs`;

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
        `${summarySql(recentLimit > 0)} WHERE $1::text IS NULL OR name = $1`,
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
    const since = lastFinished?.started_at ?? 0;
    const run = running.get(job.name) ?? [];
    out.set(job.name, {
      row: s ? jobOf(s) : null,
      running: run,
      recent,
      digest: s ? summaryDigest(verdicts(s), lastFinished) : NO_RUNS,
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
  return {
    name: s.name,
    paused: s.paused,
    fence: s.fence,
    scanned_to: s.scanned_to,
    reboot_boot_id: s.reboot_boot_id,
    last_success_at: s.last_success_at,
    last_progress_at: s.last_progress_at,
    first_seen_at: s.first_seen_at,
    last_work_at: s.last_work_at,
    idle_runs: s.idle_runs,
  };
}

/** Migration 008's columns of a summary row. */
const verdicts = (s: SummaryRow) =>
  verdictsOf(
    [s.recent_ok_p95_ms, s.failing_streak, s.failing_run_id, s.failing_status, s.failing_reason],
    0,
  );

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

/** Every hold of a running run, with its run (status: `locks` and `groups`). */
export async function holdsHeld(q: Q): Promise<HeldRow[]> {
  return q.all<HeldRow>(
    `SELECT h.kind AS hold_kind, h.name AS hold_name, r.* FROM holds h
     JOIN runs r ON r.id = h.run_id AND r.status = 'running'
     ORDER BY h.kind, h.name COLLATE "C", r.id`,
  );
}
