// Markers, `once` claims, attempts and progress: the statements both engines run (see sql.ts).
// Counting an attempt differs (PostgreSQL reads the count back with RETURNING), and so does how
// a claim is serialised (SQLite's write lock; PostgreSQL's advisory lock).
import type { Dialect } from "./sql.js";

/**
 * May run $1 write markers? Only while it is job $2's current ($3: its fence), live, unrevoked
 * run. PostgreSQL locks the run's row: a takeover or revoke waits for the write.
 */
export const fenceValid = (d: Dialect): string =>
  `SELECT 1 FROM runs WHERE id = $1 AND job = $2 AND fence = $3 AND status = 'running'
     AND revoked = 0${d.forUpdate}`;

export const IS_MARKED = "SELECT 1 FROM markers WHERE job = $1 AND key = $2";
export const INSERT_MARKER = `INSERT INTO markers (job, key, run_id, fence, created_at)
  VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`;
/** A key marked is no longer attempted. */
export const FORGET_ATTEMPTS = "DELETE FROM attempts WHERE job = $1 AND key = $2";
/** A writer's new markers, counted on its run while it runs (a finished run's are its summary's). */
export const COUNT_NEW = `UPDATE runs SET markers_new = markers_new + $1, progress_at = $2
  WHERE id = $3 AND status = 'running'`;
export const COUNT_SKIPPED = "UPDATE runs SET markers_skipped = markers_skipped + $1 WHERE id = $2";
export const DELETE_MARKER = "DELETE FROM markers WHERE job = $1 AND key = $2";
/** Every marker of job $2 copied to job $1 (run, fence and time kept; a key $1 has stays). */
export const COPY_MARKERS = `INSERT INTO markers (job, key, run_id, fence, created_at)
  SELECT $1, key, run_id, fence, created_at FROM markers WHERE job = $2 ON CONFLICT DO NOTHING`;
export const DELETE_JOB_MARKERS = "DELETE FROM markers WHERE job = $1";
export const MARKERS = `SELECT key, run_id, fence, created_at FROM markers WHERE job = $1
  ORDER BY created_at, key`;
export const MARKER_COUNT = "SELECT COUNT(*) AS n FROM markers WHERE job = $1";
/** Every job's marker count (jobs without markers are absent). */
export const MARKER_COUNTS = "SELECT job, COUNT(*) AS n FROM markers GROUP BY job ORDER BY job";
export const CLAIM_HOLDER = `SELECT node, pid, pid_start, run_id, cmd_pid, cmd_start FROM claims
  WHERE job = $1 AND key = $2`;
export const SET_CLAIM_COMMAND = `UPDATE claims SET cmd_pid = $1, cmd_start = $2
  WHERE job = $3 AND key = $4 AND pid = $5`;
export const PUT_CLAIM = `INSERT INTO claims (job, key, pid, pid_start, run_id, since, node)
  VALUES ($1, $2, $3, $4, $5, $6, $7)
  ON CONFLICT (job, key) DO UPDATE SET pid = excluded.pid, pid_start = excluded.pid_start,
    run_id = excluded.run_id, since = excluded.since, cmd_pid = NULL, cmd_start = NULL,
    node = excluded.node`;
export const DROP_CLAIM = "DELETE FROM claims WHERE job = $1 AND key = $2 AND pid = $3";
/** Keys attempted more than $2 times without being marked, worst first. */
export const REPEATING_KEYS = `SELECT key, count FROM attempts WHERE job = $1 AND count > $2
  ORDER BY count DESC, key LIMIT 10`;
/** The same, last attempted at or after $3 (still being tried). */
export const REPEATING_KEYS_SINCE = `SELECT key, count, last_at FROM attempts
  WHERE job = $1 AND count > $2 AND last_at >= $3 ORDER BY count DESC, key LIMIT 10`;
export const REPEATING_KEYS_ALL = `SELECT job, key, count, last_at FROM attempts WHERE count > $1
  ORDER BY job, count DESC, key`;
export const ATTEMPTED_SINCE = "SELECT DISTINCT job FROM attempts WHERE last_at >= $1 ORDER BY job";
/** A run's progress, only while it runs (migration 009: a finished row never gets it). */
export const PROGRESS = `UPDATE runs SET progress_at = $1, progress_msg = COALESCE($2, progress_msg),
    progress_count = progress_count + 1
  WHERE id = $3 AND status = 'running'`;

/**
 * New markers or progress are new work (health `idle`, migration 012): the job's stamps move to
 * $1 and $2 (the same time, twice: each placeholder is bound once). `ofRun`: the job is the one
 * of run $3, else the job named $3.
 */
export const jobWorked = (d: Dialect, ofRun: boolean): string =>
  `UPDATE jobs SET last_progress_at = ${d.greatest}(COALESCE(last_progress_at, 0), $1),
     last_work_at = ${d.greatest}(COALESCE(last_work_at, 0), $2), idle_runs = 0
   WHERE name = ${ofRun ? "(SELECT job FROM runs WHERE id = $3)" : "$3"}`;
