// Wall-clock time in a job's time zone, pure: an ISO-8601 TIME as an operator types it (with or
// without an offset), the instants a local time names (none in a DST gap, two in a DST repeat),
// and an instant shown in the zone. Built on Intl: the zone rules are the platform's. UTC is
// plain arithmetic, so that a UTC daemon never loads ICU's formatting data (host-zone.ts).
import { isUtcZone } from "./host-zone.js";

/** A local date and time as written, before any zone is applied. */
export interface WallTime {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  ms: number;
}

/** A parsed TIME: the wall time, and its offset in ms when TIME had one (`Z`, `+01:00`). */
export interface ParsedTime {
  wall: WallTime;
  offsetMs: number | null;
}

// 2026-03-29, 2026-03-29T02:30, 2026-03-29 02:30:15.250, each with an optional Z or ±HH[:MM].
const ISO =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?(Z|[+-]\d{2}(?::?\d{2})?)?$/i;

/** TIME as ISO-8601, or null when it is not one (or names a day or hour that does not exist). */
export function parseIsoTime(text: string): ParsedTime | null {
  const m = ISO.exec(text.trim());
  if (!m) return null;
  const n = (i: number) => (m[i] === undefined ? 0 : Number(m[i]));
  const wall: WallTime = {
    year: n(1),
    month: n(2),
    day: n(3),
    hour: n(4),
    minute: n(5),
    second: n(6),
    ms: m[7] === undefined ? 0 : Math.floor(Number(`0.${m[7]}`) * 1000),
  };
  const daysInMonth = new Date(Date.UTC(wall.year, wall.month, 0)).getUTCDate();
  if (wall.month < 1 || wall.month > 12 || wall.day < 1 || wall.day > daysInMonth) return null;
  if (wall.hour > 23 || wall.minute > 59 || wall.second > 59) return null;
  const z = m[8];
  if (z === undefined) return { wall, offsetMs: null };
  if (z.toUpperCase() === "Z") return { wall, offsetMs: 0 };
  const o = /^([+-])(\d{2}):?(\d{2})?$/.exec(z) as RegExpExecArray;
  const hours = Number(o[2]);
  const minutes = Number(o[3] ?? 0);
  if (hours > 23 || minutes > 59) return null;
  return { wall, offsetMs: (o[1] === "-" ? -1 : 1) * (hours * 60 + minutes) * 60_000 };
}

/** The wall time read as if it were UTC (the zone's offset is then subtracted). */
const asUtc = (w: WallTime): number =>
  Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second, w.ms);

const offsetFormats = new Map<string, Intl.DateTimeFormat>();

/** The zone's offset from UTC at instant `t`, in ms (Europe/Berlin in summer: 7,200,000). */
export function offsetAt(t: number, zone: string): number {
  if (isUtcZone(zone)) return 0;
  let f = offsetFormats.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", { timeZone: zone, timeZoneName: "longOffset" });
    offsetFormats.set(zone, f);
  }
  const name = f.formatToParts(t).find((p) => p.type === "timeZoneName")?.value ?? "";
  const m = /([+-])(\d\d):(\d\d)/.exec(name);
  return m ? (m[1] === "-" ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3])) * 60_000 : 0;
}

const DAY = 86_400_000;

/**
 * The instants whose local time in `zone` is `wall`, earliest first: one, none (a DST gap: the
 * clocks jumped over it) or two (a DST repeat: the clocks went back over it). Zones change their
 * offset at most once within a day of any instant, so the offsets a day before and after are
 * the only candidates.
 */
export function localInstants(wall: WallTime, zone: string): number[] {
  const u = asUtc(wall);
  const offsets = new Set([offsetAt(u - DAY, zone), offsetAt(u + DAY, zone)]);
  const out: number[] = [];
  for (const off of offsets) {
    const t = u - off;
    if (offsetAt(t, zone) === off) out.push(t);
  }
  return out.sort((a, b) => a - b);
}

/**
 * Where a DST gap is: the instant of the change (`at`), and the local times the clocks jumped
 * from and to (e.g. 02:00 -> 03:00), as wall times read as UTC.
 */
export function gapAround(wall: WallTime, zone: string): { at: number; from: number; to: number } {
  const u = asUtc(wall);
  const before = offsetAt(u - DAY, zone);
  const after = offsetAt(u + DAY, zone);
  // The change is between the instant the wall time would be under the later offset and under
  // the earlier one; halve to the minute (offsets change on whole minutes).
  let lo = u - Math.max(before, after);
  let hi = u - Math.min(before, after);
  while (hi - lo > 60_000) {
    const mid = lo + Math.floor((hi - lo) / 120_000) * 60_000;
    if (offsetAt(mid, zone) === before) lo = mid;
    else hi = mid;
  }
  return { at: hi, from: hi + before, to: hi + after };
}

const pad = (n: number, w = 2) => String(n).padStart(w, "0");

/** A wall time as `2026-03-29 02:30`, with `:SS` when its seconds are not zero. */
export function formatWall(w: WallTime): string {
  const base = `${w.year}-${pad(w.month)}-${pad(w.day)} ${pad(w.hour)}:${pad(w.minute)}`;
  return w.second !== 0 ? `${base}:${pad(w.second)}` : base;
}

/** The local wall time of instant `t` in `zone`. */
export function wallAt(t: number, zone: string): WallTime {
  const d = new Date(t + offsetAt(t, zone));
  return {
    year: d.getUTCFullYear(),
    month: d.getUTCMonth() + 1,
    day: d.getUTCDate(),
    hour: d.getUTCHours(),
    minute: d.getUTCMinutes(),
    second: d.getUTCSeconds(),
    ms: d.getUTCMilliseconds(),
  };
}

/** Instant `t` in `zone` as `2026-03-29 02:30` (`:SS` when not zero). */
export const formatLocal = (t: number, zone: string): string => formatWall(wallAt(t, zone));

/** An offset as `+02:00`. */
export function formatOffset(ms: number): string {
  const m = Math.abs(ms) / 60_000;
  return `${ms < 0 ? "-" : "+"}${pad(Math.floor(m / 60))}:${pad(m % 60)}`;
}
