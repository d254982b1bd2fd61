// Writing runs and the per-job lock on PostgreSQL: the same operations as ../sqlite/runs.ts
// (a tick's reservations and dispositions are in ./tick.ts). Table-group functions: they run in
// their caller's transaction and never open one. A write that reads a job's runs and acts on them
// holds the job's row lock (jobs.lockJobs, lockRunJobs) first.
import type { Q } from "../pg-connection.js";
import * as S from "../queries/runs.js";
import type {
  HolderLease,
  Owner,
  RunEnd,
  RunProcess,
  RunRow,
  TakenOver,
  TickOutcome,
} from "../rows.js";
import { lockJobs } from "./jobs.js";
import { readLogTail } from "../log-tail.js";
import { fenced, interrupted, runResult } from "../../core/result.js";
import { leaseLeft } from "./daemon.js";
import type { RunResult } from "../../core/types.js";
import { runningRuns } from "./history.js";

/** A job's lock holder: a run of this node, or of another node held by that node's lease. */
export interface Held {
  holder: RunRow;
  lease?: HolderLease;
}

/**
 * Why a slot was skipped for another node's run: its node, the run and the end of its lease (the
 * run's id lets the takeover find the slots it blocked: `blockedSlots`).
 */
export function lockHeldReason(lease: HolderLease, runId: number): string {
  return `${lockHeldPrefix(lease.node, runId)} lease until ${new Date(lease.until).toISOString()})`;
}

const lockHeldPrefix = (node: string, runId: number): string =>
  `lock held by node ${node} (run ${runId},`;

/** The scheduled slots of a job skipped for another node's run `runId`, oldest first. */
async function blockedSlots(q: Q, job: string, node: string, runId: number): Promise<number[]> {
  const rows = await q.all<{ slot: string }>(
    `SELECT slot FROM runs WHERE job = $1 AND status = 'skipped' AND slot IS NOT NULL
       AND starts_with(reason, $2) ORDER BY slot`,
    [job, lockHeldPrefix(node, runId)],
  );
  return rows.map((r) => Number(r.slot));
}

/**
 * The live lock holder of a job, after ending dead holders. A run of this node is judged by its
 * processes (`alive`) and recorded `interrupted` when they died; a run of another node by that
 * node's lease, and recorded `fenced` when the lease ran out: its node may only be frozen, so its
 * run may still be at work, but the fence bumped by the takeover refuses its marker writes. The
 * takeover (one node's, under the job's lock) returns the slots each such run blocked: its
 * caller catches them up per the job's `catchup:` (daemon/blocked.ts).
 */
export async function reapDeadHolders(
  q: Q,
  job: string,
  now: number,
  alive: (r: RunRow) => boolean,
  node: string,
  me?: Owner,
): Promise<{ held: Held | null; tookOver: TakenOver[] }> {
  // Only a daemon's reservation judges by processes: `me` is then its node's row's daemon.
  const mine = me === undefined ? undefined : { node, me };
  let held: Held | null = null;
  const tookOver: TakenOver[] = [];
  for (const r of await runningRuns(q, job)) {
    const elsewhere = r.node !== null && r.node !== node;
    if (!elsewhere && alive(r)) {
      held ??= { holder: r };
      continue;
    }
    const lease = elsewhere ? await leaseLeft(q, r.node as string, mine) : null;
    // A node on the caller's machine (its kernel's boot) whose run and daemon are both gone is
    // dead now: no need to wait for its lease (as a restarted daemon takes its node's name over
    // at once). Processes only ever shorten the wait: a live (or stopped) one keeps the lease's.
    const diedHere = lease !== null && lease.here && !alive(r);
    if (lease !== null && !diedHere) {
      const { until, leftMs } = lease;
      held ??= { holder: r, lease: { node: r.node as string, until, leftMs } };
      continue;
    }
    const end = diedHere
      ? interrupted(
          `its processes and node ${r.node}'s daemon died on this machine; node ${node} took the job over`,
        )
      : elsewhere
        ? fenced(`node ${r.node}'s lease ran out; node ${node} took the job over`)
        : interrupted("its processes and supervisor died");
    const log = { bytes: r.log_bytes ?? 0, truncated: false };
    await finishRun(q, r.id, runResult(end, r.started_at, now, log));
    if (elsewhere) {
      const slots = await blockedSlots(q, job, r.node as string, r.id);
      tookOver.push({ node: r.node as string, runId: r.id, slots, diedHere });
    }
  }
  return { held, tookOver };
}

