// Named locks and concurrency groups across nodes (docs/locks.md): two daemons on one
// PostgreSQL store (test/pg.js's throwaway cluster), each running its own jobs of one lock and
// one group. The lock and the cap hold across the nodes.
import assert from "node:assert/strict";
import test from "node:test";
import { cli, readPgStore, startDaemon, stopDaemon, tmpdir, waitFor } from "./helpers.js";
import { mostAtOnce } from "./locks-helpers.js";
import { assertEachSlotOnce, nodeConfig, started } from "./nodes-helpers.js";
import { freshDatabase, pgMissing, rawClient } from "./pg.js";
import { needs } from "./needs.js";

const skip = pgMissing();

test(
  "a named lock and a group hold across two nodes: never two holders of the lock, never three of the group",
  needs(skip),
  async (t) => {
    const url = await freshDatabase();
    const raw = await rawClient(url, t);
    const dir = tmpdir(t);
    const job = (name, node, key) =>
      `  ${name}:\n    schedule: "* * * * * *"\n    command: sleep 1.2\n    hosts: [${node}]\n    ${key}\n`;
    const jobs =
      job("a", "n1", "locks: [db]") +
      job("b", "n2", "locks: [db]") +
      ["g1", "g2"].map((g) => job(g, "n1", "group: heavy")).join("") +
      ["g3", "g4"].map((g) => job(g, "n2", "group: heavy")).join("");
    const top = "groups: { heavy: { max_running: 2 } }";
    const cfgs = ["n1", "n2"].map((n) => nodeConfig(dir, n, url, jobs, "6s", top));
    const ds = cfgs.map((cfg) => startDaemon(t, cfg));
    await started(ds);
    const store = readPgStore(raw);
    const count = async (where, keep = () => true) => (await store.runs(where)).filter(keep).length;
    const g = (r) => r.job.startsWith("g");
    /** reason LIKE 'lock db held by JOB (run %)' */
    const heldBy = (job) => (r) =>
      r.reason?.startsWith(`lock db held by ${job} (run `) && r.reason.endsWith(")");
    await waitFor(
      async () =>
        (await count({ job: ["a", "b"], status: "ok" })) >= 4 &&
        (await count({ job: "a" }, heldBy("b"))) >= 1 &&
        (await count({ job: "b" }, heldBy("a"))) >= 1 &&
        (await count({ reason: "group heavy full (2 of 2 running)" })) >= 3 &&
        (await count({ status: "ok", node: "n1" }, g)) >= 1 &&
        (await count({ status: "ok", node: "n2" }, g)) >= 1,
      "both nodes ran under the lock and the group, and slots were refused for each",
      45_000,
      200,
    ).catch(async (e) => {
      const all = await store.runs();
      const seen = all
        .map(
          (r) =>
            `${r.id} ${r.job} ${r.node} ${r.status} slot=${r.slot} start=${r.started_at} end=${r.finished_at} ${r.reason ?? ""}`,
        )
        .join("\n");
      throw new Error(`${e.message}\n${seen}\n${ds.map((d) => d.err).join("\n---\n")}`);
    });
    const st = JSON.parse(cli(["status", "-c", cfgs[0], "--json"]).stdout);
    assert.deepEqual(
      st.locks.map((l) => l.name),
      ["db"],
    );
    assert.deepEqual(
      st.groups.map((g) => [g.name, g.max_running]),
      [["heavy", 2]],
    );
    for (const d of ds) await stopDaemon(d);
    assert.equal(mostAtOnce(await store.ran({ job: ["a", "b"] })), 1, "one holder of db at a time");
    assert.equal(mostAtOnce((await store.ran()).filter(g)), 2, "two of the group at most");
    await assertEachSlotOnce(raw);
  },
);
