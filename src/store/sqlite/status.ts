// What health and `status` read, gathered per job or for every job at once. Table-group
// functions: they run in their caller's transaction (SqliteStore reads them in one snapshot)
// and never open one.
import type { Conn } from "../connection.js";
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
export function jobReadings(
  c: Conn,
  job: string,
  recentLimit: number,
  repeatLimit: number,
): JobReadings {
  const recent = recentFinished(c, job, recentLimit);
  const since = recent[0]?.started_at ?? 0;
  return {
    row: jobRow(c, job),
    running: runningRuns(c, job),
    recent,
    attempts: repeatingKeysSince(c, job, repeatLimit, since),
  };
}

/**
 * Everything `status` shows. Over more than one job, the job rows, running runs, attempts and
 * marker counts are read for every job at once (one query each instead of one per job: `status`
 * over 1,000 jobs).
 */
export function statusRows(c: Conn, jobs: readonly StatusJob[], recentLimit: number): StatusRows {
  const out = new Map<string, StatusJobRows>();
  const daemon = daemonRow(c);
  if (jobs.length === 1) {
    const job = jobs[0] as StatusJob;
    const r = jobReadings(c, job.name, recentLimit, job.repeatLimit);
    out.set(job.name, { ...r, ...latest(c, job.name, r), markers: markerCount(c, job.name) });
    return { daemon, nodes: nodes(c, Date.now()), jobs: out };
  }
  const running = new Map<string, RunRow[]>();
  for (const r of runningRuns(c)) {
    const list = running.get(r.job);
    if (list) list.push(r);
    else running.set(r.job, [r]);
  }
  const rows = new Map(allJobs(c).map((r) => [r.name, r]));
  const minLimit = Math.min(...jobs.map((j) => j.repeatLimit));
  const attempts: Map<string, AttemptRow[]> =
    jobs.length > 0 ? repeatingKeysAll(c, minLimit) : new Map();
  const counts = markerCounts(c);
  for (const job of jobs) {
    const recent = recentFinished(c, job.name, recentLimit);
    const since = recent[0]?.started_at ?? 0;
    const r: JobReadings = {
      row: rows.get(job.name) ?? null,
      running: running.get(job.name) ?? [],
      recent,
      attempts: (attempts.get(job.name) ?? [])
        .filter((a) => a.count > job.repeatLimit && a.last_at >= since)
        .slice(0, 10),
    };
    out.set(job.name, { ...r, ...latest(c, job.name, r), markers: counts.get(job.name) ?? 0 });
  }
  return { daemon, nodes: nodes(c, Date.now()), jobs: out };
}

/** The latest run with a process, and the latest that has ended (often the same row). */
function latest(
  c: Conn,
  job: string,
  r: JobReadings,
): Pick<StatusJobRows, "last" | "lastFinished"> {
  const last = lastRun(c, job);
  const newest = r.recent[0];
  // `last` is the newest finished run too unless a run is going: then read that one.
  const lastFinished =
    newest === undefined ? null : last?.id === newest.id ? last : historyRow(c, newest.id);
  return { last, lastFinished };
}
