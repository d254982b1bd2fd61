// Reading runs and slot dispositions: one run, the running ones, history, what health is judged
// from, and the monitor's scans. Table-group functions: they run in their caller's transaction
// (a snapshot when the caller opened one) and never open one.
import type { Conn } from "../connection.js";
import type { HistoryRow, RunFacts, RunRow, TimelineChanges, TimelineRow } from "../rows.js";
import { factsOf } from "../summary.js";
import * as S from "../queries/history.js";

export function runRow(c: Conn, id: number): RunRow | null {
  return (c.q(S.RUN_ROW).get(id) as RunRow | undefined) ?? null;
}

export function runningRuns(c: Conn, job?: string): RunRow[] {
  return job === undefined
    ? // INDEXED BY: for ORDER BY id the planner prefers a scan of every run (30 ms at 100,000).
      (c
        .q("SELECT * FROM runs INDEXED BY runs_running WHERE status = 'running' ORDER BY id")
        .all() as RunRow[])
    : (c.q(S.RUNNING_OF_JOB).all(job) as RunRow[]);
}

/** Newest first. */
export function history(c: Conn, job: string | null, limit: number): RunRow[] {
  return job === null
    ? (c.q(S.HISTORY_ALL).all(limit) as RunRow[])
    : (c.q(S.HISTORY_OF_JOB).all(job, limit) as RunRow[]);
}

/** The latest run that had a process (not a skipped/missed disposition), as a history entry. */
export function lastRun(c: Conn, job: string): HistoryRow | null {
  return (c.q(S.LAST_RUN).get(job) as HistoryRow | undefined) ?? null;
}

/** One run's history-entry columns (null if there is no such run). */
export function historyRow(c: Conn, id: number): HistoryRow | null {
  return (c.q(S.HISTORY_ROW).get(id) as HistoryRow | undefined) ?? null;
}

/**
 * Finished runs with a process, newest first: what health is derived from. Only the columns
 * health reads: `status` reads these for every job, and whole rows cost ~4x as much.
 */
export function recentFinished(c: Conn, job: string, limit: number): RunFacts[] {
  // Raw rows, made into objects here: better-sqlite3 builds each row object key by key, which
  // was a third of the time of this query over 1,000 jobs.
  const rows = c.q(S.RECENT_FINISHED, true).all(job, limit) as unknown[][];
  return rows.map(factsOf);
}

/** A job's rows (runs and dispositions, any status) with an id above `afterId`, oldest first. */
export function runsAfter(c: Conn, job: string, afterId: number, limit: number): RunRow[] {
  return c.q(S.RUNS_AFTER).all(job, afterId, limit) as RunRow[];
}

/**
 * A job's rows still running or finished at or after `since`, oldest first: two index searches,
 * as `timelines` reads them. Written as one `status = 'running' OR finished_at >= ?`, SQLite
 * walked all the job's rows over runs_by_job: 75-120 ms for 1,000 jobs of 100 runs each (the
 * bench's store, `since` a minute ago), against 9-12 ms. The monitor asks it of every job once
 * after a start, on the daemon's loop.
 */
export function runsRunningOrFinishedSince(c: Conn, job: string, since: number): RunRow[] {
  return c
    .q(
      `SELECT * FROM runs INDEXED BY runs_by_job_finish WHERE job = ? AND finished_at >= ?
       UNION ALL
       SELECT * FROM runs INDEXED BY runs_running WHERE job = ? AND status = 'running'
       ORDER BY id`,
    )
    .all(job, since, job) as RunRow[];
}

/**
 * Each job's rows running or finished at or after `since`, oldest first, as TimelineRows, in one
 * query: the finished ones over runs_by_job_finish, the running ones over runs_running. Raw rows
 * made into objects here, as recentFinished does: the page reads thousands of them.
 */
export function timelines(
  c: Conn,
  jobs: readonly string[],
  since: number,
): Map<string, TimelineRow[]> {
  const out = new Map<string, TimelineRow[]>(jobs.map((j) => [j, []]));
  if (jobs.length === 0) return out;
  const list = JSON.stringify(jobs);
  const rows = c
    .q(
      `SELECT job, ${S.TIMELINE_COLUMNS} FROM runs INDEXED BY runs_by_job_finish
       WHERE job IN (SELECT value FROM json_each(?)) AND finished_at >= ?
       UNION ALL
       SELECT job, ${S.TIMELINE_COLUMNS} FROM runs INDEXED BY runs_running
       WHERE job IN (SELECT value FROM json_each(?)) AND status = 'running'
       ORDER BY id`,
      true,
    )
    .all(list, since, list) as unknown[][];
  for (const r of rows) out.get(r[0] as string)?.push(timelineRow(r));
  return out;
}

