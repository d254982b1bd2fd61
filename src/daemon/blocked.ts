// Slots skipped because another node's run holds the job's lock (a shared store). The lock is that
// node's lease: if the node died, the lock is free when the lease ends, and the slots it blocked
// are caught up then, per the job's `catchup:` (once: the latest; all: each; skip: none), as slots
// that passed while no daemon ran would be. If the node renewed its lease it was alive, and its
// run was simply still running: the skips stand, as an overlap skip on one node does.
// Pure functions of (job, what was blocked, now).
import type { JobConfig } from "../core/types.js";
import type { HolderLease } from "../store/store.js";
import type { Pending } from "./state.js";

/** Wait this much past the lease's end (by the store's clock) before catching up. */
export const BLOCKED_MARGIN_MS = 100;

/** A job's slots skipped for another node's lock, and when that node's lease ends. */
export interface Blocked {
  node: string;
  /** When to catch up (this node's clock): the latest lease end seen, plus the margin. */
  at: number;
  /** The slots skipped, oldest first. */
  slots: number[];
}

/**
 * The job's blocked slots with one more: skipped at `now` for the lock of `lease`'s node. A newer
 * lease end (the node renewed meanwhile) moves the catch-up later.
 */
export function addBlocked(
  b: Blocked | null,
  slot: number,
  lease: HolderLease,
  now: number,
): Blocked {
  const at = now + lease.leftMs + BLOCKED_MARGIN_MS;
  if (b === null || b.node !== lease.node) return { node: lease.node, at, slots: [slot] };
  return {
    node: b.node,
    at: Math.max(b.at, at),
    slots: b.slots.includes(slot) ? b.slots : [...b.slots, slot].sort((x, y) => x - y),
  };
}

/**
 * The runs that catch the blocked slots up once the lease has ended: trigger `catchup`, each slot's
 * second attempt (its `skipped` row was the first), within `catchup_window`.
 */
export function planBlocked(
  job: Pick<JobConfig, "catchup" | "catchupWindowMs">,
  b: Blocked,
  now: number,
): Pending[] {
  const eligible = b.slots.filter((s) => s >= now - job.catchupWindowMs);
  const run = job.catchup === "once" ? eligible.slice(-1) : job.catchup === "all" ? eligible : [];
  return run.map((slot) => ({ slot, claimSlot: false, trigger: "catchup", attempt: 2 }));
}
