// Lifecycle with real processes: a daemon SIGKILLed alone or with its jobs, downtime and catch-up,
// graceful stop, reload, overlap policies, retries.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { SqliteStore } from "../dist/store/sqlite-store.js";
import {
  alive,
  cli,
  killGroup,
  killGroupsAfter,
  readStoreIn,
  setJob,
  spawnCli,
  startDaemon,
  tmpdir,
  waitFor,
  writeConfig,
  spawnerOf,
} from "./helpers.js";

test("daemon SIGKILLed alone: the restarted daemon adopts the live run, starts no second copy, records its end", async (t) => {
  const dir = tmpdir(t);
  const flag = path.join(dir, "finish");
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  long:\n    schedule: "* * * * * *"\n    command: "while [ ! -e ${flag} ]; do sleep 0.1; done; exit 4"\n`,
  );
  let d = startDaemon(t, cfg);
  const first = await waitFor(() => readStoreIn(dir).spawned()[0], "a running run");
  killGroupsAfter(t, [first.pgid]);
  d.kill("SIGKILL");
  await d.exited;
  assert.ok(alive(first.pid), "the job outlives its daemon (own process group)");
  d = startDaemon(t, cfg);
  // While the orphan lives, every slot is skipped with the orphan as the holder.
  await waitFor(
    () =>
      readStoreIn(dir)
        .runs({ status: "skipped" })
        .filter((r) => r.started_at > first.started_at).length >= 2,
    "skips behind the orphan",
  );
  const running = readStoreIn(dir).runs({ status: "running" });
  assert.deepEqual(
    running.map((r) => r.id),
    [first.id],
    "no second copy",
  );
  assert.match(
    readStoreIn(dir).runs({ status: "skipped" }).at(-1).reason,
    new RegExp(`run ${first.id} holds`),
  );
  assert.equal(
    JSON.parse(cli(["status", "-c", cfg, "--json"]).stdout).jobs[0].lock.run_id,
    first.id,
  );
  fs.writeFileSync(flag, "");
  const ended = await waitFor(
    () => readStoreIn(dir).ended({ id: first.id })[0],
    "the orphan's end recorded",
  );
  assert.equal(ended.status, "failed");
  assert.equal(ended.exit_code, 4, "exit status learned from the run's exit file");
  d.kill("SIGTERM");
  await d.exited;
});

test("daemon and jobs SIGKILLed together: the run is recorded interrupted and resumed per catchup", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  work:\n    schedule: "0 0 1 1 *"\n    command: "echo attempt=$CRONVISOR_ATTEMPT trigger=$CRONVISOR_TRIGGER; sleep 30"\n    catchup: once\n    catchup_window: 1h\n    kill_grace: 1s\n`,
  );
  const run = spawnCli(["run", "work", "-c", cfg], { detached: true });
  const first = await waitFor(() => readStoreIn(dir).spawned()[0], "the manual run");
  // SIGKILL the owner, its spawner and its job's whole group at once: nothing is left to record
  // the end. The owner first: killed second, it could still see its child die and record that.
  // (The spawner alone left alive would write the job's exit status: its end would be known.)
  const spawner = spawnerOf(run.pid);
  process.kill(run.pid, "SIGKILL");
  if (spawner !== null) process.kill(spawner, "SIGKILL");
  killGroup(first.pgid);
  await run.exited;
  await waitFor(() => !alive(first.pid), "job gone");
  const d = startDaemon(t, cfg);
  const resumed = await waitFor(
    () =>
      readStoreIn(dir)
        .runs({ trigger: "resume" })
        .find((r) => r.pid !== null),
    "a resume run",
  );
  killGroupsAfter(t, [resumed.pgid]);
  assert.equal(readStoreIn(dir).runs({ id: first.id })[0].status, "interrupted");
  assert.equal(resumed.attempt, 2);
  await waitFor(
    () =>
      fs.existsSync(resumed.log_path) &&
      fs.readFileSync(resumed.log_path, "utf8").includes("trigger=resume"),
    "resume log",
  );
  d.kill("SIGTERM");
  await d.exited;
});

/** A store whose `job` was last scanned up to `at`: as if the daemon had been down since. */
function scannedTo(dir, job, at, create = true) {
  const store = SqliteStore.open(path.join(dir, ".cronvisor"), { create });
  if (create) store.ensureJob(job, at);
  setJob(store.db, job, { scanned_to: at });
  store.close();
}

/** A store whose job was last scanned `agoMs` ago: as if the daemon had been down since. */
const fakeDowntime = (dir, job, agoMs) => scannedTo(dir, job, Date.now() - agoMs);

