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
  rows,
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
  const first = await waitFor(
    () => rows(dir, "SELECT * FROM runs WHERE status = 'running' AND pid IS NOT NULL")[0],
    "a running run",
  );
  killGroupsAfter(t, [first.pgid]);
  d.kill("SIGKILL");
  await d.exited;
  assert.ok(alive(first.pid), "the job outlives its daemon (own process group)");
  d = startDaemon(t, cfg);
  // While the orphan lives, every slot is skipped with the orphan as the holder.
  await waitFor(
    () =>
      rows(dir, "SELECT * FROM runs WHERE status = 'skipped' AND started_at > ?", first.started_at)
        .length >= 2,
    "skips behind the orphan",
  );
  const running = rows(dir, "SELECT * FROM runs WHERE status = 'running'");
  assert.deepEqual(
    running.map((r) => r.id),
    [first.id],
    "no second copy",
  );
  assert.match(
    rows(dir, "SELECT reason FROM runs WHERE status = 'skipped' ORDER BY id DESC LIMIT 1")[0]
      .reason,
    new RegExp(`run ${first.id} holds`),
  );
  assert.equal(
    JSON.parse(cli(["status", "-c", cfg, "--json"]).stdout).jobs[0].lock.run_id,
    first.id,
  );
  fs.writeFileSync(flag, "");
  const ended = await waitFor(
    () => rows(dir, "SELECT * FROM runs WHERE id = ? AND status != 'running'", first.id)[0],
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
  const first = await waitFor(
    () => rows(dir, "SELECT * FROM runs WHERE status = 'running' AND pid IS NOT NULL")[0],
    "the manual run",
  );
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
    () => rows(dir, "SELECT * FROM runs WHERE trigger = 'resume' AND pid IS NOT NULL")[0],
    "a resume run",
  );
  killGroupsAfter(t, [resumed.pgid]);
  assert.equal(
    rows(dir, "SELECT status FROM runs WHERE id = ?", first.id)[0].status,
    "interrupted",
  );
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

/** A store whose job was last scanned `agoMs` ago: as if the daemon had been down since. */
function fakeDowntime(dir, job, agoMs) {
  const store = SqliteStore.open(path.join(dir, ".cronvisor"), { create: true });
  store.ensureJob(job, Date.now() - agoMs);
  store.db.prepare("UPDATE jobs SET scanned_to = ? WHERE name = ?").run(Date.now() - agoMs, job);
  store.close();
}

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
    await waitFor(() => rows(dir, "SELECT pid FROM daemon")[0]?.pid === d.pid, "daemon up");
    await waitFor(
      () =>
        rows(dir, "SELECT COUNT(*) n FROM runs WHERE trigger = 'catchup' AND status = 'ok'")[0]
          .n === expectRuns &&
        rows(dir, "SELECT COUNT(*) n FROM runs WHERE status = 'missed'")[0].n === 10 - expectRuns,
      `${expectRuns} catch-up runs`,
    );
    d.kill("SIGTERM");
    await d.exited;
    const missed = rows(
      dir,
      "SELECT COUNT(*) n FROM runs WHERE status = 'missed' AND reason = 'daemon down'",
    )[0].n;
    const caught = rows(dir, "SELECT slot FROM runs WHERE trigger = 'catchup' ORDER BY id").map(
      (r) => r.slot,
    );
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
    () => rows(dir, "SELECT * FROM runs WHERE status = 'ok'").length >= 1,
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
    const r = rows(dir, "SELECT * FROM runs WHERE status = 'running' AND pid IS NOT NULL");
    return r.length === 2 ? r : null;
  }, "both running");
  d.kill("SIGTERM");
  const exit = await d.exited;
  assert.equal(exit.code, 0);
  assert.equal(fs.readFileSync(cleaned, "utf8"), "bye\n");
  for (const r of running) assert.equal(alive(r.pid), false);
  const after = rows(
    dir,
    "SELECT job, status, reason FROM runs WHERE id IN (?, ?) ORDER BY job",
    running[0].id,
    running[1].id,
  );
  assert.deepEqual(
    after.map((r) => [r.job, r.status]),
    [
      ["polite", "killed"],
      ["stubborn", "killed"],
    ],
  );
  assert.equal(rows(dir, "SELECT COUNT(*) n FROM runs WHERE status = 'running'")[0].n, 0);
});

