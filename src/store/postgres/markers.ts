// Markers, `once` claims, attempts and progress on PostgreSQL: the same operations as
// ../sqlite/markers.ts. Table-group functions: they run in their caller's transaction and never
// open one. The fence check holds: the caller took the job's row lock (jobs.lockJobs), and
// fenceValid locks the writer's run row, so a takeover (which ends the old run) or a revoke
// either commits before the check (the write is refused) or waits until the write commits.
import type { Q } from "../pg-connection.js";
import * as S from "../queries/markers.js";
import { POSTGRES } from "../queries/sql.js";
import { leaseLive } from "./daemon.js";
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
const JOB_WORKED = S.jobWorked(POSTGRES, false);
const FENCE_VALID = S.fenceValid(POSTGRES);
const RUN_WORKED = S.jobWorked(POSTGRES, true);

/** May this run write markers? Only while it is the job's current, live, unrevoked run. */
export async function fenceValid(q: Q, job: string, runId: number, fence: number) {
  return (await q.get(FENCE_VALID, [runId, job, fence])) !== undefined;
}

export async function isMarked(q: Q, job: string, key: string): Promise<boolean> {
  return (await q.get(S.IS_MARKED, [job, key])) !== undefined;
}

/** Insert a writer's markers; returns how many were new, counted once (see ../sqlite/markers.ts). */
async function insertMarkers(q: Q, w: MarkerWriter, keys: readonly string[], now: number) {
  const runId = w.run?.id ?? null;
  let n = 0;
  for (const key of keys) {
    const inserted = await q.run(S.INSERT_MARKER, [w.job, key, runId, w.run?.fence ?? null, now]);
    if (inserted === 0) continue;
    await q.run(S.FORGET_ATTEMPTS, [w.job, key]);
    n++;
  }
  if (n === 0) return 0;
  if (runId !== null) {
    await q.run(S.COUNT_NEW, [n, now, runId]);
  }
  await q.run(JOB_WORKED, [now, now, w.job]);
  return n;
}

export async function countSkipped(q: Q, runId: number | null, n = 1) {
  if (runId !== null) await q.run(S.COUNT_SKIPPED, [n, runId]);
}

/** Delete a marker; returns true if there was one. */
export async function deleteMarker(q: Q, job: string, key: string): Promise<boolean> {
  return (await q.run(S.DELETE_MARKER, [job, key])) > 0;
}

export async function markers(q: Q, job: string): Promise<MarkerRow[]> {
  return q.all<MarkerRow>(S.MARKERS, [job]);
}

export async function markerCount(q: Q, job: string): Promise<number> {
  const r = await q.get<{ n: number }>(S.MARKER_COUNT, [job]);
  return r?.n ?? 0;
}

/** Every job's marker count in one pass (jobs without markers are absent). */
export async function markerCounts(q: Q): Promise<Map<string, number>> {
  const rows = await q.all<{ job: string; n: number }>(S.MARKER_COUNTS);
  return new Map(rows.map((r) => [r.job, r.n]));
}

/** Who holds the `once` claim on a key, if anyone (a read: takeClaim takes one). */
export async function claimHolder(q: Q, job: string, key: string): Promise<ClaimRow | undefined> {
  return q.get<ClaimRow>(S.CLAIM_HOLDER, [job, key]);
}

export async function setClaimCommand(
  q: Q,
  job: string,
  key: string,
  pid: number,
  cmdPid: number,
  cmdStart: string | null,
) {
  await q.run(S.SET_CLAIM_COMMAND, [cmdPid, cmdStart, job, key, pid]);
}

async function putClaim(
  q: Q,
  job: string,
  key: string,
  me: Owner,
  runId: number | null,
  now: number,
  node: string,
) {
  await q.run(S.PUT_CLAIM, [job, key, me.pid, me.start, runId, now, node]);
}

export async function dropClaim(q: Q, job: string, key: string, pid: number) {
  await q.run(S.DROP_CLAIM, [job, key, pid]);
}

export async function countAttempt(q: Q, job: string, key: string, now: number) {
  const r = await q.get<{ count: number }>(
    `INSERT INTO attempts (job, key, count, last_at) VALUES ($1, $2, 1, $3)
     ON CONFLICT (job, key) DO UPDATE SET count = attempts.count + 1, last_at = excluded.last_at
     RETURNING count`,
    [job, key, now],
  );
  return r?.count ?? 0;
}

