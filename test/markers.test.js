// Done-markers and fences through the real CLI (`mark`, `check`, `once`, `progress`) and the
// library, against a real SQLite store with real running-run rows.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import { SqliteStore } from "../dist/store/sqlite-store.js";
import { Markers, FenceError } from "../dist/index.js";
import { BIN, cleanEnv, cli, reserveManualRun, tmpdir, waitFor } from "./helpers.js";

/** A store with one `running` run of `job`, owned by this test process (so its lock lives). */
async function startRun(stateDir, job = "enrich") {
  const store = SqliteStore.open(stateDir, { create: true });
  return { store, run: await reserveManualRun(store, stateDir, job) };
}

function runEnv(stateDir, run) {
  return {
    CRONVISOR_STATE_DIR: stateDir,
    CRONVISOR_JOB: run.job,
    CRONVISOR_RUN_ID: String(run.id),
    CRONVISOR_FENCE: String(run.fence),
  };
}

async function finish(store, run, status = "ok") {
  const now = Date.now();
  await store.finishRun(run.id, {
    status,
    reason: null,
    exitCode: 0,
    signal: null,
    startedAt: run.started_at,
    finishedAt: now,
    durationMs: now - run.started_at,
    logBytes: 0,
    logTruncated: false,
  });
}

/** Spawn the CLI without waiting; resolves to { code, stdout, stderr }. */
function cliAsync(args, env) {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, [BIN, ...args], { env: cleanEnv(env) });
    let stdout = "";
    let stderr = "";
    c.stdout.on("data", (d) => (stdout += d));
    c.stderr.on("data", (d) => (stderr += d));
    // 'close', not 'exit': 'exit' can come before the last of stdout/stderr has been read.
    c.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

test("mark then check: 0 after a durable commit, 1 for an unknown key; counted on the run", async (t) => {
  const dir = tmpdir(t);
  const { store, run } = await startRun(dir);
  const env = runEnv(dir, run);
  assert.equal(cli(["check", "a"], { env }).code, 1);
  const r = cli(["mark", "a", "b"], { env });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(cli(["check", "a"], { env }).code, 0);
  assert.equal(cli(["check", "b"], { env }).code, 0);
  const row = await store.run(run.id);
  assert.equal(row.markers_new, 2);
  assert.equal(row.markers_skipped, 2, "two checks found their key done");
  // synchronous=FULL must be set on the connection, not just assumed.
  assert.equal(store.db.pragma("synchronous", { simple: true }), 2);
  assert.equal(store.db.pragma("journal_mode", { simple: true }), "wal");
  store.close();
});

test("a superseded writer is refused with exit 3 and writes nothing", async (t) => {
  const dir = tmpdir(t);
  const { store, run: old } = await startRun(dir);
  await finish(store, old); // the run ended: any later write from it is a straggler
  const { run: current } = await startRun(dir);
  assert.ok(current.fence > old.fence, "the fence grows with every run");
  const r = cli(["mark", "late-write"], { env: runEnv(dir, old) });
  assert.equal(r.code, 3, r.stderr);
  assert.match(r.stderr, /no longer the current run/);
  assert.equal(await store.isMarked("enrich", "late-write"), false);
  const once = cli(["once", "k", "--", "sh", "-c", "echo ran"], { env: runEnv(dir, old) });
  assert.equal(once.code, 3);
  assert.doesNotMatch(once.stdout, /ran/, "a stale run does not even start the side effect");
  // A revoked (replaced) run is refused the same way.
  await store.revokeRun(current.id);
  assert.equal(cli(["mark", "x"], { env: runEnv(dir, current) }).code, 3);
  store.close();
});

test("once: runs CMD, marks right after exit 0, then skips; a failure leaves the key open and counts attempts", async (t) => {
  const dir = tmpdir(t);
  const { store, run } = await startRun(dir);
  const env = runEnv(dir, run);
  const out = path.join(dir, "out.txt");
  const cmd = ["once", "upload-1", "--", "sh", "-c", `echo up >> ${out}`];
  assert.equal(cli(cmd, { env }).code, 0);
  const again = cli(cmd, { env });
  assert.equal(again.code, 0);
  assert.match(again.stderr, /already done/);
  assert.equal(fs.readFileSync(out, "utf8"), "up\n");
  for (let i = 0; i < 4; i++) {
    assert.equal(cli(["once", "flaky", "--", "sh", "-c", "exit 7"], { env }).code, 7);
  }
  assert.equal(await store.isMarked("enrich", "flaky"), false);
  assert.deepEqual(await store.repeatingKeys("enrich", 3), [{ key: "flaky", count: 4 }]);
  const row = await store.run(run.id);
  assert.equal(row.markers_new, 1);
  assert.equal(row.markers_skipped, 1);
  store.close();
});

