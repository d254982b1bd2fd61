// `cronvisor plan`: what applying a config would change, as a pure function of the baseline (the
// config the daemon runs or last ran), the new config, the store's facts and `now`. It asks the
// daemon's own decisions (catch-up, resume, retry) what they would do, so the plan says what the
// daemon will do, not a second opinion. Applying means a reload while a daemon runs (no catch-up:
// a reload counts new slots from now) and a start while none does (catch-up from each job's slot
// stamp, resumes of interrupted runs, @reboot for this boot).
import type { Config, JobConfig } from "../core/types.js";
import { dstCrossings } from "../schedule/dst-ahead.js";
import { nextSlots, nextSlotAt } from "../schedule/schedule.js";
import { planCatchUp, planResume } from "./catchup.js";
import { retryDelay } from "./retry.js";

export type BaselineSource = "daemon" | "recorded" | "none";
export type Change = "added" | "removed" | "changed" | "same";

export interface Baseline {
  source: BaselineSource;
  /** When the baseline was accepted by its daemon; null with none. */
  at: number | null;
  config: Pick<Config, "jobs"> | null;
}

/** What the store knows that the plan reads; every field is read, never written. */
export interface PlanFacts {
  /** Jobs with a row: their slot stamp and the boot their @reboot last ran in. */
  jobs: ReadonlyMap<string, { scanned_to: number | null; reboot_boot_id: string | null }>;
  /** Running runs; `alive`: its processes (or, of another node, its node) still live. */
  running: readonly {
    id: number;
    job: string;
    slot: number | null;
    started_at: number;
    attempt: number;
    alive: boolean;
  }[];
  /** Each job's latest finished run (for a retry the daemon has pending). */
  lastRuns: ReadonlyMap<
    string,
    { id: number; status: string; attempt: number; finished_at: number | null }
  >;
  /** Marker count per namespace (namespaces without markers absent). */
  markerCounts: ReadonlyMap<string, number>;
  bootId: string;
}

export interface JobPlan {
  name: string;
  change: Change;
  /** The changed key paths, as in the config (`schedule`, `retries.attempts`, `env.MODE`). */
  keys: string[];
  next_before: string[];
  next_after: string[];
  /** What applying starts at once. */
  at_once: string[];
  /** What would never run again. */
  never_again: string[];
  /** Other consequences: pending retries kept or dropped, slots recorded missed. */
  notes: string[];
  /** The run a removed or changed job has running, and what becomes of it. */
  running: number | null;
  running_note: string | null;
  /** Clock changes its schedule crosses in the next year. */
  dst: string[];
}

export interface MarkersLeft {
  job: string;
  count: number;
  renamed_to: string | null;
}

export interface Plan {
  baseline: { source: BaselineSource; at: string | null };
  jobs: JobPlan[];
  markers_left: MarkersLeft[];
}

const NEXT = 5;
const YEAR = 365 * 86_400_000;
const iso = (t: number): string => new Date(t).toISOString();

/** A field of JobConfig as its key in the YAML: `catchupWindowMs` -> `catchup_window`. */
export function keyName(field: string): string {
  return field.replace(/(Ms|Bytes|Percent)$/, "").replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

const plain = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v);

/** The key paths whose values differ, nested objects followed (env by variable name). */
export function changedKeys(a: unknown, b: unknown, prefix = ""): string[] {
  const out: string[] = [];
  const ra = plain(a) ? a : {};
  const rb = plain(b) ? b : {};
  const fields = [...new Set([...Object.keys(ra), ...Object.keys(rb)])];
  for (const f of fields) {
    // Derived or positional, not settings: the pattern follows the schedule, the line the file.
    if (prefix === "" && (f === "pattern" || f === "line" || f === "name")) continue;
    const name = prefix === "env." ? f : keyName(f);
    const [va, vb] = [ra[f], rb[f]];
    if (plain(va) && plain(vb)) out.push(...changedKeys(va, vb, `${prefix}${name}.`));
    else if (JSON.stringify(va) !== JSON.stringify(vb)) out.push(`${prefix}${name}`);
  }
  return out;
}

const nextOf = (job: JobConfig | undefined, now: number): string[] =>
  job ? nextSlots(job, new Date(now), NEXT).map((d) => d.toISOString()) : [];

export function plan(
  baseline: Baseline,
  next: Pick<Config, "jobs">,
  facts: PlanFacts,
  now: number,
): Plan {
  const before = new Map((baseline.config?.jobs ?? []).map((j) => [j.name, j]));
  const after = new Map(next.jobs.map((j) => [j.name, j]));
  const names = [
    ...next.jobs.map((j) => j.name),
    ...[...before.keys()].filter((n) => !after.has(n)),
  ];
  const jobs = names.map((name) =>
    jobPlan(name, before.get(name), after.get(name), baseline, facts, now),
  );
  return {
    baseline: { source: baseline.source, at: baseline.at === null ? null : iso(baseline.at) },
    jobs,
    markers_left: markersLeft(before, after, facts),
  };
}

function jobPlan(
  name: string,
  old: JobConfig | undefined,
  neu: JobConfig | undefined,
  baseline: Baseline,
  facts: PlanFacts,
  now: number,
): JobPlan {
  const keys = old && neu ? changedKeys(old, neu) : [];
  const change: Change = !old ? "added" : !neu ? "removed" : keys.length > 0 ? "changed" : "same";
  const p: JobPlan = {
    name,
    change,
    keys,
    next_before: nextOf(old, now),
    next_after: nextOf(neu, now),
    at_once: [],
    never_again: [],
    notes: [],
    running: null,
    running_note: null,
    dst: neu ? dstCrossings(neu, now, now + YEAR) : [],
  };
  const reload = baseline.source === "daemon";
  if (neu) startsAtOnce(p, old, neu, reload, facts, now);
  neverAgain(p, old, neu, now);
  runningFate(p, neu, reload, facts, now);
  if (reload && old) retryFate(p, old, neu, facts, now);
  return p;
}

