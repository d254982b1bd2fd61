// The key table: every key of jobs.yaml with its kind, default and doc. It is declarative on
// purpose: the walk (walk.ts) validates against it, defaults.ts fills in from it and schema.ts
// turns it into the JSON Schema, so the three cannot drift.
import type { Catchup, Leftovers, Overlap } from "../core/types.js";
import type { KeySpec } from "./key-spec.js";

export type { KeyKind, KeySpec } from "./key-spec.js";

export const JOB_NAME_PATTERN = "^[a-z0-9][a-z0-9_.-]{0,63}$";
/** A named lock's or a group's name: a job name's characters (`db`, `heavy`). */
export const LOCK_NAME_PATTERN = JOB_NAME_PATTERN;
export { ENV_NAME_PATTERN } from "../core/env-name.js"; // the shell's rule, for the schema
/** `127.0.0.1:9464`, `localhost:80`, `[::1]:9464`. */
export const HOSTPORT_PATTERN = "^(\\[[0-9A-Fa-f:.]+\\]|[^\\s:[\\]]+):([0-9]+)$";
/** A node's name: a host name's characters (`app01`, `db-2.internal`). */
export const NODE_NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$";
/** A PostgreSQL store: `postgresql://USER@HOST[:PORT]/DB` (`postgres://` too). */
export const STORE_URL_PATTERN = "^postgres(ql)?://";
const OVERLAPS: readonly Overlap[] = ["skip", "queue", "replace", "allow"];
const LEFTOVERS: readonly Leftovers[] = ["kill", "wait", "keep"];
/** `150%`: one and a half CPUs. */
export const PERCENT_PATTERN = "^[0-9]+(\\.[0-9]+)?%$";
const CATCHUPS: readonly Catchup[] = ["skip", "once", "all"];

