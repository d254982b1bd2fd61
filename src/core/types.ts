// Terminology (ARCHITECTURE.md, "Glossary"; the code uses these words and no others):
//   job         a named entry under `jobs:` in the config
//   slot        one scheduled instant of a job: the unit that must run once
//   run         one execution of a job's command (for a slot, a manual trigger, a retry, a catch-up)
//   disposition what became of a slot: ran, skipped, missed, caught up
//   lock        per-job mutual exclusion, held for the life of the run's process tree
//   fence       a number that grows with every run of a job; stale fences cannot write markers
//   marker      a durable "this key is done" record in a job's namespace
//   heartbeat   the daemon's liveness beat
//   progress    evidence a job moves: a successful run, a new marker, an explicit progress call

export type Overlap = "skip" | "queue" | "replace" | "allow";
export type Catchup = "skip" | "once" | "all";
export type Trigger =
  "schedule" | "manual" | "catchup" | "retry" | "resume" | "reboot" | "backfill" | "chained";

/** Every status a history row can have. `skipped` and `missed` are slot dispositions with no process. */
export type RunStatus =
  | "running"
  | "ok"
  | "failed"
  | "timeout"
  | "killed"
  | "interrupted"
  | "fenced"
  | "spawn_failed"
  | "skipped"
  | "missed";

export interface RetriesConfig {
  /** Extra runs after a failed or timed-out one (0 = no retries). */
  attempts: number;
  /** Delay before the first retry; doubles for each further one. */
  backoffMs: number;
}

export interface HealthConfig {
  /** Dead-man's switch: no successful run for longer is `late`. null = not checked. */
  successWithinMs: number | null;
  /** A running run with no progress signal for longer is `stuck`. null = not checked. */
  progressWithinMs: number | null;
  /** A marker key attempted more often than this without being marked is `repeating`. */
  repeatLimit: number;
  /** Runs succeed but no new marker or progress call for longer: `idle`. null = not checked. */
  newWorkWithinMs: number | null;
}

/**
 * `kill`: what is left is killed when the main process exits (systemd's KillMode=control-group);
 * `wait`: the run, and its lock, last until its last process exits (flock(1)'s behaviour);
 * `keep`: what is left moves out of the run, outside its lock, and keeps running.
 */
export type Leftovers = "kill" | "wait" | "keep";

export interface Limits {
  /** memory.max of the run's cgroup, in bytes. */
  memoryBytes: number | null;
  /** cpu.max of the run's cgroup, in percent of one CPU (150 = one and a half). */
  cpuPercent: number | null;
  /** pids.max of the run's cgroup. */
  tasks: number | null;
  /** The soft RLIMIT_NOFILE of the run's processes. */
  nofile: number | null;
}

export interface LogConfig {
  maxSizeBytes: number;
  keepRuns: number;
}

export interface JobConfig {
  name: string;
  /** The schedule as written (`0 2 * * *`, `@daily`, `@reboot`). */
  schedule: string;
  /** The pattern handed to croner (`@daily` expanded), or null for `@reboot`. */
  pattern: string | null;
  /** string: run by `shell -c`; list: exec'd as argv with no shell. */
  command: string | string[];
  /** Absolute; defaults to the config file's directory. */
  cwd: string;
  env: Record<string, string>;
  /** Absolute path or null. Read at each run start (so a rotated secret is picked up). */
  envFile: string | null;
  user: string | null;
  /** Resolved: the job's, else the config's, else the host's. */
  timezone: string;
  timeoutMs: number | null;
  killGraceMs: number;
  overlap: Overlap;
  catchup: Catchup;
  catchupWindowMs: number;
  jitterMs: number;
  retries: RetriesConfig;
  paused: boolean;
  health: HealthConfig;
  log: LogConfig;
  ping: string | null;
  /** Alert `failed`/`timeout` only after this many consecutive failures (1: the first). */
  failuresBeforeAlert: number;
  /** Repeat an alert this often while its condition lasts; null: once. */
  realertEveryMs: number | null;
  /** The nodes (by `node:` name) where the job may run; null: any. */
  hosts: string[] | null;
  /** What becomes of a run's processes left when its main process exits (`leftovers:`). */
  leftovers: Leftovers;
  /** Per-run resource limits (`limits:`); each null when not set. */
  limits: Limits;
  /** Named locks a run holds besides the job's own (`locks:`), sorted: taken in this order. */
  locks: string[];
  /** The concurrency group (`group:`, one of Config.groups), or null. */
  group: string | null;
  /** Among slots waiting for a group: the earlier slot first, then the higher `priority:`. */
  priority: number;
  /** Jobs started for this run's slot when it ends ok (`then:`), or fails for good (`then_on_failure:`). */
  then: string[];
  thenOnFailure: string[];
  /** Windows (named at the top level, or the job's own) whose slots are skipped (`blackouts:`). */
  blackouts: NamedWindow[];
  /** 1-based line of the job's key in the config, for messages. */
  line: number;
}

