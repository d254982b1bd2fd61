// Friendlier words for common mistakes: a key in the wrong place, and "did you mean" for a typo.
import { isMap } from "yaml";
import { JOB_KEYS, KEYS } from "./keys.js";

/** An unknown top-level key: often a job written without "jobs:", or a job key put at the top. */
export function rootUnknownKey(key: string, value: unknown): string {
  if (isMap(value) && (value.has("schedule") || value.has("command"))) {
    return `unknown key ${JSON.stringify(key)} (jobs go under "jobs:")`;
  }
  if (Object.hasOwn(JOB_KEYS, key)) {
    return `unknown key ${JSON.stringify(key)} (it is a job setting: put it in a job or under "defaults:")`;
  }
  return unknownKeyMessage(key, Object.keys(KEYS));
}

/** An unknown key in a job: often a top-level setting put in the job. */
export function jobUnknownKey(key: string): string {
  if (Object.hasOwn(KEYS, key)) {
    return `unknown key ${JSON.stringify(key)} (it is a top-level setting, not a job's)`;
  }
  return unknownKeyMessage(key, Object.keys(JOB_KEYS));
}

export function unknownKeyMessage(key: string, known: readonly string[]): string {
  return `unknown key ${JSON.stringify(key)}${suggest(key, known)}`;
}

/** ` (did you mean "x"?)` for a near miss, else "". */
export function suggest(word: string, candidates: readonly string[]): string {
  const best = nearest(word, candidates);
  return best === undefined ? "" : ` (did you mean "${best}"?)`;
}

/** The candidate within a typo or two of `word` (one for short words), if any. */
export function nearest(word: string, candidates: readonly string[]): string | undefined {
  const limit = word.length <= 3 ? 1 : 2;
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const c of candidates) {
    const d = levenshtein(word.toLowerCase(), c.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return best;
}

function levenshtein(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost);
    }
    prev = row;
  }
  return prev[b.length] ?? 0;
}
