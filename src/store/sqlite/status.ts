// What health and `status` read, gathered per job or for every job at once. Table-group
// functions: they run in their caller's transaction (SqliteStore reads them in one snapshot)
// and never open one.
import type { Conn } from "../connection.js";
import { DRAIN } from "../queries/chains.js";
import type { AttemptRow, HeldRow, JobRow, RunRow } from "../rows.js";
import type {
  JobReadings,
  StatusJob,
  StatusJobRows,
  StatusRows,
  SummaryParses,
  SummaryRow,
} from "../status-rows.js";
import { daemonRow, nodes } from "./daemon.js";
import { historyRow, lastRun, recentFinished, runningRuns } from "./history.js";
import { jobRow, jobWrites } from "./jobs.js";
import { markerCount, repeatingKeysAll, repeatingKeysSince } from "./markers.js";
import {
  latestRun,
  NO_RUNS,
  parseSummary,
  SUMMARY_RECENT,
  summaryDigest,
  verdictsOf,
} from "../summary.js";
import type { DrainRow } from "../chain-rows.js";

/**
 * One job's readings, by per-job queries. `recentLimit` 0: judged from the digest its row keeps
 * (migration 008) and no run read, as `status` judges; the monitor judges each job so.
 */
export function jobReadings(
  c: Conn,
  job: string,
  recentLimit: number,
  repeatLimit: number,
): JobReadings {
  if (recentLimit === 0) {
    const s = summaryRows(c, job, false).get(job);
    const lastFinished = s ? parseSummary(job, s[1], s[2], 0).lastFinished : null;
    return {
      row: s?.[0] ?? null,
      running: runningRuns(c, job),
      recent: [],
      digest: s ? summaryDigest(s[4], lastFinished) : NO_RUNS,
      attempts: repeatingKeysSince(c, job, repeatLimit, lastFinished?.started_at ?? 0),
    };
  }
  const recent = recentFinished(c, job, recentLimit);
  const since = recent[0]?.started_at ?? 0;
  return {
    row: jobRow(c, job),
    running: runningRuns(c, job),
    recent,
    attempts: repeatingKeysSince(c, job, repeatLimit, since),
  };
}

/** The jobs' rows with their summaries; `recent`: recent_runs, or '[]' when none are asked for. */
const summarySql = (recent: string): string => `SELECT name, paused, fence, scanned_to,
  reboot_boot_id, last_success_at, last_progress_at, first_seen_at, ${recent}, last_finished,
  marker_count, recent_ok_p95_ms, failing_streak, failing_run_id, failing_status, failing_reason,
  last_work_at, idle_runs FROM jobs`;
const SUMMARY_SQL = summarySql("recent_runs");
/** `status` reads no recent runs: 1,000 jobs' recent_runs were 1.5 MB of strings made for nothing. */
const VERDICTS_SQL = summarySql("'[]'");

/**
 * Every job's row, or one job's, with its summary (without recent_runs unless `recent`); raw
 * rows made into objects here.
 */
function summaryRows(c: Conn, one: string | null, recent = true): Map<string, SummaryRow> {
  const sql = recent ? SUMMARY_SQL : VERDICTS_SQL;
  const q = c.q(one === null ? sql : `${sql} WHERE name = ?`, true);
  const raw = (one === null ? q.all() : q.all(one)) as unknown[][];
  const out = new Map<string, SummaryRow>();
  for (const r of raw) {
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
    out.set(row.name, [
      row,
      r[8] as string,
      r[9] as string | null,
      r[10] as number,
      verdictsOf(r, 11),
    ]);
  }
  return out;
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
 * every job at once. Health judges from the rows' verdicts (migration 008); `recentLimit` is how
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
  if (recentLimit > SUMMARY_RECENT) return statusRowsFromRuns(c, jobs, recentLimit);
  const out = new Map<string, StatusJobRows>();
  const daemon = daemonRow(c);
  const one = jobs.length === 1 ? (jobs[0] as StatusJob).name : null;
  const running = new Map<string, RunRow[]>();
  for (const r of runningRuns(c, one ?? undefined)) {
    const list = running.get(r.job);
    if (list) list.push(r);
    else running.set(r.job, [r]);
  }
  const rows = jobTable(c, one, recentLimit, parses);
  const minLimit = Math.min(...jobs.map((j) => j.repeatLimit));
  const attempts: Map<string, AttemptRow[]> =
    jobs.length > 0 ? repeatingKeysAll(c, minLimit) : new Map();
  for (const job of jobs) {
    const s = rows.get(job.name);
    const { recent, lastFinished } = s
      ? parseSummary(job.name, s[1], s[2], recentLimit, parses)
      : { recent: [], lastFinished: null };
    const since = lastFinished?.started_at ?? 0;
    const run = running.get(job.name) ?? [];
    out.set(job.name, {
      row: s?.[0] ?? null,
      running: run,
      recent,
      digest: s ? summaryDigest(s[4], lastFinished) : NO_RUNS,
      attempts: (attempts.get(job.name) ?? [])
        .filter((a) => a.count > job.repeatLimit && a.last_at >= since)
        .slice(0, 10),
      last: latestRun(lastFinished, run),
      lastFinished,
      // Markers of a job without a row (written before any run of it) are counted here.
      markers: s ? s[3] : markerCount(c, job.name),
    });
  }
  return { daemon, nodes: nodes(c, Date.now()), jobs: out };
}

/** statusRows from the runs table, one job at a time. */
function statusRowsFromRuns(c: Conn, jobs: readonly StatusJob[], recentLimit: number): StatusRows {
  const out = new Map<string, StatusJobRows>();
  for (const job of jobs) {
    const r = jobReadings(c, job.name, recentLimit, job.repeatLimit);
    const last = lastRun(c, job.name);
    const newest = r.recent[0];
    const lastFinished =
      newest === undefined ? null : last?.id === newest.id ? last : historyRow(c, newest.id);
    out.set(job.name, { ...r, last, lastFinished, markers: markerCount(c, job.name) });
  }
  return { daemon: daemonRow(c), nodes: nodes(c, Date.now()), jobs: out };
}

/** Every hold of a running run, with its run (status: `locks` and `groups`). */
export function holdsHeld(c: Conn): HeldRow[] {
  return c
    .q(
      `SELECT h.kind AS hold_kind, h.name AS hold_name, r.* FROM holds h
       JOIN runs r ON r.id = h.run_id AND r.status = 'running' ORDER BY h.kind, h.name, r.id`,
    )
    .all() as HeldRow[];
}

/** `cronvisor pause --all` as set (migration 014); status judges it against now. */
export function drain(c: Conn): DrainRow | null {
  return (c.q(DRAIN).get() as DrainRow | undefined) ?? null;
}