test("4 concurrent once calls on one key run the command once", async (t) => {
  const dir = tmpdir(t);
  const { store, run } = await startRun(dir);
  const env = runEnv(dir, run);
  const out = path.join(dir, "ran.txt");
  // The command takes a while so the four calls overlap for real.
  const cmd = ["once", "the-key", "--", "sh", "-c", `echo $$ >> ${out}; sleep 0.5`];
  const results = await Promise.all([1, 2, 3, 4].map(() => cliAsync(cmd, env)));
  const codes = results.map((r) => r.code).sort();
  assert.equal(
    fs.readFileSync(out, "utf8").trim().split("\n").length,
    1,
    "the command ran exactly once",
  );
  assert.ok(
    codes.every((c) => c === 0 || c === 75),
    `exit codes: ${codes}`,
  );
  assert.ok(await store.isMarked("enrich", "the-key"));
  // --wait: a second caller waits for the holder, then finds the key done and skips.
  // The holder starts first and is seen holding the key (its command ran) before the waiter starts.
  const holder = cliAsync(["once", "k2", "--", "sh", "-c", `echo k2 >> ${out}; sleep 0.5`], env);
  await waitFor(() => fs.readFileSync(out, "utf8").includes("k2\n"), "the holder's command");
  const waiter = cliAsync(["once", "--wait", "k2", "--", "sh", "-c", `echo k2 >> ${out}`], env);
  const waited = await Promise.all([holder, waiter]);
  assert.deepEqual(
    waited.map((r) => r.code),
    [0, 0],
  );
  assert.equal(
    fs
      .readFileSync(out, "utf8")
      .split("\n")
      .filter((l) => l === "k2").length,
    1,
  );
  store.close();
});

test("once killed alone while its command runs: the claim holds until the command ends, then is taken over", async (t) => {
  const dir = tmpdir(t);
  const { store, run } = await startRun(dir);
  t.after(() => store.close());
  const env = runEnv(dir, run);
  const out = path.join(dir, "out.txt");
  const flag = path.join(dir, "flag");
  const first = spawn(
    process.execPath,
    [
      BIN,
      "once",
      "k3",
      "--",
      "sh",
      "-c",
      `echo start >> ${out}; while [ ! -e ${flag} ]; do sleep 0.05; done; echo end >> ${out}`,
    ],
    { env: cleanEnv(env), stdio: "ignore" },
  );
  const claim = await waitFor(
    async () =>
      (await store.claimHolder("enrich", "k3"))?.cmd_pid &&
      (await store.claimHolder("enrich", "k3")),
    "the claim to name its command",
  );
  t.after(() => {
    try {
      process.kill(claim.cmd_pid, "SIGKILL");
    } catch {
      // ended already
    }
  });
  assert.equal(claim.pid, first.pid);
  // The claim names the command once it is spawned, not once it has written: wait for its
  // `start` line, or the assertion on `out` below could read the file before it is there.
  await waitFor(
    () => fs.readFileSync(out, "utf8") === "start\n",
    "the claimed command's start line",
  );
  first.kill("SIGKILL");
  await new Promise((r) => first.on("exit", r));

  // The `once` is gone, its command is not: another `once` of the key must not run.
  const second = await cliAsync(["once", "k3", "--", "sh", "-c", `echo second >> ${out}`], env);
  assert.equal(second.code, 75, second.stderr);
  assert.match(
    second.stderr,
    new RegExp(
      `^cronvisor: key "k3" is being worked on by pid ${claim.cmd_pid}, whose \`once\` \\(pid ${first.pid}, run ${run.id}\\) has died\n$`,
    ),
  );
  assert.equal(fs.readFileSync(out, "utf8"), "start\n");

  // The command ends (unmarked: its `once` died before it could mark): the next call takes over.
  fs.writeFileSync(flag, "");
  await waitFor(() => !fs.existsSync(`/proc/${claim.cmd_pid}`), "the orphaned command to end");
  const third = await cliAsync(["once", "k3", "--", "sh", "-c", `echo third >> ${out}`], env);
  assert.equal(third.code, 0, third.stderr);
  assert.equal(fs.readFileSync(out, "utf8"), "start\nend\nthird\n");
  assert.ok(await store.isMarked("enrich", "k3"));
});

