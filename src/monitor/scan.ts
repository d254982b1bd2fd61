// Which of a job's rows are news to the monitor: each finished row once per daemon life, a row
// that was running when first seen once it has ended. The cursors are the monitor's; this reads.
import type { RunRow, Store } from "../store/store.js";

/** Rows read per query when catching up with a job's new rows. */
const SCAN_BATCH = 500;

/** Where the scan of a job's rows stands: every row up to `last` was looked at, except `pending` (running then). */
export interface Cursor {
  last: number;
  pending: Set<number>;
}

/** The job's rows finished since the last look; `cursors` is moved past them. */
export async function newRows(
  store: Store,
  cursors: Map<string, Cursor>,
  job: string,
  startedAt: number,
): Promise<RunRow[]> {
  const rows: RunRow[] = [];
  const c = cursors.get(job);
  if (!c) {
    // First look: rows finished since this daemon started are news (runs it found dead at
    // start were just recorded `interrupted`); older ones are history.
    const first: Cursor = { last: await store.maxRunId(job), pending: new Set() };
    for (const r of await store.runsRunningOrFinishedSince(job, startedAt)) {
      if (r.status === "running") first.pending.add(r.id);
      else rows.push(r);
    }
    cursors.set(job, first);
    return rows;
  }
  for (const id of c.pending) {
    const r = await store.run(id);
    if (r?.status === "running") continue;
    c.pending.delete(id);
    if (r) rows.push(r);
  }
  for (;;) {
    const batch = await store.runsAfter(job, c.last, SCAN_BATCH);
    for (const r of batch) {
      c.last = r.id;
      if (r.status === "running") c.pending.add(r.id);
      else rows.push(r);
    }
    if (batch.length < SCAN_BATCH) return rows;
  }
}