/** Keys attempted more than `limit` times without being marked, worst first. */
export async function repeatingKeys(q: Q, job: string, limit: number) {
  return q.all<Pick<AttemptRow, "key" | "count">>(S.REPEATING_KEYS, [job, limit]);
}

/** Keys attempted more than `limit` times, last attempted at or after `since`, worst first. */
export async function repeatingKeysSince(q: Q, job: string, limit: number, since: number) {
  return q.all<AttemptRow>(S.REPEATING_KEYS_SINCE, [job, limit, since]);
}

/** repeatingKeysSince for every job at once, by job, worst first. */
export async function repeatingKeysAll(q: Q, limit: number): Promise<Map<string, AttemptRow[]>> {
  const rows = await q.all<AttemptRow & { job: string }>(S.REPEATING_KEYS_ALL, [limit]);
  const by = new Map<string, AttemptRow[]>();
  for (const { job, key, count, last_at } of rows) {
    let list = by.get(job);
    if (!list) by.set(job, (list = []));
    list.push({ key, count, last_at });
  }
  return by;
}

/** Jobs whose marker keys were attempted at or after `since` (`once` may run outside a run). */
export async function jobsAttemptedSince(q: Q, since: number): Promise<string[]> {
  const rows = await q.all<{ job: string }>(S.ATTEMPTED_SINCE, [since]);
  return rows.map((r) => r.job);
}

/** A run's progress, only while it runs (see ../sqlite/markers.ts). */
async function progress(q: Q, runId: number, message: string | null, now: number) {
  const n = await q.run(S.PROGRESS, [now, message, runId]);
  if (n === 0) return;
  await q.run(RUN_WORKED, [now, now, runId]);
}

// ---- the marker path's operations -----------------------------------------------------------

const stale = async (q: Q, w: MarkerWriter): Promise<boolean> =>
  w.run !== null && !(await fenceValid(q, w.job, w.run.id, w.run.fence));

/** Is KEY done? A done key counts as skipped work on the writer's run. */
export async function checkDone(q: Q, w: MarkerWriter, key: string): Promise<boolean> {
  const done = await isMarked(q, w.job, key);
  if (done) await countSkipped(q, w.run?.id ?? null);
  return done;
}

/** Mark keys done; returns how many were new, or null (nothing written) if the fence is stale. */
export async function markKeys(q: Q, w: MarkerWriter, keys: readonly string[], now: number) {
  return (await stale(q, w)) ? null : insertMarkers(q, w, keys, now);
}

/**
 * Claim KEY for `me` (see ../sqlite/markers.ts). Two claimers of one key are serialised by a
 * transaction-scoped advisory lock on (job, key): the claim row may not exist yet, so there is
 * no row to lock.
 */
export async function takeClaim(
  q: Q,
  w: MarkerWriter,
  key: string,
  me: Owner,
  now: number,
  alive: Alive,
  node: string,
): Promise<ClaimOutcome> {
  await q.get("SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))::text AS l", [w.job, key]);
  if (await checkDone(q, w, key)) return { kind: "done" };
  if (await stale(q, w)) return { kind: "stale" };
  const h = await claimHolder(q, w.job, key);
  if (h && h.node !== null && h.node !== node) {
    // Another node's `once`: its processes cannot be seen from here; its node's lease holds it.
    if (await leaseLive(q, h.node)) return { kind: "held", holder: h, by: "once" };
  } else if (h && h.pid !== me.pid) {
    if (alive(h.pid, h.pid_start)) return { kind: "held", holder: h, by: "once" };
    // The `once` process died but its command may still be at work: the claim holds.
    if (h.cmd_pid !== null && alive(h.cmd_pid, h.cmd_start))
      return { kind: "held", holder: h, by: "command" };
  }
  await putClaim(q, w.job, key, me, w.run?.id ?? null, now, node);
  await countAttempt(q, w.job, key, now);
  return { kind: "claimed" };
}

/** Mark a claimed key and release the claim; false (nothing written) if the fence is stale. */
export async function completeClaim(q: Q, w: MarkerWriter, key: string, pid: number, now: number) {
  if (await stale(q, w)) return false;
  await insertMarkers(q, w, [key], now);
  await dropClaim(q, w.job, key, pid);
  return true;
}

/** Progress from a writer that must be its job's live, unrevoked run; false otherwise. */
export async function progressIfLive(q: Q, w: MarkerWriter, message: string | null, now: number) {
  if (w.run === null || (await stale(q, w))) return false;
  await progress(q, w.run.id, message, now);
  return true;
}
