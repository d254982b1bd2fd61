// Per-job state: pause, fence, the slot stamp (`scanned_to`), @reboot's boot id, last success
// and progress. Table-group functions: they run in their caller's transaction and never open one.
import type { Conn } from "../connection.js";
import type { AddJob, JobGauge, JobRow } from "../rows.js";
import { insertEvent } from "./events.js";

/** A JobRow's columns: the status summary (migration 006) is read only by status (status.ts). */
const JOB_COLUMNS = `name, paused, fence, scanned_to, reboot_boot_id, last_success_at, last_progress_at,
  first_seen_at, last_work_at, idle_runs`;

export function jobRow(c: Conn, name: string): JobRow | null {
  return (
    (c.q(`SELECT ${JOB_COLUMNS} FROM jobs WHERE name = ?`).get(name) as JobRow | undefined) ?? null
  );
}

/** The count of writes to the jobs table (migration 007's triggers keep it). */
export function jobWrites(c: Conn): number {
  return (c.q("SELECT n FROM job_writes WHERE id = 1", true).get() as [number])[0];
}

export function allJobs(c: Conn): JobRow[] {
  return c.q(`SELECT ${JOB_COLUMNS} FROM jobs ORDER BY name`).all() as JobRow[];
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
  c.q("UPDATE jobs SET paused = ? WHERE name = ?").run(paused ? 1 : 0, name);
  insertEvent(c, now, name, paused ? "paused" : "resumed", null);
}

/** Jobs paused with `cronvisor pause` (the config's `paused: true` is not in the store). */
export function pausedJobs(c: Conn): Set<string> {
  const rows = c.q("SELECT name FROM jobs WHERE paused = 1").all() as { name: string }[];
  return new Set(rows.map((r) => r.name));
}

/** Slots up to `at` have a disposition. Never moves backwards (a clock stepped back). */
export function setScannedTo(c: Conn, name: string, at: number): void {
  c.q("UPDATE jobs SET scanned_to = MAX(COALESCE(scanned_to, 0), ?) WHERE name = ?").run(at, name);
}

/** Take the catch-up of a job's slots in (from, to] (see ../postgres/jobs.ts). */
export function claimCatchUp(c: Conn, name: string, from: number, to: number): boolean {
  const r = c
    .q("UPDATE jobs SET scanned_to = ? WHERE name = ? AND scanned_to = ?")
    .run(to, name, from);
  return r.changes > 0;
}

/** Record that @reboot ran for this boot; false if it already did. */
export function claimReboot(c: Conn, name: string, bootId: string, now: number): boolean {
  const row = ensureJob(c, name, now);
  if (row.reboot_boot_id === bootId) return false;
  c.q("UPDATE jobs SET reboot_boot_id = ? WHERE name = ?").run(bootId, name);
  return true;
}

/** Per-job gauges for a metrics scrape, in one pass: running runs and markers, by job. */
export function jobGauges(c: Conn): JobGauge[] {
  return c
    .q(
      `SELECT j.name, j.paused, j.last_success_at, j.last_progress_at,
         (SELECT COUNT(*) FROM runs r WHERE r.job = j.name AND r.status = 'running') AS running,
         j.marker_count AS markers
       FROM jobs j ORDER BY j.name`,
    )
    .all() as JobGauge[];
}
