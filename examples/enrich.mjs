// The enrichment worker as a Node job using the library: the same resume-not-restart guarantee
// as examples/enrich.sh, without a process per item. Each item is one row appended to the
// warehouse, done under `once` so that a restart skips what is done.
import fs from "node:fs";
import { Markers } from "../dist/index.js";

const items = Number(process.env.ITEMS ?? 200);
const warehouse = process.env.WAREHOUSE ?? `${process.env.CRONVISOR_STATE_DIR}/warehouse.txt`;
const workMs = Number(process.env.WORK_MS ?? 10); // stands in for the real per-item work

const m = Markers.fromEnv();
try {
  for (let i = 0; i < items; i++) {
    await m.once(`task-${i}`, async () => {
      await new Promise((r) => setTimeout(r, workMs));
      fs.appendFileSync(warehouse, `task-${i} ${process.env.CRONVISOR_RUN_ID}\n`);
    });
    if ((i + 1) % 50 === 0) m.progress(`item ${i + 1} of ${items}`);
  }
} finally {
  m.close();
}
console.log(`enriched ${items} items`);
