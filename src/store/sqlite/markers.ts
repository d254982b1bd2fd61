// Markers, `once` claims, attempts and progress. The functions at the end (markKeys, takeClaim,
// completeClaim, checkDone) are the marker path's whole operations, shared by the async store
// and the synchronous library (`Markers`); like every table-group function they run in their
// caller's transaction and never open one.
import type { Conn } from "../connection.js";
import * as S from "../queries/markers.js";
import { SQLITE } from "../queries/sql.js";
import type {
  Alive,
  AttemptRow,
  ClaimOutcome,
  ClaimRow,
  MarkerRow,
  MarkerWriter,
  Owner,
} from "../rows.js";

/** New markers (of a job) and progress (of a run) are new work: see jobWorked in queries/markers.ts. */
const JOB_WORKED = S.jobWorked(SQLITE, false);
const FENCE_VALID = S.fenceValid(SQLITE);
const RUN_WORKED = S.jobWorked(SQLITE, true);

/**
 * May this run write markers? Only while it is the job's current, live, unrevoked run:
 * a straggler, a replaced run or a run whose lock was taken over is refused.
 */
export function fenceValid(c: Conn, job: string, runId: number, fence: number): boolean {
  return c.q(FENCE_VALID).get(runId, job, fence) !== undefined;
}

export function isMarked(c: Conn, job: string, key: string): boolean {
  return c.q(S.IS_MARKED).get(job, key) !== undefined;
}

/**
 * Insert a writer's markers; returns how many were new. The new ones are counted on the run and
 * as the job's progress once per call, not per key: an UPDATE of runs cost 50 to 130 µs until
 * migration 009 (BENCHMARKS.md), and is a statement still. The run's counters are written only
 * while it runs: a finished run's columns are its summary's (migration 009).
 */
function insertMarkers(c: Conn, w: MarkerWriter, keys: readonly string[], now: number): number {
  const runId = w.run?.id ?? null;
  const insert = c.q(S.INSERT_MARKER);
  const attempts = c.q(S.FORGET_ATTEMPTS);
  let n = 0;
  for (const key of keys) {
    if (insert.run(w.job, key, runId, w.run?.fence ?? null, now).changes === 0) continue;
    attempts.run(w.job, key);
    n++;
  }
  if (n === 0) return 0;
  if (runId !== null) {
    c.q(S.COUNT_NEW).run(n, now, runId);
  }
  // New markers are new work (health `idle`, migration 012): in the same statement.
  c.q(JOB_WORKED).run(now, now, w.job);
  return n;
}

export function countSkipped(c: Conn, runId: number | null, n = 1): void {
  if (runId !== null) c.q(S.COUNT_SKIPPED).run(n, runId);
}

/** Delete a marker; returns true if there was one. */
export function deleteMarker(c: Conn, job: string, key: string): boolean {
  return c.q(S.DELETE_MARKER).run(job, key).changes > 0;
}

/**
 * Every marker of `from` into `to` (its run, fence and time kept), then out of `from`: a key `to`
 * has already stays as `to` has it. Insert and delete, not an UPDATE of `job`: the job summary's
 * marker count follows the insert and delete triggers (migration 006).
 */
export function moveMarkerRows(
  c: Conn,
  from: string,
  to: string,
): { moved: number; already: number } {
  const moved = c.q(S.COPY_MARKERS).run(to, from).changes;
  const all = c.q(S.DELETE_JOB_MARKERS).run(from).changes;
  return { moved, already: all - moved };
}

export function markers(c: Conn, job: string): MarkerRow[] {
  return c.q(S.MARKERS).all(job) as MarkerRow[];
}

export function markerCount(c: Conn, job: string): number {
  return (c.q(S.MARKER_COUNT).get(job) as { n: number }).n;
}

/** Every job's marker count in one pass (jobs without markers are absent). */
export function markerCounts(c: Conn): Map<string, number> {
  const rows = c.q(S.MARKER_COUNTS, true).all() as [string, number][];
  return new Map(rows);
}

/** Who holds the `once` claim on a key, if anyone (a read: takeClaim takes one). */
export function claimHolder(c: Conn, job: string, key: string): ClaimRow | undefined {
  return c.q(S.CLAIM_HOLDER).get(job, key) as ClaimRow | undefined;
}

export function setClaimCommand(
  c: Conn,
  job: string,
  key: string,
  pid: number,
  cmdPid: number,
  cmdStart: string | null,
): void {
  c.q(S.SET_CLAIM_COMMAND).run(cmdPid, cmdStart, job, key, pid);
}

function putClaim(
  c: Conn,
  job: string,
  key: string,
  me: Owner,
  runId: number | null,
  now: number,
  node: string,
): void {
  c.q(S.PUT_CLAIM).run(job, key, me.pid, me.start, runId, now, node);
}

export function dropClaim(c: Conn, job: string, key: string, pid: number): void {
  c.q(S.DROP_CLAIM).run(job, key, pid);
}

