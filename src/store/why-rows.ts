// What `why` and `backfill` read of a job's slots (Store.slotFacts, Store.slotRuns).
import type { DaemonRow, EventRow, JobRow, RunRow } from "./rows.js";

/** The store's facts about one slot of one job, read in one snapshot (Store.slotFacts). */
export interface SlotFacts {
  job: JobRow | null;
  daemon: DaemonRow | null;
  /**
   * The slot's claim: the slots table keeps it after the runs are pruned. `run_id` is the slot's
   * first run, or null when it was a disposition with no process; null: never claimed.
   */
  claim: { run_id: number | null } | null;
  /** Rows of this slot, oldest first: its one disposition, or its runs (first, retries, resumes). */
  runs: RunRow[];
  /** A run of the job (of another slot, or none) running when the slot was decided: the lock holder. */
  holder: RunRow | null;
  /** The job's runs running now, oldest first. */
  running: RunRow[];
  /** The job's last `paused` or `resumed` event at or before the slot was decided. */
  pause: EventRow | null;
  /** For a missed slot: the catch-up runs of the start that recorded it, oldest first. */
  catchUps: RunRow[];
  /** The job's first `missed` event after the slot (a long downtime's slots counted, not listed). */
  missedEvent: EventRow | null;
  /** The newest time any row or event records at or before the slot (the daemon's last sign). */
  lastBefore: number | null;
  /** The oldest time any run or event records after the slot (a restarted daemon's first sign). */
  firstAfter: number | null;
}

/** What the runs of one slot came to: one of them `ok`, and their highest attempt. */
export interface SlotRun {
  slot: number;
  ok: boolean;
  attempt: number;
}
