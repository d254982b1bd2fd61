// Times as status and history print them: toISOString's form, made faster for many calls.

const DAY_MS = 86_400_000;
/** Years 0 to 9999, where toISOString's form is YYYY-MM-DDTHH:MM:SS.mmmZ. */
const ISO_END = 253_402_300_800_000;
/** Entries kept in each cache below (a daemon serving the page calls iso for years). */
const CACHE_MAX = 4096;
const dayPrefixes = new Map<number, string>();
/** "HH:MM:SS." by second of the day: runs of one schedule share their seconds. */
const clockParts = new Map<number, string>();
/** "00" to "99": two digits without a padStart call each. */
const TWO = Array.from({ length: 100 }, (_, i) => (i < 10 ? `0${i}` : `${i}`));
/** "000Z" to "999Z": the milliseconds and the end, one lookup instead of a number formatted. */
const MILLIS_Z = Array.from({ length: 1000 }, (_, i) => `${String(i).padStart(3, "0")}Z`);

/**
 * toISOString's string without a Date per call (6,000 calls for 1,000 jobs). Three pieces, each
 * from a table or a cache, joined by two concatenations: a template of nine parts made eight
 * intermediate strings per call, which the collector then copied (1.9 MB for 1,000 jobs).
 */
export function iso(t: number | null | undefined): string | null {
  if (t === null || t === undefined) return null;
  if (!Number.isInteger(t) || t < 0 || t >= ISO_END) return new Date(t).toISOString();
  const ms = t % DAY_MS;
  const day = t - ms;
  let prefix = dayPrefixes.get(day);
  if (prefix === undefined) {
    prefix = new Date(day).toISOString().slice(0, 11);
    if (dayPrefixes.size < CACHE_MAX) dayPrefixes.set(day, prefix);
  }
  const s = Math.floor(ms / 1000);
  let clock = clockParts.get(s);
  if (clock === undefined) {
    clock = `${TWO[Math.floor(s / 3600)]}:${TWO[Math.floor(s / 60) % 60]}:${TWO[s % 60]}.`;
    if (clockParts.size < CACHE_MAX) clockParts.set(s, clock);
  }
  return prefix + clock + MILLIS_Z[ms % 1000];
}
