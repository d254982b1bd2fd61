// jobs.yaml -> Config, or every error with its line and column.
//
// One table, KEYS, describes every key (kind, default, doc). The validator below reads it, the
// defaults come from it, and schema.ts turns it into the JSON Schema, so the three cannot drift.
// parseConfig is pure; loadConfig only adds reading the file and asking for the host's zone.

import path from "node:path";
import { Cron } from "croner";
import {
  isAlias,
  isMap,
  isNode,
  isScalar,
  isSeq,
  LineCounter,
  parseDocument,
  type Document,
  type Node as YamlNode,
  type Scalar,
  type YAMLError,
  type YAMLMap,
  type YAMLSeq,
} from "yaml";
import { hostTimezone, readConfigFile, saveConfigCache } from "./config-cache.js";
import { CRON_OPTIONS } from "../schedule/cron-options.js";
import { parseDuration, parseSize } from "../core/duration.js";
import type {
  AlertTarget,
  Catchup,
  Config,
  ConfigError,
  JobConfig,
  Overlap,
} from "../core/types.js";

// ---------------------------------------------------------------------------------------------
// The key table

export type KeyKind =
  | "string"
  | "path"
  | "duration"
  | "size"
  | "count"
  | "bool"
  | "enum"
  | "schedule"
  | "command"
  | "timezone"
  | "env"
  | "url"
  | "hostport"
  | "alerts"
  | "section"
  | "defaults"
  | "jobs";

export interface KeySpec {
  kind: KeyKind;
  /** For humans: the schema's description. Says what a missing key means. */
  doc: string;
  /** The default as written in jobs.yaml. Absent: required, or derived (see doc). */
  default?: string | number | boolean | null | Record<string, never> | never[];
  required?: true;
  /** `null` (and `none` for a duration) switches the setting off. */
  nullable?: true;
  /** A duration or size of 0 makes no sense here. */
  positive?: true;
  /** Smallest allowed count. */
  min?: number;
  /** enum: the allowed words. */
  values?: readonly string[];
  /** section, alerts, defaults, jobs: the keys inside. */
  keys?: Readonly<Record<string, KeySpec>>;
}

