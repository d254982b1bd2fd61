// What is due and what a late tick records: pure functions of (job, state, now).
import { missedSlots, nextSlotAt } from "../schedule/schedule.js";
import type { JobConfig } from "../core/types.js";
import { LATE_MS, MISSED_ROWS, type Gap } from "./state.js";

type SlotJob = Pick<JobConfig, "name" | "pattern" | "timezone">;

/** A job whose slot a tick handled late (suspend, clock step, a slow start-up). */
export interface LateSlot {
  name: string;
  slot: number;
  /** Older slots of the same job recorded missed by the same tick. */
  missed: number;
  capped: boolean;
}

export interface DuePlan {
  /** The slot to fire: the latest one that has passed. */
  fire: number;
  /** Older slots that passed while the timer was late: recorded `missed`, oldest first. */
  missed: readonly number[];
  /** The job's next slot after this tick. */
  next: number | null;
  /** Set when the tick is late for this job: reported as an event. */
  late: LateSlot | null;
}

/** No missed slot: one array for every plan of a punctual tick (10,000 a second at 10,000 jobs). */
const NONE: readonly number[] = Object.freeze([]);

/** A job's slot `due` came due (due <= now). If the timer woke late, older slots are missed. */
export function planDue(job: SlotJob, due: number, now: number): DuePlan {
  const after = nextSlotAt(job, due);
  if (after === null || after > now) {
    // The common case, one slot due: no walk over passed slots.
    const late =
      now - due > LATE_MS ? { name: job.name, slot: due, missed: 0, capped: false } : null;
    return { fire: due, missed: NONE, next: after, late };
  }
  const passed = missedSlots(job, new Date(due - 1), new Date(now), MISSED_ROWS);
  const slots = passed.slots.map((d) => d.getTime());
  const fire = slots.pop() ?? due;
  const next = nextSlotAt(job, Math.max(now, fire));
  if (now - fire <= LATE_MS && slots.length === 0) return { fire, missed: NONE, next, late: null };
  const late = {
    name: job.name,
    slot: due,
    missed: slots.length + passed.earlier,
    capped: passed.earlierCapped,
  };
  return { fire, missed: slots, next, late };
}

/**
 * The wall clock went back further than LATE_MS since the last tick: every job plans from the
 * wall clock again (waiting for the old next slots would stall each job for as long as the step).
 * A slot that already has a disposition is refused by the store, so none fires twice.
 */
export function clockSteppedBack(lastWake: number, now: number): boolean {
  return now < lastWake - LATE_MS;
}

/** The gap after a failed write of `slot` (the earliest failed slot is kept) because of `e`. */
export function widenGap(gap: Gap | null, slot: number, e: unknown): Gap {
  if (gap !== null && gap.from <= slot) return gap;
  return { from: slot, reason: gap?.reason ?? gapReason(e) };
}

/**
 * What kind of failure kept the slots from the store, from its error (a StoreError's code and
 * message, SQLite's or pg's words): the reason the gap's slots are recorded with.
 */
function gapReason(e: unknown): string {
  const m = e instanceof Error ? e.message : String(e);
  const code = (e as { code?: unknown } | null)?.code;
  if (code === "busy") return "the store stayed busy (another writer held its lock)";
  if (/disk is full|SQLITE_FULL|ENOSPC|no space left/i.test(m))
    return "the store could not be written (disk full)";
  if (/timeout|timed out/i.test(m)) return "the store did not answer in time (timeout)";
  if (/ECONN|EHOSTUNREACH|ENOTFOUND|EPIPE|terminat|connect|socket/i.test(m))
    return "the store could not be reached (connection lost)";
  if (/read-only|readonly/i.test(m)) return "the store could not be written (read-only)";
  return "the store could not be written (I/O error)";
}

/**
 * The slots of a gap: from its first slot up to the slot now due. Each is recorded `missed` only
 * if it has no row (the store keeps a slot's first disposition), so the slots another node
 * recorded stay as they are. Not from the job's slot stamp: on a shared store another node's later
 * rows move it past a slot that no node could record, which would then never get a row.
 */
export function gapSlots(job: SlotJob, gap: Gap, due: number): number[] {
  return missedSlots(job, new Date(gap.from - 1), new Date(due - 1), MISSED_ROWS).slots.map((d) =>
    d.getTime(),
  );
}

/** More late jobs than this in one tick are summed up in one event, not one event per job. */
export const LATE_EVENTS_PER_TICK = 5;

/** The `late` events a tick records: one per late job, or one for them all (a slow start-up). */
export function lateEvents(
  late: LateSlot[],
  now: number,
): { job: string | null; detail: string }[] {
  const older = (l: LateSlot[]): string => {
    const n = l.reduce((sum, x) => sum + x.missed, 0);
    return `${l.some((x) => x.capped) ? "more than " : ""}${n} older slot(s) recorded missed`;
  };
  if (late.length <= LATE_EVENTS_PER_TICK) {
    return late.map((l) => ({
      job: l.name,
      detail: `timer fired ${now - l.slot} ms after slot ${new Date(l.slot).toISOString()} (suspend or clock step)${l.missed > 0 || l.capped ? `; ${older([l])}` : ""}`,
    }));
  }
  const worst = Math.max(...late.map((l) => now - l.slot));
  return [
    {
      job: null,
      detail: `timer fired up to ${worst} ms after the slots of ${late.length} jobs (suspend, clock step or a slow start-up); ${older(late)}`,
    },
  ];
}
