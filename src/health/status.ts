// What `status` and `history` report, built from the store alone (so they work while the daemon is
// down) plus the config for schedules. Its JSON field names are a public contract (scripts read
// `status --json`): rename none. The daemon's alerts and metrics call `inspectJob` too: one
// health function for every reader.
import { parseContainment, type ContainmentReport } from "./containment.js";
import {
  assessJob,
  daemonState,
  WARNING_WORDS,
  type Assessment,
  type DaemonState,
  type HealthWord,
} from "./health.js";
import { isAlive, runAlive } from "../core/proc.js";
import { drainReport, drainWarning, type DrainReport } from "./drain.js";
import { nextSlotAt } from "../schedule/schedule.js";
import type {
  DaemonRow,
  JobReadings,
  JobRow,
  NodeRow,
  RunFacts,
  RunRow,
  StatusJobRows,
  StatusStore,
} from "../store/store.js";
import type { Limits, StatusConfig, StatusJobConfig } from "../core/types.js";
import { formatSeconds } from "../core/duration.js";
import type { DiskFacts } from "../core/disk.js";
import { diskReport, type DiskReport } from "./disk.js";
import { hasHolds, holdsReport, type GroupReport, type LockReport } from "./holds.js";
import {
  definitionsDiffer,
  nodeReports,
  nodeTrouble,
  runLiveness,
  unrunnable,
  type NodeReport,
} from "./nodes.js";
import { EXIT } from "../core/exit.js";
import { iso } from "./iso.js";

export { iso };

/**
 * How many finished runs health looks back over (failing streaks, p95 of durations): the 20 the
 * job's row keeps (SUMMARY_RECENT), whose digest it keeps too (store/digest.ts).
 */
const RECENT_RUNS = 20;

import { historyEntry, type HistoryEntry } from "./history-entry.js";

export { historyEntry, type HistoryEntry };

export interface DaemonReport {
  state: DaemonState;
  pid: number | null;
  started_at: string | null;
  heartbeat_at: string | null;
  heartbeat_age_s: number | null;
  heartbeat_interval_s: number | null;
  config_error: string | null;
  /** Why the daemon's `http:` endpoint is not serving (it retries every heartbeat), and since when. */
  http_error: string | null;
  http_error_since: string | null;
  /** When the config the daemon runs (or last ran) was accepted, and its file's sha256. */
  config_accepted_at: string | null;
  config_hash: string | null;
  /** null, or every error of the config file on disk, while status works from the record. */
  config_file_errors: string[] | null;
  /** How the daemon contains its runs: `cgroup` (a cgroup per run) or `process-group`, and why. */
  containment: ContainmentReport | null;
  /** What the store and the logs take, what is free (health/disk.ts); null if not asked for. */
  disk: DiskReport | null;
  /**
   * With `allow_open_database: true`, as root: how the PostgreSQL store lets any local user in as
   * its role without a credential (a WARNING); else null.
   */
  open_database: string | null;
  /** `pause --all` in force: since when, until when (null: until `resume --all`), why; else null. */
  drain: DrainReport | null;
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
  node: string | null;
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
  lock: { run_id: number; pid: number | null; since: string; node: string | null } | null;
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
  /** The live nodes that define this job differently (a WARNING), by name; [] when they agree. */
  definition_differs_on: string[];
}

export interface StatusReport {
  daemon: DaemonReport;
  /** Every node of the store; one with SQLite. */
  nodes: NodeReport[];
  /** Several nodes may share the store (PostgreSQL): --check judges by nodes, not the daemon. */
  shared: boolean;
  /** Named locks and their holders; groups with their running runs (docs/locks.md). */
  locks: LockReport[];
  groups: GroupReport[];
  jobs: JobReport[];
}

/** Everything health is judged from for one job, read from the store, plus the judgement. */
export interface JobInspection {
  row: JobRow | null;
  paused: boolean;
  /** Live runs, oldest first. */
  running: RunRow[];
  assessment: Assessment;
}

/** One job's rows, judged: as `status`, alerts and metrics see it (another node's run by its lease). */
export async function inspectJob(
  store: StatusStore,
  job: StatusJobConfig,
  now: number,
  nodes: readonly NodeRow[] = [],
): Promise<JobInspection> {
  // No recent run read: the job's row keeps their digest (store/digest.ts).
  const readings = await store.jobReadings(job.name, job.health.repeatLimit);
  return judgeJob(job, readings, now, runLiveness(nodes, store.shared, store.node, runAlive));
}

