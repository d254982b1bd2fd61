// Variable lines (`NAME=value`): how cron reads them, and what each becomes in cronvisor: env:,
// shell:, timezone:, jitter: or cwd:, or a note for what cron alone used (MAILTO).
import { ENV_NAME as VALID_ENV_NAME } from "../core/env-name.js";
import type { CronLine, EnvMap } from "./types.js";

/** cron's own default: do_command.c runs `$SHELL -c cmd`, with SHELL=/bin/sh unless set. */
export const CRON_SHELL = "/bin/sh";

/** Variables cron itself reads. They go to the job's env only if a command mentions them. */
const CONTROL_VARS = new Set([
  "SHELL", "CRON_TZ", "MAILTO", "MAILFROM", "RANDOM_DELAY", "CONTENT_TYPE",
  "CONTENT_TRANSFER_ENCODING", "MLS_LEVEL",
]); // prettier-ignore

/** The names cronvisor's env: takes. */

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
export function parseEnvLine(s: string): { name: string; value: string } | null {
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

/** Whether a variable goes to the jobs' env: cron's own only when a command or stdin uses it. */
export function envFilter(cronLines: CronLine[]): (name: string) => boolean {
  const allText = cronLines.map((c) => `${c.command}\n${c.stdin ?? ""}`).join("\n");
  return (name: string) => !CONTROL_VARS.has(name) || new RegExp(`\\$\\{?${name}\\b`).test(allText);
}

const validZone = (tz: string) => {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
};

/**
 * A variable line, in file order: sets it in `env` (warning where cronvisor reads it
 * differently), or returns why the line cannot be imported.
 */
export function takeVariable(
  v: { line: number; name: string; value: string },
  env: EnvMap,
  forEnv: (name: string) => boolean,
  warnings: string[],
): string | null {
  const { name, value, line } = v;
  if ((name === "CRON_TZ" || name === "TZ") && !validZone(value)) {
    return `${name}=${value} is not a time zone cronvisor knows (an IANA name such as Europe/Berlin)`;
  }
  if (!VALID_ENV_NAME.test(name)) {
    warnings.push(
      `line ${line}: "${name}" cannot be an env: name in cronvisor (letters, digits and _); not imported`,
    );
    return null;
  }
  if (value.includes("$") && forEnv(name)) {
    warnings.push(
      `line ${line}: cron does not expand variables in "${name}=${value}"; the value is copied as written`,
    );
  }
  env.set(name, { value, line });
  return null;
}

/** The time zone cron scheduled with: CRON_TZ, or TZ (see the comment where it is used). */
export const zoneOf = (env: EnvMap) => env.get("CRON_TZ")?.value ?? env.get("TZ")?.value ?? null;

export function tzNote(env: EnvMap): string {
  const tz = env.get("TZ");
  return `TZ=${tz?.value} (line ${tz?.line}) is used as the schedule's time zone; cronie schedules by CRON_TZ only and gave TZ to the job alone: if cron ran these jobs in the host's time zone, remove timezone:`;
}

export function mailNote(mailto: string): string {
  return mailto === ""
    ? 'MAILTO="": cron mailed nothing; cronvisor still keeps every run\'s output in its log'
    : `MAILTO=${mailto}: cron mailed job output there; cronvisor keeps it in the run's log (cronvisor logs JOB). To hear about failures, add an alerts: entry (a webhook or a command)`;
}

/** What the variables in force at a job line make of that job. */
export interface JobVariables {
  command: string | string[];
  env: Record<string, string>;
  cwd: string | null;
  timezone: string | null;
  jitterMs: number | null;
}

/**
 * The job's keys from the variables in force at its line: those that differ from the ones in
 * force at the first job (which become the file's top-level keys) go to the job.
 */
export function jobVariables(
  command: string,
  env: EnvMap,
  globalEnv: EnvMap,
  forEnv: (name: string) => boolean,
  notes: string[],
  warnings: string[],
): JobVariables {
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
  const jitterMs = randomDelay(env, notes, warnings);
  const home = env.get("HOME")?.value;
  return {
    command: finalCommand,
    env: jobEnv,
    cwd: home && home.startsWith("/") && !home.includes("$") ? home : null,
    timezone: zone !== globalZone ? zone : null,
    jitterMs,
  };
}

/** cronie's RANDOM_DELAY as cronvisor's jitter, in ms; null for none (or one cronie ignored). */
function randomDelay(env: EnvMap, notes: string[], warnings: string[]): number | null {
  const delay = env.get("RANDOM_DELAY");
  if (!delay) return null;
  // cronie: strtol, 0-1440 minutes, else logged and ignored. Debian's cron ignores it.
  const minutes = Number(/^\s*([+-]?[0-9]+)/.exec(delay.value)?.[1] ?? 0);
  if (minutes < 0 || minutes > 1440) {
    warnings.push(
      `line ${delay.line}: RANDOM_DELAY=${delay.value} is outside 0-1440 minutes; cronie ignored it, so does this import`,
    );
    return null;
  }
  if (minutes === 0) return null;
  notes.push(
    `RANDOM_DELAY=${delay.value} (line ${delay.line}): cronie delayed every job by one random 0-${minutes} min picked at its start; cronvisor's jitter delays each run by a random amount up to that`,
  );
  return minutes * 60_000;
}
