// What `why` reads about one slot of one job: the statements both engines run (see sql.ts).
// What the runs of a range of slots came to differs (SQLite's MAX of a comparison, PostgreSQL's
// bool_or).

export const SLOT_ROWS = "SELECT * FROM runs WHERE job = $1 AND slot = $2 ORDER BY id";
/** The job's last pause or resume at or before $2. */
export const PAUSE_AT = `SELECT * FROM events WHERE job = $1 AND kind IN ('paused', 'resumed')
  AND at <= $2 ORDER BY id DESC LIMIT 1`;
/** The catch-ups of the job's slots in ($2, $3]. */
export const CATCH_UPS = `SELECT * FROM runs WHERE job = $1 AND trigger = 'catchup'
  AND slot > $2 AND slot <= $3 ORDER BY id`;
export const MISSED_AFTER = `SELECT * FROM events WHERE job = $1 AND kind = 'missed' AND at > $2
  ORDER BY id LIMIT 1`;
/** The oldest run of job $1, not of slot $2, that had started and not ended at $3 (= $4). */
export const HOLDER_AT = `SELECT * FROM runs WHERE job = $1 AND status NOT IN ('skipped', 'missed')
    AND (slot IS NULL OR slot != $2) AND started_at <= $3
    AND (finished_at IS NULL OR finished_at >= $4)
  ORDER BY id LIMIT 1`;
/**
 * The daemon keeps no row per start or stop, so a downtime is bounded by what any job's rows and
 * events record: the newest time at or before the slot, and the oldest after it. Every
 * placeholder is the slot (bound five times: each once, see sql.ts).
 */
export const DAEMON_SIGNS = `SELECT
    (SELECT MAX(t) FROM (
       SELECT MAX(started_at) AS t FROM runs WHERE started_at <= $1
       UNION ALL SELECT MAX(finished_at) FROM runs WHERE finished_at <= $2
       UNION ALL SELECT MAX(at) FROM events WHERE at <= $3) b) AS last_before,
    (SELECT MIN(t) FROM (
       SELECT MIN(started_at) AS t FROM runs WHERE started_at > $4
       UNION ALL SELECT MIN(at) FROM events WHERE at > $5) a) AS first_after`;
