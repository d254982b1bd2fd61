// An operator's reconcile of markers on PostgreSQL: `unmark` and `markers OLD --move-to NEW`, the
// same operations as SqliteStore's. Table-group functions: they run in their caller's
// transaction and never open one.
import type { Q } from "../pg-connection.js";
import { COPY_MARKERS, DELETE_JOB_MARKERS } from "../queries/markers.js";
import { movedEvents } from "../moved.js";
import type { MoveMarkers, MoveOutcome } from "../moved.js";
import { insertEvent } from "./events.js";
import { runningRuns } from "./history.js";
import { lockJobs } from "./jobs.js";
import { deleteMarker } from "./markers.js";

/** Remove one marker, recorded as an event; false if it was not marked. */
export async function removeMarker(q: Q, job: string, key: string, now: number, by: string) {
  await lockJobs(q, [job]);
  const removed = await deleteMarker(q, job, key);
  if (removed) await insertEvent(q, now, job, "unmark", `${key} (by ${by})`);
  return removed;
}

/**
 * Both jobs' rows locked first (as a reservation locks its job's), so no run of either starts
 * between the check and the move. A run of another node counts as running whatever its lease:
 * only the node that takes the job over may end it (a frozen node's run may wake and write).
 */
export async function moveMarkers(q: Q, m: MoveMarkers, node: string): Promise<MoveOutcome> {
  await lockJobs(q, [m.from, m.to]);
  for (const job of [m.from, m.to]) {
    const runs = await runningRuns(q, job);
    const run = runs.find((r) => (r.node !== null && r.node !== node) || m.holderAlive(r));
    if (run) return { kind: "running", job, run };
  }
  const moved = await q.run(COPY_MARKERS, [m.to, m.from]);
  const all = await q.run(DELETE_JOB_MARKERS, [m.from]);
  const r = { moved, already: all - moved };
  for (const [job, detail] of movedEvents(m, r))
    await insertEvent(q, m.now, job, "markers-moved", detail);
  return { kind: "moved", ...r };
}