export const JOB_NAME_PATTERN = "^[a-z0-9][a-z0-9_.-]{0,63}$";
export const ENV_NAME_PATTERN = "^[A-Za-z_][A-Za-z0-9_]*$";
/** `127.0.0.1:9464`, `localhost:80`, `[::1]:9464`. */
export const HOSTPORT_PATTERN = "^(\\[[0-9A-Fa-f:.]+\\]|[^\\s:[\\]]+):([0-9]+)$";
const OVERLAPS: readonly Overlap[] = ["skip", "queue", "replace", "allow"];
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
    doc: "Then SIGTERM to the whole process group (and SIGKILL after kill_grace). Default: none.",
  },
  kill_grace: {
    kind: "duration",
    default: "10s",
    doc: "Time between SIGTERM and SIGKILL when a run is stopped.",
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
    },
  },
  log: {
    kind: "section",
    doc: "Run logs.",
    keys: {
      max_size: {
        kind: "size",
        positive: true,
        default: "10MB",
        doc: "Largest log kept per run (1024-based units: B KB MB GB TB).",
      },
      keep_runs: { kind: "count", min: 1, default: 100, doc: "Logs of this many runs are kept." },
    },
  },
  ping: {
    kind: "url",
    nullable: true,
    default: null,
    doc: "Healthchecks-style URL: URL/start when a run starts, URL on success, URL/fail on failure. Default: none.",
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
  http: {
    kind: "hostport",
    nullable: true,
    default: null,
    doc: "HOST:PORT for GET /healthz /status /metrics. Default: off.",
  },
  alerts: {
    kind: "alerts",
    default: [],
    keys: ALERT_KEYS,
    doc: "Where events go (failed timeout late stuck repeating interrupted recovered): each entry is {webhook: URL} or {command: STRING}.",
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

// ---------------------------------------------------------------------------------------------
// Schedules

// CRON_OPTIONS lives in its own module so that the scheduler's maths (and `status`) can use it
// without loading the YAML parser.
export { CRON_OPTIONS };

export const MACROS: Readonly<Record<string, string | null>> = {
  "@yearly": "0 0 1 1 *",
  "@annually": "0 0 1 1 *",
  "@monthly": "0 0 1 * *",
  "@weekly": "0 0 * * 0",
  "@daily": "0 0 * * *",
  "@midnight": "0 0 * * *",
  "@hourly": "0 * * * *",
  "@reboot": null,
};

// Any fixed instant will do: with years wildcarded, an expression that never fires after it
// never fires at all. Fixed, so that validation does not read the clock.
const NEVER_FIRES_PROBE = new Date(Date.UTC(2000, 0, 1));
const CRON_FIELDS = ["second", "minute", "hour", "day-of-month", "month", "day-of-week"];

/**
 * A schedule as written -> the pattern croner gets (macros expanded, whitespace single), or
 * null for `@reboot`. Throws an Error whose message is meant for the user.
 */
const scheduleMemo = new Map<string, string | null | Error>();
export function parseSchedule(schedule: string): string | null {
  return cached(scheduleMemo, schedule, parseScheduleOnce);
}
function parseScheduleOnce(schedule: string): string | null {
  const text = schedule.trim();
  const quoted = JSON.stringify(schedule);
  if (text === "") throw new Error("schedule is empty");
  if (text.startsWith("@")) {
    const pattern = Object.hasOwn(MACROS, text) ? MACROS[text] : undefined;
    if (pattern === undefined) {
      throw new Error(`schedule ${quoted}: unknown macro (use ${Object.keys(MACROS).join(" ")})`);
    }
    return pattern;
  }
  const fields = text.split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) {
    throw new Error(
      `schedule ${quoted} has ${fields.length} field${fields.length === 1 ? "" : "s"}; ` +
        "use 5 (minute hour day month weekday) or 6 (second first)",
    );
  }
  const pattern = fields.join(" ");
  let cron: Cron;
  try {
    cron = new Cron(pattern, { ...CRON_OPTIONS, timezone: "UTC", paused: true });
  } catch (e) {
    throw new Error(`schedule ${quoted}: ${cronMessage(e)}`, { cause: e });
  }
  if (cron.nextRun(NEVER_FIRES_PROBE) === null) throw new Error(`schedule ${quoted} never fires`);
  return pattern;
}

/** croner's messages, without its class prefix and in the field names cron users know. */
function cronMessage(e: unknown): string {
  const raw = e instanceof Error ? e.message : String(e);
  const text = raw
    .replace(/^Cron\w*: /, "")
    .replace(/\.$/, "")
    .replace(/configuration entry (\d) \((.*)\)/, (_m, i: string, part: string) => {
      return `${CRON_FIELDS[Number(i)] ?? "field"} field "${part}"`;
    })
    .replace("dayOfWeek", "day-of-week")
    .replace(/\bfor day:/, "for day-of-month:");
  return text.charAt(0).toLowerCase() + text.slice(1);
}

// ---------------------------------------------------------------------------------------------
// Parsing

export interface ParseResult {
  config: Config | null;
  errors: ConfigError[];
}

/**
 * Parse and validate jobs.yaml text. Pure but for one thing: a relative `file` is made
 * absolute against the working directory (it anchors state_dir, cwd and env_file).
 * Every error is returned, sorted by position; `config` is null if there is any.
 */
export function parseConfig(
  text: string,
  file: string,
  opts: { hostTimezone?: string } = {},
): ParseResult {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true, prettyErrors: false });
  const yamlErrors = [...doc.errors, ...doc.warnings];
  const ctx: Ctx = {
    file,
    text,
    lineCounter,
    doc,
    errors: [],
    yamlAt: yamlErrors.map((e) => e.pos[0]),
    replaced: [],
    schedules: new Map(),
  };

  let raw: Raw | typeof BAD = BAD;
  const root = doc.contents;
  if (root === null || (isScalar(root) && root.value === null)) {
    reportAt(ctx, 0, "(root)", "no jobs defined");
  } else if (!isMap(root)) {
    report(
      ctx,
      root,
      "(root)",
      `expected a map of settings with "jobs:", got ${describe(ctx, root)}`,
    );
  } else {
    raw = readMap(ctx, root, KEYS, "(root)", (key, value) => rootUnknownKey(key, value));
    if (!root.has("jobs")) reportAt(ctx, rangeOf(root)[0], "(root)", "no jobs defined");
  }

  for (const e of yamlErrors) {
    const at = e.pos[0];
    if (ctx.replaced.some(([from, to]) => at >= from && at <= to)) continue;
    const where = locate(ctx, root, at);
    const { node } = where;
    if (e.code === "MISSING_CHAR" && isScalar(node) && node.type?.startsWith("QUOTE_")) {
      // YAML notices at the end of the file; the quote that was never closed is the news.
      reportAt(ctx, rangeOf(node)[0], where.path, "this quote is never closed");
    } else {
      reportAt(ctx, at, where.path, yamlMessage(e, where.key));
    }
  }

  const errors = sortErrors(ctx.errors);
  if (errors.length > 0 || raw === BAD) return { config: null, errors };
  return { config: build(raw, file, opts.hostTimezone ?? "UTC"), errors };
}

