// `markers OLD --move-to NEW`: what it asks and answers, and the events it records, one in each
// job's history: the same words on both engines.
import type { RunRow } from "./rows.js";

/**
 * `markers OLD --move-to NEW`: carry a renamed job's done-markers over, in one transaction with
 * the check that neither job runs (a run of either could write into a namespace mid-move).
 */
export interface MoveMarkers {
  from: string;
  to: string;
  now: number;
  /** Who asked, for both jobs' events (`USER pid N`). */
  by: string;
  /** Is this node's running run alive? Another node's running run always counts as running. */
  holderAlive: (run: RunRow) => boolean;
}

export type MoveOutcome =
  | { kind: "running"; job: string; run: RunRow }
  /** `moved` keys now in `to`; `already` keys `to` had marked too (dropped from `from`). */
  | { kind: "moved"; moved: number; already: number };

export function movedEvents(
  m: Pick<MoveMarkers, "from" | "to" | "by">,
  r: { moved: number; already: number },
): [job: string, detail: string][] {
  const already = r.already > 0 ? `; ${r.already} already marked in ${m.to}, dropped` : "";
  return [
    [m.from, `${r.moved} marker(s) moved to ${m.to}${already} (by ${m.by})`],
    [m.to, `${r.moved} marker(s) moved from ${m.from}${already} (by ${m.by})`],
  ];
}