/** Judge one job's health from its readings. */
export function judgeJob(
  job: StatusJobConfig,
  r: JobReadings,
  now: number,
  alive: (r: RunRow) => boolean = runAlive,
): JobInspection {
  const { row, attempts } = r;
  const paused = job.paused || row?.paused === 1;
  // A `running` row whose processes and supervisor (or node) are gone is not running.
  const running = r.running.filter(alive);
  const assessment = assessJob({
    now,
    job,
    paused,
    firstSeenAt: row?.first_seen_at ?? null,
    lastSuccessAt: row?.last_success_at ?? null,
    lastWorkAt: row?.last_work_at ?? null,
    idleRuns: row?.idle_runs ?? 0,
    recent: r.digest,
    running,
    attempts,
  });
  return { row, paused, running, assessment };
}

/** The daemon's state as `status` sees it from outside: the row plus whether its pid lives. */
export function daemonReport(
  d: DaemonRow | null,
  now: number,
  fileErrors: string[] | null = null,
  jobs: readonly { name: string; limits: Limits }[] = [],
): DaemonReport {
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
    http_error: state === "down" ? null : (d?.http_error ?? null),
    http_error_since: state === "down" ? null : iso(d?.http_error_since),
    config_accepted_at: iso(d?.config_accepted_at),
    config_hash: d?.config_hash ?? null,
    config_file_errors: fileErrors,
    containment: state === "down" ? null : parseContainment(d?.containment ?? null, jobs),
    disk: null,
    open_database: null,
    drain: null,
  };
}

export async function buildStatus(
  config: StatusConfig,
  store: StatusStore,
  now: number,
  only: string | null = null,
  fileErrors: string[] | null = null,
  recentOut?: Map<string, RunFacts[]>,
  disk: DiskFacts | null = null,
): Promise<StatusReport> {
  // One snapshot: the rows read for every job belong together (and a run cannot be pruned
  // between reading a job's recent runs and its last finished one). Health judges from each
  // row's digest; the recent runs themselves are read only for the page's trends.
  const wanted = config.jobs.filter((j) => only === null || j.name === only);
  const rows = await store.statusRows(
    wanted.map((j) => ({ name: j.name, repeatLimit: j.health.repeatLimit })),
    recentOut ? RECENT_RUNS : 0,
  );
  const daemon = daemonReport(rows.daemon, now, fileErrors, config.jobs);
  if (disk) daemon.disk = diskReport(disk, rows.daemon?.logs_bytes ?? null);
  daemon.drain = drainReport(await store.drain(), now);
  const nodes = nodeReports(rows.nodes, store.shared, daemon.state);
  const alive = runLiveness(rows.nodes, store.shared, store.node, runAlive);
  const differs = definitionsDiffer(
    await store.jobHashes(),
    new Set(nodes.filter((n) => n.state !== "gone").map((n) => n.name)),
  );
  // The status page draws its trends from the finished runs health was judged from.
  if (recentOut) for (const [name, r] of rows.jobs) recentOut.set(name, r.recent);
  const jobs = wanted.map((job) =>
    jobReport(job, rows.jobs.get(job.name) as StatusJobRows, now, alive, differs.get(job.name)),
  );
  const holds = hasHolds(config)
    ? holdsReport(config, await store.holdsHeld(), alive)
    : { locks: [], groups: [] };
  return { daemon, nodes, shared: store.shared, ...holds, jobs };
}

/** One job's entry, built once in its final key order (1,000 of them per `status`). */
function jobReport(
  job: StatusJobConfig,
  r: StatusJobRows,
  now: number,
  alive: (r: RunRow) => boolean,
  differs: string[] | undefined,
): JobReport {
  const { row, paused, running, assessment } = judgeJob(job, r, now, alive);
  const { last, lastFinished } = r;
  const holder = job.overlap === "allow" ? undefined : running[0];
  const finished = lastFinished ? historyEntry(lastFinished) : null;
  return {
    name: job.name,
    schedule: job.schedule,
    timezone: job.timezone,
    paused,
    health: assessment.health,
    problems: assessment.problems,
    next_slot: iso(nextSlotAt(job, Math.max(now, row?.scanned_to ?? 0))),
    running: running[0] ? runningEntry(running[0], now, assessment.slowRunIds) : null,
    running_count: running.length,
    lock: holder
      ? {
          run_id: holder.id,
          pid: holder.pid,
          since: iso(holder.started_at) as string,
          node: holder.node,
        }
      : null,
    // Without a run going, the latest run is the last finished one: one entry for both.
    last_run: last === lastFinished ? finished : last ? historyEntry(last) : null,
    last_finished_run: finished,
    last_success_at: iso(row?.last_success_at),
    last_progress_at: iso(row?.last_progress_at),
    markers: r.markers,
    markers_new_last_run: last?.markers_new ?? null,
    markers_skipped_last_run: last?.markers_skipped ?? null,
    p95_duration_ms: assessment.p95DurationMs,
    definition_differs_on: differs ?? [],
  };
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
    node: r.node ?? null, // a summary written before migration 011 has none
  };
}