/** A blackout window as the config names it: a top-level name, or its own text. */
export interface NamedWindow {
  name: string;
  window: BlackoutWindow;
}

/**
 * A blackout window in a job's zone (schedule/windows.ts): local dates (`from` inclusive, `to`
 * exclusive, as `YYYY-MM-DD HH:MM`), or every week on `days` (0 = Sunday) from minute `start`
 * of the day to minute `end` (the next day when `end <= start`).
 */
export type BlackoutWindow =
  | { kind: "dates"; from: string; to: string }
  | { kind: "weekly"; days: number[]; start: number; end: number };

/**
 * What `status` reads of a job: its health, next slot, lock, and where it may run. The config
 * cache keeps only these (src/config/config-cache.ts): a job's command, env, log and retry
 * settings were two thirds of the file that every `status` read and parsed for nothing.
 */
export const STATUS_JOB_KEYS = [
  "name",
  "schedule",
  "pattern",
  "timezone",
  "overlap",
  "paused",
  "health",
  "hosts",
  "limits",
  "locks",
  "group",
  "line",
] as const satisfies readonly (keyof JobConfig)[];
export type StatusJobConfig = Pick<JobConfig, (typeof STATUS_JOB_KEYS)[number]>;

export type AlertTarget = { kind: "webhook"; url: string } | { kind: "command"; command: string };

export interface Config {
  /** Absolute path of the config file. */
  file: string;
  /** Absolute; relative paths in the file are relative to the file's directory. */
  stateDir: string;
  timezone: string;
  shell: string;
  env: Record<string, string>;
  heartbeatMs: number;
  /** A PostgreSQL store's URL (no password in it), or null: SQLite in stateDir. */
  store: string | null;
  /** Absolute path of the file holding the PostgreSQL password, or null. */
  passwordFile: string | null;
  /** Run although the PostgreSQL store lets any local user in as its role (status warns). */
  allowOpenDatabase: boolean;
  /** PostgreSQL: keep each finished run's log tail in the store (for `logs` from another node). */
  logTails: boolean;
  /** This daemon's node name as written, or null: the host name (see nodeName). */
  node: string | null;
  /** How long a silent node keeps its jobs on a shared store. */
  leaseMs: number;
  http: { host: string; port: number } | null;
  /** Show runs' commands and log tails on the http endpoint's page (`http_logs`, default false). */
  httpLogs: boolean;
  /** `logs.max_total`: all run logs together; past it the oldest finished runs' go first. */
  logsMaxTotalBytes: number;
  alerts: AlertTarget[];
  /** Concurrency groups (`groups:`), in file order. */
  groups: GroupConfig[];
  /** In file order. */
  jobs: JobConfig[];
}

/** A concurrency group: at most `maxRunning` runs of its jobs at once, across every node. */
export interface GroupConfig {
  name: string;
  maxRunning: number;
}

