// Schedule maths over croner, pure: time is always an argument. One Cron object is shared per
// distinct (pattern, zone), and the daemon runs a single timer over a heap of next slots instead
// of one croner timer per job.
import { Cron } from "croner";
import { CRON_OPTIONS } from "./cron-options.js";
import { isUtcZone } from "./host-zone.js";
import type { JobConfig } from "../core/types.js";

interface Entry {
  cron: Cron;
  // Many jobs share a pattern and ask for the slot after the same instants (a tick, a late tick
  // walking the same missed slots), and a croner step costs ~40 µs: remember recent answers.
  memo: Map<number, number | null>;
}
/** Answers kept per pattern; the memo is emptied when full (the next tick refills it). */
const MEMO_MAX = 256;
/**
 * By zone, then pattern: the tick asks once per due job, and a key made by joining the two
 * strings would be a new string to allocate and hash each time (10,000 a second at 10,000 jobs);
 * the config's own strings keep their hash.
 */
const cache = new Map<string, Map<string, Entry>>();

// croner fills a 10,000-entry year table per Cron (80 KB: 78 MiB for 1,000 distinct patterns)
// even for the 5- and 6-field patterns a config allows, whose year is always "*", all ones. It
// only reads the table once parsed, so every pattern shares the first one. Guarded by its shape:
// a croner that keeps it otherwise is left alone (test/schedule-zone.test.js sees the cost).
let allYears: unknown[] | null = null;

function shareYearTable(cron: Cron): void {
  const p = (cron as unknown as { _states?: { pattern?: { year?: unknown } } })._states?.pattern;
  const y = p?.year;
  if (!p || !Array.isArray(y) || y.length !== 10_000 || !y.every((v) => v === 1)) return;
  if (allYears === null) allYears = y;
  else p.year = allYears;
}

function entryFor(pattern: string, timezone: string): Entry {
  let zone = cache.get(timezone);
  if (!zone) cache.set(timezone, (zone = new Map()));
  let e = zone.get(pattern);
  if (!e) {
    // croner given a `timezone` reads every wall time through Intl, even UTC's; given
    // `utcOffset: 0` it does UTC arithmetic (getUTC*, Date.UTC) and leaves ICU unloaded.
    const tz = isUtcZone(timezone) ? { utcOffset: 0 } : { timezone };
    e = { cron: new Cron(pattern, { ...tz, paused: true, ...CRON_OPTIONS }), memo: new Map() };
    shareYearTable(e.cron);
    zone.set(pattern, e);
  }
  return e;
}

function step(e: Entry, after: number): number | null {
  let next = e.memo.get(after);
  if (next === undefined) {
    next = e.cron.nextRun(new Date(after))?.getTime() ?? null;
    if (e.memo.size >= MEMO_MAX) e.memo.clear();
    e.memo.set(after, next);
  }
  return next;
}

/** The first slot strictly after `after`, or null (`@reboot`, or a pattern that never fires). */
export function nextSlot(job: Pick<JobConfig, "pattern" | "timezone">, after: Date): Date | null {
  if (job.pattern === null) return null;
  const next = nextSlotAt(job, after.getTime());
  return next === null ? null : new Date(next);
}

/** nextSlot in epoch milliseconds: the daemon's tick calls it per due job, without a Date. */
export function nextSlotAt(
  job: Pick<JobConfig, "pattern" | "timezone">,
  after: number,
): number | null {
  return job.pattern === null ? null : step(entryFor(job.pattern, job.timezone), after);
}

/** The last slot strictly before `before`, or null (`@reboot`, or none before). */
export function prevSlotAt(
  job: Pick<JobConfig, "pattern" | "timezone">,
  before: number,
): number | null {
  if (job.pattern === null) return null;
  return (
    entryFor(job.pattern, job.timezone).cron.previousRuns(1, new Date(before))[0]?.getTime() ?? null
  );
}

/** Is `t` (to the millisecond) one of the schedule's slots? */
export function isSlotAt(job: Pick<JobConfig, "pattern" | "timezone">, t: number): boolean {
  return job.pattern !== null && nextSlotAt(job, t - 1) === t;
}

/** Up to `count` slots strictly after `after`. */
export function nextSlots(
  job: Pick<JobConfig, "pattern" | "timezone">,
  after: Date,
  count: number,
): Date[] {
  const out: Date[] = [];
  let t: Date | null = after;
  while (out.length < count && t) {
    t = nextSlot(job, t);
    if (t) out.push(t);
  }
  return out;
}

/**
 * The slots in (from, to] that a daemon that was down missed: the latest `max` of them (oldest
 * first), and how many earlier ones there were. croner takes ~40 µs a step, so the earlier ones
 * are counted only up to `countCap` (a year of downtime on a per-second job stays cheap).
 */
export function missedSlots(
  job: Pick<JobConfig, "pattern" | "timezone">,
  from: Date,
  to: Date,
  max: number,
  countCap = 1000,
): { slots: Date[]; earlier: number; earlierCapped: boolean } {
  if (job.pattern === null || to <= from) return { slots: [], earlier: 0, earlierCapped: false };
  // Usually only a few slots passed (a late tick, a short restart): walk forward, which shares
  // the memo with every job on this pattern. Only past `max` slots walk back from `to`.
  const e = entryFor(job.pattern, job.timezone);
  const forward: Date[] = [];
  for (let t = step(e, from.getTime()); t !== null && t <= to.getTime(); t = step(e, t)) {
    if (forward.length === max) return walkBack(e.cron, from, to, max, countCap);
    forward.push(new Date(t));
  }
  return { slots: forward, earlier: 0, earlierCapped: false };
}

function walkBack(
  cron: Cron,
  from: Date,
  to: Date,
  max: number,
  countCap: number,
): { slots: Date[]; earlier: number; earlierCapped: boolean } {
  // previousRuns is strictly before its reference: step 1 ms past `to` so `to` itself counts.
  const latest = cron
    .previousRuns(max + 1, new Date(to.getTime() + 1))
    .filter((d) => d > from)
    .reverse();
  if (latest.length <= max) return { slots: latest, earlier: 0, earlierCapped: false };
  const slots = latest.slice(1);
  const first = slots[0] as Date;
  let earlier = 0;
  let t: Date | null = from;
  while ((t = t && cron.nextRun(t)) && t < first) {
    if (++earlier >= countCap) return { slots, earlier, earlierCapped: true };
  }
  return { slots, earlier, earlierCapped: false };
}