export type CheckCode = typeof EXIT.ok | typeof EXIT.warning | typeof EXIT.critical;

/**
 * Nagios-style: 2 CRITICAL when the daemon is down or not beating; 1 WARNING when a job is late,
 * stuck, failing or repeating, the daemon runs on an old config because a reload failed or
 * the file on disk has errors, its http endpoint is down or its disk short; else 0 OK. (3 UNKNOWN, no store, is
 * decided before there is a report.)
 */
export function checkCode(s: StatusReport, config?: StatusConfig): CheckCode {
  const d = s.daemon;
  if (s.shared ? unrunnable(s, config).length > 0 : d.state !== "running") return EXIT.critical;
  if (
    s.jobs.some((j) => WARNING_WORDS.includes(j.health) || j.definition_differs_on.length > 0) ||
    d.config_error !== null ||
    d.http_error !== null ||
    (d.disk?.low_space ?? null) !== null ||
    (d.open_database ?? null) !== null ||
    (d.containment?.warnings.length ?? 0) > 0 ||
    (d.drain ?? null) !== null ||
    brokenFile(d) ||
    (s.shared && nodeTrouble(s).length > 0)
  )
    return EXIT.warning;
  return EXIT.ok;
}

/** Is the report built from the daemon's record because the config file has errors? */
const brokenFile = (d: DaemonReport): boolean => (d.config_file_errors?.length ?? 0) > 0;

/** The one-line verdict of `--check` (the first line a monitoring agent shows). */
export function checkSummary(s: StatusReport, config?: StatusConfig): string {
  const code = checkCode(s, config);
  const d = s.daemon;
  if (code === EXIT.critical && s.shared) {
    const jobs = unrunnable(s, config);
    return `CRITICAL: no running node may run ${jobs.join(", ")}`;
  }
  if (code === EXIT.critical) {
    const age =
      d.heartbeat_age_s === null
        ? "never beat"
        : `last heartbeat ${formatSeconds(d.heartbeat_age_s * 1000, 0)} ago`;
    return `CRITICAL: daemon ${d.state} (${age})`;
  }
  const bad = s.jobs.filter((j) => WARNING_WORDS.includes(j.health));
  const parts = bad.map((j) => `${j.name} ${j.health}`);
  // A broken file says more than the refused reload it usually caused: it goes first, alone.
  if (brokenFile(d) && d.config_accepted_at !== null)
    parts.unshift(brokenFileNotice(Date.parse(d.config_accepted_at), true));
  else if (d.config_error !== null)
    parts.push("config reload failed (the daemon runs the previous config)");
  if (d.drain) parts.push(drainWarning(d.drain));
  if (d.http_error !== null) parts.push(`http endpoint down (${d.http_error})`);
  if (d.disk?.low_space) parts.push(d.disk.low_space);
  if ((d.open_database ?? null) !== null) parts.push(`open database: ${d.open_database}`);
  parts.push(...(d.containment?.warnings ?? []));
  for (const j of s.jobs)
    if (j.definition_differs_on.length > 0)
      parts.push(`${j.name} defined differently on ${j.definition_differs_on.join(", ")}`);
  if (s.shared) parts.push(...nodeTrouble(s));
  if (code === EXIT.warning) return `WARNING: ${parts.join(", ")}`;
  if (s.shared) {
    const up = s.nodes.filter((n) => n.state === "running").length;
    return `OK: ${up} node(s) running, ${s.jobs.length} job(s) without a warning`;
  }
  return `OK: daemon running, ${s.jobs.length} job(s) without a warning`;
}

/**
 * What a reader says first while it works from the daemon's record because the config file is
 * broken: when that config was accepted, as HH:MM in `timeZone` (the host's) with the zone's name
 * and the date. `runs`: false once the daemon has stopped (the record is what it last ran).
 */
export function brokenFileNotice(acceptedAt: number, runs: boolean, timeZone?: string): string {
  const at = new Date(acceptedAt);
  const time = new Intl.DateTimeFormat("en-GB", {
    timeZone,
    hour: "2-digit",
    minute: "2-digit",
    hourCycle: "h23",
    timeZoneName: "short",
  }).format(at);
  const date = new Intl.DateTimeFormat("sv-SE", { timeZone, dateStyle: "short" }).format(at);
  const verb = runs ? "runs" : "last ran";
  return `the config file has errors; the daemon ${verb} the config accepted at ${time} on ${date}`;
}
