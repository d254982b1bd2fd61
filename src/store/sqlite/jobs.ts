// Per-job state: pause, fence, the slot stamp (`scanned_to`), @reboot's boot id, last success
// and progress. Table-group functions: they run in their caller's transaction and never open one.
import type { Conn } from "../connection.js";
import type { AddJob, JobGauge, JobRow } from "../rows.js";
import { insertEvent } from "./events.js";
import * as S from "../queries/jobs.js";
import { SQLITE } from "../queries/sql.js";

const SCANNED_TO = S.setScannedTo(SQLITE);

export function jobRow(c: Conn, name: string): JobRow | null {
  return (c.q(S.JOB_ROW).get(name) as JobRow | undefined) ?? null;
}

/** The count of writes to the jobs table (migration 007's triggers keep it). */
export function jobWrites(c: Conn): number {
  return (c.q("SELECT n FROM job_writes WHERE id = 1", true).get() as [number])[0];
}

export function allJobs(c: Conn): JobRow[] {
  return c.q(S.ALL_JOBS).all() as JobRow[];
}

export function ensureJob(c: Conn, name: string, now: number): JobRow {
  c.q("INSERT INTO jobs (name, first_seen_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING").run(
    name,
    now,
  );
  return jobRow(c, name) as JobRow;
}

/**
 * A job the daemon starts watching: its row exists, a job seen for the first time has missed
 * nothing (its slots count from now), and an @reboot job claims this boot's run.
 */
export function addJob(c: Conn, job: AddJob, now: number): { row: JobRow; rebootClaimed: boolean } {
  let row = ensureJob(c, job.name, now);
  if (row.scanned_to === null) {
    setScannedTo(c, job.name, now);
    row = { ...row, scanned_to: now };
  }
  const rebootClaimed = job.bootId !== null && claimReboot(c, job.name, job.bootId, now);
  return { row, rebootClaimed };
}

export function setPaused(c: Conn, name: string, paused: boolean, now: number): void {
  ensureJob(c, name, now);
  c.q(S.SET_PAUSED).run(paused ? 1 : 0, name);
  insertEvent(c, now, name, paused ? "paused" : "resumed", null);
}

/** Jobs paused with `cronvisor pause` (the config's `paused: true` is not in the store). */
export function pausedJobs(c: Conn): Set<string> {
  const rows = c.q(S.PAUSED_JOBS).all() as { name: string }[];
  return new Set(rows.map((r) => r.name));
}

/** Slots up to `at` have a disposition. Never moves backwards (a clock stepped back). */
export function setScannedTo(c: Conn, name: string, at: number): void {
  c.q(SCANNED_TO).run(at, name);
}

/** Take the catch-up of a job's slots in (from, to] (see ../postgres/jobs.ts). */
export function claimCatchUp(c: Conn, name: string, from: number, to: number): boolean {
  return c.q(S.CLAIM_CATCH_UP).run(to, name, from).changes > 0;
}

/** Record that @reboot ran for this boot; false if it already did. */
export function claimReboot(c: Conn, name: string, bootId: string, now: number): boolean {
  const row = ensureJob(c, name, now);
  if (row.reboot_boot_id === bootId) return false;
  c.q(S.SET_REBOOT).run(bootId, name);
  return true;
}

/** Per-job gauges for a metrics scrape, in one pass: running runs and markers, by job. */
export function jobGauges(c: Conn): JobGauge[] {
  return c.q(S.JOB_GAUGES).all() as JobGauge[];
}
