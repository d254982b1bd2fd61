// One job line -> one job: schedule, wrappers, name, stdin and variables, each with a note
// where cronvisor behaves differently from cron.
import { dstNote } from "./dst.js";
import { convertFields } from "./fields.js";
import { nameFor, uniqueName } from "./names.js";
import { tokenize, withStdin } from "./shell.js";
import { LineError } from "./types.js";
import type { CronLine, EnvMap, Entry, Job } from "./types.js";
import { CRON_SHELL, jobVariables, zoneOf } from "./variables.js";
import { unwrap, wrapperKeys, type SharedLock } from "./wrappers.js";

const POSIX_SHELL = /(?:^|\/)(?:sh|bash|dash|ash|ksh|mksh|zsh|busybox)$/;

/** What a job line is read against: the file so far and what all its lines share. */
export interface JobContext {
  /** The variables in force at this line. */
  env: EnvMap;
  /** The variables in force at the first job line: the file's top-level keys. */
  globalEnv: EnvMap;
  /** Lock files flocked by more than one line, with those lines. */
  sharedLocks: ReadonlyMap<string, SharedLock>;
  forEnv: (name: string) => boolean;
  /** Job names given so far. */
  taken: Set<string>;
  warnings: string[];
}

/** The job for a line, or null when its schedule never fires. Throws LineError. */
export function buildJob(p: CronLine, ctx: JobContext): Job | null {
  const { entry } = p;
  const notes: string[] = [];
  const line = entry.line;

  const schedule = scheduleOf(entry, zoneOf(ctx.env), notes);
  if (schedule === null) return null;
  if (entry.dontLog) {
    notes.push(`removed cronie's "-" prefix (don't syslog this job): cronvisor records every run`);
  }
  checkCommand(p, ctx.warnings);

  const unwrapped = unwrap(p.command, ctx.sharedLocks, line);
  const keys = wrapperKeys(unwrapped.layers, notes);
  for (const why of unwrapped.kept) notes.push(why);

  const name = uniqueName(nameFor(unwrapped.command), ctx.taken);
  const command =
    p.stdin === null
      ? unwrapped.command
      : feedStdin(unwrapped.command, p.stdin, ctx.env, line, notes, ctx.warnings);
  const vars = jobVariables(command, ctx.env, ctx.globalEnv, ctx.forEnv, notes, ctx.warnings);
  // `cmd &` under cron leaves cmd running after the line's shell exits; a run's leftovers are
  // killed by default, so the line keeps cron's meaning with `leftovers: keep`.
  const background = typeof vars.command === "string" && /(^|[^&])&\s*$/.test(vars.command);
  if (background)
    notes.push(
      "leftovers: keep: the line ends in `&`, so what it starts runs on after the line's shell exits, outside the run and its lock (as under cron)",
    );
  return {
    line,
    original: entry.text,
    name,
    comments: [],
    notes,
    schedule,
    user: p.user,
    command: vars.command,
    cwd: vars.cwd,
    timezone: vars.timezone,
    env: vars.env,
    overlap: keys.overlap,
    locks: keys.locks,
    leftovers: background ? "keep" : null,
    timeoutMs: keys.timeoutMs,
    killGraceMs: keys.killGraceMs,
    jitterMs: vars.jitterMs,
  };
}

/** The schedule for cronvisor, or null when it never fires. */
function scheduleOf(entry: Entry, zone: string | null, notes: string[]): string | null {
  if (entry.macro !== null) return `@${entry.macro}`;
  const s = convertFields(entry.fields);
  if (s.never) return null;
  notes.push(...s.notes);
  const dst = dstNote(s, entry.fields, zone);
  if (dst) notes.push(dst);
  return s.pattern;
}

/** An empty command is an error; one the shell cannot read is copied with a warning. */
function checkCommand(p: CronLine, warnings: string[]): void {
  if (/^\s*$/.test(p.command)) {
    throw new LineError(`the command is empty${p.stdin === null ? "" : ' before the first "%"'}`);
  }
  if (!tokenize(p.command).complete) {
    warnings.push(
      `line ${p.entry.line}: the command has an unterminated quote or substitution${p.stdin !== null ? ' after cutting it at the first "%" (cron sent the rest to stdin; write \\% for a literal %)' : ""}; copied as cron ran it`,
    );
  }
}

/** The command with cron's stdin text fed to it by printf. */
function feedStdin(
  command: string,
  stdin: string,
  env: EnvMap,
  line: number,
  notes: string[],
  warnings: string[],
): string {
  notes.push(
    `cron sent the text after the first "%" to the command's stdin (each further "%" a newline, "\\%" a "%", ending in a newline); the printf below sends exactly that`,
  );
  const shell = env.get("SHELL")?.value ?? CRON_SHELL;
  if (!POSIX_SHELL.test(shell)) {
    warnings.push(
      `line ${line}: the stdin of this job is written as POSIX shell, but SHELL is ${shell}`,
    );
  }
  return withStdin(command, stdin);
}
