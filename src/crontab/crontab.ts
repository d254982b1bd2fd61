// crontab -> jobs YAML. Pure: text in, text out; the CLI reads the file and picks the exit code.
//
// What a crontab line means is taken from cronie and Debian's cron, which share Paul Vixie's
// parser (entry.c, env.c) and command runner (do_command.c). Where they or cronvisor behave
// differently, the output says so in a comment next to the job, so nothing changes silently.
//
// Words (DESIGN.md): a crontab *line* becomes a *job*; its schedule's instants are *slots*.
import YAML from "yaml";
import { dstNote } from "./dst.js";
import { MACROS, convertFields } from "./fields.js";
import { nameFor, uniqueName } from "./names.js";
import { isSimple, literal, splitPercent, tokenize, withStdin, type Token } from "./shell.js";
import { LineError } from "./types.js";
import type { ImportError, ImportOptions, ImportResult } from "./types.js";

export type { ImportError, ImportOptions, ImportResult } from "./types.js";

const SCHEMA_COMMENT =
  " yaml-language-server: $schema=./node_modules/cronvisor/schema/jobs.schema.json";

/** cron's own default: do_command.c runs `$SHELL -c cmd`, with SHELL=/bin/sh unless set. */
const CRON_SHELL = "/bin/sh";

// ---------------------------------------------------------------------------------------------
// Environment lines (cronie env.c load_env, ported state for state)

const ENV_NAMEI = 0,
  ENV_NAME = 1,
  ENV_EQ1 = 2,
  ENV_EQ2 = 3,
  ENV_VALUEI = 4,
  ENV_VALUE = 5,
  ENV_FINI = 6,
  ENV_ERROR = 7;

const isSpace = (c: string) => c === " " || c === "\t" || c === "\v" || c === "\f" || c === "\r";

/**
 * `NAME = value`, with optional matching quotes around the name or the value, is an assignment;
 * anything else is not (cron then parses the line as a job). Unquoted values lose trailing blanks.
 * One deliberate difference: an empty value (`MAILTO=`) is accepted, as its intent is plain.
 */
function parseEnvLine(s: string): { name: string; value: string } | null {
  let state = ENV_NAMEI;
  let quote = "";
  let name = "";
  let value = "";
  let i = 0;
  while (state !== ENV_ERROR && i < s.length) {
    const c = s[i] as string;
    switch (state) {
      case ENV_NAMEI:
      case ENV_VALUEI:
        if (c === "'" || c === '"') {
          quote = c;
          i++;
        }
        state++;
        break;
      case ENV_NAME:
      case ENV_VALUE:
        if (quote) {
          if (c === quote) {
            state++;
            i++;
            break;
          }
          if (state === ENV_NAME && c === "=") {
            state = ENV_ERROR;
            break;
          }
        } else if (state === ENV_NAME) {
          if (isSpace(c)) {
            i++;
            state++;
            break;
          }
          if (c === "=") {
            state++;
            break;
          }
        }
        if (state === ENV_NAME) name += c;
        else value += c;
        i++;
        break;
      case ENV_EQ1:
        if (c === "=") {
          state++;
          quote = "";
        } else if (!isSpace(c)) state = ENV_ERROR;
        i++;
        break;
      case ENV_EQ2:
      case ENV_FINI:
        if (isSpace(c)) i++;
        else state++;
        break;
    }
  }
  const unquotedValue = state === ENV_VALUE && !quote;
  if (state !== ENV_FINI && !unquotedValue && state !== ENV_EQ2) return null;
  if (unquotedValue) value = value.replace(/[ \t\v\f\r]+$/, "");
  return { name, value };
}

// ---------------------------------------------------------------------------------------------
// The command: `%` (do_command.c), shell words, wrappers

/** `flock`, `/usr/bin/flock` -> `flock`; anything else -> null. */
function wrapperName(word: string | null): "chronic" | "flock" | "timeout" | null {
  const m = word === null ? null : /^(?:\/[^\s]*\/)?(chronic|flock|timeout)$/.exec(word);
  return m ? (m[1] as "chronic" | "flock" | "timeout") : null;
}

type Layer =
  | { kind: "chronic"; text: string }
  | { kind: "flock"; text: string; lock: string }
  | {
      kind: "timeout";
      text: string;
      ms: number;
      killMs: number | null;
      signal: string | null;
      foreground: boolean;
    };

interface Unwrapped {
  command: string;
  layers: Layer[];
  /** Why a wrapper was left in place, for a comment. */
  kept: string[];
}

