// Per-job state: the statements both engines run (see sql.ts). Making a job's row differs
// (PostgreSQL locks rows in name order and sets first_seen_at once the lock is held).
import type { Dialect } from "./sql.js";

/** A JobRow's columns: the status summary (migration 006) is read only by status. */
export const JOB_COLUMNS = `name, paused, fence, scanned_to, reboot_boot_id, last_success_at, last_progress_at,
  first_seen_at, last_work_at, idle_runs`;

export const JOB_ROW = `SELECT ${JOB_COLUMNS} FROM jobs WHERE name = $1`;
export const ALL_JOBS = `SELECT ${JOB_COLUMNS} FROM jobs ORDER BY name`;
export const SET_PAUSED = "UPDATE jobs SET paused = $1 WHERE name = $2";
export const PAUSED_JOBS = "SELECT name FROM jobs WHERE paused = 1";
export const CLAIM_CATCH_UP = "UPDATE jobs SET scanned_to = $1 WHERE name = $2 AND scanned_to = $3";
export const SET_REBOOT = "UPDATE jobs SET reboot_boot_id = $1 WHERE name = $2";

/** Slots up to $1 have a disposition; never moves backwards (a clock stepped back). */
export const setScannedTo = (d: Dialect): string =>
  `UPDATE jobs SET scanned_to = ${d.greatest}(COALESCE(scanned_to, 0), $1) WHERE name = $2`;

/** Per-job gauges for a metrics scrape, in one pass: running runs and markers, by job. */
export const JOB_GAUGES = `SELECT j.name, j.paused, j.last_success_at, j.last_progress_at,
    (SELECT COUNT(*) FROM runs r WHERE r.job = j.name AND r.status = 'running') AS running,
    j.marker_count AS markers
  FROM jobs j ORDER BY j.name`;
