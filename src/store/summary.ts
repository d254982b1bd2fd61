// A job's status summary (migration 006): the columns triggers keep in the job's own row, made
// into what `status` reads, the same for both engines. Pure: no SQL here (the columns' meaning
// is in migrations/sqlite/006_job_summary.sql).
import type { AttemptRow, HistoryRow, JobRow, RunFacts, RunRow } from "./rows.js";
import type {
  JobReadings,
  RecentDigest,
  RowVerdicts,
  StatusJob,
  StatusJobRows,
  SummaryParses,
  SummaryRow,
} from "./status-rows.js";
import type { RunStatus } from "../core/types.js";

/** How many finished runs recent_runs keeps: a reader asking for more reads the runs table. */
export const SUMMARY_RECENT = 20;

/** A run's facts from an array in RunFacts' column order (a raw row, or recent_runs' JSON). */
export function factsOf(r: readonly unknown[]): RunFacts {
  return {
    id: r[0] as number,
    status: r[1] as RunStatus,
    reason: r[2] as string | null,
    started_at: r[3] as number,
    finished_at: r[4] as number | null,
    duration_ms: r[5] as number | null,
    progress_at: r[6] as number | null,
  };
}

/** recent_runs' JSON arrays as RunFacts, newest first, at most `limit`. */
export function summaryFacts(json: string, limit: number): RunFacts[] {
  const rows = JSON.parse(json) as unknown[][];
  return (rows.length > limit ? rows.slice(0, limit) : rows).map(factsOf);
}

/**
 * A job's recent_runs and last_finished as RunFacts and a HistoryRow, from `parses` if unchanged.
 * `limit` 0 leaves recent_runs unparsed: `status` judges from the row's verdicts instead.
 */
export function parseSummary(
  job: string,
  recentJson: string,
  lastJson: string | null,
  limit: number,
  parses?: SummaryParses,
): { recent: RunFacts[]; lastFinished: HistoryRow | null } {
  const kept = parses?.jobs.get(job);
  if (kept && kept.recentJson === recentJson && kept.lastJson === lastJson && kept.limit === limit)
    return kept;
  const recent = limit > 0 ? summaryFacts(recentJson, limit) : [];
  const lastFinished = lastJson ? (JSON.parse(lastJson) as HistoryRow) : null;
  parses?.jobs.set(job, { recentJson, limit, recent, lastJson, lastFinished });
  return { recent, lastFinished };
}

/** Migration 008's columns, in this order: recent_ok_p95_ms, failing_streak, failing_run_id,
 * failing_status, failing_reason (a raw row's columns from `at` on). */
export function verdictsOf(r: readonly unknown[], at: number): RowVerdicts {
  const streak = r[at + 1] as number;
  return {
    okP95: r[at] as number | null,
    failing:
      streak > 0
        ? {
            run: {
              id: r[at + 2] as number,
              status: r[at + 3] as RunFacts["status"],
              reason: r[at + 4] as string | null,
            },
            streak,
          }
        : null,
  };
}

/** A raw row of queries/status.ts summarySql (its columns in order) as a SummaryRow. */
export function summaryRowOf(r: readonly unknown[]): SummaryRow {
  const row: JobRow = {
    name: r[0] as string,
    paused: r[1] as number,
    fence: r[2] as number,
    scanned_to: r[3] as number | null,
    reboot_boot_id: r[4] as string | null,
    last_success_at: r[5] as number | null,
    last_progress_at: r[6] as number | null,
    first_seen_at: r[7] as number | null,
    last_work_at: r[16] as number | null,
    idle_runs: r[17] as number,
  };
  return [row, r[8] as string, r[9] as string | null, r[10] as number, verdictsOf(r, 11)];
}

/** The digest health judges from: the row's verdicts and its last finished run (the newest). */
export function summaryDigest(v: RowVerdicts, lastFinished: HistoryRow | null): RecentDigest {
  return { newest: lastFinished, okP95: v.okP95, failing: v.failing };
}

/** A job without a row: no run. */
export const NO_RUNS: RecentDigest = { newest: null, okP95: null, failing: null };

/**
 * One job's readings judged from its summary row (undefined: none) and no run read, as `status`
 * judges (jobReadings), but the attempts: the engine reads those attempted
 * at or after `since` (the start of the row's last finished run).
 */
export function summaryReadings(
  job: string,
  s: SummaryRow | undefined,
  running: RunRow[],
): { readings: Omit<JobReadings, "attempts">; since: number } {
  const lastFinished = s ? parseSummary(job, s[1], s[2], 0).lastFinished : null;
  const digest = s ? summaryDigest(s[4], lastFinished) : NO_RUNS;
  return {
    readings: { row: s?.[0] ?? null, running, recent: [], digest },
    since: lastFinished?.started_at ?? 0,
  };
}

/** Running rows by job, each oldest first as read. */
export function byJob(rows: readonly RunRow[]): Map<string, RunRow[]> {
  const out = new Map<string, RunRow[]>();
  for (const r of rows) {
    const list = out.get(r.job);
    if (list) list.push(r);
    else out.set(r.job, [r]);
  }
  return out;
}

/**
 * What `status` shows of one job from its summary row (undefined: none), its running rows and
 * the keys attempted more than the smallest repeat limit (filtered here by the job's own), all
 * but the marker count of a job without a row, which the engine counts.
 */
export function statusJobRows(
  job: StatusJob,
  s: SummaryRow | undefined,
  running: RunRow[],
  attempts: readonly AttemptRow[],
  recentLimit: number,
  parses: SummaryParses | undefined,
): Omit<StatusJobRows, "markers"> {
  const { recent, lastFinished } = s
    ? parseSummary(job.name, s[1], s[2], recentLimit, parses)
    : { recent: [], lastFinished: null };
  const since = lastFinished?.started_at ?? 0;
  return {
    row: s?.[0] ?? null,
    running,
    recent,
    digest: s ? summaryDigest(s[4], lastFinished) : NO_RUNS,
    attempts: attempts.filter((a) => a.count > job.repeatLimit && a.last_at >= since).slice(0, 10),
    last: latestRun(lastFinished, running),
    lastFinished,
  };
}

/**
 * The latest run with a process: the newest of the job's running rows and its last finished run
 * (what `SELECT ... WHERE status NOT IN ('skipped', 'missed') ORDER BY id DESC LIMIT 1` gave),
 * in the history columns only, as that query gave them.
 */
export function latestRun(lastFinished: HistoryRow | null, running: RunRow[]): HistoryRow | null {
  let top: RunRow | undefined;
  for (const r of running) if (top === undefined || r.id > top.id) top = r;
  if (top === undefined || (lastFinished !== null && lastFinished.id > top.id)) return lastFinished;
  return {
    id: top.id,
    job: top.job,
    slot: top.slot,
    trigger: top.trigger,
    status: top.status,
    reason: top.reason,
    exit_code: top.exit_code,
    signal: top.signal,
    attempt: top.attempt,
    started_at: top.started_at,
    finished_at: top.finished_at,
    duration_ms: top.duration_ms,
    markers_new: top.markers_new,
    markers_skipped: top.markers_skipped,
    pid: top.pid,
    log_path: top.log_path,
    node: top.node,
    cpu_s: null, // measured at its end
    memory_peak_bytes: null,
  };
}