export const JOB_KEYS: Readonly<Record<string, KeySpec>> = {
  schedule: {
    kind: "schedule",
    required: true,
    doc: 'Cron expression in quotes: 5 fields ("0 2 * * *"), or 6 with seconds first; or @yearly @annually @monthly @weekly @daily @midnight @hourly @reboot. Day-of-month and day-of-week are OR\'ed when both are set.',
  },
  command: {
    kind: "command",
    required: true,
    doc: "A string is run by `shell -c`; a list is exec'd as argv, with no shell.",
  },
  cwd: {
    kind: "path",
    doc: "Working directory, relative to this file's directory. Default: this file's directory.",
  },
  env: {
    kind: "env",
    default: {},
    doc: "Environment variables, on top of the top-level env. Numbers and booleans are kept as written.",
  },
  env_file: {
    kind: "path",
    nullable: true,
    default: null,
    doc: "A file of NAME=value lines, read at each run start; relative to this file's directory. Default: none.",
  },
  user: {
    kind: "string",
    nullable: true,
    default: null,
    doc: "Run as this user (the daemon must be root). Default: the daemon's user.",
  },
  timezone: {
    kind: "timezone",
    doc: "Time zone of the schedule, e.g. Europe/Berlin. Default: the top-level timezone, else the host's.",
  },
  timeout: {
    kind: "duration",
    nullable: true,
    positive: true,
    default: null,
    doc: "Then SIGTERM to every process of the run (and SIGKILL after kill_grace). Default: none.",
  },
  kill_grace: {
    kind: "duration",
    default: "10s",
    doc: "Time between SIGTERM and SIGKILL when a run is stopped.",
  },
  leftovers: {
    kind: "enum",
    values: LEFTOVERS,
    default: "kill",
    doc: "Processes of a run left when its main process exits: kill them (systemd's KillMode=control-group), wait for them (flock(1): the run and its lock last until the last one exits), or keep them running outside the run and its lock.",
  },
  limits: {
    kind: "section",
    doc: "Limits of each run: memory, cpu and tasks through its cgroup's controllers, nofile as an rlimit. A limit this host cannot enforce is a WARNING in validate and status.",
    keys: {
      memory: {
        kind: "size",
        nullable: true,
        positive: true,
        default: null,
        doc: "memory.max of the run's cgroup (its processes together). Default: none.",
      },
      cpu: {
        kind: "percent",
        nullable: true,
        default: null,
        doc: "cpu.max of the run's cgroup, in percent of one CPU (150% = one and a half). Default: none.",
      },
      tasks: {
        kind: "count",
        nullable: true,
        min: 1,
        default: null,
        doc: "pids.max of the run's cgroup: processes and threads at once. Default: none.",
      },
      nofile: {
        kind: "count",
        nullable: true,
        min: 1,
        default: null,
        doc: "Open files per process (soft RLIMIT_NOFILE). Default: the system's usual 1024, not the daemon's raised limit.",
      },
    },
  },
  overlap: {
    kind: "enum",
    values: OVERLAPS,
    default: "skip",
    doc: "When a slot comes while the previous run still runs: skip it, queue it (at most one waiting), replace the running one, or allow both.",
  },
  catchup: {
    kind: "enum",
    values: CATCHUPS,
    default: "once",
    doc: "Slots missed while the daemon was down, or whose run was interrupted: skip them, run once, or run all.",
  },
  catchup_window: {
    kind: "duration",
    default: "6h",
    doc: "Only slots this recent are caught up.",
  },
  jitter: {
    kind: "duration",
    default: "0s",
    doc: "Start each run up to this much after its slot (spreads load).",
  },
  retries: {
    kind: "section",
    doc: "Retry a failed or timed-out run.",
    keys: {
      attempts: {
        kind: "count",
        min: 0,
        default: 0,
        doc: "Extra runs after a failed one; 0 = no retries.",
      },
      backoff: {
        kind: "duration",
        default: "30s",
        doc: "Delay before the first retry; doubles for each further one.",
      },
    },
  },
  paused: {
    kind: "bool",
    default: false,
    doc: "A paused job does not fire (its slots are recorded as skipped).",
  },
  health: {
    kind: "section",
    doc: "When status calls the job unhealthy.",
    keys: {
      success_within: {
        kind: "duration",
        nullable: true,
        positive: true,
        default: null,
        doc: "No successful run for longer: late (a dead-man's switch). Default: not checked.",
      },
      progress_within: {
        kind: "duration",
        nullable: true,
        positive: true,
        default: null,
        doc: "A run with no progress signal for longer: stuck. Default: not checked.",
      },
      repeat_limit: {
        kind: "count",
        min: 1,
        default: 3,
        doc: "A marker key attempted more often than this without being marked: repeating.",
      },
      new_work_within: {
        kind: "duration",
        nullable: true,
        positive: true,
        default: null,
        doc: "Runs succeed but no new marker or progress call for longer: idle (success without work). Default: not checked.",
      },
    },
  },
  log: {
    kind: "section",
    doc: "Run logs.",
    keys: {
      max_size: {
        kind: "size",
        positive: true,
        // With keep_runs' 100: one job's logs stay within 100 MB (docs/store.md).
        default: "1MB",
        doc: "Largest log kept per run, its head and its tail (1024-based units: B KB MB GB TB).",
      },
      keep_runs: { kind: "count", min: 1, default: 100, doc: "Logs of this many runs are kept." },
    },
  },
  hosts: {
    kind: "nodes",
    nullable: true,
    default: null,
    doc: "The nodes (their `node:` names) where this job may run, e.g. [app01, app02]. Default: any node.",
  },
  failures_before_alert: {
    kind: "count",
    min: 1,
    default: 1,
    doc: "Alert `failed` (or `timeout`) only after this many consecutive failed runs.",
  },
  realert_every: {
    kind: "duration",
    nullable: true,
    positive: true,
    default: null,
    doc: "Repeat an alert while its condition lasts, this often. Default: once per condition.",
  },
  locks: {
    kind: "names",
    default: [],
    doc: "Named locks shared with other jobs (docs/locks.md), e.g. [db]: a run holds each for its whole life, besides its own lock; a slot that finds one held follows overlap (skip or queue).",
  },
  group: {
    kind: "name",
    nullable: true,
    default: null,
    doc: "A concurrency group of the top-level groups: (docs/locks.md): a slot that would pass its max_running waits (overlap: queue) or is skipped. Default: none.",
  },
  priority: {
    kind: "number",
    default: 0,
    doc: "Among slots waiting for a group: the earlier slot first, then the higher priority.",
  },
  ping: {
    kind: "url",
    nullable: true,
    default: null,
    doc: "Healthchecks-style URL: URL/start when a run starts, URL on success, URL/fail on failure. Default: none.",
  },
  then: {
    kind: "jobrefs",
    default: [],
    doc: "Jobs started once for the same slot (trigger `chained`) when a run of this job ends ok. A job starts no chain that leads back to it.",
  },
  then_on_failure: {
    kind: "jobrefs",
    default: [],
    doc: "Jobs started once for the same slot (trigger `chained`) when a run of this job fails (failed, timeout, spawn_failed) with no retry left.",
  },
  blackouts: {
    kind: "blackouts",
    default: [],
    doc: 'Windows whose slots are skipped (never caught up): names from the top-level blackouts, or windows in the job\'s time zone ("Sat 00:00-06:00", "2026-12-24..2026-12-26").',
  },
};

/** Every job key but schedule and command may have a default. */
const DEFAULTABLE_KEYS: Readonly<Record<string, KeySpec>> = Object.fromEntries(
  Object.entries(JOB_KEYS).filter(([, spec]) => !spec.required),
);