/** @reboot for this boot, and (at a start) the catch-up of slots that passed while none ran. */
function startsAtOnce(
  p: JobPlan,
  old: JobConfig | undefined,
  neu: JobConfig,
  reload: boolean,
  facts: PlanFacts,
  now: number,
): void {
  const row = facts.jobs.get(neu.name);
  // A daemon claims @reboot per boot: at its start for every job, at a reload for a new job.
  if (neu.pattern === null && (!reload || !old) && row?.reboot_boot_id !== facts.bootId)
    p.at_once.push("@reboot: runs at once (it has not run since this boot)");
  if (reload || row?.scanned_to == null) return;
  const c = planCatchUp(neu, row.scanned_to, now);
  if (c.kind !== "passed") return;
  const since = iso(row.scanned_to);
  if (c.run.length > 0) {
    const slots = c.run.map(iso).join(", ");
    const was = old ? planCatchUp(old, row.scanned_to, now) : null;
    const wasN = was?.kind === "passed" ? was.run.length : 0;
    const contrast = was && wasN !== c.run.length ? `; the baseline would run ${wasN}` : "";
    p.at_once.push(
      `catch-up (catchup: ${neu.catchup}): ${c.run.length} slot(s) since the last daemon stopped at ${since} run at once, one after another: ${slots}${contrast}`,
    );
  }
  const missed = c.missed.length + c.earlier;
  if (missed > 0)
    p.notes.push(`${missed} slot(s) since ${since} are recorded missed (catchup: ${neu.catchup})`);
}

function neverAgain(
  p: JobPlan,
  old: JobConfig | undefined,
  neu: JobConfig | undefined,
  now: number,
): void {
  const nextOld = old ? nextSlotAt(old, now) : null;
  if (old && !neu) {
    const would = nextOld === null ? "" : ` (its next slot was ${iso(nextOld)})`;
    p.never_again.push(`${old.name} never runs again${would}`);
  } else if (old && neu && neu.paused && !old.paused) {
    p.never_again.push("paused: no slot of it runs until `paused: false`");
  } else if (old && neu && old.pattern !== null && nextSlotAt(neu, now) === null) {
    p.never_again.push(`no slot any more: ${neu.schedule} runs only when the machine boots`);
  }
}

/** A running run of a changed or removed job, at a reload or at a start. */
function runningFate(
  p: JobPlan,
  neu: JobConfig | undefined,
  reload: boolean,
  facts: PlanFacts,
  now: number,
): void {
  const r = facts.running.find((x) => x.job === p.name);
  if (!r) return;
  if (p.change === "removed" || p.change === "changed") p.running = r.id;
  const run = `run ${r.id} (started ${iso(r.started_at)})`;
  if (reload) {
    if (p.change === "removed")
      p.running_note = `${run} runs on to its end under its lock and is recorded; nothing of ${p.name} starts after it`;
    else if (p.change === "changed")
      p.running_note = `${run} finishes with the settings it started with; later runs use the new ones`;
    return;
  }
  if (r.alive) {
    p.running_note = neu
      ? `${run} is adopted by the starting daemon and runs on`
      : `${run} is left running and unwatched (no job of the file owns it); its lock holds until it ends`;
    return;
  }
  p.running_note = `${run} died with its daemon: recorded interrupted`;
  const resume = neu ? planResume(neu, r, now) : null;
  if (resume)
    p.at_once.push(
      `resume: run ${r.id} was interrupted; attempt ${resume.attempt} of its slot starts at once`,
    );
}

/** A retry the running daemon has pending (its timer is not in the store: read from the run). */
function retryFate(
  p: JobPlan,
  old: JobConfig,
  neu: JobConfig | undefined,
  facts: PlanFacts,
  now: number,
): void {
  const last = facts.lastRuns.get(old.name);
  if (!last || last.finished_at === null || (last.status !== "failed" && last.status !== "timeout"))
    return;
  if (last.attempt > old.retries.attempts) return;
  const due = last.finished_at + retryDelay(old.retries.backoffMs, last.attempt);
  if (due <= now) return;
  const retry = `the pending retry of run ${last.id} (attempt ${last.attempt + 1}, due ${iso(due)})`;
  p.notes.push(neu ? `${retry} still runs` : `${retry} never runs`);
}

/**
 * Marker namespaces no job of the new file owns, with a likely rename: a job of the new file that
 * the baseline did not have, with the same command as the namespace's job in the baseline.
 */
function markersLeft(
  before: ReadonlyMap<string, JobConfig>,
  after: ReadonlyMap<string, JobConfig>,
  facts: PlanFacts,
): MarkersLeft[] {
  const out: MarkersLeft[] = [];
  const same = (a: JobConfig, b: JobConfig) =>
    JSON.stringify(a.command) === JSON.stringify(b.command);
  for (const [job, count] of [...facts.markerCounts].sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (count === 0 || after.has(job)) continue;
    const was = before.get(job);
    const to = was
      ? [...after.values()].find((j) => !before.has(j.name) && same(j, was))
      : undefined;
    out.push({ job, count, renamed_to: to?.name ?? null });
  }
  return out;
}
