// What holds a start back besides the overlap decision: the drain (`pause --all`) and the job's
// blackout windows. Pure functions of (job, slot, drain, now); the supervisor reads the drain
// from the store (another process writes it) and records the reason as the slot's disposition.
import type { JobConfig } from "../core/types.js";
import type { DrainRow } from "../store/store.js";
import { blackoutAt } from "../schedule/windows.js";

/** Is the drain in force at `now`? Its `until` ends it by itself. */
export function drainActive(d: DrainRow | null, now: number): d is DrainRow {
  return d !== null && d.since <= now && (d.until === null || now < d.until);
}

/** A skipped slot's reason while drained: `paused (maintenance: TEXT)`. */
export function drainReason(d: DrainRow): string {
  return d.reason === null ? "paused (maintenance)" : `paused (maintenance: ${d.reason})`;
}

/**
 * Why a start of `job` for `slot` must not happen now, or null: the drain holds every start;
 * a blackout holds a slot inside one of the job's windows (judged at the slot, in the job's
 * zone). A start with no slot (an @reboot run) is held only by the drain.
 */
export function holdReason(
  job: Pick<JobConfig, "timezone" | "blackouts">,
  slot: number | null,
  drain: DrainRow | null,
  now: number,
): string | null {
  if (drainActive(drain, now)) return drainReason(drain);
  if (slot === null) return null;
  const window = blackoutAt(job, slot);
  return window === null ? null : `blackout ${window}`;
}