const ALERT_KEYS: Readonly<Record<string, KeySpec>> = {
  webhook: { kind: "url", doc: "Send each event to this http(s) URL." },
  command: { kind: "string", doc: "Run this command for each event." },
};

const GROUP_KEYS: Readonly<Record<string, KeySpec>> = {
  max_running: {
    kind: "count",
    min: 1,
    required: true,
    doc: "Runs of the group's jobs at once, at most.",
  },
};

/** The top-level keys of jobs.yaml; `defaults` and `jobs` lead to the job keys. */
export const KEYS: Readonly<Record<string, KeySpec>> = {
  state_dir: {
    kind: "path",
    default: "./.cronvisor",
    doc: "Store, logs and locks; relative to this file's directory.",
  },
  timezone: {
    kind: "timezone",
    doc: "Time zone of every schedule, e.g. Europe/Berlin. Default: the host's.",
  },
  shell: { kind: "string", default: "/bin/sh", doc: "Runs string commands as `shell -c COMMAND`." },
  env: {
    kind: "env",
    default: {},
    doc: "Environment variables for every job, on top of a minimal base (PATH HOME USER LOGNAME SHELL LANG TZ).",
  },
  heartbeat: {
    kind: "duration",
    positive: true,
    default: "10s",
    doc: "How often the daemon records that it is alive.",
  },
  store: {
    kind: "store",
    nullable: true,
    default: null,
    doc: "postgresql://USER@HOST:PORT/DB: a PostgreSQL store that several daemons (nodes) share. The password is never in the URL: it comes from password_file, PGPASSWORD or ~/.pgpass. Default: SQLite in state_dir.",
  },
  password_file: {
    kind: "path",
    nullable: true,
    default: null,
    doc: "A file holding the PostgreSQL password alone (0600, owned by the daemon's user); relative to this file's directory. Default: PGPASSWORD, else ~/.pgpass.",
  },
  log_tails: {
    kind: "bool",
    default: true,
    doc: "With a PostgreSQL store: keep the last 64 KiB of each finished run's log in the database, so that `cronvisor logs` shows a run of another node. Whoever can connect as the store's role can read them. false: keep none. Default true.",
  },
  allow_open_database: {
    kind: "bool",
    default: false,
    doc: "Run even when the PostgreSQL store lets any local user connect as its role without a credential (a root daemon tries, as uid 65534, at start); status then warns. Default false: the daemon refuses to start (docs/safety.md).",
  },
  node: {
    kind: "node",
    doc: "This daemon's name among the nodes of a shared store (1-64 of A-Z a-z 0-9 _ . -). Default: the host name.",
  },
  lease: {
    kind: "duration",
    positive: true,
    default: "30s",
    doc: "How long a node that stops beating keeps its jobs, judged by the database's clock; a node that cannot renew it stops its runs before it runs out. Only with a PostgreSQL store.",
  },
  http: {
    kind: "hostport",
    nullable: true,
    default: null,
    doc: "HOST:PORT for the status page (GET /) and GET /healthz /status /metrics. Default: off.",
  },
  logs: {
    kind: "section",
    doc: "All run logs together.",
    keys: {
      max_total: {
        kind: "size",
        positive: true,
        default: "1GB",
        doc: "Past this, the daemon removes the oldest finished runs' logs first (never a running run's).",
      },
    },
  },
  http_logs: {
    kind: "bool",
    default: false,
    doc: "Show each run's command and log tail on the status page (GET /runs/ID). Default false: any local user can reach the http port, while logs are 0600 on disk.",
  },
  groups: {
    kind: "groups",
    default: {},
    keys: GROUP_KEYS,
    doc: "Concurrency groups by name (docs/locks.md), e.g. { heavy: { max_running: 2 } }: at most max_running runs of the jobs with that group: at once, across every node.",
  },
  alerts: {
    kind: "alerts",
    default: [],
    keys: ALERT_KEYS,
    doc: "Where events go (failed timeout late stuck repeating idle interrupted recovered): each entry is {webhook: URL} or {command: STRING}.",
  },
  blackouts: {
    kind: "windows",
    default: {},
    doc: 'Named blackout windows for jobs\' `blackouts:` lists: NAME: "YYYY-MM-DD..YYYY-MM-DD" (whole days), "YYYY-MM-DD HH:MM..YYYY-MM-DD HH:MM" or "[DAY[-DAY]] HH:MM-HH:MM", judged in each job\'s time zone.',
  },
  defaults: {
    kind: "defaults",
    keys: DEFAULTABLE_KEYS,
    doc: "Values for every job (any job key but schedule and command). A job's own value wins; env, retries, health and log merge key by key.",
  },
  jobs: {
    kind: "jobs",
    required: true,
    keys: JOB_KEYS,
    doc: "The jobs by name: 1-64 of a-z 0-9 _ . - starting with a letter or digit.",
  },
};