/** Read the config file and parse it. A file that cannot be read is one error at 1:1. */
export function loadConfig(file: string): ParseResult {
  return loadConfigCacheable(file).result;
}

/**
 * loadConfig, plus `saveCache`: write the state dir's copy of exactly what was parsed, for
 * `status` (src/config-cache.ts); a no-op if the parse failed. The daemon calls it once its store
 * has opened (start) or the new config is accepted (reload). Nothing here reads that copy.
 */
export function loadConfigCacheable(file: string): { result: ParseResult; saveCache: () => void } {
  const read = readConfigFile(file);
  if ("error" in read)
    return { result: { config: null, errors: [read.error] }, saveCache: () => {} };
  const zone = hostTimezone();
  const result = parseConfig(read.bytes.toString("utf8"), file, { hostTimezone: zone });
  const { config } = result;
  return {
    result,
    saveCache: () => {
      if (config) saveConfigCache(config, read.bytes, zone);
    },
  };
}

// The walk below checks the YAML tree against KEYS and produces plain values keyed by YAML
// name (durations in ms, sizes in bytes). Only keys that were present and valid are kept, so
// defaults can fill in later, layer by layer.

type Raw = Record<string, unknown>;
const BAD = Symbol("invalid");

interface Ctx {
  file: string;
  text: string;
  lineCounter: LineCounter;
  doc: Document.Parsed;
  errors: ConfigError[];
  /** Where YAML itself found problems: our own error on a node there would only repeat it. */
  yamlAt: number[];
  /** Offset ranges whose YAML errors one clearer message of ours replaces. */
  replaced: Array<[number, number]>;
  /** Checked schedules: many jobs share one, and croner takes ~0.7 ms to check each. */
  schedules: Map<string, string | null | Error>;
}

function rangeOf(node: unknown): [number, number, number] {
  const r = isNode(node) ? node.range : undefined;
  return r ? [r[0], r[1], r[2]] : [0, 0, 0];
}

function reportAt(ctx: Ctx, offset: number, where: string, message: string): void {
  const { line, col } = ctx.lineCounter.linePos(offset);
  ctx.errors.push({ file: ctx.file, line, col, path: where, message });
}

function report(ctx: Ctx, node: unknown, where: string, message: string, replacesYaml = false) {
  const start = rangeOf(node)[0];
  if (replacesYaml) {
    const eol = ctx.text.indexOf("\n", start);
    ctx.replaced.push([start, eol < 0 ? ctx.text.length : eol]);
  } else if (nearYamlError(ctx, node)) {
    return;
  }
  reportAt(ctx, start, where, message);
}