/** `5m` -> 300000, as coreutils timeout(1) reads it (seconds by default); null if not exact. */
function timeoutMs(text: string): number | null {
  const m = /^([0-9]*)(?:\.([0-9]*))?([smhd]?)$/.exec(text);
  if (!m || (m[1] === "" && !m[2])) return null;
  const unit =
    { "": 1000, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[3] as string] ?? 1000;
  const frac = m[2] ?? "";
  const scaled = BigInt((m[1] || "0") + frac) * BigInt(unit);
  const denominator = 10n ** BigInt(frac.length);
  if (scaled % denominator !== 0n) return null;
  const ms = Number(scaled / denominator);
  return Number.isSafeInteger(ms) ? ms : null;
}

/** 300000 -> `5m`: the largest unit that is exact, as cronvisor's durations are written. */
function formatMs(ms: number): string {
  for (const [unit, size] of [
    ["d", 86_400_000],
    ["h", 3_600_000],
    ["m", 60_000],
    ["s", 1000],
  ] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return ms === 0 ? "0s" : `${ms}ms`;
}

/**
 * Remove the wrappers cronvisor does itself from the front of a command: `chronic`, a
 * non-blocking `flock` (-> overlap: skip) and `timeout` (-> timeout:, kill_grace:), nested in
 * any order. What remains is the rest of the original text, byte for byte (or, for
 * `flock ... -c 'cmd'`, the quoted command's literal text, which flock handed to the same shell).
 * A flock whose lock file is in `sharedLocks` stays, as cronvisor's lock is per job.
 */
function unwrap(command: string, sharedLocks: Map<string, number[]>, line: number): Unwrapped {
  let text = command;
  let { tokens, complete } = tokenize(text);
  let k = 0;
  const layers: Layer[] = [];
  const kept: string[] = [];
  const has = (kind: Layer["kind"]) => layers.some((l) => l.kind === kind);
  while (complete) {
    const head = tokens[k];
    const kind = wrapperName(literal(head));
    if (!head || !kind || has(kind)) break;
    const layerText = (endToken: Token) => text.slice(head.start, endToken.end);
    if (kind === "chronic") {
      // chronic only hides output of successful runs; what follows it keeps its meaning.
      let j = k + 1;
      while (/^-[ev]+$/.test(literal(tokens[j]) ?? "")) j++;
      if (tokens[j]?.kind !== "word") break;
      layers.push({ kind, text: layerText(tokens[j - 1] as Token) });
      k = j;
      continue;
    }
    if (kind === "flock") {
      const f = parseFlock(tokens, k + 1);
      if (typeof f === "string") {
        kept.push(`kept \`${text.slice(head.start, tokens[k + 1]?.end ?? head.end)} ...\`: ${f}`);
        break;
      }
      const others = (sharedLocks.get(f.lock) ?? []).filter((l) => l !== line);
      if (others.length > 0) {
        kept.push(
          `kept \`${layerText(tokens[f.lockIndex] as Token)}\`: line${others.length > 1 ? "s" : ""} ${others.join(", ")} lock${others.length > 1 ? "" : "s"} the same file, and cronvisor's overlap lock is per job`,
        );
        break;
      }
      if (f.inner !== null) {
        layers.push({ kind, text: `${layerText(tokens[f.lockIndex + 1] as Token)}`, lock: f.lock });
        text = f.inner;
        ({ tokens, complete } = tokenize(text));
        k = 0;
        continue;
      }
      if (!isSimple(tokens.slice(f.next), false)) {
        kept.push(
          `kept \`${layerText(tokens[f.lockIndex] as Token)}\`: it locks only the first command of the line`,
        );
        break;
      }
      layers.push({ kind, text: layerText(tokens[f.lockIndex] as Token), lock: f.lock });
      k = f.next;
      continue;
    }
    const t = parseTimeout(tokens, k + 1);
    if (typeof t === "string") {
      kept.push(`kept \`${text.slice(head.start, tokens[k + 1]?.end ?? head.end)} ...\`: ${t}`);
      break;
    }
    if (!isSimple(tokens.slice(t.next), false)) {
      kept.push(
        `kept \`${layerText(tokens[t.next - 1] as Token)}\`: it limits only the first command of the line`,
      );
      break;
    }
    layers.push({ kind, text: layerText(tokens[t.next - 1] as Token), ...t.layer });
    k = t.next;
  }
  const rest =
    layers.length === 0 ? command : tokens[k] ? text.slice((tokens[k] as Token).start) : text;
  return { command: rest, layers, kept };
}

/** flock(1)'s options up to the lock file (it stops at the first non-option, like getopt "+"). */
function parseFlock(
  tokens: Token[],
  j: number,
): string | { lock: string; lockIndex: number; next: number; inner: string | null } {
  let nonblock = false;
  for (;;) {
    const v = literal(tokens[j]);
    if (v === null || !v.startsWith("-") || v === "-") break;
    j++;
    if (v === "--") break;
    if (v.startsWith("--")) {
      const [name] = v.split("=", 1);
      if (name === "--nonblock" || name === "--nb") nonblock = true;
      else if (name === "--conflict-exit-code") {
        if (!v.includes("=")) j++;
      } else if (name === "--wait" || name === "--timeout") return "it waits for the lock (-w)";
      else if (name === "--shared") return "a shared lock (-s) lets other readers in";
      else if (!["--exclusive", "--close", "--no-fork", "--verbose"].includes(name as string)) {
        return `unknown option ${v}`;
      }
      continue;
    }
    for (let c = 1; c < v.length; c++) {
      const o = v[c] as string;
      if (o === "n") nonblock = true;
      else if (o === "E") {
        if (c === v.length - 1) j++;
        break;
      } else if (o === "w") return "it waits for the lock (-w)";
      else if (o === "s") return "a shared lock (-s) lets other readers in";
      else if (!"xeoF".includes(o)) return `unknown option -${o}`;
    }
  }
  const lock = literal(tokens[j]);
  if (lock === null) return "its lock file is computed when it runs";
  if (!nonblock) {
    return "without -n it waits for the lock and then runs; cronvisor's nearest is overlap: queue";
  }
  const lockIndex = j;
  const after = literal(tokens[j + 1]);
  if (after === "-c" || after === "--command") {
    const inner = literal(tokens[j + 2]);
    if (inner === null || tokens.length !== j + 3)
      return "its -c command is not a plain quoted string";
    return { lock, lockIndex, next: j + 3, inner };
  }
  if (tokens[j + 1]?.kind !== "word") return "it runs no command";
  return { lock, lockIndex, next: j + 1, inner: null };
}

/** timeout(1)'s options and duration; `next` is the command's first token. */
function parseTimeout(
  tokens: Token[],
  j: number,
):
  | string
  | {
      next: number;
      layer: { ms: number; killMs: number | null; signal: string | null; foreground: boolean };
    } {
  let signal: string | null = null;
  let kill: string | null = null;
  let foreground = false;
  const argOf = (v: string, at: number): string | null =>
    v.length > at ? v.slice(at) : (literal(tokens[j++]) ?? null);
  for (;;) {
    const v = literal(tokens[j]);
    if (v === null || !v.startsWith("-") || v === "-") break;
    j++;
    if (v === "--") break;
    if (v.startsWith("--")) {
      const eq = v.indexOf("=");
      const name = eq < 0 ? v : v.slice(0, eq);
      const arg = () => (eq < 0 ? literal(tokens[j++]) : v.slice(eq + 1));
      if (name === "--signal") signal = arg();
      else if (name === "--kill-after") kill = arg();
      else if (name === "--foreground") foreground = true;
      else if (name !== "--preserve-status" && name !== "--verbose") return `unknown option ${v}`;
      continue;
    }
    for (let c = 1; c < v.length; c++) {
      const o = v[c];
      if (o === "s" || o === "k") {
        const a = argOf(v, c + 1);
        if (o === "s") signal = a;
        else kill = a;
        break;
      }
      if (o !== "v") return `unknown option -${o}`;
    }
  }
  const duration = literal(tokens[j]);
  const ms = duration === null ? null : timeoutMs(duration);
  if (ms === null) return `cannot read its duration "${duration ?? "?"}"`;
  const killMs = kill === null ? null : timeoutMs(kill);
  if (kill !== null && killMs === null) return `cannot read its kill-after "${kill}"`;
  if (tokens[j + 1]?.kind !== "word") return "it runs no command";
  return { next: j + 1, layer: { ms, killMs: killMs || null, signal, foreground } };
}

// ---------------------------------------------------------------------------------------------
// Lines -> jobs

/** Variables cron itself reads. They go to the job's env only if a command mentions them. */
const CONTROL_VARS = new Set([
  "SHELL", "CRON_TZ", "MAILTO", "MAILFROM", "RANDOM_DELAY", "CONTENT_TYPE",
  "CONTENT_TRANSFER_ENCODING", "MLS_LEVEL",
]); // prettier-ignore

/** Users that make a sixth column read as a user column (and are unlikely command names). */
const KNOWN_USERS = new Set([
  "root", "www-data", "nobody", "daemon", "postgres", "mysql", "nginx", "apache", "redis", "http",
  "bin", "sys", "smmsp", "operator", "uucp",
]); // prettier-ignore
const USERISH = /^[a-z_][a-z0-9_.-]*\$?$/i;
/** Sixth fields that are commands, not users, however user-like they look. */
const COMMON_COMMANDS = new Set([
  "cd", "echo", "test", "true", "sleep", "cat", "date", "find", "rm", "mv", "cp", "tar", "gzip",
  "rsync", "curl", "wget", "php", "python", "python3", "perl", "ruby", "node", "sh", "bash", "env",
  "nice", "ionice", "flock", "timeout", "chronic", "sudo", "su", "run-parts", "mail", "git", "make",
  "npm", "docker", "mysqldump", "pg_dump", "certbot", "logrotate", "touch", "mkdir", "tr", "wp",
]); // prettier-ignore

interface Entry {
  line: number;
  text: string;
  dontLog: boolean;
  macro: string | null;
  fields: string[];
  /** Everything after the time fields: `[user] command`. */
  rest: string;
}

/** The time part of a job line, which reads the same in both formats. */
function splitEntry(line: number, text: string): Entry {
  let t = text.replace(/^[ \t]+/, "");
  const dontLog = t.startsWith("-");
  if (dontLog) t = t.slice(1);
  const entry = {
    line,
    text,
    dontLog,
    macro: null as string | null,
    fields: [] as string[],
    rest: "",
  };
  if (t.startsWith("@")) {
    const m = /^@(\S*)[ \t]*(.*)$/s.exec(t) as RegExpExecArray;
    if (!MACROS.has(m[1] as string)) {
      throw new LineError(
        `unknown time specifier "@${m[1]}" (cron knows @${[...MACROS].join(" @")}, in lower case)`,
      );
    }
    entry.macro = m[1] as string;
    entry.rest = m[2] as string;
  } else {
    const m = /^(\S+)[ \t]+(\S+)[ \t]+(\S+)[ \t]+(\S+)[ \t]+(\S+)(?:[ \t]+(.*))?$/s.exec(t);
    if (!m) {
      const hint = /^export[ \t]/.test(t) ? ' (write "NAME=value" without "export")' : "";
      throw new LineError(`expected five time fields and a command, or NAME=value${hint}`);
    }
    entry.fields = m.slice(1, 6) as string[];
    entry.rest = m[6] ?? "";
  }
  if (entry.rest.trim() === "") throw new LineError("no command after the time fields");
  // cron's "catch a common typo" check: a sixth time field (seconds) is not crontab syntax.
  if (entry.rest.startsWith("*")) {
    throw new LineError('a "*" where the command should start: cron has five time fields, not six');
  }
  return entry;
}

/** A job line, its user column and its command cut at `%`. */
interface CronLine {
  entry: Entry;
  user: string | null;
  command: string;
  stdin: string | null;
}

interface Format {
  system: boolean;
  why: string;
}

function detectFormat(entries: Entry[], opts: ImportOptions): { format: Format; warning?: string } {
  if (opts.system) return { format: { system: true, why: "--system was given" } };
  if (opts.file === "/etc/crontab" || opts.file.startsWith("/etc/cron.d/")) {
    return { format: { system: true, why: `the file is ${opts.file}` } };
  }
  if (entries.length === 0) return { format: { system: false, why: "it has no job lines" } };
  const sixth = entries.map((e) => {
    const m = /^(\S+)([ \t]+\S)?/.exec(e.rest) as RegExpExecArray;
    return { entry: e, word: m[1] as string, more: m[2] !== undefined };
  });
  const notUser = sixth.find(
    (s) => !s.more || !USERISH.test(s.word) || COMMON_COMMANDS.has(s.word),
  );
  if (notUser) {
    const what = !USERISH.test(notUser.word)
      ? "cannot be a user name"
      : COMMON_COMMANDS.has(notUser.word)
        ? "is a command"
        : "has no command after it";
    return {
      format: {
        system: false,
        why: `line ${notUser.entry.line}'s sixth field "${notUser.word}" ${what}`,
      },
    };
  }
  const known = [...new Set(sixth.map((s) => s.word as string).filter((w) => KNOWN_USERS.has(w)))];
  if (known.length > 0) {
    return {
      format: {
        system: true,
        why: `every job line names a user in column 6 (${known.join(", ")})`,
      },
    };
  }
  const words = [...new Set(sixth.map((s) => s.word as string))].join(", ");
  return {
    format: { system: false, why: `no job line names a well-known user in column 6` },
    warning: `every job line's sixth field (${words}) could be a user name: if this is a system crontab, import it with --system`,
  };
}

interface Job {
  line: number;
  /** The crontab line as written. */
  original: string;
  name: string;
  comments: string[];
  notes: string[];
  schedule: string;
  user: string | null;
  command: string | string[];
  cwd: string | null;
  timezone: string | null;
  env: Record<string, string>;
  overlap: "skip" | null;
  timeoutMs: number | null;
  killGraceMs: number | null;
  jitterMs: number | null;
}

type EnvMap = Map<string, { value: string; line: number }>;

const validZone = (tz: string) => {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
};

/** The time zone cron scheduled with: CRON_TZ, or TZ (see the comment where it is used). */
const zoneOf = (env: EnvMap) => env.get("CRON_TZ")?.value ?? env.get("TZ")?.value ?? null;

const POSIX_SHELL = /(?:^|\/)(?:sh|bash|dash|ash|ksh|mksh|zsh|busybox)$/;

/** Comment text with control characters made visible: a YAML comment cannot hold them. */
const visible = (s: string) =>
  [...s]
    .map((c) => {
      const code = c.charCodeAt(0);
      const control = (code < 0x20 && c !== "\t") || code === 0x7f;
      return control ? `\\x${code.toString(16).padStart(2, "0")}` : c;
    })
    .join("");

export function importCrontab(text: string, opts: ImportOptions): ImportResult {
  const errors: ImportError[] = [];
  const warnings: string[] = [];
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  if (lines.some((l) => l.endsWith("\r"))) {
    warnings.push(
      "the file has Windows (CRLF) line endings: the \\r is dropped; cron would have kept it in commands (and they would most likely have failed)",
    );
  }
  const fail = (line: number, message: string) => {
    errors.push({ line, message: `line ${line}: ${message}` });
  };

  // Pass 1: classify the lines; job lines are split into time fields and the rest.
  type Item =
    | { kind: "comment"; line: number; text: string }
    | { kind: "blank"; line: number }
    | { kind: "env"; line: number; name: string; value: string }
    | { kind: "entry"; entry: Entry }
    | { kind: "bad"; line: number; text: string; message: string };
  const items: Item[] = lines.map((raw, i): Item => {
    const line = i + 1;
    const t = raw.replace(/\r$/, "");
    const body = t.replace(/^[ \t]+/, "");
    if (body === "") return { kind: "blank", line };
    if (body.startsWith("#")) return { kind: "comment", line, text: body.slice(1) };
    const env = parseEnvLine(body);
    if (env) {
      if (env.name === "") return { kind: "bad", line, text: t, message: "empty variable name" };
      return { kind: "env", line, ...env };
    }
    try {
      return { kind: "entry", entry: splitEntry(line, t) };
    } catch (e) {
      if (!(e instanceof LineError)) throw e;
      return { kind: "bad", line, text: t, message: e.message };
    }
  });

  const detected = detectFormat(
    items.flatMap((it) => (it.kind === "entry" ? [it.entry] : [])),
    opts,
  );
  const format = detected.format;
  if (detected.warning) warnings.push(detected.warning);

  // The user column and the command, cut at `%`, now that the format is known.
  const cmdItems = items.map((item): Item | { kind: "job"; job: CronLine } => {
    if (item.kind !== "entry") return item;
    const e = item.entry;
    let rest = e.rest;
    let user: string | null = null;
    if (format.system) {
      const m = /^(\S+)[ \t]+(.*)$/s.exec(rest);
      if (!m || (m[2] as string).trim() === "") {
        return {
          kind: "bad",
          line: e.line,
          text: e.text,
          message: "no command after the user column",
        };
      }
      user = m[1] as string;
      rest = m[2] as string;
    }
    const split = splitPercent(rest);
    // Blanks around a command mean nothing to the shell; an escaped trailing blank does.
    const command = split.command.replace(/^[ \t]+/, "").replace(/(?<!\\)[ \t]+$/, "");
    return { kind: "job", job: { entry: e, user, command, stdin: split.stdin } };
  });
  const cronLines = cmdItems.flatMap((it) => (it.kind === "job" ? [it.job] : []));

  // A lock file that two lines share excludes them from each other: that flock has to stay.
  const lockLines = new Map<string, number[]>();
  for (const c of cronLines) {
    for (const layer of unwrap(c.command, new Map(), c.entry.line).layers) {
      if (layer.kind === "flock") {
        lockLines.set(layer.lock, [...(lockLines.get(layer.lock) ?? []), c.entry.line]);
      }
    }
  }
  const sharedLocks = new Map([...lockLines].filter(([, ls]) => ls.length > 1));
  const allText = cronLines.map((c) => `${c.command}\n${c.stdin ?? ""}`).join("\n");
  const forEnv = (name: string) =>
    !CONTROL_VARS.has(name) || new RegExp(`\\$\\{?${name}\\b`).test(allText);

  // Pass 2: walk the lines in order, with the environment in force at each job.
  const env: EnvMap = new Map();
  let globalEnv: EnvMap | null = null;
  const jobs: Job[] = [];
  const taken = new Set<string>();
  let pending: string[] = []; // comments waiting for the next job
  const reject = (line: number, message: string) => {
    const original = lines[line - 1]?.replace(/\r$/, "") ?? "";
    if (opts.skipInvalid) {
      warnings.push(`line ${line}: ${message}; skipped`);
      pending.push(` line ${line} (skipped, cannot import: ${message}): ${original}`);
    } else {
      fail(line, message);
      pending.push(` line ${line} (ERROR: ${message}): ${original}`);
    }
  };
  for (const item of cmdItems) {
    if (item.kind === "blank") {
      if (pending.length > 0) pending.push("");
    } else if (item.kind === "comment") {
      pending.push(item.text);
    } else if (item.kind === "env") {
      const { name, value, line } = item;
      if ((name === "CRON_TZ" || name === "TZ") && !validZone(value)) {
        reject(
          line,
          `${name}=${value} is not a time zone cronvisor knows (an IANA name such as Europe/Berlin)`,
        );
        continue;
      }
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
        warnings.push(
          `line ${line}: "${name}" cannot be an env: name in cronvisor (letters, digits and _); not imported`,
        );
        continue;
      }
      if (value.includes("$") && forEnv(name)) {
        warnings.push(
          `line ${line}: cron does not expand variables in "${name}=${value}"; the value is copied as written`,
        );
      }
      env.set(name, { value, line });
    } else if (item.kind === "bad") {
      globalEnv ??= new Map(env);
      reject(item.line, item.message);
    } else if (item.kind === "job") {
      globalEnv ??= new Map(env);
      const line = item.job.entry.line;
      let job: Job | null;
      try {
        job = buildJob(item.job, env, globalEnv, sharedLocks, forEnv, taken, warnings);
      } catch (e) {
        if (!(e instanceof LineError)) throw e;
        reject(line, e.message);
        continue;
      }
      if (job === null) {
        const message = `"${item.job.entry.fields.join(" ")}" never fires (no such date), under cron either; left out as a comment`;
        warnings.push(`line ${line}: ${message}`);
        pending.push(` line ${line} (never fires, left out): ${item.job.entry.text}`);
        continue;
      }
      job.comments = trimBlank(pending);
      pending = [];
      jobs.push(job);
    }
  }
  return {
    yaml: render(jobs, globalEnv ?? env, format, forEnv, trimBlank(pending), opts, warnings),
    errors,
    warnings,
  };
}

