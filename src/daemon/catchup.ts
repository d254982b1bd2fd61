// The catch-up plan: what runs after downtime (slots that passed while no daemon ran) and after
// an interrupted run. Pure functions of (job, state, now).
import { missedSlots } from "../schedule/schedule.js";
import type { JobConfig } from "../core/types.js";
import { LATE_MS, MISSED_ROWS, type Pending } from "./state.js";

type CatchUpJob = Pick<JobConfig, "pattern" | "timezone" | "catchup" | "catchupWindowMs">;

export type CatchUpPlan =
  /** Nothing passed. */
  | { kind: "none" }
  /** The job's slot stamp is in the future (the clock was wrong): continue from now. */
  | { kind: "future"; stamp: number }
  | {
      kind: "passed";
      /** Slots recorded `missed` (the latest MISSED_ROWS at most, less the ones that run). */
      missed: number[];
      /** Slots before those, counted in one event, not listed. */
      earlier: number;
      earlierCapped: boolean;
      /** Slots run with trigger `catchup`, oldest first. */
      run: number[];
    };

/**
 * Slots in (scannedTo, now]: `catchup: once` runs the latest one inside `catchup_window`, `all`
 * every one inside it (the latest MISSED_ROWS at most), `skip` none; the rest are missed.
 */
export function planCatchUp(job: CatchUpJob, scannedTo: number | null, now: number): CatchUpPlan {
  const from = scannedTo ?? now;
  if (from > now + LATE_MS) return { kind: "future", stamp: from };
  const passed = missedSlots(job, new Date(from), new Date(now), MISSED_ROWS);
  if (passed.slots.length === 0) return { kind: "none" };
  const slots = passed.slots.map((d) => d.getTime());
  const windowStart = now - job.catchupWindowMs;
  const eligible = slots.filter((s) => s >= windowStart);
  const run = job.catchup === "once" ? eligible.slice(-1) : job.catchup === "all" ? eligible : [];
  const toRun = new Set(run);
  return {
    kind: "passed",
    missed: slots.filter((s) => !toRun.has(s)),
    earlier: passed.earlier,
    earlierCapped: passed.earlierCapped,
    run,
  };
}

/**
 * A run recorded `interrupted` (its processes died with the daemon) runs again (trigger
 * `resume`, the next attempt, its slot already claimed) unless the policy is `skip` or its slot
 * is older than `catchup_window`.
 */
export function planResume(
  job: Pick<JobConfig, "catchup" | "catchupWindowMs">,
  run: { slot: number | null; started_at: number; attempt: number },
  now: number,
): Pending | null {
  if (job.catchup === "skip") return null;
  const slotTime = run.slot ?? run.started_at;
  if (slotTime < now - job.catchupWindowMs) return null;
  return { slot: run.slot, claimSlot: false, trigger: "resume", attempt: run.attempt + 1 };
}
