// crontab -> jobs YAML. Pure: text in, text out; the CLI reads the file and picks the exit code.
//
// What a crontab line means is taken from cronie and Debian's cron, which share Paul Vixie's
// parser (entry.c, env.c) and command runner (do_command.c). Where they or cronvisor behave
// differently, the output says so in a comment next to the job, so nothing changes silently.
//
// The stages: lines.ts classifies the lines and detects the format; variables.ts, fields.ts,
// wrappers.ts and names.ts read a line's parts; job.ts makes a job of a job line; render.ts
// writes the YAML. A crontab *line* becomes a *job*; its schedule's instants are *slots*.
import { buildJob } from "./job.js";
import { classifyLine, cutCommand, detectFormat, splitLines, type LineItem } from "./lines.js";
import { render } from "./render.js";
import { LineError } from "./types.js";
import type { CronLine, EnvMap, ImportError, ImportOptions, ImportResult, Job } from "./types.js";
import { envFilter, takeVariable } from "./variables.js";
import { sharedLockFiles, type SharedLock } from "./wrappers.js";

export type { ImportError, ImportOptions, ImportResult } from "./types.js";

export function importCrontab(text: string, opts: ImportOptions): ImportResult {
  const errors: ImportError[] = [];
  const warnings: string[] = [];
  const lines = splitLines(text, warnings);

  // Pass 1: classify the lines, then cut the user column and the command once the format is
  // known (it is detected from the job lines).
  const classified = lines.map((raw, i) => classifyLine(raw, i + 1));
  const detected = detectFormat(
    classified.flatMap((it) => (it.kind === "entry" ? [it.entry] : [])),
    opts,
  );
  if (detected.warning) warnings.push(detected.warning);
  const items = classified.map((item) => cutCommand(item, detected.format.system));
  const cronLines = items.flatMap((it) => (it.kind === "job" ? [it.job] : []));
  const forEnv = envFilter(cronLines);

  // Pass 2: walk the lines in order, with the environment in force at each job.
  const ctx = { lines, opts, sharedLocks: sharedLockFiles(cronLines), forEnv, errors, warnings };
  const walked = walk(items, ctx);
  return {
    yaml: render(
      walked.jobs,
      walked.globalEnv ?? walked.env,
      detected.format,
      forEnv,
      trimBlank(walked.pending),
      opts,
      warnings,
    ),
    errors,
    warnings,
  };
}

interface WalkContext {
  lines: string[];
  opts: ImportOptions;
  sharedLocks: ReadonlyMap<string, SharedLock>;
  forEnv: (name: string) => boolean;
  errors: ImportError[];
  warnings: string[];
}

/** Pass 2's state, line by line. */
interface Walk {
  /** The variables in force at the current line. */
  env: EnvMap;
  /** The variables in force at the first job (or bad) line: the file's top-level keys. */
  globalEnv: EnvMap | null;
  jobs: Job[];
  taken: Set<string>;
  /** Comments waiting for the next job. */
  pending: string[];
}

function walk(items: LineItem[], ctx: WalkContext): Walk {
  const w: Walk = { env: new Map(), globalEnv: null, jobs: [], taken: new Set(), pending: [] };
  const reject = (line: number, message: string) => {
    const original = ctx.lines[line - 1]?.replace(/\r$/, "") ?? "";
    if (ctx.opts.skipInvalid) {
      ctx.warnings.push(`line ${line}: ${message}; skipped`);
      w.pending.push(` line ${line} (skipped, cannot import: ${message}): ${original}`);
    } else {
      ctx.errors.push({ line, message: `line ${line}: ${message}` });
      w.pending.push(` line ${line} (ERROR: ${message}): ${original}`);
    }
  };
  for (const item of items) {
    if (item.kind === "blank") {
      if (w.pending.length > 0) w.pending.push("");
    } else if (item.kind === "comment") {
      w.pending.push(item.text);
    } else if (item.kind === "env" && item.name.startsWith("CRONVISOR_")) {
      // cronvisor gives every run its own CRONVISOR_* (the config refuses them in env:): a
      // crontab's copy would be overwritten, so it is left out, and the comment says so.
      w.pending.push(
        ` line ${item.line}: ${item.name}=${item.value} not imported: cronvisor sets CRONVISOR_* itself for every run`,
      );
    } else if (item.kind === "env") {
      const why = takeVariable(item, w.env, ctx.forEnv, ctx.warnings);
      if (why !== null) reject(item.line, why);
    } else if (item.kind === "bad") {
      w.globalEnv ??= new Map(w.env);
      reject(item.line, item.message);
    } else if (item.kind === "job") {
      w.globalEnv ??= new Map(w.env);
      takeJob(item.job, w, w.globalEnv, ctx, reject);
    }
  }
  return w;
}

/** A job line: a job, a comment for a schedule that never fires, or a rejected line. */
function takeJob(
  cron: CronLine,
  w: Walk,
  globalEnv: EnvMap,
  ctx: WalkContext,
  reject: (line: number, message: string) => void,
): void {
  const line = cron.entry.line;
  const { sharedLocks, forEnv, warnings } = ctx;
  let job: Job | null;
  try {
    job = buildJob(cron, { env: w.env, globalEnv, sharedLocks, forEnv, taken: w.taken, warnings });
  } catch (e) {
    if (!(e instanceof LineError)) throw e;
    reject(line, e.message);
    return;
  }
  if (job === null) {
    const message = `"${cron.entry.fields.join(" ")}" never fires (no such date), under cron either; left out as a comment`;
    warnings.push(`line ${line}: ${message}`);
    w.pending.push(` line ${line} (never fires, left out): ${cron.entry.text}`);
    return;
  }
  job.comments = trimBlank(w.pending);
  w.pending = [];
  w.jobs.push(job);
}

function trimBlank(comments: string[]): string[] {
  const out = [...comments];
  while (out.length > 0 && out[out.length - 1] === "") out.pop();
  return out;
}
