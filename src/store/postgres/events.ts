// Events and the alert state on PostgreSQL: the same operations as ../sqlite/events.ts.
// Table-group functions: they run in their caller's transaction and never open one.
import type { Q } from "../pg-connection.js";
import type { EventRow } from "../rows.js";
import { ALERT_STATE, EVENTS_ALL, EVENTS_OF_JOB, SET_ALERT_STATE } from "../queries/events.js";

export async function insertEvent(
  q: Q,
  at: number,
  job: string | null,
  kind: string,
  detail: string | null,
): Promise<void> {
  // The transaction's xid before the row's id (pg_current_xact_id, evaluated before the row is
  // made): the readers' horizon rests on it (horizon.ts).
  await q.run(
    `INSERT INTO events (at, job, kind, detail)
     SELECT $1::bigint, $2::text, $3::text, $4::text FROM (SELECT pg_current_xact_id()) x`,
    [at, job, kind, detail],
  );
}

/** Newest first. */
export async function events(q: Q, job: string | null, limit: number): Promise<EventRow[]> {
  return job === null
    ? q.all<EventRow>(EVENTS_ALL, [limit])
    : q.all<EventRow>(EVENTS_OF_JOB, [job, limit]);
}

/** The conditions last announced for a job, comma-separated, and since when; null if never. */
export async function alertState(
  q: Q,
  job: string,
): Promise<{ active: string; since: number } | null> {
  return (await q.get<{ active: string; since: number }>(ALERT_STATE, [job])) ?? null;
}

export async function setAlertState(q: Q, job: string, active: string, now: number) {
  await q.run(SET_ALERT_STATE, [job, active, now]);
}
