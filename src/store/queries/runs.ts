// Writing runs and slots: the statements both engines run (see sql.ts). Reserving and ending
// runs differ (PostgreSQL: row locks, leases, RETURNING, a tick's batches in one statement).

/** The run that took a slot (null: a disposition without a run), if the slot is taken. */
export const SLOT_RUN = "SELECT run_id FROM slots WHERE job = $1 AND slot = $2";
export const SET_LOG_PATH = "UPDATE runs SET log_path = $1 WHERE id = $2";
export const SET_RUN_PROCESS = "UPDATE runs SET pid = $1, pid_start = $2, pgid = $3 WHERE id = $4";
export const ADOPT_RUN = "UPDATE runs SET owner_pid = $1, owner_start = $2 WHERE id = $3";
export const REVOKE_RUN = "UPDATE runs SET revoked = 1 WHERE id = $1";
/** The pruned runs of a job: finished, up to the id given. */
export const DELETE_PRUNED = "DELETE FROM runs WHERE job = $1 AND status != 'running' AND id <= $2";
/** A job's finished runs beyond the newest $3 ($1 = $2: the job), oldest first. */
export const PRUNABLE = `SELECT id, log_path FROM runs WHERE job = $1 AND status != 'running'
  AND id < (SELECT MIN(id) FROM (SELECT id FROM runs WHERE job = $2 ORDER BY id DESC LIMIT $3) t)
  ORDER BY id`;
