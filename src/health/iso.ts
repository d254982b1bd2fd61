// Times as status and history print them: toISOString's form, made faster for many calls.

const DAY_MS = 86_400_000;
/** Years 0 to 9999, where toISOString's form is YYYY-MM-DDTHH:MM:SS.mmmZ. */
const ISO_END = 253_402_300_800_000;
const dayPrefixes = new Map<number, string>();
/** "00" to "99": two digits without a padStart call each (four per time). */
const TWO = Array.from({ length: 100 }, (_, i) => (i < 10 ? `0${i}` : `${i}`));
const three = (n: number): string => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);

/** toISOString's string without a Date per call (8,000 calls for 1,000 jobs: 5% of `status`). */
export function iso(t: number | null | undefined): string | null {
  if (t === null || t === undefined) return null;
  if (!Number.isInteger(t) || t < 0 || t >= ISO_END) return new Date(t).toISOString();
  const ms = t % DAY_MS;
  const day = t - ms;
  let prefix = dayPrefixes.get(day);
  if (prefix === undefined) {
    prefix = new Date(day).toISOString().slice(0, 11);
    if (dayPrefixes.size < 4096) dayPrefixes.set(day, prefix);
  }
  const s = Math.floor(ms / 1000);
  return `${prefix}${TWO[Math.floor(s / 3600)]}:${TWO[Math.floor(s / 60) % 60]}:${TWO[s % 60]}.${three(ms % 1000)}Z`;
}
