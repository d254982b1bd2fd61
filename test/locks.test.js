// Named locks and concurrency groups (docs/locks.md) end to end: real daemons, real jobs, a real
// SQLite store; the PostgreSQL side is in locks-nodes.test.js.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import test from "node:test";
import { parse } from "yaml";
import {
  cli,
  freePort,
  killDaemon,
  request,
  readStoreIn,
  startDaemon,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";
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
  const lockSkips = () =>
    readStoreIn(dir)
      .runs()
      .filter((r) => r.reason?.startsWith("lock db held by "));
  await waitFor(
    () =>
      new Set(
        readStoreIn(dir)
          .runs({ status: "ok" })
          .map((r) => r.job),
      ).size === 2 && lockSkips().length >= 2,
    "both jobs ran, and slots skipped for the lock",
    30_000,
  );
  // `run` meets the lock too: exit 75, with who holds it.
  let manual;
  await waitFor(
    () => {
      // Asked while b's run holds db (else a manual run of a may start, or meet a's own lock).
      if (readStoreIn(dir).runs({ job: "b", status: "running" }).length === 0) return false;
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
  for (const l of st.locks)
    if (l.holder !== null) {
      assert.ok(["a", "b"].includes(l.holder.job));
      assert.equal(typeof l.holder.run_id, "number");
      assert.equal(typeof l.holder.node, "string");
    }
  assert.match(
    cli(["status", "-c", cfg]).stdout,
    /^ {2}lock db: (free|held by [ab] \(run \d+\))$/m,
  );
  await stopDaemon(d);
  const ran = readStoreIn(dir).ran();
  assert.equal(mostAtOnce(ran), 1, "never two holders of db at once");
  for (const s of lockSkips()) {
    const [, job, id] = /^lock db held by (\w+) \(run (\d+)\)$/.exec(s.reason) ?? [];
    const holder = readStoreIn(dir).runs({ id: Number(id) })[0];
    assert.equal(holder?.job, job, s.reason);
    assert.notEqual(holder.job, s.job, "another job's run holds it");
    // The holder was running when the slot was decided.
    assert.ok(holder.started_at <= s.started_at && holder.finished_at >= s.started_at, s.reason);
  }
  // `why` explains it.
  const s = lockSkips()[0];
  const at = new Date(s.slot).toISOString();
  const why = JSON.parse(cli(["why", s.job, "--at", at, "--json", "-c", cfg]).stdout);
  assert.equal(why.disposition, "skipped");
  assert.equal(why.reason, s.reason);
  assert.match(why.explanation[1], /^Skipped: the named lock db was held by run \d+ of \w+ /);
  assert.match(why.explanation[2], /not run afterwards \(no catch-up\)/);
});

test("a group of max_running 2 with four jobs never has three running; the slot is recorded full", async (t) => {
  const dir = tmpdir(t);
  const port = await freePort();
  const jobs = ["g1", "g2", "g3", "g4"]
    .map((n) => `  ${n}:\n    schedule: "* * * * * *"\n    command: sleep 1.2\n    group: heavy\n`)
    .join("");
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\nhttp: 127.0.0.1:${port}\ngroups: { heavy: { max_running: 2 } }\njobs:\n${jobs}`,
  );
  const d = startDaemon(t, cfg);
  const full = () => readStoreIn(dir).runs({ reason: "group heavy full (2 of 2 running)" });
  await waitFor(
    () => readStoreIn(dir).runs({ status: "ok" }).length >= 6 && full().length >= 3,
    "runs, and slots skipped for the full group",
    30_000,
  );
  const st = JSON.parse(cli(["status", "-c", cfg, "--json"]).stdout);
  assert.equal(st.groups.length, 1);
  assert.equal(st.groups[0].name, "heavy");
  assert.equal(st.groups[0].max_running, 2);
  assert.ok(st.groups[0].running <= 2);
  // The page shows the group with its runs against its cap.
  const page = await request(port);
  assert.equal(page.status, 200);
  assert.match(page.body, /<li data-group="heavy"[^>]*>group heavy: [0-2] of 2 running<\/li>/);
  await stopDaemon(d);
  const ran = readStoreIn(dir).ran();
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
  await waitFor(() => readStoreIn(dir).runs({ job: "blocker" }).length === 1, "blocker");
  const d = startDaemon(t, cfg);
  // One slot of each waits; their next ones are skipped (queue keeps one per job).
  await waitFor(
    () =>
      readStoreIn(dir).runs({
        reason: "group one full (1 of 1 running) and a slot is already waiting",
      }).length >= 4,
    "later slots skipped behind the waiting ones",
  );
  writeFileSync(gate, "");
  assert.equal((await blocker.exited).code, 0);
  await waitFor(
    () => readStoreIn(dir).runs({ job: ["lo", "hi"], status: "ok" }).length >= 2,
    "the waiting slots ran",
  );
  await stopDaemon(d);
  const [first, second] = readStoreIn(dir).ran({ job: ["lo", "hi"] });
  assert.equal(first.slot, second.slot, "the two waited for the same slot");
  assert.deepEqual([first.job, second.job], ["hi", "lo"]);
  const end = readStoreIn(dir).runs({ job: "blocker" })[0].finished_at;
  assert.ok(first.slot < end, "they waited for the blocker");
});

test("validate: an unknown group, bad lock names and a bad priority are errors with file, line and key", (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `groups:
  heavy: { max_running: 2 }
  light: { max_running: 0 }
jobs:
  a:
    schedule: "@daily"
    command: "true"
    locks: [db, "Not ok", db]
    group: heavyy
    priority: high
  b:
    schedule: "@daily"
    command: "true"
    locks: db
`,
  );
  const r = cli(["validate", "-c", cfg]);
  assert.equal(r.code, 2);
  assert.deepEqual(r.stderr.trim().split("\n"), [
    `${cfg}:3:25: groups.light.max_running: expected a whole number (1 or more), got 0`,
    `${cfg}:8:17: jobs.a.locks[1]: expected a lock name (1-64 of a-z 0-9 _ . -, starting with a letter or digit), got "Not ok"`,
    `${cfg}:8:27: jobs.a.locks[2]: "db" is listed twice`,
    `${cfg}:10:15: jobs.a.priority: expected a number, e.g. 10, got "high"`,
    `${cfg}:14:12: jobs.b.locks: expected a list of lock names, e.g. [db], got "db"`,
  ]);
  // With a valid groups: map, an unknown name says which it may have meant.
  const cfg2 = writeConfig(
    dir,
    `groups: { heavy: { max_running: 2 } }\njobs:\n  a:\n    schedule: "@daily"\n    command: "true"\n    group: heavyy\n`,
    "two.yaml",
  );
  const r2 = cli(["validate", "-c", cfg2]);
  assert.equal(r2.code, 2);
  assert.equal(
    r2.stderr.trim(),
    `${cfg2}:6:12: jobs.a.group: unknown group "heavyy" (did you mean "heavy"?)`,
  );
  const none = writeConfig(
    dir,
    `jobs:\n  a:\n    schedule: "@daily"\n    command: "true"\n    group: heavy\n`,
    "three.yaml",
  );
  assert.match(
    cli(["validate", "-c", none]).stderr,
    /three\.yaml:5:12: jobs\.a\.group: unknown group "heavy" \(there is no top-level groups:\)/,
  );
});

test("import-crontab: a flock file several lines share becomes a named lock, the wrapper removed with a comment", (t) => {
  const dir = tmpdir(t);
  const crontab = `${dir}/crontab`;
  writeFileSync(
    crontab,
    `0 2 * * * flock -n /var/lock/db.lock /usr/local/bin/backup
30 * * * * flock -x -w 30 /var/lock/db.lock -c "vacuumdb --all"
*/5 * * * * flock /var/lock/db.lock /usr/local/bin/import --fast
0 3 * * * flock -n /tmp/own.lock /bin/solo
`,
  );
  const r = cli(["import-crontab", crontab]);
  assert.equal(r.code, 0, r.stderr);
  const yaml = writeConfig(dir, r.stdout, "imported.yaml");
  const v = cli(["validate", "-c", yaml]);
  assert.equal(v.code, 0, v.stderr);
  const { jobs } = parse(r.stdout);
  assert.deepEqual(jobs.backup, {
    schedule: "0 2 * * *",
    command: "/usr/local/bin/backup",
    overlap: "skip",
    locks: ["db"],
  });
  assert.deepEqual(jobs.vacuumdb.locks, ["db"]);
  assert.equal(jobs.vacuumdb.overlap, "queue");
  assert.equal(jobs.vacuumdb.command, "vacuumdb --all");
  assert.deepEqual(jobs.import.locks, ["db"]);
  assert.equal(jobs.import.command, "/usr/local/bin/import --fast");
  // A lock file of one line only is the job's own overlap lock, as before.
  assert.deepEqual(jobs.solo, { schedule: "0 3 * * *", command: "/bin/solo", overlap: "skip" });
  assert.match(
    r.stdout,
    /# removed `flock -n \/var\/lock\/db\.lock`: other lines lock \/var\/lock\/db\.lock too: `locks: \[db\]`/,
  );
});

test("a daemon killed and restarted adopts a running run with its named lock: the lock stays held", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s
jobs:
  a:
    schedule: "* * * * * *"
    command: sleep 60
    kill_grace: 1s
    locks: [db]
  b:
    schedule: "* * * * * *"
    command: "true"
    locks: [db]
`,
  );
  let d = startDaemon(t, cfg);
  // After the restart the catch-up of the slot missed while it was down waits for db too, and
  // later slots say so (`... and a slot is already waiting`).
  const heldBy = (id) =>
    readStoreIn(dir)
      .runs({ job: "b" })
      .filter((r) => r.reason?.startsWith(`lock db held by a (run ${id})`));
  await waitFor(
    () =>
      readStoreIn(dir)
        .runs({ job: "a" })
        .filter((r) => r.pid !== null).length === 1,
    "a running",
  );
  const [run] = readStoreIn(dir).runs({ job: "a" });
  await killDaemon(d);
  const before = heldBy(run.id).length;
  d = startDaemon(t, cfg);
  await waitFor(() => heldBy(run.id).length >= before + 2, "b skipped for the adopted run's lock");
  assert.equal(readStoreIn(dir).runs({ id: run.id })[0].status, "running");
  assert.deepEqual(
    readStoreIn(dir)
      .ran({ job: "b" })
      .map((r) => ({ id: r.id })),
    [],
    "b never ran while a's run held db",
  );
  await stopDaemon(d);
});

