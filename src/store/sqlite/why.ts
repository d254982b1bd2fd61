// What `why` reads about one slot of one job: the slot's rows, the lock holder when it was
// decided, the pause events, the catch-up that followed a downtime, and the daemon's last and
// first signs around it. Table-group functions: they run in their caller's transaction (a
// snapshot: SqliteStore reads them in one) and never open one.
import type { Conn } from "../connection.js";
import type { EventRow, RunRow } from "../rows.js";
import type { SlotFacts, SlotRun } from "../why-rows.js";
import { daemonRow } from "./daemon.js";
import { runningRuns } from "./history.js";
import { jobRow } from "./jobs.js";
import { SLOT_RUN } from "../queries/runs.js";
import * as S from "../queries/why.js";

export function slotFacts(c: Conn, job: string, slot: number): SlotFacts {
  const claim = (c.q(SLOT_RUN).get(job, slot) as { run_id: number | null } | undefined) ?? null;
  const runs = c.q(S.SLOT_ROWS).all(job, slot) as RunRow[];
  const first = runs[0];
  // When the slot was decided: its row's start (a disposition's is when it was recorded).
  const decided = first?.started_at ?? slot;
  const missed = first?.status === "missed";
  return {
    job: jobRow(c, job),
    daemon: daemonRow(c),
    claim,
    runs,
    holder: holderAt(c, job, slot, decided),
    running: runningRuns(c, job),
    pause: (c.q(S.PAUSE_AT).get(job, decided) as EventRow | undefined) ?? null,
    // The start that recorded a slot missed ran its catch-ups for later slots, up to that start.
    catchUps: missed ? (c.q(S.CATCH_UPS).all(job, slot, decided) as RunRow[]) : [],
    missedEvent: (c.q(S.MISSED_AFTER).get(job, slot) as EventRow | undefined) ?? null,
    ...daemonSigns(c, slot),
  };
}

/** The oldest run of the job, not of this slot, that had started and not ended at `at`. */
function holderAt(c: Conn, job: string, slot: number, at: number): RunRow | null {
  return (c.q(S.HOLDER_AT).get(job, slot, at, at) as RunRow | undefined) ?? null;
}

/** The daemon's last and first signs around the slot (DAEMON_SIGNS in queries/why.ts). */
function daemonSigns(c: Conn, slot: number): Pick<SlotFacts, "lastBefore" | "firstAfter"> {
  const r = c.q(S.DAEMON_SIGNS, true).get(slot, slot, slot, slot, slot) as [
    number | null,
    number | null,
  ];
  return { lastBefore: r[0], firstAfter: r[1] };
}

/**
 * What the runs of a job's slots in [from, to] came to, oldest first: whether one is `ok`, and the
 * highest attempt among them (dispositions count as attempt 1): `backfill` runs the others.
 */
export function slotRuns(c: Conn, job: string, from: number, to: number): SlotRun[] {
  return c
    .q(
      `SELECT slot, MAX(status = 'ok') AS ok, MAX(attempt) AS attempt FROM runs
       WHERE job = ? AND slot BETWEEN ? AND ? GROUP BY slot ORDER BY slot`,
    )
    .all(job, from, to)
    .map((r) => {
      const x = r as { slot: number; ok: number; attempt: number };
      return { slot: x.slot, ok: x.ok === 1, attempt: x.attempt };
    });
}