function trimBlank(comments: string[]): string[] {
  const out = [...comments];
  while (out.length > 0 && out[out.length - 1] === "") out.pop();
  return out;
}

function buildJob(
  p: CronLine,
  env: EnvMap,
  globalEnv: EnvMap,
  sharedLocks: Map<string, number[]>,
  forEnv: (name: string) => boolean,
  taken: Set<string>,
  warnings: string[],
): Job | null {
  const { entry } = p;
  const notes: string[] = [];
  const line = entry.line;

  let schedule: string;
  if (entry.macro !== null) {
    schedule = `@${entry.macro}`;
  } else {
    const s = convertFields(entry.fields);
    if (s.never) return null;
    schedule = s.pattern;
    notes.push(...s.notes);
    const dst = dstNote(s, entry.fields, zoneOf(env));
    if (dst) notes.push(dst);
  }

  if (entry.dontLog) {
    notes.push(`removed cronie's "-" prefix (don't syslog this job): cronvisor records every run`);
  }

  if (/^\s*$/.test(p.command)) {
    throw new LineError(`the command is empty${p.stdin === null ? "" : ' before the first "%"'}`);
  }
  if (!tokenize(p.command).complete) {
    warnings.push(
      `line ${line}: the command has an unterminated quote or substitution${p.stdin !== null ? ' after cutting it at the first "%" (cron sent the rest to stdin; write \\% for a literal %)' : ""}; copied as cron ran it`,
    );
  }

  const unwrapped = unwrap(p.command, sharedLocks, line);
  let command = unwrapped.command;
  let overlap: "skip" | null = null;
  let timeoutMsValue: number | null = null;
  let killGraceMs: number | null = null;
  for (const layer of unwrapped.layers) {
    if (layer.kind === "chronic") {
      notes.push(
        `removed \`${layer.text}\`: cronvisor keeps every run's output in its log and alerts on failure (alerts:)`,
      );
    } else if (layer.kind === "flock") {
      overlap = "skip";
      notes.push(
        `removed \`${layer.text}\`: overlap: skip does the same for this job (a slot that finds the previous run still going is skipped and recorded). If anything outside this crontab also locks ${layer.lock}, put the flock back`,
      );
    } else if (layer.ms === 0) {
      notes.push(`removed \`${layer.text}\`: a timeout of 0 never fires`);
    } else {
      timeoutMsValue = layer.ms;
      killGraceMs = layer.killMs;
      const named = (layer.signal ?? "TERM").toUpperCase().replace(/^SIG/, "");
      const signal = { "1": "HUP", "2": "INT", "9": "KILL", "15": "TERM" }[named] ?? named;
      const how =
        signal === "KILL"
          ? "timeout(1) sent SIGKILL at once; cronvisor sends SIGTERM first and SIGKILL after kill_grace"
          : signal !== "TERM"
            ? `timeout(1) sent SIG${signal}; cronvisor sends SIGTERM, then SIGKILL after kill_grace`
            : layer.killMs
              ? "like timeout(1), cronvisor sends SIGTERM, then SIGKILL after kill_grace"
              : "timeout(1) sent only SIGTERM; cronvisor also sends SIGKILL after kill_grace";
      const group = layer.foreground
        ? " (to the whole process group; --foreground signalled only the command)"
        : " (to the whole process group)";
      notes.push(`removed \`${layer.text}\`: ${how}${group}`);
    }
  }
  for (const why of unwrapped.kept) notes.push(why);

  const name = uniqueName(nameFor(command), taken);

  if (p.stdin !== null) {
    command = withStdin(command, p.stdin);
    notes.push(
      `cron sent the text after the first "%" to the command's stdin (each further "%" a newline, "\\%" a "%", ending in a newline); the printf below sends exactly that`,
    );
    const shell = env.get("SHELL")?.value ?? CRON_SHELL;
    if (!POSIX_SHELL.test(shell)) {
      warnings.push(
        `line ${line}: the stdin of this job is written as POSIX shell, but SHELL is ${shell}`,
      );
    }
  }

  // Variables in force for this line that differ from the ones in force at the first job.
  const jobEnv: Record<string, string> = {};
  for (const [k, v] of env) {
    if (forEnv(k) && globalEnv.get(k)?.value !== v.value) jobEnv[k] = v.value;
  }
  const shell = env.get("SHELL")?.value ?? CRON_SHELL;
  const globalShell = globalEnv.get("SHELL")?.value ?? CRON_SHELL;
  let finalCommand: string | string[] = command;
  if (shell !== globalShell) {
    finalCommand = [shell, "-c", command];
    notes.push(
      `SHELL=${shell} from line ${env.get("SHELL")?.line}: run as an argv list, as cron did: ${shell} -c COMMAND`,
    );
  }
  const zone = zoneOf(env);
  const globalZone = zoneOf(globalEnv);
  if (zone !== globalZone && !env.has("CRON_TZ") && env.has("TZ")) notes.push(tzNote(env));
  const mailto = env.get("MAILTO");
  if (mailto && mailto.value !== globalEnv.get("MAILTO")?.value) notes.push(mailNote(mailto.value));

  let jitterMs: number | null = null;
  const delay = env.get("RANDOM_DELAY");
  if (delay) {
    // cronie: strtol, 0-1440 minutes, else logged and ignored. Debian's cron ignores it.
    const minutes = Number(/^\s*([+-]?[0-9]+)/.exec(delay.value)?.[1] ?? 0);
    if (minutes < 0 || minutes > 1440) {
      warnings.push(
        `line ${delay.line}: RANDOM_DELAY=${delay.value} is outside 0-1440 minutes; cronie ignored it, so does this import`,
      );
    } else if (minutes > 0) {
      jitterMs = minutes * 60_000;
      notes.push(
        `RANDOM_DELAY=${delay.value} (line ${delay.line}): cronie delayed every job by one random 0-${minutes} min picked at its start; cronvisor's jitter delays each run by a random amount up to that`,
      );
    }
  }

  const home = env.get("HOME")?.value;
  return {
    line,
    original: entry.text,
    name,
    comments: [],
    notes,
    schedule,
    user: p.user,
    command: finalCommand,
    cwd: home && home.startsWith("/") && !home.includes("$") ? home : null,
    timezone: zone !== globalZone ? zone : null,
    env: jobEnv,
    overlap,
    timeoutMs: timeoutMsValue,
    killGraceMs,
    jitterMs,
  };
}