test("8 processes marking in parallel lose nothing; integrity_check is ok", async (t) => {
  const dir = tmpdir(t);
  const { store, run } = await startRun(dir);
  const env = runEnv(dir, run);
  const perProc = 100;
  const procs = [];
  for (let p = 0; p < 8; p++) {
    const keys = Array.from({ length: perProc }, (_, i) => `p${p}-k${i}`).join("\n");
    procs.push(
      new Promise((resolve) => {
        const c = spawn(process.execPath, [BIN, "mark", "--stdin"], { env: cleanEnv(env) });
        let acks = "";
        c.stdout.on("data", (d) => (acks += d));
        // 'close', not 'exit': the last acks may still be in the pipe when 'exit' comes.
        c.on("close", (code) => resolve({ code, acks }));
        c.stdin.end(`${keys}\n`);
      }),
    );
  }
  const results = await Promise.all(procs);
  for (const r of results) {
    assert.equal(r.code, 0);
    assert.equal(r.acks.trim().split("\n").length, perProc, "every key acknowledged once on disk");
  }
  assert.equal(await store.markerCount("enrich"), 8 * perProc);
  store.close();
  const db = new Database(path.join(dir, "cronvisor.db"), { readonly: true });
  assert.equal(db.pragma("integrity_check", { simple: true }), "ok");
  db.close();
});

test("usage errors exit 2; outside a run without --job is a usage error", async (t) => {
  const dir = tmpdir(t);
  const { store, run } = await startRun(dir);
  const env = runEnv(dir, run);
  assert.equal(cli(["mark"], { env }).code, 2);
  assert.equal(cli(["mark", ""], { env }).code, 2);
  assert.equal(cli(["once", "k"], { env }).code, 2);
  assert.equal(cli(["once", "k", "sh"], { env }).code, 2);
  assert.equal(cli(["check"], { env }).code, 2);
  assert.equal(cli(["mark", "a\nb"], { env }).code, 2);
  assert.equal(await store.markerCount("enrich"), 0);
  store.close();
});

test("progress records time, message and count on the run and as job progress", async (t) => {
  const dir = tmpdir(t);
  const { store, run } = await startRun(dir);
  const env = runEnv(dir, run);
  assert.equal(cli(["progress", "item 5 of 10"], { env }).code, 0);
  assert.equal(cli(["progress"], { env }).code, 0);
  const row = await store.run(run.id);
  assert.equal(row.progress_msg, "item 5 of 10");
  assert.equal(row.progress_count, 2);
  assert.ok((await store.job("enrich")).last_progress_at >= run.started_at);
  // From a process left over after its run ended: refused with exit 3, as through the broker
  // (README), and nothing written.
  await finish(store, run);
  const late = cli(["progress", "late"], { env });
  assert.equal(late.code, 3, late.stderr);
  assert.match(late.stderr, /no longer the current run/);
  const after = await store.run(run.id);
  assert.deepEqual(
    [after.progress_msg, after.progress_count, after.progress_at],
    [row.progress_msg, row.progress_count, row.progress_at],
  );
  store.close();
});

test("library: once/isDone/markDone with the same semantics and fence checks", async (t) => {
  const dir = tmpdir(t);
  const { store, run } = await startRun(dir);
  const m = Markers.fromEnv(runEnv(dir, run));
  let calls = 0;
  assert.equal(await m.once("a", () => calls++), true);
  assert.equal(await m.once("a", () => calls++), false);
  assert.equal(calls, 1);
  await assert.rejects(
    m.once("b", () => {
      throw new Error("flaky");
    }),
    /flaky/,
  );
  assert.equal(m.isDone("b"), false);
  assert.equal(m.markDone("c", "d"), 2);
  assert.equal(m.isDone("c"), true);
  m.progress("3 of 4");
  await finish(store, run);
  assert.throws(() => m.markDone("e"), FenceError);
  assert.equal(await store.isMarked("enrich", "e"), false);
  assert.throws(() => m.progress("late"), FenceError);
  assert.equal((await store.run(run.id)).progress_msg, "3 of 4");
  m.close();
  store.close();
});
