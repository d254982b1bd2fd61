// The admission decision for named locks and concurrency groups (docs/locks.md): what a run to
// start does when a lock it names is held, or its group is at its max_running. Pure: the store
// asks it inside the reservation's transaction, on what it found (HoldFacts), so that the
// judgement and the take are one step on both engines.
import type { Admission, HoldFacts } from "../store/store.js";
import type { Overlap, Trigger } from "../core/types.js";

export interface AdmitState {
  /** The job's `overlap:`: `queue` waits (one slot at most), the others skip. */
  policy: Overlap;
  trigger: Trigger;
  /** A slot of this job already waits for a lock or its group. */
  waiting: boolean;
}

/** Why the holds refuse a start, or null when every lock is free and the group has room. */
export function blockedBy(f: HoldFacts): string | null {
  for (const l of f.locks) {
    if (l.holder !== null) return `lock ${l.name} held by ${l.holder.job} (run ${l.holder.runId})`;
  }
  const g = f.group;
  if (g !== null && g.running >= g.maxRunning)
    return `group ${g.name} full (${g.running} of ${g.maxRunning} running)`;
  return null;
}

/**
 * Start when nothing blocks. Else: a manual run is refused (exit 75, as for the job's lock); a
 * run that is not a scheduled slot (catch-up, retry, resume, @reboot) waits, as it would behind
 * the job's own run; a scheduled slot follows `overlap:`: `queue` waits, one slot per job at
 * most, and every other policy skips (`replace` cannot stop another job's run, and `allow` is
 * about the job's own runs).
 */
export function decideAdmission(s: AdmitState, f: HoldFacts): Admission {
  const why = blockedBy(f);
  if (why === null) return { kind: "start" };
  if (s.trigger === "manual") return { kind: "skip", reason: why };
  if (s.trigger !== "schedule") return { kind: "wait", reason: why };
  if (s.policy !== "queue") return { kind: "skip", reason: why };
  if (s.waiting) return { kind: "skip", reason: `${why} and a slot is already waiting` };
  return { kind: "wait", reason: why };
}