/** The config `status` judges by: a Config whose jobs may hold only STATUS_JOB_KEYS. */
export interface StatusConfig extends Omit<Config, "jobs"> {
  jobs: StatusJobConfig[];
}

/** One problem in a config file. Printed as `FILE:LINE:COL: PATH: MESSAGE`. */
export interface ConfigError {
  file: string;
  line: number;
  col: number;
  /** Dotted key path, e.g. `jobs.backup.schedule`; `(root)` for the document itself. */
  path: string;
  message: string;
}

export function formatConfigError(e: ConfigError): string {
  return `${e.file}:${e.line}:${e.col}: ${e.path}: ${e.message}`;
}

/** What the runner needs to start one run. The supervisor and `cronvisor run` build it. */
export interface RunSpec {
  /** For error messages: `(job: x, run: y)`. */
  job: string;
  runId: number;
  command: string | string[];
  shell: string;
  /** Where the process starts (as root, before a `user:` job's privilege drop). */
  cwd: string;
  /** A `user:` job's cwd, entered by its shell after the drop, as the user ("/" is spec.cwd then). */
  userCwd?: string;
  /** The complete environment of the child: nothing else is inherited. */
  env: Record<string, string>;
  /** Run as this user (the daemon must be root). */
  user: string | null;
  logPath: string;
  logMaxBytes: number;
  timeoutMs: number | null;
  killGraceMs: number;
  /** Also copy the output here as it arrives (`cronvisor run` prints the job's output). */
  echo?: NodeJS.WritableStream;
  /** Where the spawner writes the main process's exit status, so an adopting daemon can read it. */
  exitFile: string;
  /** Where the spawner writes the run's pid and start time before its exec (a daemon killed
   *  before it recorded them still finds the run). */
  pidFile: string;
  leftovers: Leftovers;
  /** The run's soft open-files limit; null: the system's usual 1024. */
  nofile: number | null;
  /** The cgroup limits this host can enforce (run/cgroup.ts `enforceable`); null: none. */
  memory: number | null;
  cpu: number | null;
  tasks: number | null;
  /** Never its job's kept cgroup (`overlap: allow`: another run of the job may be in it, and a
   *  run's cgroups are found by its id and job, core/proc.ts runCgroupsOf). */
  ownCgroup?: boolean;
}

/** One plain result per run; maps one-to-one onto the run row. */
export interface RunResult {
  status: Exclude<RunStatus, "running" | "skipped" | "missed">;
  /** Why it ended, in words: `exit 3`, `timeout after 30m`, `spawn failed: ENOENT ...`. */
  reason: string | null;
  exitCode: number | null;
  signal: string | null;
  startedAt: number;
  finishedAt: number;
  durationMs: number;
  logBytes: number;
  logTruncated: boolean;
  /** User + system CPU seconds of all the run's processes; null where not measured. */
  cpuS: number | null;
  /** The run's peak memory in bytes; null where not measured. */
  memoryPeakBytes: number | null;
}

/**
 * The marker broker as a run sees it (src/markers/broker.ts implements it; the supervising
 * process starts it and passes it in, so run/ never imports markers/). A run is registered before its spawn, with a
 * secret only it receives, and forgotten once its end is recorded.
 */
export interface RunBroker {
  /** The socket of the supervising process's own uid. */
  readonly socketPath: string;
  /** The socket a run whose processes run as `uid` is given (CRONVISOR_BROKER); made at need. */
  socketFor(uid?: number): string;
  /** Returns the run's secret (CRONVISOR_SECRET); the run is served on `uid`'s socket only. */
  register(run: { job: string; runId: number; fence: number; uid?: number }): string;
  /** A run a previous daemon started (adopted): served again if its secret's hash was kept. */
  adopt(run: {
    job: string;
    runId: number;
    fence: number;
    pgid: number | null;
    uid?: number;
  }): boolean;
  /** The run's process group: the processes `once` may name as its own. */
  setGroup(runId: number, pgid: number): void;
  unregister(runId: number): void;
  close(): Promise<void>;
}