function tzNote(env: EnvMap): string {
  const tz = env.get("TZ");
  return `TZ=${tz?.value} (line ${tz?.line}) is used as the schedule's time zone; cronie schedules by CRON_TZ only and gave TZ to the job alone: if cron ran these jobs in the host's time zone, remove timezone:`;
}

function mailNote(mailto: string): string {
  return mailto === ""
    ? 'MAILTO="": cron mailed nothing; cronvisor still keeps every run\'s output in its log'
    : `MAILTO=${mailto}: cron mailed job output there; cronvisor keeps it in the run's log (cronvisor logs JOB). To hear about failures, add an alerts: entry (a webhook or a command)`;
}

/** A note as comment lines of at most ~100 columns; continuation lines are indented. */
function wrap(note: string, width = 94): string[] {
  const out: string[] = [];
  let line = "";
  for (const word of note.split(" ")) {
    if (line !== "" && line.length + 1 + word.length > width) {
      out.push(line);
      line = `  ${word}`;
    } else line = line === "" ? word : `${line} ${word}`;
  }
  out.push(line);
  return out.map((l) => ` ${l}`);
}

function render(
  jobs: Job[],
  globalEnv: EnvMap,
  format: Format,
  forEnv: (name: string) => boolean,
  trailing: string[],
  opts: ImportOptions,
  warnings: string[],
): string {
  const header = [
    SCHEMA_COMMENT,
    ` Imported from ${opts.file} by \`cronvisor import-crontab\`. Review it, then run \`cronvisor validate\`.`,
    format.system
      ? ` format: system crontab (a user column before the command), detected because ${format.why}`
      : ` format: user crontab (five time fields, then the command), detected because ${format.why}`,
    "",
    " What changes when cronvisor runs these jobs instead of cron:",
    " - Overlaps: cron started a job even while its previous run was still going; cronvisor skips",
    "   that slot and records it (overlap: allow on a job brings cron's behaviour back).",
    " - Output: cron mailed it; cronvisor keeps each run's output in its log (cronvisor logs JOB)",
    "   and reports failures through alerts:.",
    " - Environment: both start jobs with a minimal one. cron set SHELL, HOME, LOGNAME, USER and",
    "   PATH=/usr/bin:/bin, plus the crontab's variables; cronvisor passes PATH, HOME, USER,",
    "   LOGNAME, SHELL, LANG and TZ, plus env:. Put PATH in env: if a command needs cron's.",
    " - Working directory: cron started jobs in HOME; cronvisor starts them in cwd: (set below",
    "   where the crontab set HOME, otherwise the directory of this file).",
    " - Missed runs: cron never ran what came due while it was down; cronvisor runs a missed slot",
    "   once afterwards (catchup: once, within catchup_window: 6h). catchup: skip is cron's way.",
    " - DST: cronvisor runs a job that has one fixed time exactly once on the days the clocks",
    "   change; cron implementations differ (some skip it, some run it twice).",
    " - Commands run as cron ran them, with `shell -c COMMAND`; what was rewritten is noted at",
    "   each job.",
  ];
  const mailto = globalEnv.get("MAILTO");
  if (mailto) header.push("", ...wrap(mailNote(mailto.value)));
  const globalZone = zoneOf(globalEnv);
  if (globalZone !== null && !globalEnv.has("CRON_TZ")) header.push("", ...wrap(tzNote(globalEnv)));
  for (const dropped of ["MAILFROM", "CONTENT_TYPE", "CONTENT_TRANSFER_ENCODING", "MLS_LEVEL"]) {
    const v = globalEnv.get(dropped);
    if (v && !forEnv(dropped)) {
      warnings.push(`line ${v.line}: ${dropped} only configured cron itself; not imported`);
    }
  }

  const doc = new YAML.Document({});
  doc.commentBefore = header.map(visible).join("\n");
  const top = doc.contents as YAML.YAMLMap;
  top.add(new YAML.Pair("shell", globalEnv.get("SHELL")?.value ?? CRON_SHELL));
  if (globalZone !== null) top.add(new YAML.Pair("timezone", globalZone));
  const envEntries = [...globalEnv].filter(([k]) => forEnv(k)).map(([k, v]) => [k, v.value]);
  if (envEntries.length > 0)
    top.add(new YAML.Pair("env", doc.createNode(Object.fromEntries(envEntries))));

  const jobsMap = new YAML.YAMLMap();
  for (const job of jobs) {
    const key = new YAML.Scalar(job.name);
    const comment = [...job.comments, ` line ${job.line}: ${job.original}`];
    comment.push(...job.notes.flatMap((n) => wrap(n)));
    key.commentBefore = comment.map(visible).join("\n");
    key.spaceBefore = jobsMap.items.length > 0;
    const value = new YAML.YAMLMap();
    const set = (k: string, v: unknown) => value.add(new YAML.Pair(k, v));
    const schedule = new YAML.Scalar(job.schedule);
    schedule.type = "QUOTE_DOUBLE"; // `*/5 * * * *` unquoted would be a YAML alias
    set("schedule", schedule);
    if (job.user !== null) set("user", job.user);
    set(
      "command",
      typeof job.command === "string" ? job.command : doc.createNode(job.command, { flow: true }),
    );
    if (job.cwd !== null) set("cwd", job.cwd);
    if (job.timezone !== null) set("timezone", job.timezone);
    if (Object.keys(job.env).length > 0) set("env", doc.createNode(job.env));
    if (job.overlap !== null) set("overlap", job.overlap);
    if (job.timeoutMs !== null) set("timeout", formatMs(job.timeoutMs));
    if (job.killGraceMs !== null) set("kill_grace", formatMs(job.killGraceMs));
    if (job.jitterMs !== null) set("jitter", formatMs(job.jitterMs));
    jobsMap.add(new YAML.Pair(key, value));
  }
  const jobsKey = new YAML.Scalar("jobs");
  jobsKey.spaceBefore = true;
  top.add(new YAML.Pair(jobsKey, jobsMap));
  if (trailing.length > 0) doc.comment = trailing.map(visible).join("\n");
  return doc.toString({ lineWidth: 0 });
}
