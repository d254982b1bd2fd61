// Clock changes: which local hours a zone skips or repeats, and what that does to a job.
import type { Schedule } from "./fields.js";

const dstHoursCache = new Map<string, Set<number>>();

/**
 * The local hours that a clock change skips or repeats in `zone`, from its changes in 2026.
 * For the host's zone (null), which an import cannot know, the hours Europe and North America
 * change in.
 */
function dstHours(zone: string | null): Set<number> {
  if (zone === null) return new Set([1, 2]);
  const cached = dstHoursCache.get(zone);
  if (cached) return cached;
  const format = new Intl.DateTimeFormat("en-US", { timeZone: zone, timeZoneName: "longOffset" });
  const offsetMs = (t: number) => {
    const name = format.formatToParts(t).find((p) => p.type === "timeZoneName")?.value ?? "";
    const m = /([+-])(\d\d):(\d\d)/.exec(name);
    return m ? (m[1] === "-" ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3])) * 60_000 : 0;
  };
  const hours = new Set<number>();
  const day = 86_400_000;
  for (let t = Date.UTC(2026, 0, 1); t < Date.UTC(2027, 0, 1); t += day) {
    const before = offsetMs(t);
    const after = offsetMs(t + day);
    if (before === after) continue;
    let lo = t;
    let hi = t + day;
    while (hi - lo > 60_000) {
      const mid = lo + Math.floor((hi - lo) / 120_000) * 60_000;
      if (offsetMs(mid) === before) lo = mid;
      else hi = mid;
    }
    // At `hi` the wall clock jumps from hi+before to hi+after: the minutes between are skipped
    // (clocks forward) or happen twice (clocks back).
    const from = hi + Math.min(before, after);
    for (let w = from; w < hi + Math.max(before, after); w += 60_000) {
      hours.add(new Date(w).getUTCHours());
    }
  }
  dstHoursCache.set(zone, hours);
  return hours;
}

/**
 * A job due in an hour that a clock change skips or repeats gets a note. croner (and so
 * cronvisor) runs a single fixed time once on such a night; other schedules lose the runs of a
 * skipped hour and repeat those of a repeated hour. Vixie's crons (Debian, cronie) call a job
 * "fixed" when neither its minute nor its hour field starts with "*", and run the skipped runs
 * of such a job right after the change.
 */
export function dstNote(s: Schedule, fields: string[], zone: string | null): string | null {
  const changing = dstHours(zone);
  if (s.hours.size === 24 || ![...s.hours].some((h) => changing.has(h))) return null;
  if (s.fixedTime) {
    const hhmm = [...s.hours, ...s.minutes].map((n) => String(n).padStart(2, "0")).join(":");
    return `DST: when the clocks change, ${hhmm} may not exist or may happen twice; cronvisor runs this job once either way (right after the change, or at the first ${hhmm})`;
  }
  const cronFixed =
    !(fields[0] as string).startsWith("*") && !(fields[1] as string).startsWith("*");
  return `DST: when the clocks change, runs due in a skipped hour are skipped and runs in a repeated hour happen twice${cronFixed ? "; Debian's cron and cronie ran the skipped ones right after the change" : ""}`;
}