for (const [policy, expectRuns] of [
  ["skip", 0],
  ["once", 1],
  ["all", 5],
]) {
  test(`downtime across N slots with catchup: ${policy}: exact missed and catchup counts`, async (t) => {
    const dir = tmpdir(t);
    // A slot every 10 minutes and ~100 minutes down: exactly 10 slots missed. The window is set
    // from the time since the latest slot so that exactly 5 of them fall inside it.
    const now = Date.now();
    const lastSlot = Math.floor(now / 600_000) * 600_000;
    const windowS = Math.ceil((now - lastSlot) / 1000) + 45 * 60;
    const cfg = writeConfig(
      dir,
      `heartbeat: 1s\njobs:\n  c:\n    schedule: "*/10 * * * *"\n    command: "echo $CRONVISOR_SLOT"\n    catchup: ${policy}\n    catchup_window: ${windowS}s\n`,
    );
    // Scanned up to one second after the 11th slot back: the 10 after it were missed.
    fakeDowntime(dir, "c", now - (lastSlot - 10 * 600_000 + 1000));
    const d = startDaemon(t, cfg);
    await waitFor(() => readStoreIn(dir).daemon()?.pid === d.pid, "daemon up");
    await waitFor(
      () =>
        readStoreIn(dir).runs({ trigger: "catchup", status: "ok" }).length === expectRuns &&
        readStoreIn(dir).runs({ status: "missed" }).length === 10 - expectRuns,
      `${expectRuns} catch-up runs`,
    );
    d.kill("SIGTERM");
    await d.exited;
    const missed = readStoreIn(dir).runs({ status: "missed", reason: "daemon down" }).length;
    const caught = readStoreIn(dir)
      .runs({ trigger: "catchup" })
      .map((r) => r.slot);
    assert.equal(missed + caught.length, 10, "every missed slot has exactly one disposition");
    assert.equal(caught.length, expectRuns);
    if (policy === "once") assert.equal(caught[0], lastSlot, "once runs the latest missed slot");
    if (policy === "all") assert.deepEqual(caught, [...caught].sort(), "all runs them in order");
  });
}

test("a slot stamp in the future (clock was wrong) does not block the job", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  f:\n    schedule: "* * * * * *"\n    command: "true"\n`,
  );
  fakeDowntime(dir, "f", -86_400_000); // scanned_to = tomorrow
  const d = startDaemon(t, cfg);
  await waitFor(
    () => readStoreIn(dir).runs({ status: "ok" }).length >= 1,
    "runs despite the future stamp",
  );
  assert.match(d.err, /in the future/);
  d.kill("SIGTERM");
  await d.exited;
});

test("SIGTERM: a job that traps TERM cleans up within the grace; one that ignores it is killed after", async (t) => {
  const dir = tmpdir(t);
  const cleaned = path.join(dir, "cleaned");
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  polite:\n    schedule: "* * * * * *"\n    command: "trap 'echo bye > ${cleaned}; exit 0' TERM; while :; do sleep 0.1; done"\n    kill_grace: 5s\n  stubborn:\n    schedule: "* * * * * *"\n    command: "trap '' TERM; while :; do sleep 0.1; done"\n    kill_grace: 1s\n`,
  );
  const d = startDaemon(t, cfg);
  const running = await waitFor(() => {
    const r = readStoreIn(dir).spawned();
    return r.length === 2 ? r : null;
  }, "both running");
  d.kill("SIGTERM");
  const exit = await d.exited;
  assert.equal(exit.code, 0);
  assert.equal(fs.readFileSync(cleaned, "utf8"), "bye\n");
  for (const r of running) assert.equal(alive(r.pid), false);
  const after = readStoreIn(dir)
    .runs({ id: [running[0].id, running[1].id] })
    .sort((x, y) => (x.job < y.job ? -1 : 1));
  assert.deepEqual(
    after.map((r) => [r.job, r.status]),
    [
      ["polite", "killed"],
      ["stubborn", "killed"],
    ],
  );
  assert.equal(readStoreIn(dir).runs({ status: "running" }).length, 0);
});

