// Slots skipped because another node's run holds the job's lock (a shared store). The lock is that
// node's lease: if the node died, the lock is free when the lease ends. A node that skipped such
// a slot looks again then (`at`); whichever node takes the job over (that look, or a reservation
// that finds the lease ended) records the old run `fenced` and gets the slots it blocked, every
// node's (store/postgres/runs.ts), and catches them up per the job's `catchup:` (once: the
// latest; all: each; skip: none), as slots that passed while no daemon ran would be. If the node
// renewed its lease it was alive and its run simply still running: the skips stand, as an
// overlap skip on one node does. Pure functions of (job, what was blocked, now).
import type { JobConfig } from "../core/types.js";
import { nextSlotAt } from "../schedule/schedule.js";
import type { HolderLease } from "../store/store.js";
import type { Blocked, Pending } from "./state.js";

/** Look this much past the lease's end (its time left by the store's clock) before taking over. */
export const BLOCKED_MARGIN_MS = 100;
/**
 * A slot of the job this soon after that look: the look waits for it, so that the slot starts
 * on time and the catch-up queues behind it (started first, the catch-up would hold the lock at
 * the slot, which `overlap: skip` then skips).
 */
export const BLOCKED_ALIGN_MS = 1000;

/**
 * A slot skipped at `now` for run `runId`, held by `lease`. The look is at the end of the lease
 * first seen (or the job's slot just after it): a node that renewed it by then is alive, and a
 * later skip sets the next look.
 */
export function addBlocked(
  job: Pick<JobConfig, "pattern" | "timezone">,
  b: Blocked | null,
  runId: number,
  lease: HolderLease,
  now: number,
): Blocked {
  if (b !== null && b.runId === runId) return b;
  const at = now + lease.leftMs + BLOCKED_MARGIN_MS;
  const slot = nextSlotAt(job, at - 1);
  const look = slot !== null && slot - at <= BLOCKED_ALIGN_MS ? slot : at;
  return { node: lease.node, runId, at: look };
}

/**
 * The runs that catch up the slots a taken-over run blocked: trigger `catchup`, each slot's second
 * attempt (its `skipped` row was the first), within `catchup_window`.
 */
export function planBlocked(
  job: Pick<JobConfig, "catchup" | "catchupWindowMs">,
  slots: readonly number[],
  now: number,
): Pending[] {
  const eligible = slots.filter((s) => s >= now - job.catchupWindowMs);
  const run = job.catchup === "once" ? eligible.slice(-1) : job.catchup === "all" ? eligible : [];
  return run.map((slot) => ({ slot, claimSlot: false, trigger: "catchup", attempt: 2 }));
}
