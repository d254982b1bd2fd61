// Schedule maths over croner, pure: time is always an argument. croner keeps a large table per
// Cron object (~80 KB), so one object is shared per distinct (pattern, zone) and the daemon runs a
// single timer over a heap of next slots instead of one croner timer per job.
import { Cron } from "croner";
import { CRON_OPTIONS } from "./cron-options.js";
import type { JobConfig } from "./types.js";

interface Entry {
  cron: Cron;
  // One-entry memo: many jobs share a pattern and ask for the slot after the same instant,
  // and a croner step costs ~40 µs.
  after: number;
  next: Date | null;
}
const cache = new Map<string, Entry>();

function entryFor(pattern: string, timezone: string): Entry {
  const k = `${timezone}\u0000${pattern}`;
  let e = cache.get(k);
  if (!e) {
    e = {
      cron: new Cron(pattern, { timezone, paused: true, ...CRON_OPTIONS }),
      after: NaN,
      next: null,
    };
    cache.set(k, e);
  }
  return e;
}

function cronFor(pattern: string, timezone: string): Cron {
  return entryFor(pattern, timezone).cron;
}

/** The first slot strictly after `after`, or null (`@reboot`, or a pattern that never fires). */
export function nextSlot(job: Pick<JobConfig, "pattern" | "timezone">, after: Date): Date | null {
  if (job.pattern === null) return null;
  const e = entryFor(job.pattern, job.timezone);
  const t = after.getTime();
  if (e.after !== t) {
    e.next = e.cron.nextRun(after);
    e.after = t;
  }
  return e.next && new Date(e.next.getTime());
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
  const cron = cronFor(job.pattern, job.timezone);
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
