// What `status` and `history` report, built from the store alone (so they work while the daemon is
// down) plus the config for schedules. JSON field names are the contract in DESIGN.md. The daemon's
// alerts and metrics call `inspectJob` too: one health function for every reader.
import {
  assessJob,
  daemonState,
  WARNING_WORDS,
  type Assessment,
  type DaemonState,
  type HealthWord,
  type RunFacts,
} from "./health.js";
import { groupAlive, isAlive } from "../run/proc.js";
import { nextSlot } from "../schedule/schedule.js";
import type { DaemonRow, HistoryRow, JobRow, RunRow, Store } from "../store/store.js";
import type { Config, JobConfig } from "../core/types.js";

const iso = (t: number | null | undefined): string | null =>
  t === null || t === undefined ? null : new Date(t).toISOString();

/** How many finished runs health looks back over (failing streaks, p95 of durations). */
const RECENT_RUNS = 20;

export interface HistoryEntry {
  run_id: number;
  job: string;
  slot: string | null;
  trigger: string | null;
  status: string;
  reason: string | null;
  exit_code: number | null;
  signal: string | null;
  attempt: number;
  started_at: string;
  finished_at: string | null;
  duration_ms: number | null;
  markers_new: number;
  markers_skipped: number;
  pid: number | null;
  log_path: string | null;
}

export function historyEntry(r: HistoryRow): HistoryEntry {
  return {
    run_id: r.id,
    job: r.job,
    slot: iso(r.slot),
    trigger: r.trigger,
    status: r.status,
    reason: r.reason,
    exit_code: r.exit_code,
    signal: r.signal,
    attempt: r.attempt,
    started_at: iso(r.started_at) as string,
    finished_at: iso(r.finished_at),
    duration_ms: r.duration_ms,
    markers_new: r.markers_new,
    markers_skipped: r.markers_skipped,
    pid: r.pid,
    log_path: r.log_path,
  };
}

export interface DaemonReport {
  state: DaemonState;
  pid: number | null;
  started_at: string | null;
  heartbeat_at: string | null;
  heartbeat_age_s: number | null;
  heartbeat_interval_s: number | null;
  config_error: string | null;
}

export interface RunningReport {
  run_id: number;
  pid: number | null;
  started_at: string;
  progress_at: string | null;
  progress_age_s: number | null;
  progress_message: string | null;
  /** Longer than 2 x the p95 of the job's recent successful runs. */
  slow: boolean;
}

export interface JobReport {
  name: string;
  schedule: string;
  timezone: string;
  paused: boolean;
  health: HealthWord;
  problems: string[];
  next_slot: string | null;
  /** The oldest running run (with `overlap: allow` there may be more: see `running_count`). */
  running: RunningReport | null;
  running_count: number;
  lock: { run_id: number; pid: number | null; since: string } | null;
  last_run: HistoryEntry | null;
  /** The latest run that has ended (what `last_run` was before a run started). */
  last_finished_run: HistoryEntry | null;
  last_success_at: string | null;
  last_progress_at: string | null;
  markers: number;
  markers_new_last_run: number | null;
  markers_skipped_last_run: number | null;
  /** p95 of the recent successful runs' durations (null with fewer than 5). */
  p95_duration_ms: number | null;
}

export interface StatusReport {
  daemon: DaemonReport;
  jobs: JobReport[];
}

/** Everything health is judged from for one job, read from the store, plus the judgement. */
export interface JobInspection {
  row: JobRow | null;
  paused: boolean;
  /** Live runs, oldest first. */
  running: RunRow[];
  /** Finished runs with a process, newest first (the ones health was judged from). */
  recent: RunFacts[];
  assessment: Assessment;
}

/**
 * What inspectJob would read per job, read for every job at once (one query each instead of one
 * per job: `status` over 1,000 jobs). Built by `prefetch`.
 */
export interface Prefetched {
  jobs: Map<string, JobRow>;
  /** `running` rows by job, oldest first (before the liveness check). */
  running: Map<string, RunRow[]>;
  /** Keys attempted more than the smallest repeat_limit of any job, by job, worst first. */
  attempts: Map<string, { key: string; count: number; last_at: number }[]>;
}

export function prefetch(store: Store, jobs: readonly JobConfig[]): Prefetched {
  const running = new Map<string, RunRow[]>();
  for (const r of store.runningRuns()) {
    const list = running.get(r.job);
    if (list) list.push(r);
    else running.set(r.job, [r]);
  }
  const minLimit = Math.min(...jobs.map((j) => j.health.repeatLimit));
  return {
    jobs: new Map(store.allJobs().map((r) => [r.name, r])),
    running,
    attempts: jobs.length > 0 ? store.repeatingKeysAll(minLimit) : new Map(),
  };
}

/**
 * Read one job's rows and judge its health: the same for `status`, alerts and metrics. `pre`:
 * rows already read for every job (buildStatus over all jobs); without it, this job's are read.
 */