/** YAML found a problem in this node or on its line: whatever we say about it would be noise. */
function nearYamlError(ctx: Ctx, node: unknown): boolean {
  const [start, , end] = rangeOf(node);
  const line = ctx.lineCounter.linePos(start).line;
  return ctx.yamlAt.some(
    (at) => (at >= start && at <= end) || ctx.lineCounter.linePos(at).line === line,
  );
}

/** By position (a stable sort keeps same-place errors in the order found), each once. */
function sortErrors(errors: ConfigError[]): ConfigError[] {
  const unique = new Map(errors.map((e) => [`${e.line}:${e.col}:${e.path}:${e.message}`, e]));
  return [...unique.values()].sort((a, b) => a.line - b.line || a.col - b.col);
}

function join(parent: string, key: string): string {
  return parent === "(root)" ? key : `${parent}.${key}`;
}

/** A scalar as written: keeps `1.10` and `08` that a number would lose. */
function sourceText(ctx: Ctx, node: Scalar): string {
  if (typeof node.value === "string") return node.value;
  const [start, end] = rangeOf(node);
  return ctx.text.slice(start, end);
}

/** What a node is, for "expected X, got Y". */
function describe(ctx: Ctx, node: unknown): string {
  if (isMap(node)) return "a map";
  if (isSeq(node)) return "a list";
  if (isScalar(node)) {
    if (typeof node.value === "string") return JSON.stringify(node.value);
    return sourceText(ctx, node) || "nothing";
  }
  return "nothing";
}

function expected(spec: KeySpec): string {
  switch (spec.kind) {
    case "string":
    case "path":
      return "a non-empty string";
    case "duration":
      return "a duration, e.g. 30s";
    case "size":
      return "a size, e.g. 10MB";
    case "count":
      return `a whole number (${spec.min ?? 0} or more)`;
    case "bool":
      return "true or false";
    case "enum":
      return `one of ${(spec.values ?? []).join(", ")}`;
    case "schedule":
      return 'a cron expression in quotes, e.g. "0 2 * * *"';
    case "command":
      return "a command string or a list of arguments";
    case "timezone":
      return "a time zone name, e.g. Europe/Berlin";
    case "env":
      return "a map of NAME: value";
    case "url":
      return "an http(s) URL";
    case "hostport":
      return "HOST:PORT, e.g. 127.0.0.1:9464";
    case "alerts":
      return "a list of {webhook: URL} or {command: STRING}";
    case "section":
      return `a map of ${Object.keys(spec.keys ?? {}).join(", ")}`;
    case "defaults":
      return "a map of job settings";
    case "jobs":
      return "a map of jobs by name";
  }
}

function isEmptyValue(node: unknown): boolean {
  if (!isNode(node)) return true;
  const [start, end] = rangeOf(node);
  return isScalar(node) && node.value === null && start === end;
}

