// `cronvisor backfill`'s decisions, pure: which instants --from and --to name, and which slots of
// the range run (those with no `ok` run, oldest first; none after `now`, which are the schedule's).
import { nextSlot } from "../schedule/schedule.js";
import { gapAround, localInstants, type ParsedTime } from "../schedule/zone.js";
import type { JobConfig } from "../core/types.js";
import type { SlotRun } from "../store/store.js";

/**
 * The instant an edge of the range names. A TIME without an offset is a local time of the job's
 * zone (as `why --at` reads it): in a DST repeat --from takes the first of the two instants and
 * --to the second, so the range holds both; in a gap, the instant the clocks jump (no slot of
 * the zone lies inside a gap).
 */
export function edgeInstant(at: ParsedTime, zone: string, edge: "from" | "to"): number {
  const w = at.wall;
  if (at.offsetMs !== null)
    return Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second, w.ms) - at.offsetMs;
  const found = localInstants(w, zone);
  if (found.length === 0) return gapAround(w, zone).at;
  return (edge === "from" ? found[0] : found[found.length - 1]) as number;
}

export type BackfillPlan =
  /** More slots to run than `max`: nothing runs. `count` is at least max + 1. */
  | { kind: "too-many"; count: number }
  | {
      kind: "plan";
      /** The slots to run, oldest first, each with its attempt (1 + its runs' highest). */
      run: { slot: number; attempt: number }[];
      /** Slots of the range that have an `ok` run already (skipped). */
      done: number[];
      /** Slots of the range after `now`: left to the schedule. */
      future: number;
    };

/**
 * The slots in [from, to] (both ends included) of a job: those with no `ok` run among `runs` (what
 * each slot's runs came to) are run, oldest first, unless there are more than `max` of them. The walk stops past max + 1 slots to run, so
 * a range of years on a per-minute job costs no more than the refusal.
 */
export function planBackfill(
  job: Pick<JobConfig, "pattern" | "timezone">,
  from: number,
  to: number,
  runs: readonly SlotRun[],
  now: number,
  max: number,
): BackfillPlan {
  const had = new Map(runs.map((r) => [r.slot, r]));
  const run: { slot: number; attempt: number }[] = [];
  const done: number[] = [];
  let future = 0;
  if (job.pattern === null || to < from) return { kind: "plan", run, done, future };
  // nextSlot is strictly after its reference: start 1 ms before `from` so `from` itself counts.
  for (let d = nextSlot(job, new Date(from - 1)); d !== null; d = nextSlot(job, d)) {
    const t = d.getTime();
    if (t > to) break;
    if (t > now) {
      future++;
      // Only a count for the message: stop at a bound, the range may run years ahead.
      if (future > max) break;
      continue;
    }
    const h = had.get(t);
    if (h?.ok) done.push(t);
    else if (run.push({ slot: t, attempt: (h?.attempt ?? 0) + 1 }) > max)
      return { kind: "too-many", count: run.length };
  }
  return { kind: "plan", run, done, future };
}
