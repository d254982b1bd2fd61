// Faults injected into the built CLI as real processes (issue 7): a daemon stopped (SIGSTOP) past
// every staleness, a daemon SIGKILLed alone, the wall clock stepped forward and back under
// libfaketime, a store with pages overwritten. Each test reads the store and `status` afterwards
// and asserts what must hold: no second copy, every slot one disposition, nothing silently lost.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import { SqliteStore } from "../dist/store/sqlite-store.js";
import {
  alive,
  cli,
  killGroupsAfter,
  scheduleSlots,
  startDaemon,
  statusJson,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
  readStore,
} from "./helpers.js";
import { needs } from "./needs.js";

/**
 * Every slot of `job` from its first to its last recorded one has exactly one disposition (a
 * run, `skipped` or `missed`): `* * * * * *` slots one second apart, none twice, none left out.
 */
function assertEverySlotOnce(stateDir, job) {
  const dup = readStore(stateDir).doubled({ job, trigger: "schedule" });
  assert.deepEqual(dup, [], `${job}: no slot has two dispositions`);
  const { slots, gaps } = scheduleSlots(stateDir, job);
  assert.ok(slots.length >= 2, `${job}: slots recorded`);
  assert.deepEqual(gaps, [], `${job}: every slot between the first and the last has a disposition`);
  return slots;
}

