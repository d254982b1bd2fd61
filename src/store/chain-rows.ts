// The rows of chains and the drain (migration 014), and the texts both engines write for them.

/** A downstream job's start for an upstream run's slot (`then:` / `then_on_failure:`). */
export interface ChainStart {
  job: string;
  slot: number;
  upstream: string;
  upstreamRun: number;
}

/** A chain start not yet settled: its downstream slot has no disposition yet (or just got one). */
export interface ChainRow {
  job: string;
  slot: number;
  upstream: string;
  upstream_run: number;
  created_at: number;
}

/** What a chained run's history `reason` says it follows. */
export const chainReason = (upstream: string, runId: number): string =>
  `chained after ${upstream} run ${runId}`;

/** The event a drain's start records. */
export function drainDetail(d: DrainRow): string {
  const until = d.until === null ? "" : ` until ${new Date(d.until).toISOString()}`;
  return `drain (pause --all)${until}${d.reason === null ? "" : `: ${d.reason}`}`;
}

/** `cronvisor pause --all`: since when, until when (null: until `resume --all`), and why. */
export interface DrainRow {
  since: number;
  until: number | null;
  reason: string | null;
}
