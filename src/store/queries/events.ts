// Events and the alert state: the statements both engines run (see sql.ts). Inserting an event
// differs (PostgreSQL takes the transaction's xid first, for the readers' horizon).

export const EVENTS_ALL = "SELECT * FROM events ORDER BY id DESC LIMIT $1";
export const EVENTS_OF_JOB = "SELECT * FROM events WHERE job = $1 ORDER BY id DESC LIMIT $2";
export const ALERT_STATE = "SELECT active, since FROM alert_state WHERE job = $1";
export const SET_ALERT_STATE = `INSERT INTO alert_state (job, active, since) VALUES ($1, $2, $3)
  ON CONFLICT (job) DO UPDATE SET active = excluded.active, since = excluded.since`;
