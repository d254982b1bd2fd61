// The checks that need the whole file, after the walk: chains (`then:`, `then_on_failure:`) name
// jobs that exist and never lead back to where they started, and a job's `blackouts:` names
// windows that the top level defines. Each error points at the list item it is about.
import type { BlackoutWindow } from "../core/types.js";
import { reportAt, type Ctx, type Raw, type RawJob } from "./nodes.js";
import { nearest } from "./suggest.js";

/** A job named in `then:` / `then_on_failure:`, with where it was written. */
export interface JobRef {
  name: string;
  /** Offset in the text, and the key path, for an error about it. */
  at: number;
  path: string;
}

/** An entry of a job's `blackouts:`: a top-level window's name (window null) or a window. */
export interface BlackoutRef {
  name: string;
  window: BlackoutWindow | null;
  at: number;
  path: string;
}

const CHAIN_KEYS = ["then", "then_on_failure"] as const;

/** A job's value of `key`, else the `defaults:` section's. */
function effective<T>(job: RawJob, defaults: Raw, key: string): T[] {
  return ((key in job.raw ? job.raw[key] : defaults[key]) ?? []) as T[];
}

/** Report unknown job and window names and chain cycles. `raw`: the root map as the walk read it. */
export function checkLinks(ctx: Ctx, raw: Raw): void {
  const jobs = Array.isArray(raw.jobs) ? (raw.jobs as RawJob[]) : [];
  const defaults = (raw.defaults ?? {}) as Raw;
  const names = jobs.map((j) => j.name);
  const windows = (raw.blackouts ?? {}) as Record<string, BlackoutWindow>;
  const unknownJob = (r: JobRef) => {
    const near = nearest(r.name, names);
    reportAt(
      ctx,
      r.at,
      r.path,
      `no job named ${JSON.stringify(r.name)}${near ? ` (did you mean "${near}"?)` : ""}`,
    );
  };
  // A list in defaults is each job's: its names are checked once, where they are written.
  for (const key of CHAIN_KEYS)
    for (const r of (defaults[key] ?? []) as JobRef[]) if (!names.includes(r.name)) unknownJob(r);
  for (const r of (defaults.blackouts ?? []) as BlackoutRef[]) checkWindowName(ctx, r, windows);
  for (const job of jobs) {
    for (const key of CHAIN_KEYS)
      for (const r of (job.raw[key] ?? []) as JobRef[]) if (!names.includes(r.name)) unknownJob(r);
    for (const r of (job.raw.blackouts ?? []) as BlackoutRef[]) checkWindowName(ctx, r, windows);
  }
  reportCycles(ctx, jobs, defaults);
}

function checkWindowName(ctx: Ctx, r: BlackoutRef, windows: Record<string, BlackoutWindow>): void {
  if (r.window !== null || Object.hasOwn(windows, r.name)) return;
  const known = Object.keys(windows);
  const near = nearest(r.name, known);
  const hint = near
    ? ` (did you mean "${near}"?)`
    : known.length === 0
      ? ' (define it under the top-level blackouts:, or write a window such as "Sat 00:00-06:00")'
      : ` (defined: ${known.join(", ")})`;
  reportAt(ctx, r.at, r.path, `no blackout window named ${JSON.stringify(r.name)}${hint}`);
}

/**
 * A chain that leads back to a job already in it would start runs for ever: each cycle is
 * reported once, at the edge that closes it (the `then` item of its last job).
 */
function reportCycles(ctx: Ctx, jobs: readonly RawJob[], defaults: Raw): void {
  const edges = new Map<string, JobRef[]>();
  for (const job of jobs)
    edges.set(job.name, [
      ...effective<JobRef>(job, defaults, "then"),
      ...effective<JobRef>(job, defaults, "then_on_failure"),
    ]);
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const reported = new Set<string>();
  const visit = (name: string): void => {
    state.set(name, "open");
    path.push(name);
    for (const r of edges.get(name) ?? []) {
      const s = state.get(r.name);
      if (s === "open") {
        const cycle = [...path.slice(path.indexOf(r.name)), r.name];
        const key = [...cycle].slice(0, -1).sort().join(" ");
        if (!reported.has(key)) {
          reported.add(key);
          reportAt(
            ctx,
            r.at,
            r.path,
            `a chain leads back to where it started: ${cycle.join(" -> ")}`,
          );
        }
      } else if (s === undefined && edges.has(r.name)) visit(r.name);
    }
    path.pop();
    state.set(name, "done");
  };
  for (const job of jobs) if (!state.has(job.name)) visit(job.name);
}