/** Follow an alias. An alias with no anchor is almost always an unquoted value starting with `*`. */
function deref(ctx: Ctx, node: unknown, where: string, what: string): unknown {
  if (!isAlias(node)) return node;
  const target = node.resolve(ctx.doc);
  if (target) return target;
  const start = rangeOf(node)[0];
  const eol = ctx.text.indexOf("\n", start);
  const written = ctx.text
    .slice(start, eol < 0 ? undefined : eol)
    .replace(/\s+#.*$/, "")
    .trim();
  const message = `${what} ${JSON.stringify(written)} must be quoted: YAML reads a leading * as an alias`;
  report(ctx, node, where, message, true);
  return BAD;
}

type UnknownKeyMessage = (key: string, value: unknown) => string;

function readMap(
  ctx: Ctx,
  node: unknown,
  table: Readonly<Record<string, KeySpec>>,
  where: string,
  unknownKey: UnknownKeyMessage = (key) => unknownKeyMessage(key, Object.keys(table)),
): Raw | typeof BAD {
  if (!isMap(node)) return BAD;
  const out: Raw = {};
  const seen = new Set<string>();
  for (const pair of node.items) {
    if (!isScalar(pair.key)) {
      report(ctx, pair.key, where, "keys must be plain names");
      continue;
    }
    const key = sourceText(ctx, pair.key);
    if (seen.has(key)) continue; // YAML reports the duplicate itself
    seen.add(key);
    const spec = Object.hasOwn(table, key) ? table[key] : undefined;
    if (!spec) {
      report(ctx, pair.key, where, unknownKey(key, pair.value));
      continue;
    }
    const value = readValue(ctx, spec, pair.value, pair.key, join(where, key));
    if (value !== BAD) out[key] = value;
  }
  return out;
}

function readValue(ctx: Ctx, spec: KeySpec, value: unknown, key: Scalar, where: string): unknown {
  const node = deref(ctx, value, where, spec.kind === "schedule" ? "schedule" : "value");
  if (node === BAD) return BAD;
  // An empty value has no place of its own in the text: point at its key.
  const at = isEmptyValue(node) ? key : node;
  const fail = (message: string): typeof BAD => {
    report(ctx, at, where, message);
    return BAD;
  };

  if (!isNode(node) || (isScalar(node) && node.value === null)) {
    if (spec.nullable) return null;
    switch (spec.kind) {
      case "env":
      case "section":
      case "defaults":
        return {}; // an empty block, e.g. every entry commented out
      case "alerts":
        return [];
      case "jobs":
        return fail("no jobs defined");
      case "command":
        return fail("command is empty");
      default:
        return fail(`expected ${expected(spec)}, got ${describe(ctx, node)}`);
    }
  }
  const wrongType = (): typeof BAD =>
    fail(`expected ${expected(spec)}, got ${describe(ctx, node)}`);

  switch (spec.kind) {
    case "section":
    case "defaults":
      if (!isMap(node)) return wrongType();
      return readMap(ctx, node, spec.keys ?? {}, where, (k) =>
        spec.kind === "defaults" && Object.hasOwn(JOB_KEYS, k)
          ? `"${k}" cannot have a default: set it on each job`
          : unknownKeyMessage(k, Object.keys(spec.keys ?? {})),
      );
    case "jobs":
      return isMap(node) ? readJobs(ctx, node, where) : wrongType();
    case "env":
      return isMap(node) ? readEnv(ctx, node, where) : wrongType();
    case "alerts":
      return isSeq(node) ? readAlerts(ctx, node, spec, where) : wrongType();
    case "command":
      return readCommand(ctx, node, where, wrongType);
  }
  if (!isScalar(node)) return wrongType();
  const v = node.value;
  switch (spec.kind) {
    case "string":
    case "path":
      return typeof v === "string" && v.trim() !== "" ? v : wrongType();
    case "bool":
      return typeof v === "boolean" ? v : wrongType();
    case "count":
      return typeof v === "number" && Number.isInteger(v) && v >= (spec.min ?? 0) ? v : wrongType();
    case "enum": {
      const values = spec.values ?? [];
      if (typeof v === "string" && values.includes(v)) return v;
      return fail(
        `expected ${expected(spec)}, got ${describe(ctx, node)}${suggest(String(v), values)}`,
      );
    }
    case "duration":
    case "size": {
      if (typeof v !== "string" && typeof v !== "number") return wrongType();
      const text = sourceText(ctx, node);
      if (spec.nullable && text === "none") return null;
      try {
        const n = spec.kind === "duration" ? parseDuration(text) : parseSize(text);
        return spec.positive && n === 0 ? fail("must be more than 0") : n;
      } catch (e) {
        return fail((e as Error).message);
      }
    }
    case "timezone":
      if (typeof v !== "string") return wrongType();
      if (isTimeZone(v)) return v;
      return fail(`unknown time zone ${JSON.stringify(v)}${suggest(v, timeZoneNames())}`);
    case "url": {
      if (typeof v !== "string") return wrongType();
      let url: URL | undefined;
      try {
        url = new URL(v);
      } catch {
        url = undefined;
      }
      return url && (url.protocol === "http:" || url.protocol === "https:") ? v : wrongType();
    }
    case "hostport": {
      if (typeof v !== "string") return wrongType();
      const m = new RegExp(HOSTPORT_PATTERN).exec(v);
      if (!m) return wrongType();
      const port = Number(m[2]);
      if (port < 1 || port > 65535) return fail(`port must be 1-65535, got ${port}`);
      return { host: (m[1] ?? "").replace(/^\[(.*)\]$/, "$1"), port };
    }
    case "schedule":
      if (typeof v !== "string") return wrongType();
      try {
        return { schedule: v, pattern: cached(ctx.schedules, v, parseSchedule) };
      } catch (e) {
        return fail((e as Error).message);
      }
  }
  return wrongType();
}

function readJobs(ctx: Ctx, node: YAMLMap, where: string): RawJob[] {
  const jobs: RawJob[] = [];
  const seen = new Set<string>();
  const nameRe = new RegExp(JOB_NAME_PATTERN);
  for (const pair of node.items) {
    if (!isScalar(pair.key)) {
      report(ctx, pair.key, where, "job names must be plain names");
      continue;
    }
    const name = sourceText(ctx, pair.key);
    if (seen.has(name)) continue; // YAML reports the duplicate
    seen.add(name);
    if (!nameRe.test(name)) {
      report(
        ctx,
        pair.key,
        where,
        `bad job name ${JSON.stringify(name)}: use 1-64 of a-z 0-9 _ . - starting with a letter or digit`,
      );
    }
    const jobPath = `${where}.${name}`;
    const value = deref(ctx, pair.value, jobPath, "value");
    if (value === BAD) continue;
    if (!isMap(value)) {
      const at = isEmptyValue(value) ? pair.key : value;
      report(
        ctx,
        at,
        jobPath,
        `expected a map with "schedule" and "command", got ${describe(ctx, value)}`,
      );
      continue;
    }
    const raw = readMap(ctx, value, JOB_KEYS, jobPath, (key) => jobUnknownKey(key));
    // A key YAML could not read, or a misspelt one (already reported), is not also "missing".
    const broken = nearYamlError(ctx, value);
    const given = value.items.map((p) => (isScalar(p.key) ? sourceText(ctx, p.key) : ""));
    for (const [key, spec] of Object.entries(JOB_KEYS)) {
      const misspelt = given.some((k) => !Object.hasOwn(JOB_KEYS, k) && nearest(k, [key]));
      if (spec.required && !value.has(key) && !broken && !misspelt) {
        report(ctx, pair.key, jobPath, `missing "${key}"`);
      }
    }
    if (raw !== BAD) {
      jobs.push({ name, line: ctx.lineCounter.linePos(rangeOf(pair.key)[0]).line, raw });
    }
  }
  return jobs;
}

interface RawJob {
  name: string;
  line: number;
  raw: Raw;
}

const ENV_NAME = new RegExp(ENV_NAME_PATTERN);

function readEnv(ctx: Ctx, node: YAMLMap, where: string): Raw | typeof BAD {
  const env: Record<string, string> = {};
  const seen = new Set<string>();
  let ok = true;
  for (const pair of node.items) {
    if (!isScalar(pair.key)) {
      report(ctx, pair.key, where, "variable names must be plain names");
      ok = false;
      continue;
    }
    const name = sourceText(ctx, pair.key);
    if (seen.has(name)) continue;
    seen.add(name);
    if (!ENV_NAME.test(name)) {
      report(
        ctx,
        pair.key,
        where,
        `bad variable name ${JSON.stringify(name)}: use letters, digits and _, not starting with a digit`,
      );
      ok = false;
    } else if (name.startsWith("CRONVISOR_")) {
      report(ctx, pair.key, where, `"${name}" is reserved: cronvisor sets CRONVISOR_* itself`);
      ok = false;
    }
    const value = readArgument(ctx, pair.value, pair.key, `${where}.${name}`);
    if (value === BAD) ok = false;
    else env[name] = value;
  }
  return ok ? env : BAD;
}

/** A scalar that becomes a string: an env value or an argv entry. Numbers stay as written. */
function readArgument(ctx: Ctx, value: unknown, key: unknown, where: string): string | typeof BAD {
  const node = deref(ctx, value, where, "value");
  if (node === BAD) return BAD;
  if (isScalar(node) && node.value !== null) return sourceText(ctx, node);
  const at = isEmptyValue(node) ? key : node;
  const hint = isScalar(node) || !isNode(node) ? ' (write "" for an empty string)' : "";
  report(ctx, at, where, `expected a string, got ${describe(ctx, node)}${hint}`);
  return BAD;
}

function readCommand(
  ctx: Ctx,
  node: YamlNode,
  where: string,
  wrongType: () => typeof BAD,
): string | string[] | typeof BAD {
  if (isScalar(node) && typeof node.value !== "string") return wrongType();
  if (!isScalar(node) && !isSeq(node)) return wrongType();
  const empty = isScalar(node) ? String(node.value).trim() === "" : node.items.length === 0;
  if (empty) {
    report(ctx, node, where, "command is empty");
    return BAD;
  }
  if (isScalar(node)) return String(node.value);
  const argv: string[] = [];
  for (const [i, item] of node.items.entries()) {
    const arg = readArgument(ctx, item, item, `${where}[${i}]`);
    if (arg !== BAD && i === 0 && arg.trim() === "") {
      report(ctx, item, `${where}[0]`, "the program name is empty");
    } else if (arg !== BAD) argv.push(arg);
  }
  return argv.length === node.items.length ? argv : BAD;
}

function readAlerts(
  ctx: Ctx,
  node: YAMLSeq,
  spec: KeySpec,
  where: string,
): AlertTarget[] | typeof BAD {
  const alerts: AlertTarget[] = [];
  for (const [i, item] of node.items.entries()) {
    const itemPath = `${where}[${i}]`;
    const value = deref(ctx, item, itemPath, "value");
    if (value === BAD) continue;
    const raw = readMap(ctx, value, spec.keys ?? {}, itemPath);
    const given = isMap(value) ? Object.keys(spec.keys ?? {}).filter((k) => value.has(k)) : [];
    if (raw === BAD || (isMap(value) && value.items.length === 0)) {
      const got = isMap(value) ? "an empty map" : describe(ctx, value);
      report(ctx, value, itemPath, `expected {webhook: URL} or {command: STRING}, got ${got}`);
    } else if (given.length === 0) {
      continue; // only unknown keys, each reported by readMap
    } else if (given.length > 1) {
      report(ctx, value, itemPath, 'an alert has either "webhook" or "command", not both');
    } else if (typeof raw.webhook === "string") {
      alerts.push({ kind: "webhook", url: raw.webhook });
    } else if (typeof raw.command === "string") {
      alerts.push({ kind: "command", command: raw.command });
    } // else its one value was wrong, and readMap said so
  }
  return alerts.length === node.items.length ? alerts : BAD;
}

// ---------------------------------------------------------------------------------------------
// Friendlier words for common mistakes

function rootUnknownKey(key: string, value: unknown): string {
  if (isMap(value) && (value.has("schedule") || value.has("command"))) {
    return `unknown key ${JSON.stringify(key)} (jobs go under "jobs:")`;
  }
  if (Object.hasOwn(JOB_KEYS, key)) {
    return `unknown key ${JSON.stringify(key)} (it is a job setting: put it in a job or under "defaults:")`;
  }
  return unknownKeyMessage(key, Object.keys(KEYS));
}

function jobUnknownKey(key: string): string {
  if (Object.hasOwn(KEYS, key)) {
    return `unknown key ${JSON.stringify(key)} (it is a top-level setting, not a job's)`;
  }
  return unknownKeyMessage(key, Object.keys(JOB_KEYS));
}

function unknownKeyMessage(key: string, known: readonly string[]): string {
  return `unknown key ${JSON.stringify(key)}${suggest(key, known)}`;
}

/** ` (did you mean "x"?)` for a near miss, else "". */
function suggest(word: string, candidates: readonly string[]): string {
  const best = nearest(word, candidates);
  return best === undefined ? "" : ` (did you mean "${best}"?)`;
}

/** The candidate within a typo or two of `word` (one for short words), if any. */
function nearest(word: string, candidates: readonly string[]): string | undefined {
  const limit = word.length <= 3 ? 1 : 2;
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const c of candidates) {
    const d = levenshtein(word.toLowerCase(), c.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return best;
}

function levenshtein(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost);
    }
    prev = row;
  }
  return prev[b.length] ?? 0;
}