/**
 * Take a job over from another node whose lease ran out while its run held the lock (a timer at
 * the lease's end, daemon/blocked.ts): that run recorded `fenced`, and the slots it blocked
 * returned; or the lease that still holds the lock (its node renewed it).
 */
export async function takeOver(
  q: Q,
  job: string,
  now: number,
  node: string,
): Promise<{ held: HolderLease | null; tookOver: TakenOver[] }> {
  await lockJobs(q, [job]);
  // Only other nodes' runs are judged here: this node's own are its adoption's (daemon/adopt.ts).
  const r = await reapDeadHolders(q, job, now, () => true, node);
  return { held: r.held?.lease ?? null, tookOver: r.tookOver };
}

/** Lock the jobs of these runs (see jobs.lockJobs), before touching their rows: one statement. */
export async function lockRunJobs(q: Q, runIds: readonly number[]): Promise<void> {
  if (runIds.length === 0) return;
  // A run's job never changes: the subquery's snapshot is as good as a fresh one.
  await q.all(
    `SELECT 1 FROM jobs WHERE name IN (SELECT job FROM runs WHERE id = ANY($1::bigint[]))
     ORDER BY name FOR UPDATE`,
    [[...new Set(runIds)]],
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
  await q.run(S.SET_RUN_PROCESS, [pid, pidStart, pgid, runId]);
}

/** The processes of runs just spawned (a tick's starts): one statement, sent (q.send). */
export async function setRunProcesses(q: Q, list: readonly RunProcess[]) {
  if (list.length === 0) return;
  await q.send(
    `UPDATE runs SET pid = p.pid, pid_start = p.pid_start, pgid = p.pgid
     FROM unnest($1::bigint[], $2::integer[], $3::text[], $4::integer[]) AS p(id, pid, pid_start, pgid)
     WHERE runs.id = p.id`,
    [
      list.map((p) => p.runId),
      list.map((p) => p.pid),
      list.map((p) => p.pidStart),
      list.map((p) => p.pgid),
    ],
  );
}

/** A restarted daemon (or another owner) takes over supervising a live orphan. */
export async function adoptRun(q: Q, runId: number, owner: Owner) {
  await q.run(S.ADOPT_RUN, [owner.pid, owner.start, runId]);
}

/** Revoke the run's fence: its marker writes are refused from now on. */
export async function revokeRun(q: Q, runId: number) {
  await q.run(S.REVOKE_RUN, [runId]);
}

/** A run's end, as its row now says it (null when it had been recorded already). */
export interface Finished {
  id: number;
  log_path: string | null;
  node: string | null;
}

export async function finishRun(q: Q, runId: number, r: RunResult): Promise<Finished | null> {
  // Only a running row is finished: a run recorded twice (adopter and owner racing) keeps the
  // first. One statement: the run's row, and its job's success stamps when it succeeded.
  const row = await q.get<Finished>(
    `WITH f AS (
       UPDATE runs SET status = $1,
         reason = CASE WHEN trigger = 'chained' AND reason IS NOT NULL
           THEN reason || COALESCE('; ' || $2::text, '') ELSE $2::text END,
         exit_code = $3, signal = $4, finished_at = $5,
         duration_ms = $6, log_bytes = $7, cpu_s = $9, memory_peak_bytes = $10, revoked = 1
       WHERE id = $8 AND status = 'running'
       RETURNING id, job, status, log_path, node, started_at),
     j AS (UPDATE jobs SET last_success_at = GREATEST(COALESCE(last_success_at, 0), $5),
         last_progress_at = GREATEST(COALESCE(last_progress_at, 0), $5),
         idle_runs = jobs.idle_runs
           + CASE WHEN f.started_at > COALESCE(jobs.last_work_at, 0) THEN 1 ELSE 0 END
       FROM f WHERE f.status = 'ok' AND jobs.name = f.job)
     SELECT id, log_path, node FROM f`,
    [
      r.status,
      r.reason,
      r.exitCode,
      r.signal,
      r.finishedAt,
      r.durationMs,
      r.logBytes,
      runId,
      r.cpuS,
      r.memoryPeakBytes,
    ],
  );
  return row ?? null;
}

/** Delete finished runs beyond the newest `keep` of a job; returns their log paths. */

/** Whether pruneRuns would delete anything: a read, so a prune of nothing writes nothing. */
export async function hasPrunable(q: Q, job: string, keep: number): Promise<boolean> {
  const r = await q.get<{ any: boolean }>(`SELECT EXISTS (${S.PRUNABLE}) AS any`, [job, job, keep]);
  return r?.any === true;
}

export async function pruneRuns(q: Q, job: string, keep: number): Promise<string[]> {
  const old = await q.all<{ id: number; log_path: string | null }>(S.PRUNABLE, [job, job, keep]);
  if (old.length === 0) return [];
  const maxId = Math.max(...old.map((r) => r.id));
  await q.run("DELETE FROM run_logs WHERE run_id = ANY($1::bigint[])", [old.map((r) => r.id)]);
  await q.run(S.DELETE_PRUNED, [job, maxId]);
  return old.map((r) => r.log_path).filter((p): p is string => p !== null);
}

/**
 * The log paths of the runs a store started whose ends it has not recorded yet, so that their
 * tails are read before the one statement that records their ends (recordEnds) without reading
 * their rows first (a run's log path never changes once its row is written). A hint, not a
 * record: the path of a run not here (adopted, or started by another process) is read.
 */
export class StartedLogs {
  private readonly paths = new Map<number, string>();
  /** `log_tails:` (default true): false keeps no tail in the database (docs/safety.md). */
  keep = true;

  /** The runs a tick started on this node. */
  remember(out: readonly TickOutcome[], node: string): void {
    if (!this.keep) return;
    // Bounded: an end may be recorded by another writer (an adopter, a takeover), never here.
    if (this.paths.size > 10_000) this.paths.clear();
    for (const o of out)
      if (o.kind === "started" && o.run.node === node && o.run.log_path !== null)
        this.paths.set(o.run.id, o.run.log_path);
  }

  forget(runIds: readonly number[]): void {
    for (const id of runIds) this.paths.delete(id);
  }

  /** The log tails of these runs of this node (a run's log is whole once it ended). */
  async tails(q: Q, runIds: readonly number[], node: string): Promise<LogTail[]> {
    if (!this.keep) return [];
    const known = runIds.flatMap((id) => {
      const p = this.paths.get(id);
      return p === undefined ? [] : [{ id, log_path: p }];
    });
    const unknown = runIds.filter((id) => !this.paths.has(id));
    const read =
      unknown.length === 0
        ? []
        : await q.all<{ id: number; log_path: string }>(
            "SELECT id, log_path FROM runs WHERE id = ANY($1::bigint[]) AND node = $2 AND log_path IS NOT NULL",
            [unknown, node],
          );
    return [...known, ...read].flatMap((p) => {
      const tail = readLogTail(p.log_path);
      return tail === null ? [] : [{ runId: p.id, tail }];
    });
  }
}

/**
 * Record these runs' ends and keep the given log tails, as one statement (atomic by itself: no
 * transaction, so no COMMIT round trip). In the order a write transaction takes its
 * locks (tick.ts): the runs' job rows locked in name order (`l`, an aggregate, so that every
 * row is locked before the runs are touched, which the one-time filters on `l` wait for), then
 * each running run of the list ended (a run ended already, by an adopter or a takeover, keeps its
 * first end: under READ COMMITTED the UPDATE re-checks `status` on a row changed since its
 * snapshot), its job's success stamps moved when it succeeded, the tails kept,  `ends` has each run
 * once.
 */
const RECORD_ENDS = `WITH l AS MATERIALIZED (
    SELECT count(*) AS n FROM (SELECT 1 FROM jobs
      WHERE name IN (SELECT job FROM runs WHERE id = ANY($1::bigint[]))
      ORDER BY name FOR UPDATE) x),
  e AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::integer[], $5::text[],
      $6::bigint[], $7::bigint[], $8::bigint[], $11::float8[], $12::bigint[])
    AS e(id, status, reason, exit_code, signal, finished_at, duration_ms, log_bytes, cpu_s,
      memory_peak_bytes)),
  f AS (UPDATE runs SET status = e.status,
      reason = CASE WHEN runs.trigger = 'chained' AND runs.reason IS NOT NULL
        THEN runs.reason || COALESCE('; ' || e.reason, '') ELSE e.reason END,
      exit_code = e.exit_code,
      signal = e.signal, finished_at = e.finished_at, duration_ms = e.duration_ms,
      log_bytes = e.log_bytes, cpu_s = e.cpu_s, memory_peak_bytes = e.memory_peak_bytes,
      revoked = 1
    FROM e WHERE runs.id = e.id AND runs.status = 'running' AND (SELECT n FROM l) >= 0
    RETURNING runs.id, runs.job, runs.status, runs.finished_at, runs.started_at),
  c AS (INSERT INTO chains (job, slot, upstream, upstream_run, created_at)
    SELECT u.job, u.slot, u.upstream, u.upstream_run, f.finished_at
    FROM unnest($13::text[], $14::bigint[], $15::text[], $16::bigint[])
      AS u(job, slot, upstream, upstream_run)
    JOIN f ON f.id = u.upstream_run
    ON CONFLICT (job, slot) DO NOTHING),
  j AS (UPDATE jobs SET last_success_at = GREATEST(COALESCE(last_success_at, 0), m.at),
      last_progress_at = GREATEST(COALESCE(last_progress_at, 0), m.at),
      idle_runs = jobs.idle_runs + (SELECT count(*) FROM f WHERE f.job = jobs.name
        AND f.status = 'ok' AND f.started_at > COALESCE(jobs.last_work_at, 0))
    FROM (SELECT job, MAX(finished_at) AS at FROM f WHERE status = 'ok' GROUP BY job) m
    WHERE jobs.name = m.job),
  t AS (INSERT INTO run_logs (run_id, tail)
    SELECT u.id, u.tail FROM unnest($9::bigint[], $10::bytea[]) AS u(id, tail)
    WHERE (SELECT n FROM l) >= 0 AND EXISTS (SELECT 1 FROM runs WHERE runs.id = u.id)
    ON CONFLICT (run_id) DO NOTHING)
SELECT count(*) FROM f`;

export interface LogTail {
  runId: number;
  tail: Buffer;
}

/** Sent (q.send): in a tick's transaction it goes out with the statements after it. */
export async function recordEnds(q: Q, ends: readonly RunEnd[], tails: readonly LogTail[]) {
  if (ends.length === 0) return;
  const rs = ends.map((e) => e.result);
  const chains = ends.flatMap((e) => e.chains ?? []);
  await q.send(RECORD_ENDS, [
    ends.map((e) => e.runId),
    rs.map((r) => r.status),
    rs.map((r) => r.reason),
    rs.map((r) => r.exitCode),
    rs.map((r) => r.signal),
    rs.map((r) => r.finishedAt),
    rs.map((r) => r.durationMs),
    rs.map((r) => r.logBytes),
    tails.map((t) => t.runId),
    tails.map((t) => t.tail),
    rs.map((r) => r.cpuS),
    rs.map((r) => r.memoryPeakBytes),
    // Chain starts, written only for the runs this statement ended (`f`): in the end's statement,
    // so a daemon killed after it starts each after a restart, and never twice.
    chains.map((ch) => ch.job),
    chains.map((ch) => ch.slot),
    chains.map((ch) => ch.upstream),
    chains.map((ch) => ch.upstreamRun),
  ]);
}

/** The kept tail of a run's log, or null. */
export async function logTail(q: Q, runId: number): Promise<Buffer | null> {
  const r = await q.get<{ tail: Buffer }>("SELECT tail FROM run_logs WHERE run_id = $1", [runId]);
  return r?.tail ?? null;
}