test("the admission decision and the turn among waiting slots (pure)", async () => {
  const { decideAdmission } = await import("../dist/daemon/admit.js");
  const { byTurn, inTurn } = await import("../dist/daemon/waiting.js");
  const free = {
    locks: [{ name: "db", holder: null }],
    group: { name: "heavy", running: 1, maxRunning: 2 },
  };
  const held = {
    ...free,
    locks: [{ name: "db", holder: { job: "backup", runId: 812, node: "n1" } }],
  };
  const full = { ...free, group: { name: "heavy", running: 2, maxRunning: 2 } };
  const at = (policy, trigger = "schedule", waiting = false) => ({ policy, trigger, waiting });
  assert.deepEqual(decideAdmission(at("skip"), free), { kind: "start" });
  assert.deepEqual(decideAdmission(at("skip"), held), {
    kind: "skip",
    reason: "lock db held by backup (run 812)",
  });
  assert.deepEqual(decideAdmission(at("queue"), full), {
    kind: "wait",
    reason: "group heavy full (2 of 2 running)",
  });
  assert.deepEqual(decideAdmission(at("queue", "schedule", true), held), {
    kind: "skip",
    reason: "lock db held by backup (run 812) and a slot is already waiting",
  });
  // A manual run never waits (exit 75); a retry or catch-up always does, whatever the policy.
  assert.equal(decideAdmission(at("queue", "manual"), held).kind, "skip");
  assert.equal(decideAdmission(at("skip", "retry"), full).kind, "wait");
  assert.equal(decideAdmission(at("replace"), held).kind, "skip");
  // The turn: the earlier slot first, then the higher priority; other writes keep their places.
  const w = (name, slot, priority, group = "heavy", record) => ({
    job: { name, priority, group },
    p: { slot },
    ...(record ? { record } : {}),
  });
  const writes = [w("lo", 2000, 0), w("x", 1000, 9, null), w("hi", 2000, 5), w("old", 1000, -1)];
  assert.deepEqual(
    inTurn(writes).map((x) => x.job.name),
    ["old", "x", "hi", "lo"],
  );
  assert.ok(byTurn(w("a", 1000, 0), w("b", 1000, 1)) > 0);
});
