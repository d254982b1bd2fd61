// Writing runs, slots and the per-job lock: reserve a run, record its process, its end, or a
// slot that did not run; prune old runs. Table-group functions: they run in their caller's
// transaction and never open one (a reservation is only safe inside the caller's BEGIN
// IMMEDIATE, which makes the lock check and the insert one step).
import type { Conn } from "../connection.js";
import type { HoldRequest } from "../hold-rows.js";
import type { JobRow, Owner, ReserveOutcome, ReserveRequest, RunRow, SlotRecord } from "../rows.js";
import { interrupted, runResult } from "../../core/result.js";
import type { RunResult } from "../../core/types.js";
import { runRow, runningRuns } from "./history.js";
import { judgeHolds, takeHolds } from "./holds.js";
import { ensureJob, jobRow, setScannedTo } from "./jobs.js";
import * as S from "../queries/runs.js";

/**
 * Reserve a run: claim the slot (if any), check the job's lock, bump the fence and insert the
 * `running` row. The lock is "a running run of this job whose owner or process group still
 * lives"; a holder found dead is recorded `interrupted` and taken over at once. Returns the new
 * run, or the run holding the lock, or `duplicate` if the slot already has a disposition (the
 * same slot never starts twice).
 */
export function reserveRun(c: Conn, a: ReserveRequest, node: string): ReserveOutcome {
  const now = typeof a.now === "function" ? a.now() : a.now;
  ensureJob(c, a.job, now);
  const slot = a.claimSlot ? a.slot : null;
  if (slot !== null) {
    const have = c.q(S.SLOT_RUN).get(a.job, slot) as { run_id: number | null } | undefined;
    if (have) return { kind: "duplicate", slotRunId: have.run_id };
  }
  if (a.lock) {
    const holder = reapDeadHolders(c, a.job, now, a.holderAlive);
    if (holder) {
      if (slot !== null && a.stamp !== false) {
        const reason = `overlap: run ${holder.id} holds the lock`;
        insertDisposition(c, { job: a.job, slot, status: "skipped", reason }, now, node);
      }
      return { kind: "locked", holder };
    }
  }
  const held = a.holds ? admitHolds(c, a, a.holds, slot, now, node) : null;
  if (held) return held;
  c.q("UPDATE jobs SET fence = fence + 1 WHERE name = ?").run(a.job);
  const fence = (jobRow(c, a.job) as JobRow).fence;
  const info = c
    .q(
      `INSERT INTO runs (job, slot, trigger, status, attempt, started_at, fence, owner_pid, owner_start, progress_at, node)
       VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?)`,
    )
    .run(a.job, a.slot, a.trigger, a.attempt, now, fence, a.owner.pid, a.owner.start, now, node);
  const id = Number(info.lastInsertRowid);
  c.q(S.SET_LOG_PATH).run(a.logPath(id), id);
  if (slot !== null) {
    c.q("INSERT INTO slots (job, slot, run_id) VALUES (?, ?, ?)").run(a.job, slot, id);
    if (a.stamp !== false) setScannedTo(c, a.job, slot);
  }
  if (a.holds) takeHolds(c, id, a.holds);
  return { kind: "started", run: runRow(c, id) as RunRow };
}

/**
 * The named locks and group of a reservation, judged and admitted (HoldRequest.admit): null to
 * start, else the refusal, a claimed slot recorded `skipped` when the decision skips it.
 */
function admitHolds(
  c: Conn,
  a: ReserveRequest,
  h: HoldRequest,
  slot: number | null,
  now: number,
  node: string,
): ReserveOutcome | null {
  const reap = (r: RunRow) => finishRun(c, r.id, deadHolder(r, now));
  const admission = h.admit(judgeHolds(c, h, a.holderAlive, reap));
  if (admission.kind === "start") return null;
  if (admission.kind === "skip" && slot !== null)
    insertDisposition(
      c,
      { job: a.job, slot, status: "skipped", reason: admission.reason },
      now,
      node,
    );
  return { kind: "held", admission };
}

function deadHolder(r: RunRow, now: number): RunResult {
  const end = interrupted("its processes and supervisor died");
  return runResult(end, r.started_at, now, { bytes: r.log_bytes ?? 0, truncated: false });
}