export function inspectJob(
  store: Store,
  job: JobConfig,
  now: number,
  pre?: Prefetched,
): JobInspection {
  const row = pre ? (pre.jobs.get(job.name) ?? null) : store.job(job.name);
  const paused = job.paused || row?.paused === 1;
  // A `running` row whose processes and supervisor are gone is not running: show it as such.
  const running = (pre ? (pre.running.get(job.name) ?? []) : store.runningRuns(job.name)).filter(
    (r) =>
      (r.pgid !== null && groupAlive(r.pgid)) ||
      (r.owner_pid !== null && isAlive(r.owner_pid, r.owner_start)),
  );
  const recent = store.recentFinished(job.name, RECENT_RUNS);
  const limit = job.health.repeatLimit;
  const since = recent[0]?.started_at ?? 0;
  const attempts = pre
    ? (pre.attempts.get(job.name) ?? [])
        .filter((a) => a.count > limit && a.last_at >= since)
        .slice(0, 10)
    : store.repeatingKeysSince(job.name, limit, since);
  const assessment = assessJob({
    now,
    job,
    paused,
    firstSeenAt: row?.first_seen_at ?? null,
    lastSuccessAt: row?.last_success_at ?? null,
    recent,
    running,
    attempts,
  });
  return { row, paused, running, recent, assessment };
}

/** The daemon's state as `status` sees it from outside: the row plus whether its pid lives. */
export function daemonReport(d: DaemonRow | null, now: number): DaemonReport {
  const pidAlive = d?.pid != null && isAlive(d.pid, d.pid_start);
  const state = daemonState(d, pidAlive, now);
  return {
    state,
    pid: state === "down" ? null : (d?.pid ?? null),
    started_at: iso(d?.started_at),
    heartbeat_at: iso(d?.heartbeat_at),
    heartbeat_age_s: d?.heartbeat_at != null ? Math.max(0, (now - d.heartbeat_at) / 1000) : null,
    heartbeat_interval_s: d?.heartbeat_ms != null ? d.heartbeat_ms / 1000 : null,
    config_error: state === "down" ? null : (d?.config_error ?? null),
  };
}

export function buildStatus(
  config: Config,
  store: Store,
  now: number,
  only: string | null = null,
): StatusReport {
  // One snapshot: the rows read for every job belong together (and a run cannot be pruned
  // between reading a job's recent runs and its last finished one).
  return store.snapshot(() => {
    const d = store.daemon();
    const daemon = daemonReport(d, now);
    const jobs: JobReport[] = [];
    const pre = only === null ? prefetch(store, config.jobs) : undefined;
    const markerCounts = only === null ? store.markerCounts() : null;
    for (const job of config.jobs) {
      if (only !== null && job.name !== only) continue;
      const { row, paused, running, recent, assessment } = inspectJob(store, job, now, pre);
      const last = store.lastRun(job.name);
      const newest = recent[0];
      // `last` is the newest finished run too unless a run is going: then read that one.
      const lastFinished =
        newest === undefined ? null : last?.id === newest.id ? last : store.historyRow(newest.id);
      const holder = job.overlap === "allow" ? undefined : running[0];
      jobs.push({
        name: job.name,
        schedule: job.schedule,
        timezone: job.timezone,
        paused,
        health: assessment.health,
        problems: assessment.problems,
        next_slot: iso(nextSlot(job, new Date(Math.max(now, row?.scanned_to ?? 0)))?.getTime()),
        running: running[0] ? runningEntry(running[0], now, assessment.slowRunIds) : null,
        running_count: running.length,
        lock: holder
          ? { run_id: holder.id, pid: holder.pid, since: iso(holder.started_at) as string }
          : null,
        last_run: last ? historyEntry(last) : null,
        last_finished_run: lastFinished ? historyEntry(lastFinished) : null,
        last_success_at: iso(row?.last_success_at),
        last_progress_at: iso(row?.last_progress_at),
        markers: markerCounts ? (markerCounts.get(job.name) ?? 0) : store.markerCount(job.name),
        markers_new_last_run: last?.markers_new ?? null,
        markers_skipped_last_run: last?.markers_skipped ?? null,
        p95_duration_ms: assessment.p95DurationMs,
      });
    }
    return { daemon, jobs };
  });
}

function runningEntry(r: RunRow, now: number, slow: number[]): RunningReport {
  return {
    run_id: r.id,
    pid: r.pid,
    started_at: iso(r.started_at) as string,
    progress_at: iso(r.progress_at),
    progress_age_s: r.progress_at !== null ? Math.max(0, (now - r.progress_at) / 1000) : null,
    progress_message: r.progress_msg,
    slow: slow.includes(r.id),
  };
}

export type CheckCode = 0 | 1 | 2;

/**
 * Nagios-style: 2 CRITICAL when the daemon is down or not beating; 1 WARNING when a job is late,
 * stuck, failing or repeating, or the daemon runs on an old config because a reload failed;
 * else 0 OK. (3 UNKNOWN, no store, is decided before there is a report.)
 */
export function checkCode(s: StatusReport): CheckCode {
  if (s.daemon.state !== "running") return 2;
  if (s.jobs.some((j) => WARNING_WORDS.includes(j.health)) || s.daemon.config_error !== null)
    return 1;
  return 0;
}

/** The one-line verdict of `--check` (the first line a monitoring agent shows). */
export function checkSummary(s: StatusReport): string {
  const code = checkCode(s);
  const d = s.daemon;
  if (code === 2) {
    const age =
      d.heartbeat_age_s === null
        ? "never beat"
        : `last heartbeat ${Math.round(d.heartbeat_age_s)}s ago`;
    return `CRITICAL: daemon ${d.state} (${age})`;
  }
  const bad = s.jobs.filter((j) => WARNING_WORDS.includes(j.health));
  const parts = bad.map((j) => `${j.name} ${j.health}`);
  if (d.config_error !== null)
    parts.push("config reload failed (the daemon runs the previous config)");
  if (code === 1) return `WARNING: ${parts.join(", ")}`;
  return `OK: daemon running, ${s.jobs.length} job(s) healthy or idle`;
}