test("daemon SIGSTOPped past every staleness: no second copy, status unresponsive and CRITICAL; SIGCONT recovers", async (t) => {
  const dir = tmpdir(t);
  const state = path.join(dir, ".cronvisor");
  const flag = path.join(dir, "finish");
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  long:\n    schedule: "* * * * * *"\n    command: "while [ ! -e ${flag} ]; do sleep 0.1; done"\n    catchup: skip\n    log: { keep_runs: 100000 }\n`,
  );
  const d = startDaemon(t, cfg);
  const first = await waitFor(
    () =>
      readStore(state)
        .runs({ status: "running" })
        .filter((r) => r.pid !== null)[0],
    "the long run",
  );
  killGroupsAfter(t, [first.pgid]);
  await waitFor(() => statusJson(cfg).daemon.state === "running", "daemon beating");

  d.kill("SIGSTOP");
  const stoppedAt = Date.now();
  // Alive but not beating: more than 3 heartbeat intervals without a beat.
  const st = await waitFor(
    () => {
      const s = statusJson(cfg);
      return s.daemon.state === "unresponsive" ? s : null;
    },
    "status: unresponsive",
    15_000,
    200,
  );
  assert.equal(st.daemon.pid, d.pid);
  assert.ok(st.daemon.heartbeat_age_s > 3, `heartbeat age ${st.daemon.heartbeat_age_s}`);
  assert.equal(st.jobs[0].lock.run_id, first.id, "the stopped daemon's run still holds the lock");
  assert.equal(st.jobs[0].lock.pid, first.pid);
  // Longer than any staleness a lock could have (5 s without a beat), and long enough that the
  // stop spans the 4 slots the check of missed slots below needs: the last beat may have come
  // just before the stop, and the calls below may take little time.
  await waitFor(
    () => statusJson(cfg).daemon.heartbeat_age_s >= 6,
    "6 s without a beat",
    15_000,
    200,
  );
  const check = cli(["status", "-c", cfg, "--check"]);
  assert.equal(check.code, 2, check.stdout + check.stderr);
  assert.match(check.stdout, /^CRITICAL: daemon unresponsive\b/m);
  const manual = cli(["run", "long", "-c", cfg]);
  assert.equal(manual.code, 75, manual.stderr);
  assert.match(
    manual.stderr,
    new RegExp(
      `^cronvisor: long is running: run ${first.id} \\(pid ${first.pid}, since \\S+\\) holds the lock; nothing was started\\.$`,
      "m",
    ),
  );
  const second = cli(["daemon", "-c", cfg], { timeout: 15_000 });
  assert.equal(second.code, 1, second.stderr);
  assert.match(second.stderr, new RegExp(`another cronvisor daemon \\(pid ${d.pid},`));
  assert.deepEqual(
    readStore(state)
      .runs({ status: "running" })
      .map((r) => r.id),
    [first.id],
    "one running run while the daemon is stopped",
  );
  assert.equal(
    readStore(state).runs({ trigger: "manual" }).length,
    0,
    "the refused run left no row",
  );
  assert.ok(alive(first.pid), "the job keeps running while its daemon is stopped");

  d.kill("SIGCONT");
  const contAt = Date.now();
  await waitFor(
    () => statusJson(cfg).daemon.state === "running",
    "running again after SIGCONT",
    15_000,
    100,
  );
  // The timer fired late: every slot of the stop is recorded missed, and an event says why.
  const stopSlots = [];
  for (let s = Math.ceil((stoppedAt + 1) / 1000) * 1000; s <= contAt - 1000; s += 1000)
    stopSlots.push(s);
  assert.ok(stopSlots.length >= 4, `${stopSlots.length} slots passed during the stop`);
  await waitFor(() => {
    const rows = readStore(state)
      .runs({ status: "missed", reason: "timer late (suspend or clock step)" })
      .filter((r) => r.slot >= stopSlots[0] && r.slot <= stopSlots[stopSlots.length - 1]);
    return rows.length === stopSlots.length;
  }, "every slot of the stop recorded missed");
  const late = readStore(state).events({ job: "long", kind: "late" });
  assert.ok(
    late.some((e) =>
      /^timer fired \d+ ms after slot \S+ \(suspend or clock step\); \d+ older slot\(s\) recorded missed$/.test(
        e.detail,
      ),
    ),
    JSON.stringify(late),
  );
  assert.deepEqual(
    readStore(state)
      .runs({ status: "running" })
      .map((r) => r.id),
    [first.id],
    "still one copy after SIGCONT",
  );

  // Runs continue: the long run ends, the next slot runs.
  fs.writeFileSync(flag, "");
  const ended = await waitFor(
    () => readStore(state).ended({ id: first.id })[0],
    "the long run's end",
  );
  assert.equal(ended.status, "ok");
  await waitFor(
    () =>
      readStore(state)
        .runs({ status: "ok", trigger: "schedule" })
        .filter((r) => r.id > first.id).length >= 2,
    "runs after the stop",
  );
  await stopDaemon(d);
  assertEverySlotOnce(state, "long");
  const withProcess = readStore(state)
    .runs()
    .filter((r) => r.pid !== null && r.id !== first.id);
  for (const r of withProcess)
    assert.ok(r.started_at >= ended.finished_at, `run ${r.id} started after the long run ended`);
});

test("daemon SIGKILLed alone with two jobs: the orphan's lock holds with no daemon at all; the restart adopts it; every slot of both jobs has one disposition", async (t) => {
  const dir = tmpdir(t);
  const state = path.join(dir, ".cronvisor");
  const flag = path.join(dir, "finish");
  const cfg = writeConfig(
    dir,
    [
      "heartbeat: 1s",
      "defaults: { catchup: skip, log: { keep_runs: 100000 } }",
      "jobs:",
      "  long:",
      '    schedule: "* * * * * *"',
      `    command: "while [ ! -e ${flag} ]; do sleep 0.1; done"`,
      "  tick:",
      '    schedule: "* * * * * *"',
      "    command: echo tick $CRONVISOR_SLOT",
      "",
    ].join("\n"),
  );
  let d = startDaemon(t, cfg);
  const first = await waitFor(() => readStore(state).spawned({ job: "long" })[0], "the long run");
  killGroupsAfter(t, [first.pgid]);
  await waitFor(
    () => readStore(state).runs({ job: "tick", status: "ok" }).length >= 2,
    "tick runs",
  );
  d.kill("SIGKILL");
  await d.exited;
  assert.ok(alive(first.pid), "the job outlives its daemon");
  // The downtime must span a slot: the CLI calls below can take less than a second.
  const lastSlot = Math.max(
    ...readStore(state)
      .runs()
      .map((r) => r.slot),
  );
  await waitFor(() => Date.now() > lastSlot + 2000, "a slot passes with no daemon");

  // No daemon at all: the lock is the live process group, not a lease.
  const st = statusJson(cfg);
  assert.equal(st.daemon.state, "down");
  assert.equal(st.jobs.find((j) => j.name === "long").lock.run_id, first.id);
  const refused = cli(["run", "long", "-c", cfg]);
  assert.equal(refused.code, 75, refused.stderr);
  assert.match(refused.stderr, new RegExp(`run ${first.id} \\(pid ${first.pid},.*holds the lock`));
  const manual = cli(["run", "tick", "-c", cfg]);
  assert.equal(manual.code, 0, manual.stderr);
  assert.match(manual.stdout, /^tick \S+Z\n$/);

  const downAt = Date.now();
  d = startDaemon(t, cfg);
  await waitFor(
    () =>
      readStore(state)
        .runs({ job: "long", status: "skipped" })
        .filter((r) => r.started_at > downAt).length >= 2 &&
      readStore(state)
        .runs({ job: "tick", status: "ok" })
        .filter((r) => r.started_at > downAt).length >= 2,
    "both jobs handled by the new daemon",
  );
  assert.match(d.err, new RegExp(`adopted run ${first.id} of long \\(pid ${first.pid}\\)`));
  assert.deepEqual(
    readStore(state)
      .runs({ job: "long", status: "running" })
      .map((r) => r.id),
    [first.id],
    "no second copy",
  );
  for (const r of readStore(state).runs({ job: "long", status: "skipped" })) {
    assert.equal(r.reason, `overlap: run ${first.id} holds the lock`);
  }
  fs.writeFileSync(flag, "");
  const ended = await waitFor(
    () => readStore(state).ended({ id: first.id })[0],
    "the orphan's end",
  );
  assert.equal(ended.status, "ok", "exit status learned from the run's exit file");
  assert.equal(ended.exit_code, 0);
  await waitFor(
    () =>
      readStore(state)
        .runs({ job: "long", status: "ok" })
        .filter((r) => r.id > first.id).length >= 1,
    "long runs again after the orphan ended",
  );
  await stopDaemon(d);

  for (const job of ["long", "tick"]) assertEverySlotOnce(state, job);
  const downtime = readStore(state).runs({ status: "missed", reason: "daemon down" });
  assert.deepEqual(
    [...new Set(downtime.map((r) => r.job))].sort(),
    ["long", "tick"],
    "the slots of the downtime are recorded missed for both jobs",
  );
  const manualRow = readStore(state).runs({ trigger: "manual" });
  assert.deepEqual(
    manualRow.map((r) => [r.job, r.status]),
    [["tick", "ok"]],
  );
  const copies = readStore(state)
    .runs({ job: "long" })
    .filter((r) => r.pid !== null && r.id !== first.id);
  for (const r of copies)
    assert.ok(r.started_at >= ended.finished_at, `run ${r.id} started after the orphan ended`);
});

// libfaketime from Debian (package `faketime`; .ci/run installs it). FAKETIME_TIMESTAMP_FILE with
// FAKETIME_NO_CACHE=1 re-reads the offset on every clock call, so the test steps the daemon's wall
// clock while it runs. CLOCK_MONOTONIC is left alone, as a real clock step would leave it: Node's
// timers keep their real durations and only Date.now() jumps.
const FAKETIME_LIB = [
  "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
  "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
  "/usr/lib/faketime/libfaketime.so.1",
].find((f) => fs.existsSync(f));

test(
  "wall clock stepped +1 h and back (libfaketime): late and clock events, passed-over slots missed, no slot twice, runs continue",
  // Skipped only without libfaketime; .ci/run installs the Debian package faketime.
  needs(FAKETIME_LIB ? false : "libfaketime is not installed (Debian package faketime)"),
  async (t) => {
    const dir = tmpdir(t);
    const state = path.join(dir, ".cronvisor");
    const control = path.join(dir, "faketime");
    const setClock = (offset) => {
      // Renamed into place: libfaketime must never read a half-written file.
      fs.writeFileSync(`${control}.new`, `${offset}\n`);
      fs.renameSync(`${control}.new`, control);
    };
    setClock("+0");
    const cfg = writeConfig(
      dir,
      `heartbeat: 1s\njobs:\n  tick:\n    schedule: "* * * * * *"\n    command: "true"\n    catchup: skip\n    log: { keep_runs: 100000 }\n`,
    );
    const d = startDaemon(t, cfg, {
      LD_PRELOAD: FAKETIME_LIB,
      FAKETIME_TIMESTAMP_FILE: control,
      FAKETIME_NO_CACHE: "1",
      FAKETIME_DONT_FAKE_MONOTONIC: "1",
    });
    await waitFor(
      () => readStore(state).runs({ status: "ok" }).length >= 2,
      "runs on the real clock",
    );

    // Forward one hour.
    const steppedAt = Date.now();
    setClock("+1h");
    // The step's late event (a loaded machine may add small ones of its own).
    const late = await waitFor(
      () =>
        readStore(state)
          .events({ job: "tick", kind: "late" })
          .find((e) => Number(/^timer fired (\d+) ms/.exec(e.detail)?.[1]) >= 3_000_000),
      "the step's late event",
    );
    await waitFor(
      () =>
        readStore(state)
          .runs({ status: "ok" })
          .filter((r) => r.slot > steppedAt + 3_500_000).length >= 2,
      "runs an hour ahead",
    );
    const ahead = Math.max(
      ...readStore(state)
        .runs({ trigger: "schedule" })
        .map((r) => r.slot),
    );

    // Back one hour.
    setClock("+0");
    const clock = await waitFor(
      () => readStore(state).events({ kind: "clock" })[0],
      "a clock event",
    );
    await waitFor(
      () =>
        readStore(state)
          .runs({ status: "ok" })
          .filter((r) => r.slot < steppedAt + 60_000 && r.started_at >= clock.at).length >= 2,
      "runs continue on the stepped-back clock",
    );
    await stopDaemon(d);

    // One job: its slots doubled are the store's.
    const dup = readStore(state).doubled({ trigger: "schedule" });
    assert.deepEqual(dup, [], "no slot has two dispositions");

    // The late event names the slot the timer was armed for and how many slots the step passed over.
    const m =
      /^timer fired (\d+) ms after slot (\S+) \(suspend or clock step\); (more than )?(\d+) older slot\(s\) recorded missed$/.exec(
        late.detail,
      );
    assert.ok(m, late.detail);
    assert.ok(Number(m[1]) >= 3_599_000, `timer ${m[1]} ms late`);
    const due = Date.parse(m[2]);
    const firstAhead = readStore(state)
      .runs({ trigger: "schedule" })
      .filter((r) => r.status !== "missed" && r.slot > due + 3_000_000)
      .map((r) => r.slot)
      .sort((a, b) => a - b)[0];
    assert.ok(firstAhead - due >= 3_599_000, "the slot run after the step is an hour on");
    const passedOver = (firstAhead - due) / 1000;
    if (m[3]) assert.ok(Number(m[4]) < passedOver, `"more than ${m[4]}" of ${passedOver}`);
    else assert.equal(Number(m[4]), passedOver, "the event counts every passed-over slot");
    // The latest passed-over slots are recorded one by one, contiguous up to the slot that ran;
    // no slot of the skipped hour ran.
    const missed = readStore(state)
      .runs({ status: "missed" })
      .filter((r) => r.slot >= due && r.slot < firstAhead)
      .sort((a, b) => a.slot - b.slot);
    assert.ok(missed.length >= 1 && missed.length < passedOver);
    for (const r of missed) assert.equal(r.reason, "timer late (suspend or clock step)");
    missed.forEach((r, i) => assert.equal(r.slot, firstAhead - (missed.length - i) * 1000));
    // Nothing ran for a passed-over slot while the clock was ahead; after the step back, slots
    // come round again on the real clock and the ones without a disposition run then.
    const passedRuns = readStore(state)
      .runs()
      .filter((r) => r.slot >= due && r.slot < firstAhead && r.status !== "missed");
    for (const r of passedRuns) {
      assert.ok(
        r.started_at >= clock.at && Math.abs(r.started_at - r.slot) < 5000,
        `run ${r.id} ran on the real clock`,
      );
    }

    // Stepping back is one event (not one per tick) and only re-plans: the slots ahead that
    // already had a disposition keep it, the job runs on the real clock again.
    const clocks = readStore(state).events({ kind: "clock" });
    assert.equal(clocks.length, 1, JSON.stringify(clocks));
    assert.equal(clocks[0].job, null);
    assert.match(
      clocks[0].detail,
      /^wall clock stepped back -\d+ ms; slots already handled will not run again$/,
    );
    const after = readStore(state)
      .runs({ trigger: "schedule" })
      // the runs of the hour ahead carry that hour's times
      .filter((r) => r.started_at >= clock.at && r.started_at < clock.at + 3_000_000)
      .sort((a, b) => a.slot - b.slot);
    assert.ok(after.length >= 2);
    for (const r of after) assert.ok(r.slot < ahead, "the job runs on the real clock");
  },
);

test("a store with pages overwritten in the middle: the daemon and `run` refuse it and leave its bytes unchanged", async (t) => {
  const dir = tmpdir(t);
  const state = path.join(dir, ".cronvisor");
  const cfg = writeConfig(
    dir,
    `jobs:\n  a:\n    schedule: "@daily"\n    command: echo ran > ${path.join(dir, "ran")}\n`,
  );
  // A real store with a few hundred pages of markers and runs.
  const store = SqliteStore.open(state, { create: true });
  const keys = Array.from({ length: 3000 }, (_, i) => `item-${i}-${"x".repeat(40)}`);
  await store.markDone({ job: "a", run: null }, keys, Date.now());
  for (let i = 0; i < 50; i++)
    await store.recordDisposition(
      "a",
      Date.UTC(2026, 0, 1 + i),
      "missed",
      "daemon down",
      Date.now(),
    );
  await store.close();
  const file = path.join(state, "cronvisor.db");
  assert.ok(!fs.existsSync(`${file}-wal`), "the store is checkpointed and closed");
  const pageSize = 4096;
  const pages = fs.statSync(file).size / pageSize;
  assert.ok(pages > 40, `${pages} pages`);
  const fd = fs.openSync(file, "r+");
  const mid = Math.floor(pages / 2);
  for (let p = mid; p < mid + 4; p++)
    fs.writeSync(fd, Buffer.alloc(pageSize, 0xa5), 0, pageSize, p * pageSize);
  fs.closeSync(fd);
  const before = fs.readFileSync(file);
  // The fixture really is corrupt (checked on a copy: opening the original would be a touch).
  const copy = path.join(dir, "copy.db");
  fs.copyFileSync(file, copy);
  const db = new Database(copy, { readonly: true });
  assert.throws(() => db.pragma("quick_check"), /malformed/);
  db.close();

  const r = cli(["daemon", "-c", cfg], { timeout: 15_000 });
  assert.equal(r.code, 1, r.stderr);
  assert.equal(
    r.stderr,
    `state store ${file} is not a valid database (database disk image is malformed); it was left untouched: restore it from a backup or move it away\n`,
  );
  assert.deepEqual(fs.readFileSync(file), before, "the daemon left the bytes unchanged");

  const run = cli(["run", "a", "-c", cfg]);
  assert.equal(run.code, 1, run.stderr);
  assert.match(
    run.stderr,
    /^cronvisor: state store .* is not a valid database \(database disk image is malformed\); it was left untouched/,
  );
  assert.ok(!fs.existsSync(path.join(dir, "ran")), "the job did not run");
  assert.deepEqual(fs.readFileSync(file), before, "`run` left the bytes unchanged");

  assert.deepEqual(
    fs.readdirSync(state).sort(),
    ["cronvisor.db"],
    "no WAL, no new store next to the old one",
  );
});
