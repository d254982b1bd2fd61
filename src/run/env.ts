// The environment a job receives. The daemon's own variables, secrets included, are never
// passed on: a job starts from a minimal base and gets exactly what its config and env_file add.
// Everything here is pure except `readEnvFile`, which does the I/O.
import fs from "node:fs";
import { ENV_NAME } from "../core/env-name.js";
import { READ_NOFOLLOW } from "../core/safe-path.js";

/** The only variables taken from the daemon's environment. */
const BASE_KEYS = ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TZ"] as const;
const DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin";

export interface JobEnvInput {
  /** The daemon's environment; only BASE_KEYS are read from it. */
  base: NodeJS.ProcessEnv;
  configEnv: Record<string, string>;
  /** The env_file's contents, or null when the job has none. */
  envFileText: string | null;
  /** For error messages (`FILE:LINE: ...`). */
  envFilePath: string | null;
  /** CRONVISOR_* variables: applied last, so neither config nor env_file can fake them. */
  cronvisor: Record<string, string>;
  /** When the job runs as another user: that user's HOME, USER, LOGNAME and SHELL replace the daemon's. */
  user: { name: string; home: string; shell: string } | null;
}

/**
 * Layers, later wins: minimal base, then the run-as user's identity, then the config's `env`,
 * then `env_file`, then CRONVISOR_*. The config may still set HOME or SHELL explicitly.
 */
export function buildJobEnv(input: JobEnvInput): Record<string, string> {
  const env: Record<string, string> = {};
  for (const key of BASE_KEYS) {
    const value = input.base[key];
    if (value !== undefined) env[key] = value;
  }
  env.PATH ??= DEFAULT_PATH;
  if (input.user) {
    env.HOME = input.user.home;
    env.USER = input.user.name;
    env.LOGNAME = input.user.name;
    env.SHELL = input.user.shell;
  }
  Object.assign(env, input.configEnv);
  if (input.envFileText !== null) {
    Object.assign(env, parseEnvFile(input.envFileText, input.envFilePath ?? "env_file"));
  }
  Object.assign(env, input.cronvisor);
  return env;
}

/**
 * `KEY=value` lines; blank lines and `#` comments are skipped; `export ` is allowed in front.
 * Values: unquoted (trimmed; ` #...` after whitespace is a comment), 'single' (literal) or
 * "double" (`\"`, `\\`, `\$`, `` \` `` and `\n` are escapes). No `$VAR` expansion, no multi-line
 * values. A line that is none of these throws `FILE:LINE: message`: a half-read secrets file
 * must not quietly start a job with the wrong settings. The message never quotes the line: the
 * file may hold secrets, and a run's reason reaches history, alerts and /status.
 */
export function parseEnvFile(text: string, file: string): Record<string, string> {
  const out: Record<string, string> = {};
  const lines = text.split(/\r?\n/);
  lines.forEach((raw, i) => {
    const fail = (why: string): never => {
      throw new Error(`${file}:${i + 1}: ${why}`);
    };
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    const body = line.replace(/^export\s+/, "");
    const eq = body.indexOf("=");
    if (eq < 0) fail("expected KEY=value");
    const key = body.slice(0, eq).trimEnd();
    if (!ENV_NAME.test(key)) fail("invalid variable name");
    out[key] = parseValue(body.slice(eq + 1).trimStart(), fail);
  });
  return out;
}

function parseValue(text: string, fail: (why: string) => never): string {
  const quote = text[0];
  if (quote !== '"' && quote !== "'") return text.replace(/\s+#.*$/, "").trimEnd();
  let value = "";
  let i = 1;
  for (; i < text.length && text[i] !== quote; i++) {
    const c = text[i] as string;
    const next = text[i + 1];
    if (quote === '"' && c === "\\" && next !== undefined && '"\\$`n'.includes(next)) {
      value += next === "n" ? "\n" : next;
      i++;
    } else {
      value += c;
    }
  }
  if (i >= text.length) fail(`unterminated ${quote} quote`);
  const rest = text.slice(i + 1).trim();
  if (rest !== "" && !rest.startsWith("#")) {
    fail("unexpected text after the closing quote");
  }
  return value;
}

const ENV_FILE_MAX = 64 * 1024;

/**
 * Read an env_file as a root daemon may: never through a symbolic link (O_NOFOLLOW), never
 * blocking on a FIFO or device (O_NONBLOCK, then a regular file only), owned by one of `owners`
 * (root, the daemon's user, the job's own user) and writable by nobody else, at most 64 KiB, no
 * NUL byte (/proc/self/environ is not an env file). The error names the file, never its content.
 */
export function readEnvFile(file: string, owners: ReadonlySet<number> = daemonOwners()): string {
  const fail = (why: string, cause?: unknown): never => {
    throw new Error(`env_file ${file}: ${why}`, { cause });
  };
  let fd: number;
  try {
    fd = fs.openSync(file, READ_NOFOLLOW);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return fail(
      code === "ELOOP" ? "is a symbolic link; name the file itself" : `cannot read: ${code}`,
      e,
    );
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) fail("not a regular file");
    if (!owners.has(st.uid))
      fail(`owned by uid ${st.uid}, who may not set this job's environment; chown root it`);
    if ((st.mode & 0o022) !== 0)
      fail(`writable by group or others (mode ${(st.mode & 0o777).toString(8)}); chmod go-w it`);
    // A buffer of the file's size, not of the cap: this runs at every start of a job with an
    // env_file (a /proc file says size 0, and a file may grow while read: then up to the cap).
    const buf = readUpTo(fd, st.size + 1, ENV_FILE_MAX + 1);
    if (buf.length > ENV_FILE_MAX) fail("larger than 64 KiB");
    const nul = buf.indexOf(0);
    if (nul >= 0) {
      const line = buf.subarray(0, nul).toString("latin1").split("\n").length;
      fail(`a NUL byte on line ${line}; not an env file`);
    }
    return buf.toString("utf8");
  } finally {
    fs.closeSync(fd);
  }
}

/** Root and the daemon's own user. */
export function daemonOwners(): Set<number> {
  return new Set([0, process.getuid?.() ?? 0]);
}

/** Read at most `max` bytes into a buffer of `guess` first (a /proc file says size 0: read, don't trust fstat). */
function readUpTo(fd: number, guess: number, max: number): Buffer {
  let buf = Buffer.alloc(Math.min(guess, max));
  let n = 0;
  for (;;) {
    const got = n < buf.length ? fs.readSync(fd, buf, n, buf.length - n, null) : -1;
    if (got === 0) return buf.subarray(0, n);
    if (got > 0) n += got;
    else if (buf.length >= max) return buf;
    else buf = Buffer.concat([buf, Buffer.alloc(max - buf.length)]);
  }
}
