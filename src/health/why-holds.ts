// What `why` says of a slot skipped for a named lock or a full group (docs/locks.md), from its
// recorded reason: `lock db held by backup (run 812)`, `group heavy full (2 of 2 running)`,
// either followed by ` and a slot is already waiting` under `overlap: queue`. Pure.
import type { Overlap } from "../core/types.js";

const LOCK = /^lock (\S+) held by (\S+) \(run (\d+)\)( and a slot is already waiting)?$/;
const GROUP = /^group (\S+) full \((\d+) of (\d+) running\)( and a slot is already waiting)?$/;

/** The sentences for such a reason, or null when the reason is none of these. */
export function holdSentences(reason: string, overlap: Overlap): string[] | null {
  const lock = LOCK.exec(reason);
  const group = lock ? null : GROUP.exec(reason);
  if (!lock && !group) return null;
  const what = lock
    ? `the named lock ${lock[1]} was held by run ${lock[3]} of ${lock[2]} (a job whose locks: name it too), and a run holds its named locks for its whole life`
    : `its group ${group?.[1]} was full: ${group?.[2]} of its max_running ${group?.[3]} runs were going`;
  const waiting = (lock ?? group)?.[4] !== undefined;
  const policy = waiting
    ? "overlap: queue keeps one slot waiting for it, and one already waited"
    : overlap === "queue"
      ? "the slot could not wait"
      : `overlap is ${overlap}: a slot that finds it so is skipped (overlap: queue would have waited)`;
  return [
    `Skipped: ${what}; ${policy}.`,
    "A slot skipped this way is not run afterwards (no catch-up); its next slot runs if the lock or the group is free then.",
  ];
}
