// The events `markers OLD --move-to NEW` records, one in each job's history: the same words on
// both engines.
import type { MoveMarkers } from "./rows.js";

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
