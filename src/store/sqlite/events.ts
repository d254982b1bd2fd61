// Events (what happened outside a run: pause, unmark, missed slots, clock) and the alert state
// the monitor last announced per job. Table-group functions: they run in their caller's
// transaction and never open one.
import type { Conn } from "../connection.js";
import type { EventRow } from "../rows.js";

export function insertEvent(
  c: Conn,
  at: number,
  job: string | null,
  kind: string,
  detail: string | null,
): void {
  c.q("INSERT INTO events (at, job, kind, detail) VALUES (?, ?, ?, ?)").run(at, job, kind, detail);
}

/** Newest first. */
export function events(c: Conn, job: string | null, limit: number): EventRow[] {
  return job === null
    ? (c.q("SELECT * FROM events ORDER BY id DESC LIMIT ?").all(limit) as EventRow[])
    : (c
        .q("SELECT * FROM events WHERE job = ? ORDER BY id DESC LIMIT ?")
        .all(job, limit) as EventRow[]);
}

/** The conditions last announced for a job, comma-separated, and since when; null if never. */
export function alertState(c: Conn, job: string): { active: string; since: number } | null {
  return (
    (c.q("SELECT active, since FROM alert_state WHERE job = ?").get(job) as
      { active: string; since: number } | undefined) ?? null
  );
}

export function setAlertState(c: Conn, job: string, active: string, now: number): void {
  c.q(
    `INSERT INTO alert_state (job, active, since) VALUES (?, ?, ?)
     ON CONFLICT (job) DO UPDATE SET active = excluded.active, since = excluded.since`,
  ).run(job, active, now);
}
