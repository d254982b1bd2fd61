// Several daemons (nodes) on one PostgreSQL store, each a real `cronvisor daemon` process with
// its own state dir (logs, broker socket), against the throwaway cluster of test/pg.js. Short
// leases and windows keep `npm test` fast; `npm run soak` runs the long versions.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import test from "node:test";
import {
  ROOT,
  cli,
  killDaemon,
  startDaemon,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";
import { freshDatabase, pgSkip, rawClient } from "./pg.js";

const skip = pgSkip();
const NODE_DIR = path.dirname(process.execPath);

/** A config for node `name` on the store `url`, its state in dir/name. */
function nodeConfig(dir, name, url, jobs, top = "") {
  return writeConfig(
    dir,
    `store: "${url}"
node: ${name}
state_dir: ./state-${name}
heartbeat: 1s
lease: 3s
${top}
env: { PATH: "${path.join(ROOT, "bin")}:${NODE_DIR}:/usr/bin:/bin" }
jobs:
${jobs}`,
    `${name}.yaml`,
  );
}

/** The runs table, as a list of rows. */
async function runs(raw, where = "TRUE", params = []) {
  return (await raw.query(`SELECT * FROM runs WHERE ${where} ORDER BY id`, params)).rows.map(
    (r) => ({ ...r, id: Number(r.id), slot: r.slot === null ? null : Number(r.slot) }),
  );
}

test(
  "three daemons on one store, 30 per-second jobs: every slot has exactly one disposition and at most one run",
  { skip },
  async (t) => {
    const url = await freshDatabase();
    const raw = await rawClient(url, t);
    const dir = tmpdir(t);
    const jobs = Array.from(
      { length: 30 },
      (_, i) => `  j${i}:\n    schedule: "* * * * * *"\n    command: "true"\n`,
    ).join("");
    const nodes = ["n1", "n2", "n3"].map((n) => ({ n, cfg: nodeConfig(dir, n, url, jobs) }));
    const ds = nodes.map(({ cfg }) => startDaemon(t, cfg));
    // Every node claims slots: wait until each has started a run.
    await waitFor(
      async () =>
        (await raw.query("SELECT DISTINCT node FROM runs WHERE status <> 'skipped'")).rowCount ===
        3,
      "all three nodes running jobs",
      30_000,
    ).catch(async (e) => {
      throw new Error(`${e.message}\n${ds.map((d) => d.err).join("\n---\n")}`);
    });
    const from = Date.now() + 1000;
    await waitFor(() => Date.now() > from + 12_000, "a 12 s window", 20_000, 200);
    const to = Date.now() - 2000;
    for (const d of ds) await stopDaemon(d);
    const all = await runs(raw, "slot >= $1 AND slot <= $2", [from, to]);
    const bySlot = new Map();
    for (const r of all) {
      const k = `${r.job}@${r.slot}`;
      bySlot.set(k, [...(bySlot.get(k) ?? []), r]);
    }
    for (let i = 0; i < 30; i++) {
      for (let s = Math.ceil(from / 1000) * 1000; s <= to; s += 1000) {
        const got = bySlot.get(`j${i}@${s}`) ?? [];
        assert.equal(
          got.length,
          1,
          `j${i} slot ${new Date(s).toISOString()}: ${JSON.stringify(got)}`,
        );
        assert.ok(
          ["ok", "skipped"].includes(got[0].status),
          `j${i} slot ${new Date(s).toISOString()}: ${got[0].status} ${got[0].reason}`,
        );
      }
    }
    const slots = (await raw.query("SELECT count(*)::int AS n FROM slots")).rows[0].n;
    const perSlot = await raw.query(
      "SELECT job, slot, count(*)::int AS n FROM runs WHERE slot IS NOT NULL AND trigger = 'schedule' GROUP BY job, slot HAVING count(*) > 1",
    );
    assert.deepEqual(perSlot.rows, [], "no slot ran or was recorded twice");
    assert.ok(slots >= 30 * 12, `${slots} slots`);
    const byNode = await raw.query(
      "SELECT node, count(*)::int AS n FROM runs WHERE status = 'ok' GROUP BY node ORDER BY node",
    );
    assert.equal(byNode.rows.length, 3, JSON.stringify(byNode.rows));
  },
);
