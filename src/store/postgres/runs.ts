// Writing runs, slots and the per-job lock on PostgreSQL: the same operations as
// ../sqlite/runs.ts. Table-group functions: they run in their caller's transaction and never
// open one. A reservation is safe only when its caller holds the job's row lock (jobs.lockJobs,
// taken by PgStore before the batch), which makes the lock check, the fence bump and the insert
// one step against every other connection; the slot itself is claimed by its unique key.
import type { Q } from "../pg-connection.js";
import type { Owner, ReserveOutcome, ReserveRequest, RunRow, SlotRecord } from "../rows.js";
import { fenced, interrupted, runResult } from "../../core/result.js";
import { leaseLive } from "./daemon.js";
import { readLogTail } from "../log-tail.js";
import type { RunResult } from "../../core/types.js";
import { runRow, runningRuns } from "./history.js";
import { ensureJob, lockJobs, setScannedTo } from "./jobs.js";

const nowOf = (a: ReserveRequest): number => (typeof a.now === "function" ? a.now() : a.now);

/**
 * Reserve a run (see ../sqlite/runs.ts): the same outcomes. The slot is claimed first, by
 * inserting its row (a concurrent claimer of the same slot waits on the unique key, then finds
 * it taken: `duplicate`); a locked job records the slot `skipped` on that row.
 */
export async function reserveRun(q: Q, a: ReserveRequest, node: string): Promise<ReserveOutcome> {
  const now = nowOf(a);
  await ensureJob(q, a.job, now);
  const slot = a.claimSlot ? a.slot : null;
  if (slot !== null) {
    const claimed = await q.run(
      "INSERT INTO slots (job, slot, run_id) VALUES ($1, $2, NULL) ON CONFLICT DO NOTHING",
      [a.job, slot],
    );
    if (claimed === 0) {
      const have = await q.get<{ run_id: number | null }>(
        "SELECT run_id FROM slots WHERE job = $1 AND slot = $2",
        [a.job, slot],
      );
      return { kind: "duplicate", slotRunId: have?.run_id ?? null };
    }
  }
  if (a.lock) {
    const holder = await reapDeadHolders(q, a.job, now, a.holderAlive, node);
    if (holder) {
      if (slot !== null) {
        const reason = `overlap: run ${holder.id} holds the lock`;
        await dispositionRow(q, { job: a.job, slot, status: "skipped", reason }, now, node);
      }
      return { kind: "locked", holder };
    }
  }
  const f = await q.get<{ fence: number }>(
    "UPDATE jobs SET fence = fence + 1 WHERE name = $1 RETURNING fence",
    [a.job],
  );
  const ins = await q.get<{ id: number }>(
    `INSERT INTO runs (job, slot, trigger, status, attempt, started_at, fence, owner_pid,
       owner_start, progress_at, node)
     VALUES ($1, $2, $3, 'running', $4, $5, $6, $7, $8, $9, $10) RETURNING id`,
    [a.job, a.slot, a.trigger, a.attempt, now, f?.fence, a.owner.pid, a.owner.start, now, node],
  );
  const id = ins?.id as number;
  await q.run("UPDATE runs SET log_path = $1 WHERE id = $2", [a.logPath(id), id]);
  if (slot !== null) {
    await q.run("UPDATE slots SET run_id = $1 WHERE job = $2 AND slot = $3", [id, a.job, slot]);
    await setScannedTo(q, a.job, slot);
  }
  return { kind: "started", run: (await runRow(q, id)) as RunRow };
}

/**
 * The live lock holder of a job, after ending dead holders. A run of this node is judged by its
 * processes (`alive`) and recorded `interrupted` when they died; a run of another node by that
 * node's lease, and recorded `fenced` when the lease ran out: its node may only be frozen, so its
 * run may still be at work, but the fence bumped by the takeover refuses its marker writes.
 */
async function reapDeadHolders(
  q: Q,
  job: string,
  now: number,
  alive: (r: RunRow) => boolean,
  node: string,
): Promise<RunRow | null> {
  let holder: RunRow | null = null;
  for (const r of await runningRuns(q, job)) {
    const elsewhere = r.node !== null && r.node !== node;
    if (elsewhere ? await leaseLive(q, r.node as string) : alive(r)) {
      holder ??= r;
      continue;
    }
    const end = elsewhere
      ? fenced(`node ${r.node}'s lease ran out; node ${node} took the job over`)
      : interrupted("its processes and supervisor died");
    const log = { bytes: r.log_bytes ?? 0, truncated: false };
    await finishRun(q, r.id, runResult(end, r.started_at, now, log));
  }
  return holder;
}

/** Lock the jobs of these runs (see jobs.lockJobs), before touching their rows. */
export async function lockRunJobs(q: Q, runIds: readonly number[]): Promise<void> {
  if (runIds.length === 0) return;
  const rows = await q.all<{ job: string }>(
    "SELECT DISTINCT job FROM runs WHERE id = ANY($1::bigint[])",
    [[...new Set(runIds)]],
  );
  await lockJobs(
    q,
    rows.map((r) => r.job),
  );
}

