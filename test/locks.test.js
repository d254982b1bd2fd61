// Named locks and concurrency groups (docs/locks.md) end to end: real daemons, real jobs, a real
// SQLite store; the PostgreSQL side is in locks-nodes.test.js.
import assert from "node:assert/strict";
import test from "node:test";
import { cli, rows, startDaemon, stopDaemon, tmpdir, waitFor, writeConfig } from "./helpers.js";
import { mostAtOnce } from "./locks-helpers.js";

test("two jobs sharing a named lock never overlap; a slot that finds it held is skipped naming the holder; `run` exits 75", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s
jobs:
  a:
    schedule: "*/3 * * * * *"
    command: sleep 1.5
    locks: [db]
  b:
    schedule: "* * * * * *"
    command: sleep 1.5
    locks: [db, cache]
`,
  );
  const d = startDaemon(t, cfg);
  const lockSkips = () => rows(dir, "SELECT * FROM runs WHERE reason LIKE 'lock db held by %'");
  await waitFor(
    () =>
      rows(dir, "SELECT DISTINCT job FROM runs WHERE status = 'ok'").length === 2 &&
      lockSkips().length >= 2,
    "both jobs ran, and slots skipped for the lock",
    30_000,
  );
  // `run` meets the lock too: exit 75, with who holds it.
  let manual;
  await waitFor(
    () => {
      manual = cli(["run", "a", "-c", cfg]);
      return manual.code === 75 && /lock db held by b \(run \d+\)/.test(manual.stderr);
    },
    "a manual run of a refused for b's hold on db",
    20_000,
    100,
  );
  const st = JSON.parse(cli(["status", "-c", cfg, "--json"]).stdout);
  assert.deepEqual(
    st.locks.map((l) => l.name),
    ["cache", "db"],
  );
  await stopDaemon(d);
  const ran = rows(dir, "SELECT * FROM runs WHERE status NOT IN ('skipped', 'missed')");
  assert.equal(mostAtOnce(ran), 1, "never two holders of db at once");
  for (const s of lockSkips()) {
    const [, job, id] = /^lock db held by (\w+) \(run (\d+)\)$/.exec(s.reason) ?? [];
    const holder = rows(dir, "SELECT * FROM runs WHERE id = ?", Number(id))[0];
    assert.equal(holder?.job, job, s.reason);
    assert.notEqual(holder.job, s.job, "another job's run holds it");
    // The holder was running when the slot was decided.
    assert.ok(holder.started_at <= s.started_at && holder.finished_at >= s.started_at, s.reason);
  }
});

test("a group of max_running 2 with four jobs never has three running; the slot is recorded full", async (t) => {
  const dir = tmpdir(t);
  const jobs = ["g1", "g2", "g3", "g4"]
    .map((n) => `  ${n}:\n    schedule: "* * * * * *"\n    command: sleep 1.2\n    group: heavy\n`)
    .join("");
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\ngroups: { heavy: { max_running: 2 } }\njobs:\n${jobs}`,
  );
  const d = startDaemon(t, cfg);
  const full = () =>
    rows(dir, "SELECT * FROM runs WHERE reason = 'group heavy full (2 of 2 running)'");
  await waitFor(
    () => rows(dir, "SELECT * FROM runs WHERE status = 'ok'").length >= 6 && full().length >= 3,
    "runs, and slots skipped for the full group",
    30_000,
  );
  const st = JSON.parse(cli(["status", "-c", cfg, "--json"]).stdout);
  assert.equal(st.groups.length, 1);
  assert.equal(st.groups[0].name, "heavy");
  assert.equal(st.groups[0].max_running, 2);
  assert.ok(st.groups[0].running <= 2);
  await stopDaemon(d);
  const ran = rows(dir, "SELECT * FROM runs WHERE status NOT IN ('skipped', 'missed')");
  assert.equal(mostAtOnce(ran), 2, "two at once at most, and the cap was reached");
});

test("slots waiting for a group start in their turn: the earlier slot first, then the higher priority", async (t) => {
  const dir = tmpdir(t);
  const gate = `${dir}/gate`;
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s
groups: { one: { max_running: 1 } }
jobs:
  blocker:
    schedule: "@yearly"
    command: while [ ! -e ${gate} ]; do sleep 0.05; done
    group: one
  lo:
    schedule: "* * * * * *"
    command: sleep 0.3
    group: one
    overlap: queue
  hi:
    schedule: "* * * * * *"
    command: sleep 0.3
    group: one
    overlap: queue
    priority: 5
`,
  );
  // The group's one place, held by a manual run (another process than the daemon).
  const { spawnCli } = await import("./helpers.js");
  const blocker = spawnCli(["run", "blocker", "-c", cfg]);
  t.after(() => blocker.kill("SIGKILL"));
  await waitFor(
    () => rows(dir, "SELECT * FROM runs WHERE job = 'blocker'").length === 1,
    "blocker",
  );
  const d = startDaemon(t, cfg);
  // One slot of each waits; their next ones are skipped (queue keeps one per job).
  await waitFor(
    () =>
      rows(
        dir,
        "SELECT * FROM runs WHERE reason LIKE 'group one full (1 of 1 running) and a slot is already waiting'",
      ).length >= 4,
    "later slots skipped behind the waiting ones",
  );
  const { writeFileSync } = await import("node:fs");
  writeFileSync(gate, "");
  assert.equal((await blocker.exited).code, 0);
  await waitFor(
    () => rows(dir, "SELECT * FROM runs WHERE job IN ('lo', 'hi') AND status = 'ok'").length >= 2,
    "the waiting slots ran",
  );
  await stopDaemon(d);
  const [first, second] = rows(
    dir,
    "SELECT * FROM runs WHERE job IN ('lo', 'hi') AND status NOT IN ('skipped', 'missed') ORDER BY id",
  );
  assert.equal(first.slot, second.slot, "the two waited for the same slot");
  assert.deepEqual([first.job, second.job], ["hi", "lo"]);
  const end = rows(dir, "SELECT finished_at FROM runs WHERE job = 'blocker'")[0].finished_at;
  assert.ok(first.slot < end, "they waited for the blocker");
});