/** The live lock holder of a job, after recording dead holders `interrupted`. */
function reapDeadHolders(
  c: Conn,
  job: string,
  now: number,
  alive: (r: RunRow) => boolean,
): RunRow | null {
  let holder: RunRow | null = null;
  for (const r of runningRuns(c, job)) {
    if (alive(r)) holder ??= r;
    else finishRun(c, r.id, deadHolder(r, now));
  }
  return holder;
}

/** Record that the run's process started (pid + start time: pids are reused). */
export function setRunProcess(
  c: Conn,
  runId: number,
  pid: number,
  pidStart: string | null,
  pgid: number,
): void {
  c.q(S.SET_RUN_PROCESS).run(pid, pidStart, pgid, runId);
}

/** A restarted daemon (or another owner) takes over supervising a live orphan. */
export function adoptRun(c: Conn, runId: number, owner: Owner): void {
  c.q(S.ADOPT_RUN).run(owner.pid, owner.start, runId);
}

/** Revoke the run's fence: its marker writes are refused from now on. */
export function revokeRun(c: Conn, runId: number): void {
  c.q(S.REVOKE_RUN).run(runId);
}

/** Record a run's end; false if it was not running (its end is recorded already). */
export function finishRun(c: Conn, runId: number, r: RunResult): boolean {
  // Only a running row is finished: a run recorded twice (adopter and owner racing) keeps the first.
  // A chained run keeps what it follows (migration 014) ahead of why it ended.
  const info = c
    .q(
      `UPDATE runs SET status = ?,
         reason = CASE WHEN trigger = 'chained' AND reason IS NOT NULL
           THEN reason || COALESCE('; ' || ?, '') ELSE ? END,
         exit_code = ?, signal = ?, finished_at = ?,
         duration_ms = ?, log_bytes = ?, cpu_s = ?, memory_peak_bytes = ?, revoked = 1
       WHERE id = ? AND status = 'running'`,
    )
    .run(
      r.status,
      r.reason,
      r.reason,
      r.exitCode,
      r.signal,
      r.finishedAt,
      r.durationMs,
      r.logBytes,
      r.cpuS,
      r.memoryPeakBytes,
      runId,
    );
  if (info.changes > 0 && r.status === "ok") {
    // A success that started after the job's last new work did nothing new (health `idle`).
    c.q(
      `UPDATE jobs SET last_success_at = MAX(COALESCE(last_success_at, 0), ?),
         last_progress_at = MAX(COALESCE(last_progress_at, 0), ?),
         idle_runs = idle_runs + (SELECT r.started_at > COALESCE(jobs.last_work_at, 0)
           FROM runs r WHERE r.id = ?)
       WHERE name = (SELECT job FROM runs WHERE id = ?)`,
    ).run(r.finishedAt, r.finishedAt, runId, runId);
  }
  return info.changes > 0;
}

/**
 * A slot that did not run: `skipped` (overlap, paused) or `missed` (daemon down). False if the
 * slot already has a disposition (it is never recorded twice).
 */
export function insertDisposition(c: Conn, s: SlotRecord, now: number, node: string): boolean {
  const claimed = c
    .q("INSERT INTO slots (job, slot, run_id) VALUES (?, ?, NULL) ON CONFLICT DO NOTHING")
    .run(s.job, s.slot);
  if (claimed.changes === 0) return false;
  c.q(
    `INSERT INTO runs (job, slot, trigger, status, reason, attempt, started_at, finished_at, duration_ms, node)
     VALUES (?, ?, 'schedule', ?, ?, 1, ?, ?, 0, ?)`,
  ).run(s.job, s.slot, s.status, s.reason, now, now, node);
  setScannedTo(c, s.job, s.slot);
  return true;
}

/** Delete finished runs beyond the newest `keep` of a job; returns their log paths. */
export function pruneRuns(c: Conn, job: string, keep: number): string[] {
  const old = c.q(S.PRUNABLE).all(job, job, keep) as { id: number; log_path: string | null }[];
  if (old.length === 0) return [];
  const maxId = Math.max(...old.map((r) => r.id));
  c.q(S.DELETE_PRUNED).run(job, maxId);
  return old.map((r) => r.log_path).filter((p): p is string => p !== null);
}
