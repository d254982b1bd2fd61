// Reading runs and slot dispositions on PostgreSQL: the same reads as ../sqlite/history.ts.
// Table-group functions: they run in their caller's transaction (a snapshot when the caller
// opened one) and never open one.
import type { Q } from "../pg-connection.js";
import type { HistoryRow, RunFacts, RunRow, TimelineChanges, TimelineRow } from "../rows.js";

const HISTORY_COLUMNS = `id, job, slot, trigger, status, reason, exit_code, signal, attempt, started_at,
  finished_at, duration_ms, markers_new, markers_skipped, pid, log_path, node, cpu_s,
  memory_peak_bytes`;
const FACT_COLUMNS = "id, status, reason, started_at, finished_at, duration_ms, progress_at";

export async function runRow(q: Q, id: number): Promise<RunRow | null> {
  return (await q.get<RunRow>("SELECT * FROM runs WHERE id = $1", [id])) ?? null;
}

export async function runningRuns(q: Q, job?: string): Promise<RunRow[]> {
  return job === undefined
    ? q.all<RunRow>("SELECT * FROM runs WHERE status = 'running' ORDER BY id")
    : q.all<RunRow>("SELECT * FROM runs WHERE status = 'running' AND job = $1 ORDER BY id", [job]);
}

/** Newest first. */
export async function history(q: Q, job: string | null, limit: number): Promise<RunRow[]> {
  return job === null
    ? q.all<RunRow>("SELECT * FROM runs ORDER BY id DESC LIMIT $1", [limit])
    : q.all<RunRow>("SELECT * FROM runs WHERE job = $1 ORDER BY id DESC LIMIT $2", [job, limit]);
}

/** The latest run that had a process (not a skipped/missed disposition), as a history entry. */
export async function lastRun(q: Q, job: string): Promise<HistoryRow | null> {
  const r = await q.get<HistoryRow>(
    `SELECT ${HISTORY_COLUMNS} FROM runs WHERE job = $1 AND status NOT IN ('skipped', 'missed')
     ORDER BY id DESC LIMIT 1`,
    [job],
  );
  return r ?? null;
}

/** One run's history-entry columns (null if there is no such run). */
export async function historyRow(q: Q, id: number): Promise<HistoryRow | null> {
  return (
    (await q.get<HistoryRow>(`SELECT ${HISTORY_COLUMNS} FROM runs WHERE id = $1`, [id])) ?? null
  );
}

/** Finished runs with a process, newest first: what health is derived from. */
export async function recentFinished(q: Q, job: string, limit: number): Promise<RunFacts[]> {
  return q.all<RunFacts>(
    `SELECT ${FACT_COLUMNS} FROM runs
     WHERE job = $1 AND status NOT IN ('running', 'skipped', 'missed')
     ORDER BY id DESC LIMIT $2`,
    [job, limit],
  );
}

/** A job's rows (runs and dispositions, any status) with an id above `afterId`, oldest first. */
export async function runsAfter(q: Q, job: string, afterId: number, limit: number) {
  return q.all<RunRow>("SELECT * FROM runs WHERE job = $1 AND id > $2 ORDER BY id LIMIT $3", [
    job,
    afterId,
    limit,
  ]);
}

/** A job's rows still running or finished at or after `since`, oldest first. */
export async function runsRunningOrFinishedSince(q: Q, job: string, since: number) {
  return q.all<RunRow>(
    "SELECT * FROM runs WHERE job = $1 AND (status = 'running' OR finished_at >= $2) ORDER BY id",
    [job, since],
  );
}

const TIMELINE_COLUMNS =
  "id, slot, trigger, status, reason, exit_code, signal, started_at, finished_at, duration_ms, node";

/** Each job's rows running or finished at or after `since`, oldest first: one query for all. */
export async function timelines(
  q: Q,
  jobs: readonly string[],
  since: number,
): Promise<Map<string, TimelineRow[]>> {
  const rows = await q.all<TimelineRow & { job: string }>(
    `SELECT job, ${TIMELINE_COLUMNS} FROM runs
     WHERE job = ANY($1) AND (status = 'running' OR finished_at >= $2) ORDER BY id`,
    [jobs, since],
  );
  const out = new Map<string, TimelineRow[]>(jobs.map((j) => [j, []]));
  for (const { job, ...row } of rows) out.get(job)?.push(row);
  return out;
}

/**
 * What the timelines of `jobs` gained and lost since a read that saw the runs up to `afterId`
 * (see SQLite's): the rows inserted since, the rows of `ids` again, each job's count of rows
 * finished at or after `since`, and the newest run id. One statement: one snapshot. (Run ids
 * are taken in commit order, `Q.order`, so no row committed later has an id below `afterId`.)
 */
export async function timelineChanges(
  q: Q,
  jobs: readonly string[],
  since: number,
  afterId: number,
  ids: readonly number[],
): Promise<TimelineChanges> {
  const rows = await q.all<TimelineRow & { job: string; kind: string; n: number }>(
    `SELECT 'row' AS kind, 0::bigint AS n, job, ${TIMELINE_COLUMNS} FROM runs
     WHERE (id > $1 AND job = ANY($2)) OR id = ANY($3)
     UNION ALL
     SELECT 'count', COUNT(*), job, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL FROM runs WHERE job = ANY($2) AND finished_at >= $4 GROUP BY job
     UNION ALL
     SELECT 'max', COALESCE(MAX(id), 0), '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL FROM runs
     ORDER BY id NULLS LAST`,
    [afterId, jobs, ids, since],
  );
  const out: TimelineChanges = { rows: new Map(), finished: new Map(), maxId: 0 };
  for (const { kind, n, job, ...row } of rows) {
    if (kind === "count") out.finished.set(job, n);
    else if (kind === "max") out.maxId = n;
    else {
      const at = out.rows.get(job);
      if (at) at.push(row);
      else out.rows.set(job, [row]);
    }
  }
  return out;
}

/** The highest row id of a job (0 if none). */
export async function maxRunId(q: Q, job: string): Promise<number> {
  const r = await q.get<{ n: number }>(
    "SELECT COALESCE(MAX(id), 0) AS n FROM runs WHERE job = $1",
    [job],
  );
  return r?.n ?? 0;
}

/** Jobs with rows newer than the given run and event ids, and the newest ids (see SQLite's). */
export async function jobsChangedSince(
  q: Q,
  runId: number,
  eventId: number,
): Promise<{ jobs: Set<string>; runId: number; eventId: number }> {
  const runs = await q.all<{ job: string; m: number }>(
    "SELECT job, MAX(id) AS m FROM runs WHERE id > $1 GROUP BY job",
    [runId],
  );
  const events = await q.all<{ job: string | null; m: number }>(
    "SELECT job, MAX(id) AS m FROM events WHERE id > $1 GROUP BY job",
    [eventId],
  );
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
export async function maxIds(q: Q): Promise<{ runId: number; eventId: number }> {
  const r = await q.get<{ runId: number; eventId: number }>(
    `SELECT (SELECT COALESCE(MAX(id), 0) FROM runs) AS "runId",
            (SELECT COALESCE(MAX(id), 0) FROM events) AS "eventId"`,
  );
  return r ?? { runId: 0, eventId: 0 };
}

/** Changes when another connection commits (the status page's poll). */
export async function dataVersion(q: Q): Promise<number> {
  const r = await q.get<{ n: number }>("SELECT n FROM data_version WHERE id = 1");
  return r?.n ?? 0;
}