test("SIGHUP with a broken config keeps the old schedule and shows the error; a fixed one adds a job", async (t) => {
  const dir = tmpdir(t);
  const good = `heartbeat: 1s\njobs:\n  a:\n    schedule: "* * * * * *"\n    command: "true"\n`;
  const cfg = writeConfig(dir, good);
  const d = startDaemon(t, cfg);
  await waitFor(() => readStoreIn(dir).runs({ job: "a", status: "ok" }).length >= 1, "a runs");
  writeConfig(dir, `${good}  b:\n    schedule: "* * * * * *"\n    comand: oops\n`);
  const r = cli(["reload", "-c", cfg]);
  assert.equal(r.code, 2);
  d.kill("SIGHUP");
  const errRow = await waitFor(
    () => readStoreIn(dir).daemon()?.config_error,
    "config_error recorded",
  );
  assert.match(errRow, /comand/);
  const n = readStoreIn(dir).runs({ job: "a", status: "ok" }).length;
  await waitFor(
    () => readStoreIn(dir).runs({ job: "a", status: "ok" }).length > n,
    "old schedule still runs",
  );
  writeConfig(dir, `${good}  b:\n    schedule: "* * * * * *"\n    command: "true"\n`);
  const ok = cli(["reload", "-c", cfg]);
  assert.equal(ok.code, 0, ok.stderr);
  await waitFor(
    () => readStoreIn(dir).runs({ job: "b", status: "ok" }).length >= 1,
    "the new job runs",
  );
  assert.equal(readStoreIn(dir).daemon().config_error, null);
  d.kill("SIGTERM");
  await d.exited;
});

test("overlap policies: queue waits for one, replace kills the old run (fence revoked), allow runs concurrently", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  q:\n    schedule: "* * * * * *"\n    command: sleep 2.5\n    overlap: queue\n  r:\n    schedule: "*/2 * * * * *"\n    command: sleep 30\n    overlap: replace\n    kill_grace: 1s\n  a:\n    schedule: "* * * * * *"\n    command: sleep 2.5\n    overlap: allow\n`,
  );
  const d = startDaemon(t, cfg);
  await waitFor(
    () => readStoreIn(dir).runs({ job: "r", status: "killed", reason: "replaced" }).length >= 1,
    "a replaced run",
  );
  await waitFor(
    () => readStoreIn(dir).runs({ job: "a", status: "running" }).length >= 2,
    "concurrent allow runs",
  );
  await waitFor(
    () => readStoreIn(dir).runs({ job: "q", status: "ok" }).length >= 2,
    "queued runs complete",
  );
  d.kill("SIGTERM");
  await d.exited;
  const replaced = readStoreIn(dir).runs({ job: "r", reason: "replaced" })[0];
  assert.equal(replaced.revoked, 1);
  // queue: a run starts right after the previous ends (never two at once), extra slots skipped.
  const q = readStoreIn(dir).runs({ job: "q", status: "ok" });
  for (let i = 1; i < q.length; i++)
    assert.ok(q[i].started_at >= q[i - 1].finished_at - 5, "queue never overlaps");
  assert.ok(
    readStoreIn(dir).runs({ job: "q", status: "skipped" }).length >= 1,
    "a full queue skips",
  );
  const allowFences = readStoreIn(dir)
    .runs({ job: "a" })
    .filter((r) => r.fence !== null)
    .map((r) => r.fence);
  assert.equal(new Set(allowFences).size, allowFences.length, "each allow run has its own fence");
});

test("retries: a failing run is retried with backoff, CRONVISOR_ATTEMPT counting up", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  flaky:\n    schedule: "0 0 1 1 *"\n    command: "echo attempt=$CRONVISOR_ATTEMPT trigger=$CRONVISOR_TRIGGER; exit 1"\n    retries: { attempts: 2, backoff: 200ms }\n`,
  );
  const d = startDaemon(t, cfg);
  await waitFor(() => readStoreIn(dir).daemon()?.pid === d.pid, "daemon up");
  // A manual run does not retry (the operator sees the failure at once)...
  assert.equal(cli(["run", "flaky", "-c", cfg]).code, 1);
  d.kill("SIGTERM");
  await d.exited;
  // ...a catch-up of a missed slot does.
  scannedTo(dir, "flaky", Date.UTC(new Date().getUTCFullYear(), 0, 1) - 1000, false);
  writeConfig(
    dir,
    fs.readFileSync(cfg, "utf8").replace("retries", "catchup_window: 366d\n    retries"),
  );
  const d2 = startDaemon(t, cfg);
  const runs = await waitFor(() => {
    const r = readStoreIn(dir).runs({ job: "flaky", trigger: ["catchup", "retry"] });
    return r.length === 3 && r.every((x) => x.status === "failed") ? r : null;
  }, "a run and two retries");
  assert.deepEqual(
    runs.map((r) => [r.trigger, r.attempt]),
    [
      ["catchup", 1],
      ["retry", 2],
      ["retry", 3],
    ],
  );
  assert.ok(runs[2].started_at - runs[1].finished_at >= 390, "backoff doubles");
  assert.equal(runs[1].slot, runs[0].slot, "a retry keeps its slot");
  assert.equal(fs.readFileSync(runs[2].log_path, "utf8"), "attempt=3 trigger=retry\n");
  d2.kill("SIGTERM");
  await d2.exited;
});
