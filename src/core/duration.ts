// Durations (`500ms`, `30s`, `1h30m`) and sizes (`10MB`, 1024-based) as written in jobs.yaml.
// Both throw a RangeError whose message is fit to show the user as it is.

const DURATION_UNITS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

const SIZE_UNITS: Record<string, number> = {
  B: 1,
  KB: 1024,
  MB: 1024 ** 2,
  GB: 1024 ** 3,
  TB: 1024 ** 4,
};

/** What parseDuration accepts, for the JSON Schema (kept next to the parser so they agree). */
export const DURATION_PATTERN = "^([0-9]+(\\.[0-9]+)?(ms|s|m|h|d))+$";
/** What parseSize accepts, for the JSON Schema. */
export const SIZE_PATTERN = "^[0-9]+(\\.[0-9]+)?(B|KB|MB|GB|TB)$";

/** `1h30m` -> 5400000. A bare number is an error: `30` could mean seconds or minutes. */
export function parseDuration(text: string): number {
  return parseAmounts(text, DURATION_UNITS, "duration", "30s", "ms, s, m, h or d");
}

/** `10MB` -> 10485760 (1024-based). */
export function parseSize(text: string): number {
  return parseAmounts(text, SIZE_UNITS, "size", "10MB", "B, KB, MB, GB or TB");
}

function parseAmounts(
  text: string,
  units: Record<string, number>,
  what: string,
  example: string,
  unitList: string,
): number {
  const bad = (why: string) => new RangeError(`bad ${what} ${JSON.stringify(text)}: ${why}`);
  // A size is one amount; a duration may chain several (`1h30m`).
  const token = /([0-9]+(?:\.[0-9]+)?)([a-zA-Z]*)/y;
  let total = 0;
  let count = 0;
  while (token.lastIndex < text.length) {
    const m = token.exec(text);
    if (!m) throw bad(`expected a number and a unit, e.g. ${example}`);
    const [, amount = "", unit = ""] = m;
    if (unit === "") throw bad(`needs a unit, e.g. ${example}`);
    const size = units[unit];
    if (size === undefined) throw bad(`unknown unit "${unit}" (use ${unitList})`);
    total += Number(amount) * size;
    count++;
  }
  if (count === 0) throw bad(`expected a number and a unit, e.g. ${example}`);
  if (count > 1 && units === SIZE_UNITS)
    throw bad(`expected one number and a unit, e.g. ${example}`);
  const result = Math.round(total);
  if (!Number.isSafeInteger(result)) throw bad("too large");
  return result;
}

/** 5400000 -> `1h30m`. Exact, and parseDuration reads it back to the same number. */
export function formatDuration(ms: number): string {
  if (ms < 0) return `-${formatDuration(-ms)}`;
  let rest = Math.round(ms);
  if (rest === 0) return "0s";
  let out = "";
  for (const unit of ["d", "h", "m", "s", "ms"]) {
    const size = DURATION_UNITS[unit] ?? 1;
    const n = Math.floor(rest / size);
    if (n > 0) out += `${n}${unit}`;
    rest -= n * size;
  }
  return out;
}

/**
 * 300000 -> `5m`: one unit, the largest that is exact (a config written by `import-crontab`), so
 * 90000 is `90s` where formatDuration writes `1m30s`. parseDuration reads it back exactly too.
 */
export function formatDurationOneUnit(ms: number): string {
  for (const unit of ["d", "h", "m", "s"]) {
    const size = DURATION_UNITS[unit] ?? 1;
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return ms === 0 ? "0s" : `${ms}ms`;
}

/**
 * `42s`, `7m`, `3h`, `2d`: one unit, rounded, for sentences and the status table (a health
 * problem, an age). Seconds up to 2 minutes, minutes up to 2 hours, hours up to 2 days.
 */
export function formatDurationRounded(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172_800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86_400)}d`;
}

/** 1234 -> `1.2s`: seconds with `digits` decimals, for a run's duration in a table or an alert. */
export function formatSeconds(ms: number, digits = 1): string {
  return `${(ms / 1000).toFixed(digits)}s`;
}
