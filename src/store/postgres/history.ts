// Reading runs and slot dispositions on PostgreSQL: the same reads as ../sqlite/history.ts.
// Table-group functions: they run in their caller's transaction (a snapshot when the caller
// opened one) and never open one.
import type { Q } from "../pg-connection.js";
import {
  advance,
  factsOf,
  maxIdsWithFacts,
  SNAPSHOT_COLUMNS,
  type IdHorizon,
  type SnapshotRow,
} from "./horizon.js";
import type { HistoryRow, RunFacts, RunRow, TimelineChanges, TimelineRow } from "../rows.js";
import * as S from "../queries/history.js";

export async function runRow(q: Q, id: number): Promise<RunRow | null> {
  return (await q.get<RunRow>(S.RUN_ROW, [id])) ?? null;
}

export async function runningRuns(q: Q, job?: string): Promise<RunRow[]> {
  return job === undefined
    ? q.all<RunRow>("SELECT * FROM runs WHERE status = 'running' ORDER BY id")
    : q.all<RunRow>(S.RUNNING_OF_JOB, [job]);
}

/** Newest first. */
export async function history(q: Q, job: string | null, limit: number): Promise<RunRow[]> {
  return job === null
    ? q.all<RunRow>(S.HISTORY_ALL, [limit])
    : q.all<RunRow>(S.HISTORY_OF_JOB, [job, limit]);
}

/** The latest run that had a process (not a skipped/missed disposition), as a history entry. */
export async function lastRun(q: Q, job: string): Promise<HistoryRow | null> {
  return (await q.get<HistoryRow>(S.LAST_RUN, [job])) ?? null;
}

/** One run's history-entry columns (null if there is no such run). */
export async function historyRow(q: Q, id: number): Promise<HistoryRow | null> {
  return (await q.get<HistoryRow>(S.HISTORY_ROW, [id])) ?? null;
}

/** Finished runs with a process, newest first: what health is derived from. */
export async function recentFinished(q: Q, job: string, limit: number): Promise<RunFacts[]> {
  return q.all<RunFacts>(S.RECENT_FINISHED, [job, limit]);
}

/** A job's rows (runs and dispositions, any status) with an id above `afterId`, oldest first. */
export async function runsAfter(q: Q, job: string, afterId: number, limit: number) {
  return q.all<RunRow>(S.RUNS_AFTER, [job, afterId, limit]);
}

/** A job's rows still running or finished at or after `since`, oldest first. */
export async function runsRunningOrFinishedSince(q: Q, job: string, since: number) {
  return q.all<RunRow>(
    "SELECT * FROM runs WHERE job = $1 AND (status = 'running' OR finished_at >= $2) ORDER BY id",
    [job, since],
  );
}

