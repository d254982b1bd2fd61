// Defaults and resolution: the walk's Raw values -> a Config. A job's value wins over the
// `defaults:` section's, which wins over the key table's; env and sections merge key by key.
// Relative paths are resolved against the config file's directory here, and nowhere else.
import path from "node:path";
import { parseDuration, parseSize } from "../core/duration.js";
import type {
  AlertTarget,
  Catchup,
  Config,
  JobConfig,
  Leftovers,
  NamedWindow,
  Overlap,
} from "../core/types.js";
import { JOB_KEYS, KEYS, type KeySpec } from "./keys.js";
import type { Raw, RawJob } from "./nodes.js";
import type { BlackoutRef, JobRef } from "./links.js";

/** A key's default as a value (durations in ms); a section's is the map of its keys' defaults. */
function defaultOf(spec: KeySpec): unknown {
  if (spec.kind === "section") {
    return Object.fromEntries(Object.entries(spec.keys ?? {}).map(([k, s]) => [k, defaultOf(s)]));
  }
  const d = spec.default;
  if (typeof d === "string" && spec.kind === "duration") return parseDuration(d);
  if (typeof d === "string" && spec.kind === "size") return parseSize(d);
  if (Array.isArray(d)) return [];
  return d !== null && typeof d === "object" ? { ...d } : d;
}

/** The Config of a valid walk's result (`raw` of the root map, `jobs` already read). */
export function resolveConfig(raw: Raw, file: string, hostTimezone: string): Config {
  const abs = path.resolve(file);
  const dir = path.dirname(abs);
  const top = (key: string): unknown => (key in raw ? raw[key] : defaultOf(KEYS[key] as KeySpec));
  const timezone = (raw.timezone as string | undefined) ?? hostTimezone;
  const env = top("env") as Record<string, string>;
  const defaults = (raw.defaults ?? {}) as Raw;
  return {
    file: abs,
    stateDir: path.resolve(dir, top("state_dir") as string),
    timezone,
    shell: top("shell") as string,
    env,
    heartbeatMs: top("heartbeat") as number,
    store: top("store") as string | null,
    passwordFile:
      typeof raw.password_file === "string" ? path.resolve(dir, raw.password_file) : null,
    allowOpenDatabase: top("allow_open_database") as boolean,
    logTails: top("log_tails") as boolean,
    node: (raw.node as string | undefined) ?? null,
    leaseMs: top("lease") as number,
    http: top("http") as Config["http"],
    httpLogs: top("http_logs") as boolean,
    // A section merges key by key with its defaults, as a job's do.
    logsMaxTotalBytes: { ...(defaultOf(KEYS.logs as KeySpec) as Raw), ...(raw.logs as Raw) }
      .max_total as number,
    alerts: top("alerts") as AlertTarget[],
    groups: Object.entries(top("groups") as Record<string, Raw>).map(([name, g]) => ({
      name,
      maxRunning: g.max_running as number,
    })),
    jobs: (raw.jobs as RawJob[]).map((job) =>
      resolveJob(job, defaults, { dir, timezone, env, windows: (raw.blackouts ?? {}) as Raw }),
    ),
  };
}

function resolveJob(
  job: RawJob,
  defaults: Raw,
  top: { dir: string; timezone: string; env: Record<string, string>; windows: Raw },
): JobConfig {
  const own = job.raw;
  // The job's value, else the defaults', else the table's; maps merge key by key.
  const pick = (key: string): unknown => {
    const spec = JOB_KEYS[key] as KeySpec;
    if (spec.kind === "section" || spec.kind === "env") {
      return { ...(defaultOf(spec) as Raw), ...(defaults[key] as Raw), ...(own[key] as Raw) };
    }
    return key in own ? own[key] : key in defaults ? defaults[key] : defaultOf(spec);
  };
  const relative = (p: unknown) => (typeof p === "string" ? path.resolve(top.dir, p) : null);
  const schedule = own.schedule as { schedule: string; pattern: string | null };
  const retries = pick("retries") as Raw;
  const health = pick("health") as Raw;
  const log = pick("log") as Raw;
  const limits = pick("limits") as Raw;
  return {
    name: job.name,
    schedule: schedule.schedule,
    pattern: schedule.pattern,
    command: own.command as string | string[],
    cwd: relative(pick("cwd")) ?? top.dir,
    env: { ...top.env, ...(pick("env") as Record<string, string>) },
    envFile: relative(pick("env_file")),
    user: pick("user") as string | null,
    timezone: (pick("timezone") as string | undefined) ?? top.timezone,
    timeoutMs: pick("timeout") as number | null,
    killGraceMs: pick("kill_grace") as number,
    overlap: pick("overlap") as Overlap,
    catchup: pick("catchup") as Catchup,
    catchupWindowMs: pick("catchup_window") as number,
    jitterMs: pick("jitter") as number,
    retries: { attempts: retries.attempts as number, backoffMs: retries.backoff as number },
    paused: pick("paused") as boolean,
    health: {
      successWithinMs: health.success_within as number | null,
      progressWithinMs: health.progress_within as number | null,
      repeatLimit: health.repeat_limit as number,
      newWorkWithinMs: health.new_work_within as number | null,
    },
    log: { maxSizeBytes: log.max_size as number, keepRuns: log.keep_runs as number },
    ping: pick("ping") as string | null,
    failuresBeforeAlert: pick("failures_before_alert") as number,
    realertEveryMs: pick("realert_every") as number | null,
    hosts: pick("hosts") as string[] | null,
    leftovers: pick("leftovers") as Leftovers,
    limits: {
      memoryBytes: limits.memory as number | null,
      cpuPercent: limits.cpu as number | null,
      tasks: limits.tasks as number | null,
      nofile: limits.nofile as number | null,
    },
    // Sorted: every run takes its named locks in one order, so two never wait on each other.
    locks: [...(pick("locks") as string[])].sort(),
    group: pick("group") as string | null,
    priority: pick("priority") as number,
    then: (pick("then") as JobRef[]).map((r) => r.name),
    thenOnFailure: (pick("then_on_failure") as JobRef[]).map((r) => r.name),
    // A name is the top-level window of that name (links.ts checked that there is one).
    blackouts: (pick("blackouts") as BlackoutRef[]).map((r) => ({
      name: r.name,
      window: r.window ?? (top.windows[r.name] as NamedWindow["window"]),
    })),
    line: job.line,
  };
}
