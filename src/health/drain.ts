// The drain (`cronvisor pause --all`) as status, `--check` and the page say it.
import type { DrainRow } from "../store/store.js";
import { iso } from "./iso.js";

export interface DrainReport {
  since: string;
  until: string | null;
  reason: string | null;
}

/** The drain as status shows it: null unless in force at `now` (an `until` passed ends it). */
export function drainReport(d: DrainRow | null, now: number): DrainReport | null {
  if (d === null || d.since > now || (d.until !== null && now >= d.until)) return null;
  return { since: iso(d.since) as string, until: iso(d.until), reason: d.reason };
}

/** The drain's part of a WARNING. */
export function drainWarning(d: DrainReport): string {
  const until = d.until === null ? "until `resume --all`" : `until ${d.until}`;
  return `drained since ${d.since} ${until}${d.reason === null ? "" : ` (maintenance: ${d.reason})`}`;
}
