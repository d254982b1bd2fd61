// Events (what happened outside a run: pause, unmark, missed slots, clock) and the alert state
// the monitor last announced per job. Table-group functions: they run in their caller's
// transaction and never open one.
import type { Conn } from "../connection.js";
import type { EventRow } from "../rows.js";
import { ALERT_STATE, EVENTS_ALL, EVENTS_OF_JOB, SET_ALERT_STATE } from "../queries/events.js";

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
    ? (c.q(EVENTS_ALL).all(limit) as EventRow[])
    : (c.q(EVENTS_OF_JOB).all(job, limit) as EventRow[]);
}

/** The conditions last announced for a job, comma-separated, and since when; null if never. */
export function alertState(c: Conn, job: string): { active: string; since: number } | null {
  return (c.q(ALERT_STATE).get(job) as { active: string; since: number } | undefined) ?? null;
}

export function setAlertState(c: Conn, job: string, active: string, now: number): void {
  c.q(SET_ALERT_STATE).run(job, active, now);
}