// Building a DateTimeFormat costs ~0.5 ms, and a config names few zones many times.
const knownZones = new Set<string>();

function isTimeZone(zone: string): boolean {
  if (knownZones.has(zone)) return true;
  try {
    new Intl.DateTimeFormat(undefined, { timeZone: zone });
  } catch {
    return false;
  }
  knownZones.add(zone);
  return true;
}

/** fn(key), computed once per key of `memo`; a thrown error is rethrown each time. */
function cached<T>(memo: Map<string, T | Error>, key: string, fn: (key: string) => T): T {
  let result = memo.get(key);
  if (result === undefined) {
    try {
      result = fn(key);
    } catch (e) {
      result = e as Error;
    }
    memo.set(key, result);
  }
  if (result instanceof Error) throw result;
  return result;
}

function timeZoneNames(): string[] {
  return ["UTC", ...Intl.supportedValuesOf("timeZone")];
}

interface Location {
  path: string;
  /** The deepest node around the offset. */
  node: unknown;
  /** Set when the offset is on a key (the path is then its map's). */
  key?: string;
}

/** Where a YAML error sits, as a key path. */
function locate(ctx: Ctx, node: unknown, at: number, where = "(root)"): Location {
  // YAML reports an unclosed quote or bracket at the very end: that belongs to the last node.
  const within = (start: number, end: number) =>
    at >= start && (at < end || (at === end && end === ctx.text.length));
  if (isMap(node)) {
    for (const pair of node.items) {
      if (!isScalar(pair.key)) continue;
      const [start, , keyEnd] = rangeOf(pair.key);
      const name = sourceText(ctx, pair.key);
      if (at >= start && at < keyEnd) return { path: where, node: pair.key, key: name };
      const end = isNode(pair.value) ? rangeOf(pair.value)[2] : keyEnd;
      if (within(start, end)) return locate(ctx, pair.value, at, join(where, name));
    }
  } else if (isSeq(node)) {
    for (const [i, item] of node.items.entries()) {
      const [start, , end] = rangeOf(item);
      if (within(start, end)) return locate(ctx, item, at, `${where}[${i}]`);
    }
  }
  return { path: where, node };
}