/** A raw row of `job, TIMELINE_COLUMNS` (queries/history.ts) as a TimelineRow. */
function timelineRow(r: unknown[]): TimelineRow {
  return {
    id: r[1] as number,
    slot: r[2] as number | null,
    trigger: r[3] as TimelineRow["trigger"],
    status: r[4] as TimelineRow["status"],
    reason: r[5] as string | null,
    exit_code: r[6] as number | null,
    signal: r[7] as string | null,
    started_at: r[8] as number,
    finished_at: r[9] as number | null,
    duration_ms: r[10] as number | null,
    node: r[11] as string | null,
  };
}

/**
 * What the timelines of `jobs` gained and lost since a read that saw the runs up to `afterId`,
 * in one snapshot (Store.timelineChanges). A finished row's timeline columns never change, so
 * besides the rows inserted since (over the primary key) only the rows that were running then
 * (`ids`) are read again; a prune's deletions show in each job's count of rows finished at or
 * after `since`, which comes from runs_by_job_finish alone (no table row is read).
 */
export function timelineChanges(
  c: Conn,
  jobs: readonly string[],
  since: number,
  afterId: number,
  ids: readonly number[],
): TimelineChanges {
  const list = JSON.stringify(jobs);
  const rows = c
    .q(
      `SELECT job, ${S.TIMELINE_COLUMNS} FROM runs
       WHERE id > ? AND job IN (SELECT value FROM json_each(?))
       UNION ALL
       SELECT job, ${S.TIMELINE_COLUMNS} FROM runs WHERE id IN (SELECT value FROM json_each(?))
       ORDER BY id`,
      true,
    )
    .all(afterId, list, JSON.stringify(ids)) as unknown[][];
  const changed = new Map<string, TimelineRow[]>();
  for (const r of rows) {
    const job = r[0] as string;
    const at = changed.get(job);
    if (at) at.push(timelineRow(r));
    else changed.set(job, [timelineRow(r)]);
  }
  const counts = c
    .q(
      `SELECT job, COUNT(*) FROM runs INDEXED BY runs_by_job_finish
       WHERE job IN (SELECT value FROM json_each(?)) AND finished_at >= ? GROUP BY job`,
      true,
    )
    .all(list, since) as [string, number][];
  const top = c.q("SELECT COALESCE(MAX(id), 0) FROM runs", true).get() as [number];
  return { rows: changed, finished: new Map(counts), maxId: top[0] };
}

/** The highest row id of a job (0 if none). */
export function maxRunId(c: Conn, job: string): number {
  return (c.q(S.MAX_RUN_ID).get(job) as { n: number }).n;
}

/**
 * Jobs with rows newer than the given run and event ids, and the newest ids: how the daemon's
 * monitor learns what changed since its last beat without reading every job.
 */
export function jobsChangedSince(
  c: Conn,
  runId: number,
  eventId: number,
): { jobs: Set<string>; runId: number; eventId: number } {
  const runs = c.q("SELECT job, MAX(id) AS m FROM runs WHERE id > ? GROUP BY job").all(runId) as {
    job: string;
    m: number;
  }[];
  const events = c
    .q("SELECT job, MAX(id) AS m FROM events WHERE id > ? GROUP BY job")
    .all(eventId) as { job: string | null; m: number }[];
  const jobs = new Set<string>();
  for (const r of runs) {
    jobs.add(r.job);
    runId = Math.max(runId, r.m);
  }
  for (const e of events) {
    if (e.job !== null) jobs.add(e.job);
    eventId = Math.max(eventId, e.m);
  }
  return { jobs, runId, eventId };
}

/** The newest run and event ids (0 when there are none). */
export function maxIds(c: Conn): { runId: number; eventId: number } {
  return c
    .q(
      `SELECT (SELECT COALESCE(MAX(id), 0) FROM runs) AS runId,
              (SELECT COALESCE(MAX(id), 0) FROM events) AS eventId`,
    )
    .get() as { runId: number; eventId: number };
}
