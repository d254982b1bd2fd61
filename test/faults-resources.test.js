// Resource faults with real processes (issue 7): a state dir that fills up (a small tmpfs), a
// daemon out of file descriptors (prlimit --nofile) during a burst of spawns, and a job that
// writes 2 GB of output. The daemon must stay up, say what went wrong, recover when the resource
// returns, and keep its memory and its store intact.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { SqliteStore } from "../dist/store/sqlite-store.js";
import {
  alive,
  cli,
  fillDisk,
  killDaemon,
  mountTmpfs,
  query,
  scheduleSlots,
  spawnCli,
  startDaemon,
  statusJson,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
  readStore,
} from "./helpers.js";
import { needsNow } from "./needs.js";

/** Every `* * * * * *` slot of `job` between its first and last has exactly one disposition. */
function assertEverySlotOnce(stateDir, job) {
  const { slots, gaps } = scheduleSlots(stateDir, job);
  assert.ok(slots.length >= 2, `${job}: slots recorded`);
  assert.deepEqual(gaps, [], `${job}: each slot once, none left out`);
}

test("a state dir that fills up (tmpfs): the daemon stays up, status turns CRITICAL, it recovers when space returns, the store stays intact", async (t) => {
  let d = null;
  const disk = mountTmpfs(t, async () => {
    if (d) await killDaemon(d);
  });
  // Skipped only where a tmpfs cannot be mounted (not root, or a sandbox that forbids mount).
  if (needsNow(t, disk.skip)) return;
  const { root, mnt } = disk;
  const state = path.join(mnt, "state");
  const cfg = writeConfig(
    root,
    `state_dir: ./mnt/state\nheartbeat: 1s\njobs:\n  tick:\n    schedule: "*/2 * * * * *"\n    command: echo tick $CRONVISOR_SLOT\n    catchup: skip\n    log: { keep_runs: 100000 }\n`,
  );
  d = spawnCli(["daemon", "-c", cfg]);
  await waitFor(
    () => readStore(state).runs({ status: "ok" }).length >= 2,
    "runs before the disk fills",
  );
  // Fill it between two slots (slots are on even seconds), so no run is half-way through.
  await waitFor(
    () =>
      Date.now() % 2000 > 1100 &&
      Date.now() % 2000 < 1500 &&
      readStore(state).runs({ status: "running" }).length === 0,
    "a quiet moment between slots",
    10_000,
    10,
  );
  fillDisk(path.join(mnt, "filler"));
  assert.equal(fs.statfsSync(mnt).bavail, 0, "the state dir is full");

  // The store cannot take the heartbeat: status says the daemon is alive but not beating.
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
  const check = cli(["status", "-c", cfg, "--check"]);
  assert.equal(check.code, 2, check.stdout + check.stderr);
  assert.match(check.stdout, /^CRITICAL: daemon unresponsive\b/m);
  assert.ok(alive(d.pid) && d.exitCode === null, "the daemon stays up");
  assert.match(d.err, /cronvisor: heartbeat failed: database or disk is full/);
  assert.match(d.err, /cronvisor: error handling slot: database or disk is full \(job: tick\)/);

  // Space returns: beating again, runs recorded again, with their logs.
  fs.rmSync(path.join(mnt, "filler"));
  const freedAt = Date.now();
  await waitFor(() => statusJson(cfg).daemon.state === "running", "status: running", 15_000, 200);
  const after = await waitFor(() => {
    const r = readStore(state)
      .runs({ status: "ok" })
      .filter((x) => x.started_at > freedAt);
    return r.length >= 2 ? r : null;
  }, "runs after space returned");
  for (const r of after)
    assert.equal(fs.readFileSync(r.log_path, "utf8"), `tick ${new Date(r.slot).toISOString()}\n`);
  await stopDaemon(d);
  assert.deepEqual(
    readStore(state)
      .runs({ status: "running" })
      .map(({ id, status }) => ({ id, status })),
    [],
    "every run's end recorded",
  );
  assert.deepEqual(query(state, "PRAGMA integrity_check"), [{ integrity_check: "ok" }]);
  // One job: its slots doubled are the store's.
  const dup = readStore(state).doubled({ trigger: "schedule" });
  assert.deepEqual(dup, []);
});

