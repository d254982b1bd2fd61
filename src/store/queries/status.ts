// What `status` reads of the jobs' rows: the statement both engines run (see sql.ts), in the
// column order SQLite's raw rows are read by (sqlite/status.ts summaryRows).

/**
 * The jobs' rows with their summaries (migrations 006 and 008); recent_runs only if `recent`,
 * else '[]': `status` reads no recent runs (1,000 jobs' recent_runs were 1.5 MB of strings made
 * for nothing). Each engine adds its WHERE.
 */
export const summarySql = (recent: boolean): string =>
  `SELECT name, paused, fence, scanned_to, reboot_boot_id, last_success_at, last_progress_at,
     first_seen_at, ${recent ? "recent_runs" : "'[]' AS recent_runs"}, last_finished,
     marker_count, recent_ok_p95_ms, failing_streak, failing_run_id, failing_status,
     failing_reason, last_work_at, idle_runs FROM jobs`;
