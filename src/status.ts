// What `status` and `history` report, built from the store alone (so they work while the daemon is
// down) plus the config for schedules. JSON field names are the contract in DESIGN.md.
import { assessJob, daemonState, type DaemonState, type HealthWord } from "./health.js";
import { groupAlive, isAlive } from "./proc.js";
import { nextSlot } from "./schedule.js";
import type { RunRow, Store } from "./store.js";
import type { Config } from "./types.js";

const iso = (t: number | null | undefined): string | null => (t === null || t === undefined ? null : new Date(t).toISOString());

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

export function historyEntry(r: RunRow): HistoryEntry {
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

export interface JobReport {
  name: string;
  schedule: string;
  timezone: string;
  paused: boolean;
  health: HealthWord;
  problems: string[];
  next_slot: string | null;
  /** The oldest running run (with `overlap: allow` there may be more: see `running_count`). */
  running: { run_id: number; pid: number | null; started_at: string; progress_at: string | null; progress_age_s: number | null; progress_message: string | null } | null;
  running_count: number;
  lock: { run_id: number; pid: number | null; since: string } | null;
  last_run: HistoryEntry | null;
  last_success_at: string | null;
  last_progress_at: string | null;
  markers: number;
  markers_new_last_run: number | null;
  markers_skipped_last_run: number | null;
}

export interface StatusReport {
  daemon: DaemonReport;
  jobs: JobReport[];
}

export function buildStatus(config: Config, store: Store, now: number, only: string | null = null): StatusReport {
  const d = store.daemon();
  const pidAlive = d?.pid != null && isAlive(d.pid, d.pid_start);
  const state = daemonState(d, pidAlive, now);
  const daemon: DaemonReport = {
    state,
    pid: state === "down" ? null : (d?.pid ?? null),
    started_at: iso(d?.started_at),
    heartbeat_at: iso(d?.heartbeat_at),
    heartbeat_age_s: d?.heartbeat_at != null ? Math.max(0, (now - d.heartbeat_at) / 1000) : null,
    heartbeat_interval_s: d?.heartbeat_ms != null ? d.heartbeat_ms / 1000 : null,
    config_error: state === "down" ? null : (d?.config_error ?? null),
  };
  const jobs: JobReport[] = [];
  for (const job of config.jobs) {
    if (only !== null && job.name !== only) continue;
    const row = store.job(job.name);
    const paused = job.paused || row?.paused === 1;
    // A `running` row whose processes and supervisor are gone is not running: show it as such.
    const running = store.runningRuns(job.name).filter((r) => (r.pgid !== null && groupAlive(r.pgid)) || (r.owner_pid !== null && isAlive(r.owner_pid, r.owner_start)));
    const recent = store.recentFinished(job.name, 20);
    const daemonStart = state !== "down" ? (d?.started_at ?? null) : null;
    const watchedSince = Math.max(daemonStart ?? 0, row?.first_seen_at ?? 0) || null;
    const { health, problems } = assessJob({
      now,
      job,
      paused,
      watchedSince,
      lastSuccessAt: row?.last_success_at ?? null,
      recent,
      running,
      repeating: store.repeatingKeys(job.name, job.health.repeatLimit),
    });
    const last = store.lastRun(job.name);
    const holder = job.overlap === "allow" ? undefined : running[0];
    jobs.push({
      name: job.name,
      schedule: job.schedule,
      timezone: job.timezone,
      paused,
      health,
      problems,
      next_slot: iso(nextSlot(job, new Date(Math.max(now, row?.scanned_to ?? 0)))?.getTime()),
      running: running[0] ? runningEntry(running[0], now) : null,
      running_count: running.length,
      lock: holder ? { run_id: holder.id, pid: holder.pid, since: iso(holder.started_at) as string } : null,
      last_run: last ? historyEntry(last) : null,
      last_success_at: iso(row?.last_success_at),
      last_progress_at: iso(row?.last_progress_at),
      markers: store.markerCount(job.name),
      markers_new_last_run: last?.markers_new ?? null,
      markers_skipped_last_run: last?.markers_skipped ?? null,
    });
  }
  return { daemon, jobs };
}

function runningEntry(r: RunRow, now: number): NonNullable<JobReport["running"]> {
  return {
    run_id: r.id,
    pid: r.pid,
    started_at: iso(r.started_at) as string,
    progress_at: iso(r.progress_at),
    progress_age_s: r.progress_at !== null ? (now - r.progress_at) / 1000 : null,
    progress_message: r.progress_msg,
  };
}

/** Nagios-style: 0 OK, 1 WARNING (a job late/stuck/failing/repeating), 2 CRITICAL (daemon not beating). */
export function checkCode(s: StatusReport): 0 | 1 | 2 {
  if (s.daemon.state !== "running") return 2;
  const warn: HealthWord[] = ["late", "stuck", "failing", "repeating"];
  return s.jobs.some((j) => warn.includes(j.health)) ? 1 : 0;
}
