// Events and the alert state on PostgreSQL: the same operations as ../sqlite/events.ts.
// Table-group functions: they run in their caller's transaction and never open one.
import type { Q } from "../pg-connection.js";
import type { EventRow } from "../rows.js";

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
    ? q.all<EventRow>("SELECT * FROM events ORDER BY id DESC LIMIT $1", [limit])
    : q.all<EventRow>("SELECT * FROM events WHERE job = $1 ORDER BY id DESC LIMIT $2", [
        job,
        limit,
      ]);
}

/** The conditions last announced for a job, comma-separated, and since when; null if never. */
export async function alertState(
  q: Q,
  job: string,
): Promise<{ active: string; since: number } | null> {
  return (
    (await q.get<{ active: string; since: number }>(
      "SELECT active, since FROM alert_state WHERE job = $1",
      [job],
    )) ?? null
  );
}

export async function setAlertState(q: Q, job: string, active: string, now: number) {
  await q.run(
    `INSERT INTO alert_state (job, active, since) VALUES ($1, $2, $3)
     ON CONFLICT (job) DO UPDATE SET active = excluded.active, since = excluded.since`,
    [job, active, now],
  );
}
