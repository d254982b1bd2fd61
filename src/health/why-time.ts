// Which slot of a job a TIME names (`why --at TIME`), pure: a TIME without an offset is a local
// time of the job's zone, which a DST gap skips and a DST repeat names twice; and how a slot's
// instant is shown beside its local time.
import { isSlotAt, prevSlotAt } from "../schedule/schedule.js";
import {
  formatLocal,
  formatOffset,
  formatWall,
  gapAround,
  localInstants,
  offsetAt,
  wallAt,
  type ParsedTime,
  type WallTime,
} from "../schedule/zone.js";
import type { JobConfig } from "../core/types.js";

export type WhyJob = Pick<
  JobConfig,
  | "name"
  | "schedule"
  | "pattern"
  | "timezone"
  | "overlap"
  | "catchup"
  | "catchupWindowMs"
  | "paused"
  | "log"
> &
  Partial<Pick<JobConfig, "blackouts">>;

/** What TIME names: one of the job's slots, or a time that is none (null: a local time in a DST gap). */
export type Target =
  | { kind: "slot"; slot: number; note: string | null }
  | { kind: "time"; at: number | null; wall: WallTime; note: string | null };

/**
 * The slot TIME names: without TIME the latest slot at or before `now`; a TIME without an offset
 * is a local time of the job's zone (the first of two in a DST repeat, none in a gap). Slots are
 * whole seconds, so TIME counts to the second.
 */
export function resolveTarget(job: WhyJob, at: ParsedTime | null, now: number): Target {
  const zone = job.timezone;
  if (at === null) {
    const slot = prevSlotAt(job, now + 1);
    if (slot === null) return { kind: "time", at: now, wall: wallAt(now, zone), note: null };
    return { kind: "slot", slot, note: null };
  }
  let t: number;
  let note: string | null = null;
  if (at.offsetMs !== null) {
    const w = at.wall;
    t = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second, w.ms) - at.offsetMs;
  } else {
    const found = localInstants(at.wall, zone);
    if (found.length === 0)
      return { kind: "time", at: null, wall: at.wall, note: gapNote(at, zone) };
    t = found[0] as number;
    if (found.length > 1) note = repeatNote(formatWall(at.wall), found, zone);
  }
  t = Math.floor(t / 1000) * 1000;
  if (isSlotAt(job, t)) return { kind: "slot", slot: t, note };
  return { kind: "time", at: t, wall: wallAt(t, zone), note };
}

function gapNote(at: ParsedTime, zone: string): string {
  const g = gapAround(at.wall, zone);
  const hhmm = (w: number) => formatLocal(w, "UTC").slice(11);
  return `${formatWall(at.wall)} does not exist in ${zone}: the clocks jump from ${hhmm(g.from)} to ${hhmm(g.to)} that night.`;
}

function repeatNote(wall: string, found: number[], zone: string): string {
  const [a, b] = found as [number, number];
  const off = (t: number) => `UTC${formatOffset(offsetAt(t, zone))}`;
  const second = `${wall.replace(" ", "T")}${formatOffset(offsetAt(b, zone))}`;
  return `${wall} happens twice in ${zone} (the clocks go back): at ${utc(a)} (${off(a)}) and at ${utc(b)} (${off(b)}); this is the first (the second is ${second}).`;
}

/** `00:00Z`, or with its date when `local` (the same instant's local time) has another. */
export function utcBeside(t: number, local: string): string {
  const u = formatLocal(t, "UTC");
  return `${u.slice(0, 10) === local.slice(0, 10) ? u.slice(11) : u}Z`;
}
export const utc = (t: number): string => `${formatLocal(t, "UTC")}Z`;