function yamlMessage(e: YAMLError, key: string | undefined): string {
  switch (e.code) {
    case "DUPLICATE_KEY":
      return key === undefined ? "duplicate key" : `duplicate key ${JSON.stringify(key)}`;
    case "TAB_AS_INDENT":
      return "tabs are not allowed as indentation; use spaces";
    case "BLOCK_AS_IMPLICIT_KEY":
      return 'a plain value cannot contain ": "; quote it';
    case "MULTIPLE_DOCS":
      return 'a config is one YAML document: remove the "---" line';
    default:
      return e.message.charAt(0).toLowerCase() + e.message.slice(1).replace(/\.$/, "");
  }
}

// ---------------------------------------------------------------------------------------------
// Defaults and resolution

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

function build(raw: Raw, file: string, hostTimezone: string): Config {
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
    http: top("http") as Config["http"],
    alerts: top("alerts") as AlertTarget[],
    jobs: (raw.jobs as RawJob[]).map((job) => buildJob(job, defaults, { dir, timezone, env })),
  };
}

function buildJob(
  job: RawJob,
  defaults: Raw,
  top: { dir: string; timezone: string; env: Record<string, string> },
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
    },
    log: { maxSizeBytes: log.max_size as number, keepRuns: log.keep_runs as number },
    ping: pick("ping") as string | null,
    line: job.line,
  };
}
