// The environment a job receives. The daemon's own variables, secrets included, are never
// passed on: a job starts from a minimal base and gets exactly what its config and env_file add.
// Everything here is pure except `readEnvFile` and `lookupUser`, which do the I/O.
import fs from "node:fs";
import { ENV_NAME } from "../core/env-name.js";

/** The only variables taken from the daemon's environment. */
const BASE_KEYS = ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TZ"] as const;
const DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin";

/** The account a job runs as, from /etc/passwd. */
export interface PasswdEntry {
  name: string;
  uid: number;
  gid: number;
  home: string;
  shell: string;
}

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
 * must not quietly start a job with the wrong settings.
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
    if (eq < 0) fail(`expected KEY=value, got ${JSON.stringify(line)}`);
    const key = body.slice(0, eq).trimEnd();
    if (!ENV_NAME.test(key)) fail(`invalid variable name ${JSON.stringify(key)}`);
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
    fail(`unexpected ${JSON.stringify(rest)} after the closing quote`);
  }
  return value;
}

/** Read an env_file; the error names the file, as a config error would. */
export function readEnvFile(file: string): string {
  try {
    return fs.readFileSync(file, "utf8");
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    throw new Error(`env_file ${file}: cannot read: ${err.code ?? err.message}`, { cause: e });
  }
}

/** The /etc/passwd entry for a user name (or a numeric uid), or null if there is none. */
export function lookupUser(name: string, passwdFile = "/etc/passwd"): PasswdEntry | null {
  return parsePasswd(fs.readFileSync(passwdFile, "utf8"), name);
}

/** Pure: find `name` in passwd(5) text (`name:x:uid:gid:gecos:home:shell`). */
export function parsePasswd(text: string, name: string): PasswdEntry | null {
  let byUid: PasswdEntry | null = null;
  for (const line of text.split("\n")) {
    const f = line.split(":");
    if (f.length < 7 || line.startsWith("#")) continue;
    const entry: PasswdEntry = {
      name: f[0] as string,
      uid: Number(f[2]),
      gid: Number(f[3]),
      home: f[5] as string,
      shell: (f[6] as string) || "/bin/sh", // passwd(5): an empty shell means /bin/sh
    };
    if (!Number.isInteger(entry.uid) || !Number.isInteger(entry.gid)) continue;
    if (entry.name === name) return entry;
    if (byUid === null && /^[0-9]+$/.test(name) && entry.uid === Number(name)) byUid = entry;
  }
  return byUid;
}
