// The overlap decision: what a run to start does when the job is busy. One function for every
// path (a scheduled slot, a catch-up, a retry, a resume, an @reboot run, a queued slot).
import type { Overlap } from "../core/types.js";
import type { Pending } from "./state.js";

export interface OverlapState {
  /** Ids of the job's runs this daemon watches. */
  running: number[];
  /** The job already has a start in this tick's batch. */
  inBatch: boolean;
  /** Slots already waiting for the current run to end. */
  queued: number;
}

export type OverlapDecision =
  /** Start it (the store still takes the lock: a live holder makes a scheduled slot `skipped`). */
  | { kind: "start" }
  /** Wait for the job's current run to end. */
  | { kind: "queue" }
  /** Record the slot `skipped` now, with this reason. */
  | { kind: "skip"; reason: string }
  /** Revoke these runs' fences, stop them, then start. */
  | { kind: "replace"; runs: number[] }
  /** Start the job's queued run first; this one then meets the decision behind it. */
  | { kind: "queued-first" };

/**
 * A run that is not a scheduled slot (catch-up, retry, resume, @reboot) waits behind a busy job
 * whatever the policy but `allow`: it stands for a slot that already had its turn. A scheduled
 * slot follows the policy: `skip` starts and lets the lock refuse it (the store records `skipped`
 * in the transaction that sees the holder), `queue` waits (one slot at most), `replace` stops the
 * running ones first. (A tick fires a job's slot once, so a scheduled slot never meets a start of
 * its own job in the same batch: `inBatch` matters only to the other triggers.)
 */
export function decideOverlap(policy: Overlap, p: Pending, s: OverlapState): OverlapDecision {
  const busy = s.running.length > 0 || s.inBatch;
  // The run a slot queued behind exited, and its end is not handled yet (on a shared store it
  // rides the next tick's write): the queued one goes first, or every later slot would take the
  // lock before it and it would never start.
  if (!busy && s.queued > 0) return { kind: "queued-first" };
  if (!busy || policy === "allow") return { kind: "start" };
  if (p.trigger !== "schedule") return { kind: "queue" };
  switch (policy) {
    case "queue":
      if (s.queued === 0) return { kind: "queue" };
      return {
        kind: "skip",
        reason: `overlap: run ${s.running[0]} holds the lock and a slot is already queued`,
      };
    case "replace":
      return s.running.length > 0 ? { kind: "replace", runs: s.running } : { kind: "start" };
    case "skip":
      return { kind: "start" };
  }
}
