// What health and `status` read on PostgreSQL: the same as ../sqlite/status.ts. Table-group
// functions: they run in their caller's transaction (PgStore reads them in one REPEATABLE READ
// snapshot) and never open one.
import type { Q } from "../pg-connection.js";
import type {
  AttemptRow,
  JobReadings,
  RunRow,
  StatusJob,
  StatusJobRows,
  StatusRows,
} from "../rows.js";
import { daemonRow, nodes } from "./daemon.js";
import { historyRow, lastRun, recentFinished, runningRuns } from "./history.js";
import { allJobs, jobRow } from "./jobs.js";
import { markerCount, markerCounts, repeatingKeysAll, repeatingKeysSince } from "./markers.js";

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

/** Everything `status` shows; over more than one job, the shared reads are done once. */
export async function statusRows(
  q: Q,
  jobs: readonly StatusJob[],
  recentLimit: number,
  node: string,
): Promise<StatusRows> {
  const out = new Map<string, StatusJobRows>();
  const daemon = await daemonRow(q, node);
  if (jobs.length === 1) {
    const job = jobs[0] as StatusJob;
    const r = await jobReadings(q, job.name, recentLimit, job.repeatLimit);
    const markers = await markerCount(q, job.name);
    out.set(job.name, { ...r, ...(await latest(q, job.name, r)), markers });
    return { daemon, nodes: await nodes(q), jobs: out };
  }
  const running = new Map<string, RunRow[]>();
  for (const r of await runningRuns(q)) {
    const list = running.get(r.job);
    if (list) list.push(r);
    else running.set(r.job, [r]);
  }
  const rows = new Map((await allJobs(q)).map((r) => [r.name, r]));
  const minLimit = Math.min(...jobs.map((j) => j.repeatLimit));
  const attempts: Map<string, AttemptRow[]> =
    jobs.length > 0 ? await repeatingKeysAll(q, minLimit) : new Map();
  const counts = await markerCounts(q);
  for (const job of jobs) {
    const recent = await recentFinished(q, job.name, recentLimit);
    const since = recent[0]?.started_at ?? 0;
    const r: JobReadings = {
      row: rows.get(job.name) ?? null,
      running: running.get(job.name) ?? [],
      recent,
      attempts: (attempts.get(job.name) ?? [])
        .filter((a) => a.count > job.repeatLimit && a.last_at >= since)
        .slice(0, 10),
    };
    const markers = counts.get(job.name) ?? 0;
    out.set(job.name, { ...r, ...(await latest(q, job.name, r)), markers });
  }
  return { daemon, nodes: await nodes(q), jobs: out };
}

/** The latest run with a process, and the latest that has ended (often the same row). */
async function latest(
  q: Q,
  job: string,
  r: JobReadings,
): Promise<Pick<StatusJobRows, "last" | "lastFinished">> {
  const last = await lastRun(q, job);
  const newest = r.recent[0];
  const lastFinished =
    newest === undefined ? null : last?.id === newest.id ? last : await historyRow(q, newest.id);
  return { last, lastFinished };
}