test("SIGHUP with a broken config keeps the old schedule and shows the error; a fixed one adds a job", async (t) => {
  const dir = tmpdir(t);
  const good = `heartbeat: 1s\njobs:\n  a:\n    schedule: "* * * * * *"\n    command: "true"\n`;
  const cfg = writeConfig(dir, good);
  const d = startDaemon(t, cfg);
  await waitFor(
    () => rows(dir, "SELECT * FROM runs WHERE job = 'a' AND status = 'ok'").length >= 1,
    "a runs",
  );
  writeConfig(dir, `${good}  b:\n    schedule: "* * * * * *"\n    comand: oops\n`);
  const r = cli(["reload", "-c", cfg]);
  assert.equal(r.code, 2);
  d.kill("SIGHUP");
  const errRow = await waitFor(
    () => rows(dir, "SELECT config_error FROM daemon")[0]?.config_error,
    "config_error recorded",
  );
  assert.match(errRow, /comand/);
  const n = rows(dir, "SELECT COUNT(*) n FROM runs WHERE job = 'a' AND status = 'ok'")[0].n;
  await waitFor(
    () => rows(dir, "SELECT COUNT(*) n FROM runs WHERE job = 'a' AND status = 'ok'")[0].n > n,
    "old schedule still runs",
  );
  writeConfig(dir, `${good}  b:\n    schedule: "* * * * * *"\n    command: "true"\n`);
  const ok = cli(["reload", "-c", cfg]);
  assert.equal(ok.code, 0, ok.stderr);
  await waitFor(
    () => rows(dir, "SELECT * FROM runs WHERE job = 'b' AND status = 'ok'").length >= 1,
    "the new job runs",
  );
  assert.equal(rows(dir, "SELECT config_error FROM daemon")[0].config_error, null);
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
    () =>
      rows(dir, "SELECT * FROM runs WHERE job = 'r' AND status = 'killed' AND reason = 'replaced'")
        .length >= 1,
    "a replaced run",
  );
  await waitFor(
    () => rows(dir, "SELECT COUNT(*) n FROM runs WHERE job = 'a' AND status = 'running'")[0].n >= 2,
    "concurrent allow runs",
  );
  await waitFor(
    () => rows(dir, "SELECT COUNT(*) n FROM runs WHERE job = 'q' AND status = 'ok'")[0].n >= 2,
    "queued runs complete",
  );
  d.kill("SIGTERM");
  await d.exited;
  const replaced = rows(dir, "SELECT * FROM runs WHERE job = 'r' AND reason = 'replaced'")[0];
  assert.equal(replaced.revoked, 1);
  // queue: a run starts right after the previous ends (never two at once), extra slots skipped.
  const q = rows(dir, "SELECT * FROM runs WHERE job = 'q' AND status = 'ok' ORDER BY id");
  for (let i = 1; i < q.length; i++)
    assert.ok(q[i].started_at >= q[i - 1].finished_at - 5, "queue never overlaps");
  assert.ok(
    rows(dir, "SELECT COUNT(*) n FROM runs WHERE job = 'q' AND status = 'skipped'")[0].n >= 1,
    "a full queue skips",
  );
  const allowFences = rows(dir, "SELECT fence FROM runs WHERE job = 'a' AND fence IS NOT NULL").map(
    (r) => r.fence,
  );
  assert.equal(new Set(allowFences).size, allowFences.length, "each allow run has its own fence");
});

test("retries: a failing run is retried with backoff, CRONVISOR_ATTEMPT counting up", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  flaky:\n    schedule: "0 0 1 1 *"\n    command: "echo attempt=$CRONVISOR_ATTEMPT trigger=$CRONVISOR_TRIGGER; exit 1"\n    retries: { attempts: 2, backoff: 200ms }\n`,
  );
  const d = startDaemon(t, cfg);
  await waitFor(() => rows(dir, "SELECT pid FROM daemon")[0]?.pid === d.pid, "daemon up");
  // A manual run does not retry (the operator sees the failure at once)...
  assert.equal(cli(["run", "flaky", "-c", cfg]).code, 1);
  d.kill("SIGTERM");
  await d.exited;
  // ...a catch-up of a missed slot does.
  const store = SqliteStore.open(path.join(dir, ".cronvisor"), { create: false });
  store.db
    .prepare("UPDATE jobs SET scanned_to = ? WHERE name = 'flaky'")
    .run(Date.UTC(new Date().getUTCFullYear(), 0, 1) - 1000);
  store.close();
  writeConfig(
    dir,
    fs.readFileSync(cfg, "utf8").replace("retries", "catchup_window: 366d\n    retries"),
  );
  const d2 = startDaemon(t, cfg);
  const runs = await waitFor(() => {
    const r = rows(
      dir,
      "SELECT * FROM runs WHERE job = 'flaky' AND trigger IN ('catchup', 'retry') ORDER BY id",
    );
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