export function countAttempt(c: Conn, job: string, key: string, now: number): number {
  c.q(
    `INSERT INTO attempts (job, key, count, last_at) VALUES (?, ?, 1, ?)
     ON CONFLICT (job, key) DO UPDATE SET count = count + 1, last_at = excluded.last_at`,
  ).run(job, key, now);
  return (
    c.q("SELECT count FROM attempts WHERE job = ? AND key = ?").get(job, key) as { count: number }
  ).count;
}

/** Keys attempted more than `limit` times without being marked, worst first. */
export function repeatingKeys(
  c: Conn,
  job: string,
  limit: number,
): Pick<AttemptRow, "key" | "count">[] {
  return c.q(S.REPEATING_KEYS).all(job, limit) as Pick<AttemptRow, "key" | "count">[];
}

/**
 * Keys attempted more than `limit` times without being marked, whose last attempt is at or
 * after `since` (still being tried), worst first.
 */
export function repeatingKeysSince(
  c: Conn,
  job: string,
  limit: number,
  since: number,
): AttemptRow[] {
  return c.q(S.REPEATING_KEYS_SINCE).all(job, limit, since) as AttemptRow[];
}

/**
 * repeatingKeysSince for every job at once: the keys attempted more than `limit` times without
 * being marked, by job, worst first (the caller applies each job's own limit and `since`).
 */
export function repeatingKeysAll(c: Conn, limit: number): Map<string, AttemptRow[]> {
  const rows = c.q(S.REPEATING_KEYS_ALL).all(limit) as (AttemptRow & { job: string })[];
  const by = new Map<string, AttemptRow[]>();
  for (const { job, key, count, last_at } of rows) {
    let list = by.get(job);
    if (!list) by.set(job, (list = []));
    list.push({ key, count, last_at });
  }
  return by;
}

/** Jobs whose marker keys were attempted at or after `since` (`once` may run outside a run). */
export function jobsAttemptedSince(c: Conn, since: number): string[] {
  const rows = c.q(S.ATTEMPTED_SINCE).all(since) as {
    job: string;
  }[];
  return rows.map((r) => r.job);
}

/**
 * A run's progress (progressIfLive is its fenced caller). Only while the run runs, whoever calls:
 * migration 009 leaves progress_at out of the summary's trigger, so a finished row never gets it.
 */
function progress(c: Conn, runId: number, message: string | null, now: number): void {
  const info = c.q(S.PROGRESS).run(now, message, runId);
  if (info.changes === 0) return;
  c.q(RUN_WORKED).run(now, now, runId);
}

// ---- the marker path's operations -----------------------------------------------------------

const stale = (c: Conn, w: MarkerWriter): boolean =>
  w.run !== null && !fenceValid(c, w.job, w.run.id, w.run.fence);

/** Is KEY done? A done key counts as skipped work on the writer's run. */
export function checkDone(c: Conn, w: MarkerWriter, key: string): boolean {
  const done = isMarked(c, w.job, key);
  if (done) countSkipped(c, w.run?.id ?? null);
  return done;
}

/** Mark keys done; returns how many were new, or null (nothing written) if the fence is stale. */
export function markKeys(
  c: Conn,
  w: MarkerWriter,
  keys: readonly string[],
  now: number,
): number | null {
  return stale(c, w) ? null : insertMarkers(c, w, keys, now);
}

/**
 * Claim KEY for `me`: "done" if already marked (counted as skipped), else the claim is taken
 * (a dead holder's at once, a live one's never) and the attempt counted.
 */
export function takeClaim(
  c: Conn,
  w: MarkerWriter,
  key: string,
  me: Owner,
  now: number,
  alive: Alive,
  node: string,
): ClaimOutcome {
  if (checkDone(c, w, key)) return { kind: "done" };
  if (stale(c, w)) return { kind: "stale" };
  const h = claimHolder(c, w.job, key);
  if (h && h.pid !== me.pid) {
    if (alive(h.pid, h.pid_start)) return { kind: "held", holder: h, by: "once" };
    // The `once` process died but its command may still be at work: the claim holds.
    if (h.cmd_pid !== null && alive(h.cmd_pid, h.cmd_start))
      return { kind: "held", holder: h, by: "command" };
  }
  putClaim(c, w.job, key, me, w.run?.id ?? null, now, node);
  countAttempt(c, w.job, key, now);
  return { kind: "claimed" };
}

/** Mark a claimed key and release the claim; false (nothing written) if the fence is stale. */
export function completeClaim(
  c: Conn,
  w: MarkerWriter,
  key: string,
  pid: number,
  now: number,
): boolean {
  if (stale(c, w)) return false;
  insertMarkers(c, w, [key], now);
  dropClaim(c, w.job, key, pid);
  return true;
}

/**
 * Progress from a writer that must be its job's live, unrevoked run (the broker's path: a process
 * left over after its run ended is refused); false, and nothing written, otherwise.
 */
export function progressIfLive(
  c: Conn,
  w: MarkerWriter,
  message: string | null,
  now: number,
): boolean {
  if (w.run === null || stale(c, w)) return false;
  progress(c, w.run.id, message, now);
  return true;
}
