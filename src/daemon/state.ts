// What the daemon holds per job and per live run, and the constants its decisions share. The
// job state is built here only (start-up, a job added by reload, a job changed by reload).
import type { RunHandle } from "../run/runner.js";
import { nextSlotAt } from "../schedule/schedule.js";
import type { RunRow } from "../store/store.js";
import type { JobConfig, Trigger } from "../core/types.js";

/** A timer this late (or a clock this far off) is recorded as an event. */
export const LATE_MS = 5_000;
/** Missed slots recorded one by one per job and downtime; the rest are counted in one event. */
export const MISSED_ROWS = 100;

/** A run to start: a slot's first run, a catch-up, a retry, a resume or an @reboot run. */
export interface Pending {
  slot: number | null;
  /** Claim the slot (its first run); retries and resumes reuse the claimed slot. */
  claimSlot: boolean;
  trigger: Trigger;
  attempt: number;
}

/** A scheduled slot's first run. */
export function scheduled(slot: number): Pending {
  return { slot, claimSlot: true, trigger: "schedule", attempt: 1 };
}

/** A chained start (`then:`) for an upstream run's slot: the downstream job's claim of that slot. */
export function chainedStart(slot: number): Pending {
  return { slot, claimSlot: true, trigger: "chained", attempt: 1 };
}

/** A job's slots skipped for another node's run: when to look whether its lease has ended. */
export interface Blocked {
  node: string;
  runId: number;
  /** This node's clock: the lease's end when the first slot was skipped, plus the margin. */
  at: number;
}

/** A job's slots that the store could not record: from the first of them on, and why. */
export interface Gap {
  from: number;
  reason: string;
}

export interface JobState {
  cfg: JobConfig;
  next: number | null;
  /** Slots waiting for the job's current run to end: `queue` overlap, `catchup: all`, resumes. */
  pending: Pending[];
  retryTimer: NodeJS.Timeout | null;
  /** Runs ended since old runs were last pruned (pruning is spread out: it takes the write lock). */
  sincePrune: number;
  /** Slots that could not be recorded (the store refused a write): recorded when it can. */
  gap: Gap | null;
  /** Slots skipped for another node's run: looked at again when its lease ends (blocked.ts). */
  blocked: Blocked | null;
  /** How long after its next slot this node handles it: another node's job (spread.ts). */
  lag?: number;
}

/** When the job next needs the tick: its next slot, or the look at a blocking lease's end. */
export function wakeAt(st: JobState, delay = 0): number {
  const next = (st.next ?? Infinity) + delay;
  return st.blocked !== null && st.blocked.at < next ? st.blocked.at : next;
}

/**
 * A job's state from its config and its slot stamp (`scanned_to`). A job seen for the first time
 * has missed nothing: its slots count from now. A job changed by reload keeps what is waiting
 * (queued slots, a retry timer, a gap to record); a changed job's running run finishes under the
 * lock it started with.
 */
export function jobState(
  cfg: JobConfig,
  scannedTo: number | null,
  now: number,
  prev?: JobState,
): JobState {
  return {
    cfg,
    next: nextSlotAt(cfg, Math.max(now, scannedTo ?? now)),
    pending: prev?.pending ?? [],
    retryTimer: prev?.retryTimer ?? null,
    sincePrune: prev?.sincePrune ?? 0,
    gap: prev?.gap ?? null,
    blocked: prev?.blocked ?? null,
  };
}

/** A run this daemon watches: its own child, or one adopted from a previous daemon. */
export interface Active {
  run: RunRow;
  job: JobConfig;
  /** Our own child; null for a run adopted from a previous daemon. */
  handle: RunHandle | null;
  finished: Promise<unknown>;
  stopAdopt?: () => void;
  /**
   * Why this daemon stopped an adopted run (stop, a second signal, `replace`): its end is then
   * `killed` with this reason, whatever its exit file says (an own run's handle knows this itself).
   */
  stoppedFor?: string;
  /** Its process exited; its end waits to be recorded (endings.ts): not running any more. */
  exited?: boolean;
}