/** Record that the run's process started (pid + start time: pids are reused). */
export async function setRunProcess(
  q: Q,
  runId: number,
  pid: number,
  pidStart: string | null,
  pgid: number,
) {
  await q.run("UPDATE runs SET pid = $1, pid_start = $2, pgid = $3 WHERE id = $4", [
    pid,
    pidStart,
    pgid,
    runId,
  ]);
}

/** A restarted daemon (or another owner) takes over supervising a live orphan. */
export async function adoptRun(q: Q, runId: number, owner: Owner) {
  await q.run("UPDATE runs SET owner_pid = $1, owner_start = $2 WHERE id = $3", [
    owner.pid,
    owner.start,
    runId,
  ]);
}

/** Revoke the run's fence: its marker writes are refused from now on. */
export async function revokeRun(q: Q, runId: number) {
  await q.run("UPDATE runs SET revoked = 1 WHERE id = $1", [runId]);
}

export async function finishRun(q: Q, runId: number, r: RunResult) {
  // Only a running row is finished: a run recorded twice (adopter and owner racing) keeps the first.
  const changed = await q.run(
    `UPDATE runs SET status = $1, reason = $2, exit_code = $3, signal = $4, finished_at = $5,
       duration_ms = $6, log_bytes = $7, revoked = 1
     WHERE id = $8 AND status = 'running'`,
    [r.status, r.reason, r.exitCode, r.signal, r.finishedAt, r.durationMs, r.logBytes, runId],
  );
  if (changed > 0 && r.status === "ok") {
    await q.run(
      `UPDATE jobs SET last_success_at = GREATEST(COALESCE(last_success_at, 0), $1),
         last_progress_at = GREATEST(COALESCE(last_progress_at, 0), $1)
       WHERE name = (SELECT job FROM runs WHERE id = $2)`,
      [r.finishedAt, runId],
    );
  }
}

/** The run row of a disposition whose slot row the caller has claimed. */
async function dispositionRow(q: Q, s: SlotRecord, now: number, node: string) {
  await q.run(
    `INSERT INTO runs (job, slot, trigger, status, reason, attempt, started_at, finished_at,
       duration_ms, node)
     VALUES ($1, $2, 'schedule', $3, $4, 1, $5, $5, 0, $6)`,
    [s.job, s.slot, s.status, s.reason, now, node],
  );
  await setScannedTo(q, s.job, s.slot);
}

/**
 * A slot that did not run: `skipped` (overlap, paused) or `missed` (daemon down). False if the
 * slot already has a disposition (it is never recorded twice: the slot's unique key).
 */
export async function insertDisposition(
  q: Q,
  s: SlotRecord,
  now: number,
  node: string,
): Promise<boolean> {
  const claimed = await q.run(
    "INSERT INTO slots (job, slot, run_id) VALUES ($1, $2, NULL) ON CONFLICT DO NOTHING",
    [s.job, s.slot],
  );
  if (claimed === 0) return false;
  await dispositionRow(q, s, now, node);
  return true;
}

/** Delete finished runs beyond the newest `keep` of a job; returns their log paths. */
export async function pruneRuns(q: Q, job: string, keep: number): Promise<string[]> {
  const old = await q.all<{ id: number; log_path: string | null }>(
    `SELECT id, log_path FROM runs WHERE job = $1 AND status != 'running'
     AND id < (SELECT MIN(id) FROM (SELECT id FROM runs WHERE job = $1 ORDER BY id DESC LIMIT $2) t)
     ORDER BY id`,
    [job, keep],
  );
  if (old.length === 0) return [];
  const maxId = Math.max(...old.map((r) => r.id));
  await q.run("DELETE FROM run_logs WHERE run_id = ANY($1::bigint[])", [old.map((r) => r.id)]);
  await q.run("DELETE FROM runs WHERE job = $1 AND status != 'running' AND id <= $2", [job, maxId]);
  return old.map((r) => r.log_path).filter((p): p is string => p !== null);
}

/** Keep the log tail of each of these finished runs of this node (read from its log file). */
export async function keepLogTails(q: Q, runIds: readonly number[], node: string) {
  const rows = await q.all<{ id: number; log_path: string | null }>(
    "SELECT id, log_path FROM runs WHERE id = ANY($1::bigint[]) AND node = $2 AND status <> 'running'",
    [[...runIds], node],
  );
  for (const r of rows) {
    const tail = r.log_path === null ? null : readLogTail(r.log_path);
    if (tail === null) continue;
    await q.run(
      "INSERT INTO run_logs (run_id, tail) VALUES ($1, $2) ON CONFLICT (run_id) DO NOTHING",
      [r.id, tail],
    );
  }
}

/** The kept tail of a run's log, or null. */
export async function logTail(q: Q, runId: number): Promise<Buffer | null> {
  const r = await q.get<{ tail: Buffer }>("SELECT tail FROM run_logs WHERE run_id = $1", [runId]);
  return r?.tail ?? null;
}
