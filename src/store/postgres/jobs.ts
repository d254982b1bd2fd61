// Per-job state on PostgreSQL: the same operations as ../sqlite/jobs.ts, plus `lockJobs`, the
// job-row lock that makes a write's check-then-act safe against another connection.
// Table-group functions: they run in their caller's transaction and never open one.
import type { Q } from "../pg-connection.js";
import type { AddJob, JobGauge, JobRow } from "../rows.js";
import { insertEvent } from "./events.js";
import * as S from "../queries/jobs.js";
import { POSTGRES } from "../queries/sql.js";

const SCANNED_TO = S.setScannedTo(POSTGRES);

/**
 * Lock the rows of these jobs (those that exist) until the transaction ends, in name order.
 * This is the PostgreSQL store's per-job write lock, what BEGIN IMMEDIATE is for SQLite: every
 * write that reads a job's lock, fence or runs and then acts on them takes it first, before any
 * other row of the job (so two transactions never wait on each other in opposite orders).
 */
export async function lockJobs(q: Q, names: readonly string[]): Promise<void> {
  if (names.length === 0) return;
  const unique = [...new Set(names)];
  await q.all("SELECT 1 FROM jobs WHERE name = ANY($1::text[]) ORDER BY name FOR UPDATE", [unique]);
}

export async function jobRow(q: Q, name: string): Promise<JobRow | null> {
  return (await q.get<JobRow>(S.JOB_ROW, [name])) ?? null;
}

export async function allJobs(q: Q): Promise<JobRow[]> {
  return q.all<JobRow>(S.ALL_JOBS);
}

/**
 * Lock the rows of the jobs in `ensure` and the existing rows of `alsoLock`, all in one name
 * order (see lockJobs), making the missing ones of `ensure` first. A row made here has no
 * first_seen_at yet: the caller's ensureJob sets it with the clock read once the lock is held
 * (a reservation's `now`), before anyone else can see the row.
 */
export async function ensureLocked(
  q: Q,
  ensure: readonly string[],
  alsoLock: readonly string[] = [],
): Promise<void> {
  const names = [...new Set(ensure)].sort();
  if (names.length > 0) {
    await q.run(
      `INSERT INTO jobs (name) SELECT n FROM unnest($1::text[]) AS n ORDER BY n
       ON CONFLICT (name) DO NOTHING`,
      [names],
    );
  }
  await lockJobs(q, [...names, ...alsoLock]);
}

/** The job's row, made if missing (first seen `now`; also a row ensureLocked just made). */
export async function ensureJob(q: Q, name: string, now: number): Promise<JobRow> {
  await q.run(
    `INSERT INTO jobs (name, first_seen_at) VALUES ($1, $2)
     ON CONFLICT (name) DO UPDATE SET first_seen_at = excluded.first_seen_at
       WHERE jobs.first_seen_at IS NULL`,
    [name, now],
  );
  return (await jobRow(q, name)) as JobRow;
}

/**
 * Jobs the daemon starts watching (as ../sqlite/jobs.ts addJob), in one statement for their rows: each made
 * if missing, first seen and slot-stamped `now` where it had none, locked in name order (the
 * upsert locks each row it meets, as lockJobs). Then this boot's @reboot claims, one by one.
 */
export async function addJobs(
  q: Q,
  list: readonly AddJob[],
  now: number,
): Promise<{ row: JobRow; rebootClaimed: boolean }[]> {
  const names = [...new Set(list.map((j) => j.name))].sort();
  const rows = await q.all<JobRow>(
    `INSERT INTO jobs (name, first_seen_at, scanned_to)
     SELECT n, $2::bigint, $2::bigint FROM unnest($1::text[]) AS n ORDER BY n COLLATE "C"
     ON CONFLICT (name) DO UPDATE SET
       first_seen_at = COALESCE(jobs.first_seen_at, excluded.first_seen_at),
       scanned_to = COALESCE(jobs.scanned_to, excluded.scanned_to)
     RETURNING ${S.JOB_COLUMNS}`,
    [names, now],
  );
  const byName = new Map(rows.map((r) => [r.name, r]));
  const out = [];
  for (const j of list) {
    const row = byName.get(j.name) as JobRow;
    const rebootClaimed = j.bootId !== null && (await claimReboot(q, j.name, j.bootId, now));
    out.push({ row, rebootClaimed });
  }
  return out;
}

export async function setPaused(q: Q, name: string, paused: boolean, now: number) {
  await ensureJob(q, name, now);
  await q.run(S.SET_PAUSED, [paused ? 1 : 0, name]);
  await insertEvent(q, now, name, paused ? "paused" : "resumed", null);
}

/** Jobs paused with `cronvisor pause` (the config's `paused: true` is not in the store). */
export async function pausedJobs(q: Q): Promise<Set<string>> {
  const rows = await q.all<{ name: string }>(S.PAUSED_JOBS);
  return new Set(rows.map((r) => r.name));
}

/** Slots up to `at` have a disposition. Never moves backwards (a clock stepped back). */
export async function setScannedTo(q: Q, name: string, at: number) {
  await q.run(SCANNED_TO, [at, name]);
}

/**
 * Take the catch-up of a job's slots in (from, to]: move its slot stamp from `from` to `to`, or
 * false if another node moved it first (after a downtime every node plans the same catch-up;
 * the one that takes it runs it, once).
 */
export async function claimCatchUp(q: Q, name: string, from: number, to: number) {
  return (await q.run(S.CLAIM_CATCH_UP, [to, name, from])) > 0;
}

/** Record that @reboot ran for this boot; false if it already did. */
export async function claimReboot(
  q: Q,
  name: string,
  bootId: string,
  now: number,
): Promise<boolean> {
  await ensureLocked(q, [name]);
  const row = await ensureJob(q, name, now);
  if (row.reboot_boot_id === bootId) return false;
  await q.run(S.SET_REBOOT, [bootId, name]);
  return true;
}

/** Per-job gauges for a metrics scrape, in one pass: running runs and markers, by job. */
export async function jobGauges(q: Q): Promise<JobGauge[]> {
  return q.all<JobGauge>(S.JOB_GAUGES);
}
