// What `why` reads about one slot of one job, on PostgreSQL: the same reads as ../sqlite/why.ts.
// Table-group functions: they run in their caller's transaction (a snapshot: PgStore reads them
// in one) and never open one.
import type { Q } from "../pg-connection.js";
import type { EventRow, RunRow } from "../rows.js";
import type { SlotFacts, SlotRun } from "../why-rows.js";
import { daemonRow } from "./daemon.js";
import { runningRuns } from "./history.js";
import { jobRow } from "./jobs.js";
import { SLOT_RUN } from "../queries/runs.js";
import * as S from "../queries/why.js";

export async function slotFacts(q: Q, job: string, slot: number, node: string): Promise<SlotFacts> {
  const claim = (await q.get<{ run_id: number | null }>(SLOT_RUN, [job, slot])) ?? null;
  const runs = await q.all<RunRow>(S.SLOT_ROWS, [job, slot]);
  const first = runs[0];
  // When the slot was decided: its row's start (a disposition's is when it was recorded).
  const decided = first?.started_at ?? slot;
  const missed = first?.status === "missed";
  return {
    job: await jobRow(q, job),
    daemon: await daemonRow(q, node),
    claim,
    runs,
    holder: await holderAt(q, job, slot, decided),
    running: await runningRuns(q, job),
    pause: (await q.get<EventRow>(S.PAUSE_AT, [job, decided])) ?? null,
    // The start that recorded a slot missed ran its catch-ups for later slots, up to that start.
    catchUps: missed ? await q.all<RunRow>(S.CATCH_UPS, [job, slot, decided]) : [],
    missedEvent: (await q.get<EventRow>(S.MISSED_AFTER, [job, slot])) ?? null,
    ...(await daemonSigns(q, slot)),
  };
}

/** The oldest run of the job, not of this slot, that had started and not ended at `at`. */
async function holderAt(q: Q, job: string, slot: number, at: number): Promise<RunRow | null> {
  return (await q.get<RunRow>(S.HOLDER_AT, [job, slot, at, at])) ?? null;
}

/** The newest time any row records at or before the slot, and the oldest after it (sqlite/why.ts). */
async function daemonSigns(
  q: Q,
  slot: number,
): Promise<Pick<SlotFacts, "lastBefore" | "firstAfter">> {
  const r = await q.get<{ last_before: number | null; first_after: number | null }>(
    S.DAEMON_SIGNS,
    [slot, slot, slot, slot, slot],
  );
  return { lastBefore: r?.last_before ?? null, firstAfter: r?.first_after ?? null };
}

/** What the runs of a job's slots in [from, to] came to (as ../sqlite/why.ts). */
export async function slotRuns(q: Q, job: string, from: number, to: number): Promise<SlotRun[]> {
  const rows = await q.all<{ slot: number; ok: boolean; attempt: number }>(
    `SELECT slot, bool_or(status = 'ok') AS ok, MAX(attempt) AS attempt FROM runs
     WHERE job = $1 AND slot BETWEEN $2 AND $3 GROUP BY slot ORDER BY slot`,
    [job, from, to],
  );
  return rows.map((r) => ({ slot: Number(r.slot), ok: r.ok, attempt: Number(r.attempt) }));
}