/** Each job's rows running or finished at or after `since`, oldest first: one query for all. */
export async function timelines(
  q: Q,
  jobs: readonly string[],
  since: number,
): Promise<Map<string, TimelineRow[]>> {
  const rows = await q.all<TimelineRow & { job: string }>(
    `SELECT job, ${S.TIMELINE_COLUMNS} FROM runs
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
 * finished at or after `since`, and the id up to which the next read may start (the newest id
 * seen, held back to the final ones: horizon.ts). One statement: one snapshot.
 */
export async function timelineChanges(
  q: Q,
  horizon: IdHorizon,
  jobs: readonly string[],
  since: number,
  afterId: number,
  ids: readonly number[],
): Promise<TimelineChanges> {
  const earlier = horizon.before();
  const rows = await q.all<
    TimelineRow & { job: string; kind: string; n: number; f: SnapshotRow | null }
  >(
    `SELECT 'row' AS kind, 0::bigint AS n, job, ${S.TIMELINE_COLUMNS}, NULL::json AS f FROM runs
     WHERE (id > $1 AND job = ANY($2)) OR id = ANY($3)
     UNION ALL
     SELECT 'count', COUNT(*), job, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL FROM runs WHERE job = ANY($2) AND finished_at >= $4 GROUP BY job
     UNION ALL
     SELECT 'max', COALESCE(MAX(id), 0), '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, (SELECT row_to_json(s) FROM (SELECT ${SNAPSHOT_COLUMNS}) s) FROM runs
     ORDER BY id NULLS LAST`,
    [afterId, jobs, ids, since],
  );
  const out: TimelineChanges = { rows: new Map(), finished: new Map(), maxId: 0 };
  for (const { kind, n, job, f, ...row } of rows) {
    if (kind === "count") out.finished.set(job, n);
    else if (kind === "max") {
      const final = horizon.learn(earlier, factsOf(f as SnapshotRow), { runs: n, events: 0 });
      out.maxId = advance(afterId, n, final.runs);
    } else {
      const at = out.rows.get(job);
      if (at) at.push(row);
      else out.rows.set(job, [row]);
    }
  }
  return out;
}

/** The highest row id of a job (0 if none). */
export async function maxRunId(q: Q, job: string): Promise<number> {
  const r = await q.get<{ n: number }>(S.MAX_RUN_ID, [job]);
  return r?.n ?? 0;
}

/**
 * Jobs with rows newer than the given run and event ids, and the ids the next call may start
 * from (the newest seen, held back to the final ones: horizon.ts, so a row that commits later
 * with a lower id is still found). One statement: one snapshot.
 */
export async function jobsChangedSince(
  q: Q,
  horizon: IdHorizon,
  runId: number,
  eventId: number,
): Promise<{ jobs: Set<string>; runId: number; eventId: number }> {
  const earlier = horizon.before();
  const rows = await q.all<{ k: string; job: string | null; m: number; f: SnapshotRow | null }>(
    `SELECT 'r' AS k, job, MAX(id) AS m, NULL::json AS f FROM runs WHERE id > $1 GROUP BY job
     UNION ALL SELECT 'e', job, MAX(id), NULL FROM events WHERE id > $2 GROUP BY job
     UNION ALL SELECT 'f', NULL, 0, (SELECT row_to_json(s) FROM (SELECT ${SNAPSHOT_COLUMNS}) s)`,
    [runId, eventId],
  );
  const jobs = new Set<string>();
  const seen = { runs: runId, events: eventId };
  let facts: SnapshotRow | null = null;
  for (const r of rows) {
    if (r.k === "f") facts = r.f;
    else if (r.job !== null) jobs.add(r.job);
    if (r.k === "r") seen.runs = Math.max(seen.runs, r.m);
    if (r.k === "e") seen.events = Math.max(seen.events, r.m);
  }
  const final = horizon.learn(earlier, factsOf(facts as SnapshotRow), seen);
  return {
    jobs,
    runId: advance(runId, seen.runs, final.runs),
    eventId: advance(eventId, seen.events, final.events),
  };
}

/**
 * The newest run and event ids that are final (0 when there are none): read again a few times
 * while transactions that may hold lower ids are still in progress (each lasts milliseconds).
 */
export async function maxIds(
  q: Q,
  horizon: IdHorizon,
): Promise<{ runId: number; eventId: number }> {
  let last = { runs: 0, events: 0 };
  for (let i = 0; i < 20; i++) {
    const earlier = horizon.before();
    const { seen, facts } = await maxIdsWithFacts(q);
    const final = horizon.learn(earlier, facts, seen);
    last = { runs: Math.min(seen.runs, final.runs), events: Math.min(seen.events, final.events) };
    if (final.runs >= seen.runs && final.events >= seen.events) break;
    await new Promise((r) => setTimeout(r, 5));
  }
  return { runId: last.runs, eventId: last.events };
}

/** Changes when another connection commits (the status page's poll). */
export async function dataVersion(q: Q): Promise<number> {
  const r = await q.get<{ n: number }>("SELECT n FROM data_version WHERE id = 1");
  return r?.n ?? 0;
}
