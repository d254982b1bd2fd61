// Blackout windows (`blackouts:`): their text parsed, and whether an instant falls inside one in a
// time zone. Pure: the zone and the instant are arguments. A window is judged on the wall clock
// of the job's zone, so "Sat 00:00-06:00" is six local hours however DST moves the offset, and
// "2026-12-24..2026-12-26" is three local days.
import type { BlackoutWindow, NamedWindow } from "../core/types.js";

const DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
const FULL_DAYS = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"];
const DATE = /^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2}))?$/;
const TIME = /^(\d{1,2}):(\d{2})$/;

/** What a window's text may look like, for error messages. */
export const WINDOW_FORMS =
  '"YYYY-MM-DD..YYYY-MM-DD" (whole days), "YYYY-MM-DD HH:MM..YYYY-MM-DD HH:MM", or "[DAY[-DAY]] HH:MM-HH:MM" (e.g. "Sat 00:00-06:00", "Mon-Fri 22:00-02:00")';

/** A window's text -> the window, or why it is not one. */
export function parseWindow(text: string): BlackoutWindow | { error: string } {
  const t = text.trim();
  if (t.includes("..")) return parseDates(t);
  return parseWeekly(t);
}

function parseDates(t: string): BlackoutWindow | { error: string } {
  const [a, b, ...rest] = t.split("..").map((s) => s.trim());
  if (a === undefined || b === undefined || rest.length > 0)
    return { error: `expected ${WINDOW_FORMS}` };
  const from = localStamp(a, false);
  const to = localStamp(b, true);
  if ("error" in from) return from;
  if ("error" in to) return to;
  if (to.stamp <= from.stamp) return { error: `the window ends before it starts (${t})` };
  return { kind: "dates", from: from.stamp, to: to.stamp };
}

/**
 * `YYYY-MM-DD[ HH:MM]` as a sortable local stamp. A date alone starts its day; as the end of a
 * window (`end`) it is inclusive: the window ends when the next day starts.
 */
function localStamp(s: string, end: boolean): { stamp: string } | { error: string } {
  const m = DATE.exec(s);
  if (!m) return { error: `${JSON.stringify(s)} is not a date: expected ${WINDOW_FORMS}` };
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const day = new Date(Date.UTC(y, mo - 1, d));
  if (day.getUTCMonth() !== mo - 1 || day.getUTCDate() !== d)
    return { error: `${JSON.stringify(s)} is not a date of the calendar` };
  if (m[4] !== undefined) {
    const minute = minuteOf(`${m[4]}:${m[5]}`);
    if (minute === null || minute >= 24 * 60)
      return { error: `${JSON.stringify(s)}: the time is not HH:MM from 00:00 to 23:59` };
    return { stamp: `${s.slice(0, 10)} ${m[4]}:${m[5]}` };
  }
  if (!end) return { stamp: `${s} 00:00` };
  const next = new Date(day.getTime() + 86_400_000).toISOString().slice(0, 10);
  return { stamp: `${next} 00:00` };
}

function parseWeekly(t: string): BlackoutWindow | { error: string } {
  const parts = t.split(/\s+/);
  const times = parts.pop() ?? "";
  if (parts.length > 1) return { error: `expected ${WINDOW_FORMS}` };
  const days = parts.length === 0 ? [0, 1, 2, 3, 4, 5, 6] : parseDays(parts[0] as string);
  if (days === null)
    return {
      error: `${JSON.stringify(parts[0])} is not a day or a range of days (Mon, Sat-Sun, Mon-Fri)`,
    };
  const [a, b, ...rest] = times.split("-");
  const start = a === undefined ? null : minuteOf(a);
  const end = b === undefined ? null : minuteOf(b);
  if (start === null || end === null || rest.length > 0)
    return { error: `${JSON.stringify(times)} is not a time range: expected ${WINDOW_FORMS}` };
  if (start >= 24 * 60) return { error: `${JSON.stringify(times)}: a window starts by 23:59` };
  if (start === end) return { error: `${JSON.stringify(times)}: the window is empty` };
  return { kind: "weekly", days, start, end };
}

/** `Mon`, `monday`, `Fri-Mon` (wrapping through the weekend) -> day numbers, Sunday 0. */
function parseDays(s: string): number[] | null {
  const day = (d: string): number | null => {
    const l = d.toLowerCase();
    const i = DAYS.indexOf(l);
    if (i >= 0) return i;
    const f = FULL_DAYS.indexOf(l);
    return f >= 0 ? f : null;
  };
  const [a, b, ...rest] = s.split("-");
  if (a === undefined || rest.length > 0) return null;
  const from = day(a);
  const to = b === undefined ? from : day(b);
  if (from === null || to === null) return null;
  const out: number[] = [];
  for (let d = from; ; d = (d + 1) % 7) {
    out.push(d);
    if (d === to) return out;
  }
}

/** `HH:MM` -> minutes since midnight (24:00 allowed, as an end), or null. */
function minuteOf(s: string): number | null {
  const m = TIME.exec(s);
  if (!m) return null;
  const [h, min] = [Number(m[1]), Number(m[2])];
  if (min > 59 || h > 24 || (h === 24 && min > 0)) return null;
  return h * 60 + min;
}

const formats = new Map<string, Intl.DateTimeFormat>();

/** The wall clock of `zone` at `at`: its date-and-minute stamp, weekday and minute of the day. */
export function localClock(
  at: number,
  zone: string,
): { stamp: string; day: number; minute: number } {
  let f = formats.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone: zone,
      hourCycle: "h23",
      weekday: "short",
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
    });
    formats.set(zone, f);
  }
  const p: Record<string, string> = {};
  for (const part of f.formatToParts(new Date(at))) p[part.type] = part.value;
  const minute = Number(p.hour) * 60 + Number(p.minute);
  const stamp = `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}`;
  return { stamp, day: DAYS.indexOf((p.weekday ?? "").toLowerCase()), minute };
}

/** Is the instant `at` inside `w`, on the wall clock of `zone`? */
export function inWindow(w: BlackoutWindow, zone: string, at: number): boolean {
  const c = localClock(at, zone);
  if (w.kind === "dates") return c.stamp >= w.from && c.stamp < w.to;
  if (w.end > w.start) return w.days.includes(c.day) && c.minute >= w.start && c.minute < w.end;
  // Past midnight: the evening of a listed day, or the early hours of the day after one.
  return (
    (w.days.includes(c.day) && c.minute >= w.start) ||
    (w.days.includes((c.day + 6) % 7) && c.minute < w.end)
  );
}

/** The name of the first of a job's blackout windows that holds the instant `at`, or null. */
export function blackoutAt(
  job: { timezone: string; blackouts?: readonly NamedWindow[] },
  at: number,
): string | null {
  // A config recorded before blackouts existed has none (`?`: read back by older records).
  for (const b of job.blackouts ?? []) if (inWindow(b.window, job.timezone, at)) return b.name;
  return null;
}
