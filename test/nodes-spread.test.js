// Several nodes add capacity (issue 41): three real daemons on one PostgreSQL store share 300
// per-second jobs, each starting a fair share of the runs (the jobs are dealt round the live
// nodes: src/daemon/spread.ts), and still no slot runs twice.
import assert from "node:assert/strict";
import test from "node:test";
import { startDaemon, stopDaemon, tmpdir, waitFor } from "./helpers.js";
import { assertEachSlotOnce, nodeConfig } from "./nodes-helpers.js";
import { freshDatabase, pgMissing, rawClient } from "./pg.js";
import { needs } from "./needs.js";

const skip = pgMissing();
const JOBS = 300;
const WINDOW_MS = 5_000;

test(
  "three daemons share 300 per-second jobs: each starts between 20% and 47% of the runs, no slot twice",
  needs(skip),
  async (t) => {
    const url = await freshDatabase();
    const raw = await rawClient(url, t);
    const dir = tmpdir(t);
    const jobs = Array.from(
      { length: JOBS },
      (_, i) => `  j${i}:\n    schedule: "* * * * * *"\n    command: "true"\n`,
    ).join("");
    const ds = ["n1", "n2", "n3"].map((n) => startDaemon(t, nodeConfig(dir, n, url, jobs, "20s")));
    // Each node deals the jobs once it has seen the others' leases (a read after each beat):
    // wait until all three have started runs, then a beat more.
    await waitFor(
      async () =>
        (
          await raw.query(
            "SELECT DISTINCT node FROM runs WHERE status NOT IN ('skipped', 'missed')",
          )
        ).rowCount === 3,
      "all three nodes running jobs",
      60_000,
    ).catch((e) => {
      throw new Error(`${e.message}\n${ds.map((d) => d.err).join("\n---\n")}`);
    });
    // Then until the start-up has settled: a second whose 300 slots all ran, by all three nodes.
    const steady = await waitFor(
      async () =>
        (
          await raw.query(
            "SELECT slot FROM runs WHERE trigger = 'schedule' AND status NOT IN ('skipped', 'missed') GROUP BY slot HAVING count(*) = $1 AND count(DISTINCT node) = 3 ORDER BY slot DESC LIMIT 1",
            [JOBS],
          )
        ).rows[0]?.slot,
      "a second whose slots all ran",
      60_000,
    );
    const from = Number(steady) + 1000;
    const to = from + WINDOW_MS;
    await waitFor(() => Date.now() > to + 2000, "the window", WINDOW_MS + 10_000, 200);
    for (const d of ds) await stopDaemon(d);
    await assertEachSlotOnce(raw);
    const byNode = (
      await raw.query(
        "SELECT node, count(*)::int AS n FROM runs WHERE slot >= $1 AND slot < $2 AND trigger = 'schedule' AND status NOT IN ('skipped', 'missed') GROUP BY node ORDER BY node",
        [from, to],
      )
    ).rows;
    const total = byNode.reduce((s, r) => s + r.n, 0);
    const other = (
      await raw.query(
        "SELECT node, status, count(*)::int AS n FROM runs WHERE slot >= $1 AND slot < $2 AND status IN ('skipped', 'missed') GROUP BY 1, 2",
        [from, to],
      )
    ).rows;
    t.diagnostic(`not run: ${JSON.stringify(other)}`);
    const diag = `runs per node ${JSON.stringify(byNode)} of ${total}\n${ds.map((d) => d.err).join("\n---\n")}`;
    assert.ok(total >= JOBS * 2, `only ${total} runs in the window\n${diag}`);
    assert.equal(byNode.length, 3, diag);
    for (const r of byNode) {
      const share = r.n / total;
      assert.ok(share >= 0.2 && share <= 0.47, `${r.node}: ${(share * 100).toFixed(1)}%\n${diag}`);
    }
    t.diagnostic(`runs per node: ${byNode.map((r) => `${r.node} ${r.n}`).join(", ")} of ${total}`);
  },
);
