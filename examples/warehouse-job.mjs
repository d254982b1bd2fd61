// Belt and suspenders: done-markers skip finished work, and the job's own store ALSO refuses
// duplicates and stale writers, so even an operator who deletes every marker (or a kill between
// a side effect and its marker) cannot write a row twice.
//
//   - each row is keyed by the item (INSERT ... ON CONFLICT DO NOTHING): a rerun writes nothing new;
//   - each write carries the run's fence (CRONVISOR_FENCE) and the store keeps the highest fence
//     it has seen: a write whose fence is older than that is refused (the classic fencing token),
//     so a straggler from a run that lost its lock cannot overwrite newer work.
import Database from "better-sqlite3";
import { Markers } from "../dist/index.js";

const items = Number(process.env.ITEMS ?? 50);
const fence = Number(process.env.CRONVISOR_FENCE);
const db = new Database(
  process.env.WAREHOUSE_DB ?? `${process.env.CRONVISOR_STATE_DIR}/warehouse.db`,
);
db.pragma("journal_mode = WAL");
db.exec(`
  CREATE TABLE IF NOT EXISTS rows (item TEXT PRIMARY KEY, run_id INTEGER, fence INTEGER);
  CREATE TABLE IF NOT EXISTS guard (id INTEGER PRIMARY KEY CHECK (id = 1), fence INTEGER NOT NULL);
  INSERT INTO guard (id, fence) VALUES (1, 0) ON CONFLICT DO NOTHING;
`);
// Raise the store's fence to ours, or learn that a newer run already wrote: WHERE fence <= ?.
const claimFence = db.prepare("UPDATE guard SET fence = ? WHERE id = 1 AND fence <= ?");
const insert = db.prepare(
  "INSERT INTO rows (item, run_id, fence) VALUES (?, ?, ?) ON CONFLICT (item) DO NOTHING",
);
const write = db.transaction((item) => {
  if (claimFence.run(fence, fence).changes === 0)
    throw new Error(`stale fence ${fence}: a newer run owns the warehouse`);
  return insert.run(item, process.env.CRONVISOR_RUN_ID, fence).changes;
});

const m = Markers.fromEnv();
let written = 0;
try {
  for (let i = 0; i < items; i++) {
    await m.once(`item-${i}`, () => {
      written += write(`item-${i}`);
    });
  }
} finally {
  m.close();
  db.close();
}
console.log(`wrote ${written} new rows`);
