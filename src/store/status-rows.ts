// The row types of what health and `status` read, beside rows.ts (store.ts re-exports both): a
// job's readings, the digest of its recent runs, and the summary rows the status read takes
// from the jobs table.
import type {
  AttemptRow,
  DaemonRow,
  HistoryRow,
  JobRow,
  NodeRow,
  RunFacts,
  RunRow,
} from "./rows.js";

/**
 * What health judges of a job's finished runs with a process: the newest, the p95 of the
 * successes, and the failing streak. `status` has it from the job's row (the columns defined in
 * digest.ts, and last_finished) without parsing the runs.
 */
export interface RecentDigest {
  newest: Pick<RunFacts, "id" | "status" | "reason" | "started_at"> | null;
  /** The nearest-rank p95 of the successes' durations; null with fewer than 5. */
  okP95: number | null;
  /** The newest run with a verdict, when it did not succeed, and how many in a row did not. */
  failing: { run: Pick<RunFacts, "id" | "status" | "reason">; streak: number } | null;
}

/** Migration 008's columns of a job's row: RecentDigest without the newest run. */
export type RowVerdicts = Omit<RecentDigest, "newest">;

/** What one job's health is judged from. */
export interface JobReadings {
  row: JobRow | null;
  /** `running` rows, oldest first (before any liveness check). */
  running: RunRow[];
  /** Finished runs with a process, newest first (none when the reader asked for none). */
  recent: RunFacts[];
  /** The digest of the newest 20 of them, as the job's row keeps it. */
  digest: RecentDigest;
  /**
   * Keys attempted more than the job's repeat limit, whose last attempt is at or after the start
   * of the newest finished run (still being tried), worst first, at most 10.
   */
  attempts: AttemptRow[];
}

/** What `status` shows of one job: its readings plus its latest runs and marker count. */
export interface StatusJobRows extends JobReadings {
  /** The latest run that had a process. */
  last: HistoryRow | null;
  /** The latest run that has ended (the newest of `recent`). */
  lastFinished: HistoryRow | null;
  markers: number;
}

export interface StatusRows {
  daemon: DaemonRow | null;
  /** Every node of the store (one with SQLite), read in the same snapshot. */
  nodes: NodeRow[];
  jobs: Map<string, StatusJobRows>;
}

/**
 * A jobs row as the status read takes it: the JobRow, recent_runs, last_finished, marker_count
 * and its digest's columns (digest.ts).
 */
export type SummaryRow = readonly [JobRow, string, string | null, number, RowVerdicts];

/**
 * What the status page keeps of the jobs' rows between reads. The caller keeps it; the rows and
 * parses in it are shared, never changed by their readers.
 */
export interface SummaryParses {
  /**
   * The summary columns as last parsed, by job: a column read back unchanged (after a commit
   * that wrote some job's row, almost every other one) is not parsed again.
   */
  jobs: Map<
    string,
    {
      recentJson: string;
      limit: number;
      recent: RunFacts[];
      lastJson: string | null;
      lastFinished: HistoryRow | null;
    }
  >;
  /**
   * SQLite: every job's row as last read, with the count of writes to the jobs table then
   * (migration 007): while the count stands (the daemon's heartbeat writes no job's row), the
   * table is not read again.
   */
  table?: { writes: number; rows: ReadonlyMap<string, SummaryRow> };
}

/** A job `status` reads: its name and repeat limit. */
export interface StatusJob {
  name: string;
  repeatLimit: number;
}