test("EMFILE: 30 per-second jobs under prlimit --nofile=64 — the daemon stays up, failures are spawn_failed naming EMFILE, every slot has one disposition, and the end of the burst recovers", async (t) => {
  // Skipped only without prlimit: the EMFILE fault needs it to lower the fd limit.
  const noPrlimit = spawnSync("prlimit", ["--version"]).status !== 0;
  if (needsNow(t, noPrlimit && "prlimit (util-linux) is not installed")) return;
  const dir = tmpdir(t);
  const state = path.join(dir, ".cronvisor");
  const jobs = Array.from({ length: 30 }, (_, i) => `j${String(i + 1).padStart(2, "0")}`);
  // Each run lasts a second, so the 30 overlap and hold their descriptors (the daemon's log
  // files, the spawner's pipes) together: a run of `true` ends too soon on a fast machine since
  // the spawner forks them, and the limit was then reached only on a slow one. The slots its
  // runs overlap are recorded `skipped`, one disposition each as before.
  const cfg = writeConfig(
    dir,
    [
      "heartbeat: 1s",
      "defaults: { catchup: skip, log: { keep_runs: 100000 } }",
      "jobs:",
      ...jobs.flatMap((j) => [`  ${j}:`, '    schedule: "* * * * * *"', '    command: "sleep 1"']),
      "",
    ].join("\n"),
  );
  const d = startDaemon(t, cfg, {}, { wrapper: ["prlimit", "--nofile=64:64", "--"] });
  await waitFor(
    () => readStore(state).runs({ status: "spawn_failed" }).length >= 5,
    "spawn failures",
    30_000,
    100,
  );
  assert.ok(alive(d.pid) && d.exitCode === null, "the daemon stays up");
  assert.equal(
    fs.readFileSync(`/proc/${d.pid}/limits`, "utf8").match(/^Max open files\s+(\d+)/m)[1],
    "64",
  );

  // The burst ends (all but 5 jobs paused; raising a hard limit needs CAP_SYS_RESOURCE, and Node
  // raises its soft limit to the hard one at start-up): the same limit now suffices, runs succeed.
  const active = jobs.slice(0, 5);
  const store = SqliteStore.open(state, { create: false });
  for (const j of jobs.slice(5)) store.setPaused(j, true, Date.now());
  store.close();
  const pausedAt = Date.now();
  await waitFor(
    () =>
      active.every(
        (j) =>
          readStore(state)
            .ended({ job: j })
            .filter((r) => r.started_at > pausedAt + 1000 && r.status !== "skipped")
            .slice(-3)
            .filter((r) => r.status === "ok").length === 3,
      ),
    "three ok runs in a row of every active job",
    30_000,
    100,
  );
  assert.ok(alive(d.pid) && d.exitCode === null, "the daemon stays up");
  await stopDaemon(d);

  const failed = readStore(state).runs({ status: "spawn_failed" });
  for (const r of failed) {
    assert.match(
      r.reason,
      new RegExp(`^spawn failed: EMFILE .*\\(job: ${r.job}, run: ${r.id}\\)$`),
    );
  }
  const byStatus = new Map();
  for (const r of readStore(state).runs()) {
    const g = byStatus.get(r.status) ?? { status: r.status, n: 0, after_pause: 0 };
    g.n++;
    if (r.started_at > pausedAt + 1000) g.after_pause++;
    byStatus.set(r.status, g);
  }
  t.diagnostic(JSON.stringify([...byStatus.values()]));
  assert.equal(
    readStore(state)
      .runs({ status: "spawn_failed" })
      .filter((r) => r.started_at > pausedAt + 1000).length,
    0,
    "no spawn failure once the burst is over",
  );
  assert.equal(readStore(state).runs({ status: "running" }).length, 0, "every run's end recorded");
  for (const j of jobs) assertEverySlotOnce(state, j);
  assert.doesNotMatch(d.err, /error handling slot/, "the store kept every disposition");
});

test("2 GB of output with log.max_size 1MB: the daemon's RSS stays bounded, the log keeps head + marker + tail, the run is ok", async (t) => {
  const dir = tmpdir(t);
  const state = path.join(dir, ".cronvisor");
  const TOTAL = 2 * 1024 ** 3;
  const CAP = 1024 ** 2; // 1MB in a config is 2^20 bytes
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  spew:\n    schedule: "* * * * * *"\n    command: "if [ -e started ]; then exit 0; fi; : > started; exec head -c 2G /dev/zero"\n    log: { max_size: 1MB }\n`,
  );
  const d = startDaemon(t, cfg);
  const rssKb = () =>
    Number(/^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${d.pid}/status`, "utf8"))?.[1] ?? 0);
  let maxKb = 0;
  let samples = 0;
  const run = await waitFor(
    () => {
      maxKb = Math.max(maxKb, rssKb());
      samples++;
      return readStore(state).ended({ id: 1 })[0];
    },
    "the 2 GB run's end",
    90_000,
    50,
  );
  await stopDaemon(d);
  assert.ok(samples >= 20, `RSS sampled ${samples} times`);
  assert.ok(maxKb < 200 * 1024, `daemon RSS peaked at ${Math.round(maxKb / 1024)} MiB`);
  assert.equal(run.status, "ok", run.reason);
  assert.equal(run.exit_code, 0);
  assert.equal(run.log_bytes, TOTAL);
  const log = fs.readFileSync(run.log_path);
  const marker = `\n[cronvisor: ${TOTAL - CAP} bytes cut]\n`;
  assert.equal(log.length, CAP + marker.length, "the log is the cap plus one marker line");
  assert.ok(
    log.subarray(0, CAP / 2).every((b) => b === 0),
    "the head is the first output",
  );
  assert.equal(log.subarray(CAP / 2, CAP / 2 + marker.length).toString(), marker);
  assert.ok(
    log.subarray(CAP / 2 + marker.length).every((b) => b === 0),
    "the tail is the last output",
  );
  assert.ok(!fs.existsSync(`${run.log_path}.tail`), "the ring file is gone");
  t.diagnostic(`2 GiB in ${run.duration_ms} ms; daemon RSS peak ${Math.round(maxKb / 1024)} MiB`);
});
