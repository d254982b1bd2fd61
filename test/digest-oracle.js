// Health's digest of a job's recent runs, read plainly from its rule: the oracle the store's one
// definition (src/store/digest.ts, kept in each job's row by a trigger) is checked
// against on random histories (test/store-contract.test.js), and what the health tests build a
// job's facts with. Written apart from the SQL on purpose: two readings of one rule that agree.
import { P95_MIN_SAMPLES, VERDICT_STATUSES } from "../dist/store/digest.js";

const VERDICTS = new Set(VERDICT_STATUSES);

/** Nearest-rank p95; null with fewer than P95_MIN_SAMPLES samples. */
export function percentile95(xs) {
  if (xs.length < P95_MIN_SAMPLES) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.ceil(0.95 * s.length) - 1];
}

/**
 * Of finished runs with a process, newest first: the newest, the p95 of the successes'
 * durations (a missing one counts as 0), and, when the newest run with a verdict did not
 * succeed, that run and how many verdicts in a row did not.
 */
export function digestRecent(recent) {
  const ok = recent.filter((r) => r.status === "ok").map((r) => r.duration_ms ?? 0);
  const verdicts = recent.filter((r) => VERDICTS.has(r.status));
  const firstOk = verdicts.findIndex((r) => r.status === "ok");
  const streak = firstOk === -1 ? verdicts.length : firstOk;
  return {
    newest: recent[0] ?? null,
    okP95: percentile95(ok),
    failing: streak === 0 ? null : { run: verdicts[0], streak },
  };
}
