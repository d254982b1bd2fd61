// The clock changes a schedule crosses in a coming period, and what each does to its slots, pure:
// `plan` tells an operator before a new schedule or time zone is applied. A change skips local
// times (a gap: clocks forward) or repeats them (clocks back); croner runs a fixed time that
// falls in a gap once, at the change, and a repeated one once, at the first; a schedule that
// fires several times an hour loses the runs of a skipped hour and runs a repeated hour twice.
// This reads croner's own answers around each change instead of assuming either.
import type { JobConfig } from "../core/types.js";
import { isUtcZone } from "./host-zone.js";
import { nextSlotAt } from "./schedule.js";
import { formatLocal, offsetAt } from "./zone.js";

const DAY = 86_400_000;
const MINUTE = 60_000;
/** Slots counted in one changed window at most (a per-second schedule has 3,600 in an hour). */
const COUNT_CAP = 10_000;

/** A change of the zone's offset: at instant `at`, from `before` to `after` (ms east of UTC). */
export interface ClockChange {
  at: number;
  before: number;
  after: number;
}

const changesCache = new Map<string, ClockChange[]>();

/** The zone's offset changes in [from, to), to the minute. None for UTC. */
export function clockChanges(zone: string, from: number, to: number): ClockChange[] {
  if (isUtcZone(zone)) return [];
  const key = `${zone}\u0000${from}\u0000${to}`;
  const cached = changesCache.get(key);
  if (cached) return cached;
  const out: ClockChange[] = [];
  // Zones change their offset at most once a day: look at each day's end, halve where it differs.
  // From a whole minute: offsets change on whole minutes, and the halving keeps to them.
  for (let t = Math.floor(from / MINUTE) * MINUTE; t < to; t += DAY) {
    const before = offsetAt(t, zone);
    const after = offsetAt(Math.min(t + DAY, to), zone);
    if (before === after) continue;
    let lo = t;
    let hi = Math.min(t + DAY, to);
    while (hi - lo > MINUTE) {
      const mid = lo + Math.floor((hi - lo) / (2 * MINUTE)) * MINUTE;
      if (offsetAt(mid, zone) === before) lo = mid;
      else hi = mid;
    }
    out.push({ at: hi, before, after });
  }
  changesCache.set(key, out);
  return out;
}

type Sched = Pick<JobConfig, "pattern" | "timezone">;

/** The schedule's slots in [from, to) (instants), up to COUNT_CAP. */
function slotsIn(job: Sched, from: number, to: number): number[] {
  const out: number[] = [];
  for (let t = nextSlotAt(job, from - 1); t !== null && t < to; t = nextSlotAt(job, t)) {
    out.push(t);
    if (out.length >= COUNT_CAP) break;
  }
  return out;
}

/** Wall times (read as UTC instants) as `02:30`, `:SS` when not zero. */
const hhmm = (wall: number): string => formatLocal(wall, "UTC").slice(11);

function wallList(walls: number[]): string {
  if (walls.length === 1) return hhmm(walls[0] as number);
  return `${walls.length} slots (${hhmm(walls[0] as number)} to ${hhmm(walls[walls.length - 1] as number)})`;
}

/**
 * One sentence per clock change in [from, to) that touches the job's slots: the day, the change,
 * and what happens to the slots whose local time it skips or repeats. `@reboot` and UTC jobs
 * cross none.
 */
export function dstCrossings(job: Sched, from: number, to: number): string[] {
  if (job.pattern === null) return [];
  // The schedule as wall time: the same pattern read in UTC names the local times it fires at.
  const wall: Sched = { pattern: job.pattern, timezone: "UTC" };
  const out: string[] = [];
  for (const c of clockChanges(job.timezone, from, to)) {
    const day = formatLocal(c.at + Math.max(c.before, c.after), "UTC").slice(0, 10);
    const shift = Math.abs(c.after - c.before);
    const lo = c.at + Math.min(c.before, c.after);
    const walls = slotsIn(wall, lo, lo + shift);
    if (walls.length === 0) continue;
    const what = wallList(walls);
    const where = `(${job.timezone})`;
    if (c.after > c.before) {
      const jump = `${day}: the clocks jump from ${hhmm(lo)} to ${hhmm(lo + shift)} ${where}`;
      // croner runs a fixed time that does not exist at the change, once; others are lost.
      const atChange = nextSlotAt(job, c.at - 1) === c.at;
      const changeIsSlot = slotsIn(wall, lo + shift, lo + shift + 1).length > 0;
      out.push(
        atChange && !changeIsSlot
          ? `${jump}; ${what} does not exist that day: it runs once, at ${hhmm(lo + shift)}`
          : `${jump}; ${what} ${walls.length === 1 ? "does" : "do"} not happen that day`,
      );
    } else {
      const back = `${day}: the clocks go back from ${hhmm(lo + shift)} to ${hhmm(lo)} ${where}`;
      const ran = slotsIn(job, c.at - shift, c.at + shift).length;
      out.push(
        ran >= 2 * walls.length
          ? `${back}; ${what} ${walls.length === 1 ? "happens" : "happen"} twice: ${walls.length === 1 ? "it runs" : "they run"} twice`
          : `${back}; ${what} ${walls.length === 1 ? "happens" : "happen"} twice: ${walls.length === 1 ? "it runs" : "they run"} once, at the first`,
      );
    }
  }
  return out;
}
