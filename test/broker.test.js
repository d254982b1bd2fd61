// The marker broker (issue 13, item 1): jobs reach their markers through the supervising process
// (the daemon, or `cronvisor run`), over a Unix socket, authenticated by a per-run secret. Real
// daemons, real jobs (as a throwaway unprivileged user where root is needed), the built CLI.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { test } from "node:test";
import {
  ROOT,
  cli,
  reserveManualRun,
  runAs,
  startDaemon,
  stopDaemon,
  testUser,
  tmpdir,
  userCli,
  waitFor,
  writeConfig,
  readStore,
} from "./helpers.js";
import { needsNow } from "./needs.js";

const NODE_DIR = path.dirname(process.execPath);

/** Where a root supervisor puts the broker sockets of a state dir (README: the broker). */
const brokerDir = (stateDir) =>
  path.join("/run/cronvisor", createHash("sha256").update(stateDir).digest("hex").slice(0, 16));

/** Every marker command a job uses, each exit code on a line of $OUT/TAG ("name=code"). */
const ALL_COMMANDS = `#!/bin/sh
o="$OUT/$1"
id -u > "$o.uid"
cronvisor mark k1 k2 2>>"$o.err"; echo "mark=$?" >> "$o"
cronvisor check k1 2>>"$o.err"; echo "check-done=$?" >> "$o"
cronvisor check nope 2>>"$o.err"; echo "check-not=$?" >> "$o"
cronvisor once up -- sh -c "echo ran >> '$o.side'" 2>>"$o.err"; echo "once=$?" >> "$o"
cronvisor once up -- sh -c "echo ran >> '$o.side'" 2>>"$o.err"; echo "once-again=$?" >> "$o"
cronvisor progress half-way 2>>"$o.err"; echo "progress=$?" >> "$o"
printf 's1\\ns2\\n' | cronvisor mark --stdin > "$o.acks" 2>>"$o.err"; echo "stdin=$?" >> "$o"
echo end >> "$o"
`;

/** A temp dir a job's user can traverse (the state dir in it stays 0700), with $OUT it can write. */
function workDir(t, user) {
  const dir = tmpdir(t);
  fs.chmodSync(dir, 0o711);
  const out = path.join(dir, "out");
  fs.mkdirSync(out, { mode: 0o755 });
  if (user) fs.chownSync(out, user.uid, user.gid);
  return { dir, out };
}

function script(dir, name, text) {
  const file = path.join(dir, name);
  fs.writeFileSync(file, text, { mode: 0o755 });
  return file;
}

const results = (file) =>
  Object.fromEntries(
    fs
      .readFileSync(file, "utf8")
      .split("\n")
      .filter((l) => l.includes("="))
      .map((l) => l.split("=")),
  );

const done = (file) => fs.existsSync(file) && fs.readFileSync(file, "utf8").includes("end\n");

/** One request line to a broker socket; resolves to the reply lines (until the reply or close). */
function raw(socketPath, line, seen = {}) {
  return new Promise((resolve) => {
    const s = net.createConnection(socketPath);
    let got = "";
    s.setEncoding("utf8");
    s.on("data", (d) => {
      got += d;
      if (got.endsWith("\n")) s.end();
    });
    s.on("error", (e) => (seen.error = e)); // 'close' follows; the assertions say what was missing
    s.on("close", () =>
      resolve(
        got
          .split("\n")
          .filter(Boolean)
          .map((l) => JSON.parse(l)),
      ),
    );
    s.write(line);
  });
}

test("a user: job and a root job: mark, check, once, progress and mark --stdin through the daemon's broker", async (t) => {
  const user = testUser();
  // Skipped, with testUser's or userCli's reason, only when not root, where root cannot create
  // the user, or where that user cannot run node; in CI never.
  if (needsNow(t, user.skip)) return;
  const copy = userCli(user);
  if (needsNow(t, copy.skip)) return;
  const { dir, out } = workDir(t, user);
  const job = script(dir, "job.sh", ALL_COMMANDS);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s
env: { PATH: "${copy.bin}:${NODE_DIR}:/usr/bin:/bin", OUT: "${out}" }
jobs:
  app:
    schedule: "@reboot"
    command: [sh, ${job}, app]
    user: ${user.name}
    cwd: /
  rootjob:
    schedule: "@reboot"
    command: [sh, ${job}, rootjob]
    cwd: /
`,
  );
  const d = startDaemon(t, cfg);
  const state = path.join(dir, ".cronvisor");
  for (const tag of ["app", "rootjob"]) {
    await waitFor(() => done(path.join(out, tag)), `the ${tag} job to finish`, 60_000);
  }
  assert.equal(fs.readFileSync(path.join(out, "app.uid"), "utf8").trim(), String(user.uid));
  for (const tag of ["app", "rootjob"]) {
    const err = fs.existsSync(path.join(out, `${tag}.err`))
      ? fs.readFileSync(path.join(out, `${tag}.err`), "utf8")
      : "";
    assert.deepEqual(
      results(path.join(out, tag)),
      {
        mark: "0",
        "check-done": "0",
        "check-not": "1",
        once: "0",
        "once-again": "0",
        progress: "0",
        stdin: "0",
      },
      `${tag}: ${err}`,
    );
    assert.equal(fs.readFileSync(path.join(out, `${tag}.side`), "utf8"), "ran\n", "once ran once");
    assert.equal(fs.readFileSync(path.join(out, `${tag}.acks`), "utf8"), "s1\ns2\n");
    assert.deepEqual(readStore(state).markerKeys(tag), ["k1", "k2", "s1", "s2", "up"]);
    const run = await waitFor(
      () => readStore(state).runs({ job: tag, status: "ok" })[0],
      `the ${tag} run recorded`,
    );
    assert.equal(run.markers_new, 5);
    assert.equal(run.markers_skipped, 2, "check k1 and the second once found their key done");
    assert.equal(run.progress_msg, "half-way");
  }
  const sockDir = brokerDir(state);
  // A socket per uid, each 0600 and its uid's: the kernel lets only that user (and root) connect.
  assert.deepEqual(fs.readdirSync(sockDir).sort(), [`daemon-u${user.uid}.sock`, "daemon.sock"]);
  for (const [name, uid] of [
    ["daemon.sock", 0],
    [`daemon-u${user.uid}.sock`, user.uid],
  ]) {
    const st = fs.statSync(path.join(sockDir, name));
    assert.deepEqual([st.mode & 0o777, st.uid], [0o600, uid], name);
  }
  assert.equal(fs.statSync(sockDir).mode & 0o777, 0o711, "traversable, not listable");
  await stopDaemon(d);
  assert.equal(fs.existsSync(sockDir), false, "the socket and its directory are removed at stop");
});

/** A Node job using the library (`Markers.fromEnv()`); what each call gave, as JSON in $OUT/TAG. */
const libraryJob = (index) => `import fs from "node:fs";
import { Markers } from ${JSON.stringify(index)};
const r = { uid: process.getuid() };
const m = Markers.fromEnv();
r.new = m.markDone("a", "b");
r.again = m.markDone("a");
r.done = m.isDone("a");
r.not = m.isDone("zzz");
let side = 0;
r.once1 = await m.once("up", () => side++);
r.once2 = await m.once("up", () => side++);
r.side = side;
m.progress("lib");
for (const [name, f] of [
  ["list", () => m.list()],
  ["foreign", () => Markers.fromEnv({ ...process.env, CRONVISOR_JOB: "other" }).markDone("x")],
]) {
  try {
    f();
    r[name] = "no error";
  } catch (e) {
    r[name] = e.constructor.name;
  }
}
m.close();
// Whole or not at all: the test reads the file as soon as it exists.
const file = process.env.OUT + "/" + process.argv[2];
fs.writeFileSync(file + ".tmp", JSON.stringify(r));
fs.renameSync(file + ".tmp", file);
`;

test("the Node library in a user: job and a root job goes through the broker, synchronously, with the same results", async (t) => {
  const user = testUser();
  // Skipped, with testUser's or userCli's reason, only when not root, where root cannot create
  // the user, or where that user cannot run node; in CI never.
  if (needsNow(t, user.skip)) return;
  const copy = userCli(user);
  if (needsNow(t, copy.skip)) return;
  const { dir, out } = workDir(t, user);
  const job = script(dir, "job.mjs", libraryJob(path.join(copy.bin, "..", "dist", "index.js")));
  const cfg = writeConfig(
    dir,
    `env: { PATH: "${NODE_DIR}:/usr/bin:/bin", OUT: "${out}" }
jobs:
  app:
    schedule: "@reboot"
    command: [node, ${job}, app]
    user: ${user.name}
    cwd: /
  rootjob:
    schedule: "@reboot"
    command: [node, ${job}, rootjob]
    cwd: /
`,
  );
  const d = startDaemon(t, cfg);
  const state = path.join(dir, ".cronvisor");
  for (const tag of ["app", "rootjob"]) {
    const file = path.join(out, tag);
    await waitFor(() => fs.existsSync(file), `the ${tag} job to finish`, 60_000);
    const r = JSON.parse(fs.readFileSync(file, "utf8"));
    assert.deepEqual(r, {
      uid: tag === "app" ? user.uid : 0,
      new: 2,
      again: 0,
      done: true,
      not: false,
      once1: true,
      once2: false,
      side: 1,
      list: "UsageError",
      foreign: "FenceError",
    });
    const run = await waitFor(
      () => readStore(state).runs({ job: tag, status: "ok" })[0],
      `the ${tag} run recorded`,
    );
    assert.deepEqual(readStore(state).markerKeys(tag), ["a", "b", "up"]);
    assert.equal(run.markers_new, 3);
    assert.equal(run.progress_msg, "lib");
  }
  assert.equal(readStore(state).markers({ job: "other" }).length, 0);
  await stopDaemon(d);
});

test("check, mark, once and progress exit 69 and say why when the broker cannot be reached", (t) => {
  const dir = tmpdir(t);
  const env = {
    CRONVISOR_STATE_DIR: dir,
    CRONVISOR_JOB: "a",
    CRONVISOR_RUN_ID: "1",
    CRONVISOR_FENCE: "1",
    CRONVISOR_BROKER: path.join(dir, "gone.sock"),
    CRONVISOR_SECRET: "0".repeat(64),
  };
  const flag = path.join(dir, "ran");
  for (const args of [
    ["check", "k"],
    ["mark", "k"],
    ["once", "k", "--", "touch", flag],
    ["progress", "p"],
  ]) {
    const r = cli(args, { env });
    assert.equal(r.code, 69, `${args[0]}: ${r.stderr}`);
    assert.match(r.stderr, /^cronvisor: cannot reach the marker broker at .*gone\.sock/);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  }
  assert.equal(fs.existsSync(flag), false, "once never ran its command");
});

test("check as a user who cannot read the store exits 69, never 1 (not marked)", async (t) => {
  const user = testUser();
  // Skipped, with testUser's or userCli's reason, only when not root, where root cannot create
  // the user, or where that user cannot run node; in CI never.
  if (needsNow(t, user.skip)) return;
  const copy = userCli(user);
  if (needsNow(t, copy.skip)) return;
  const { dir } = workDir(t);
  const cfg = writeConfig(dir, `jobs:\n  a:\n    schedule: "0 0 1 1 *"\n    command: "true"\n`);
  assert.equal(cli(["run", "a", "-c", cfg]).code, 0); // the store exists, root's, 0700
  const env = {
    PATH: "/usr/bin:/bin",
    CRONVISOR_STATE_DIR: path.join(dir, ".cronvisor"),
    CRONVISOR_JOB: "a",
    CRONVISOR_RUN_ID: "1",
    CRONVISOR_FENCE: "1",
  };
  const r = runAs(user, [process.execPath, path.join(copy.bin, "cronvisor"), "check", "k"], {
    env,
  });
  assert.equal(r.code, 69, r.stderr);
  assert.match(r.stderr, /^cronvisor: cannot open state store .*EACCES/);
});

test("inside a run: --job naming another job, a wrong secret, and malformed or oversized lines are refused; the broker goes on serving", async (t) => {
  const { dir, out } = workDir(t);
  const job = script(
    dir,
    "job.sh",
    `#!/bin/sh
echo "$CRONVISOR_BROKER $CRONVISOR_SECRET" > "$OUT/env.tmp" && mv "$OUT/env.tmp" "$OUT/env"
# Each answer is written whole and then renamed: the test reads a file as soon as it exists.
put() { echo "$2" > "$OUT/$1.tmp" && mv "$OUT/$1.tmp" "$OUT/$1"; }
cronvisor check --job b stolen 2> /dev/null; put checkb $?
cronvisor mark --job b stolen 2> "$OUT/jobb.err"; put jobb $?
i=0; while [ ! -e "$OUT/go" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
cronvisor mark after; put after $?
`,
  );
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s
env: { PATH: "${path.join(ROOT, "bin")}:${NODE_DIR}:/usr/bin:/bin", OUT: "${out}" }
jobs:
  a:
    schedule: "@reboot"
    command: [sh, ${job}]
  b:
    schedule: "0 0 1 1 *"
    command: "true"
`,
  );
  const d = startDaemon(t, cfg);
  const state = path.join(dir, ".cronvisor");
  await waitFor(() => fs.existsSync(path.join(out, "jobb")), "the --job b attempt", 60_000);
  assert.equal(fs.readFileSync(path.join(out, "jobb"), "utf8").trim(), "3");
  assert.equal(fs.readFileSync(path.join(out, "checkb"), "utf8").trim(), "69", "check cannot tell");
  assert.match(
    fs.readFileSync(path.join(out, "jobb.err"), "utf8"),
    /^cronvisor: refused: inside a run of job a, --job may name only a, not b; nothing was written\n$/,
  );
  const [sock, secret] = fs.readFileSync(path.join(out, "env"), "utf8").trim().split(" ");
  const req = (o) => `${JSON.stringify({ op: "mark", secret, job: "a", keys: ["x"], ...o })}\n`;
  // Straight to the socket, as a job that skips the CLI would.
  const [other] = await raw(sock, req({ job: "b" }));
  assert.deepEqual([other.ok, other.code], [false, 3]);
  const [wrong] = await raw(sock, req({ secret: "f".repeat(64) }));
  assert.deepEqual([wrong.ok, wrong.code], [false, 3]);
  const [garbage] = await raw(sock, "{not json\n");
  assert.deepEqual([garbage.ok, garbage.code], [false, 2]);
  const [badKey] = await raw(sock, req({ keys: ["a\nb"] }));
  assert.deepEqual([badKey.ok, badKey.code], [false, 2]);
  const [badPid] = await raw(sock, req({ op: "claim", key: "k", pid: 1 }));
  assert.deepEqual([badPid.ok, badPid.code], [false, 2]);
  const [initPid] = await raw(sock, req({ op: "claim", key: "k", pid: process.pid }));
  assert.deepEqual([initPid.ok, initPid.code], [false, 3], "a pid outside the run's group");
  // The broker answers an oversized line and closes; a client still writing it then gets EPIPE,
  // which can destroy its socket before it reads the answer (seen under load): a refusal too.
  const hugeSocket = { error: null };
  const [huge] = await raw(sock, "x".repeat(2 << 20), hugeSocket);
  if (huge) assert.deepEqual([huge.ok, huge.code], [false, 2]);
  else assert.match(String(hugeSocket.error?.code), /^(EPIPE|ECONNRESET)$/, "closed by the broker");
  assert.equal(readStore(state).markers({ job: "b" }).length, 0);
  assert.equal(readStore(state).markers({ key: "x" }).length, 0);
  // The daemon and its broker still serve the run.
  fs.writeFileSync(path.join(out, "go"), "");
  await waitFor(() => fs.existsSync(path.join(out, "after")), "the mark after the attacks");
  assert.equal(fs.readFileSync(path.join(out, "after"), "utf8").trim(), "0");
  assert.equal(readStore(state).markers({ job: "a", key: "after" }).length, 1);
  assert.equal(d.exitCode, null, d.err);
  await stopDaemon(d);
  assert.equal(fs.existsSync(sock), false, "the socket is removed at stop");
});

test("progress and mark from a process that outlived its run are refused (3) and change nothing", async (t) => {
  const { dir, out } = workDir(t);
  // The straggler writes its pid once it has left the run's session, and the run waits for that;
  // `leftovers: keep` moves it out of the run when the run ends (the default kills it).
  const late = `echo $$ > "$OUT/pid.tmp"; mv "$OUT/pid.tmp" "$OUT/pid"; while [ ! -e "$OUT/go" ]; do sleep 0.05; done; cronvisor progress late 2> "$OUT/late.err"; echo $? > "$OUT/late.tmp"; cronvisor mark late 2>> "$OUT/late.err"; echo $? >> "$OUT/late.tmp"; mv "$OUT/late.tmp" "$OUT/late"`;
  const job = script(
    dir,
    "job.sh",
    `#!/bin/sh\nsetsid sh -c '${late}' </dev/null >/dev/null 2>&1 &\nwhile [ ! -e "$OUT/pid" ]; do sleep 0.01; done\n`,
  );
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s
env: { PATH: "${path.join(ROOT, "bin")}:${NODE_DIR}:/usr/bin:/bin", OUT: "${out}" }
jobs:
  a:
    schedule: "@reboot"
    leftovers: keep
    command: [sh, ${job}]
`,
  );
  const d = startDaemon(t, cfg);
  const state = path.join(dir, ".cronvisor");
  const run = await waitFor(
    () => readStore(state).runs({ job: "a", status: "ok" })[0],
    "the run to end",
    60_000,
  );
  t.after(() => {
    try {
      process.kill(Number(fs.readFileSync(path.join(out, "pid"), "utf8")), "SIGKILL");
    } catch {
      // ended already
    }
  });
  const before = readStore(state).job("a")?.last_progress_at;
  fs.writeFileSync(path.join(out, "go"), "");
  await waitFor(() => fs.existsSync(path.join(out, "late")), "the straggler's calls", 60_000);
  const err = fs.readFileSync(path.join(out, "late.err"), "utf8");
  assert.deepEqual(
    fs.readFileSync(path.join(out, "late"), "utf8").split("\n"),
    ["3", "3", ""],
    err,
  );
  assert.match(err, /refused/);
  assert.deepEqual(readStore(state).job("a")?.last_progress_at, before);
  const after = readStore(state).runs({ id: run.id })[0];
  assert.equal(after.progress_count, run.progress_count);
  assert.equal(readStore(state).markers().length, 0);
  await stopDaemon(d);
});

test("a manual `cronvisor run` of a user: job with no daemon running serves its markers", async (t) => {
  const user = testUser();
  // Skipped, with testUser's or userCli's reason, only when not root, where root cannot create
  // the user, or where that user cannot run node; in CI never.
  if (needsNow(t, user.skip)) return;
  const copy = userCli(user);
  if (needsNow(t, copy.skip)) return;
  const { dir, out } = workDir(t, user);
  const job = script(dir, "job.sh", ALL_COMMANDS);
  const cfg = writeConfig(
    dir,
    `env: { PATH: "${copy.bin}:${NODE_DIR}:/usr/bin:/bin", OUT: "${out}" }
jobs:
  app:
    schedule: "0 0 1 1 *"
    command: [sh, ${job}, app]
    user: ${user.name}
    cwd: /
`,
  );
  const r = cli(["run", "app", "-c", cfg]);
  assert.equal(r.code, 0, r.stderr);
  const err = fs.existsSync(path.join(out, "app.err"))
    ? fs.readFileSync(path.join(out, "app.err"), "utf8")
    : "";
  assert.equal(results(path.join(out, "app")).mark, "0", err);
  assert.equal(results(path.join(out, "app")).once, "0", err);
  const keys = readStore(path.join(dir, ".cronvisor")).markerKeys();
  assert.deepEqual(keys, ["k1", "k2", "s1", "s2", "up"]);
  // The run's socket went with it, and so did its directory (no other supervisor used it).
  assert.equal(fs.existsSync(brokerDir(path.join(dir, ".cronvisor"))), false);
});

test("a run adopted by a restarted daemon keeps its markers: the new daemon's broker knows its secret", async (t) => {
  const { dir, out } = workDir(t, null);
  const go = path.join(dir, "go");
  // Output only to files: after a crash nobody reads the run's stdout (README: KillMode=process).
  const job = script(
    dir,
    "job.sh",
    `#!/bin/sh
exec >/dev/null 2>>"$OUT/err"
cronvisor mark before; echo "before=$?" >> "$OUT/r"
while [ ! -e "${go}" ]; do sleep 0.05; done
cronvisor mark after; echo "after=$?" >> "$OUT/r"
cronvisor progress adopted; echo "progress=$?" >> "$OUT/r"
echo end >> "$OUT/r"
`,
  );
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s
env: { PATH: "${path.join(ROOT, "bin")}:${NODE_DIR}:/usr/bin:/bin", OUT: "${out}" }
jobs:
  slow:
    schedule: "* * * * * *"
    command: [sh, ${job}]
`,
  );
  const stateDir = path.join(dir, ".cronvisor");
  const d1 = startDaemon(t, cfg);
  await waitFor(() => results(path.join(out, "r")).before === "0", "the first mark");
  d1.kill("SIGKILL");
  await d1.exited;
  const d2 = startDaemon(t, cfg);
  await waitFor(() => /adopted run/.test(d2.err), "the run adopted");
  fs.writeFileSync(go, "");
  await waitFor(() => done(path.join(out, "r")), "the job's end");
  const r = results(path.join(out, "r"));
  assert.deepEqual(
    r,
    { before: "0", after: "0", progress: "0" },
    fs.readFileSync(path.join(out, "err"), "utf8"),
  );
  assert.deepEqual(readStore(stateDir).markerKeys(), ["after", "before"]);
  await stopDaemon(d2);
});

/** How many descriptors process `pid` holds on the store file itself (one per connection). */
function storeConnections(pid, stateDir) {
  const file = path.join(stateDir, "cronvisor.db");
  const dir = `/proc/${pid}/fd`;
  return fs.readdirSync(dir).filter((fd) => {
    try {
      return fs.readlinkSync(path.join(dir, fd)) === file;
    } catch {
      return false; // closed meanwhile
    }
  }).length;
}

test("the broker's store thread starts only when a run first marks (an idle daemon holds one connection)", async (t) => {
  const { dir, out } = workDir(t, null);
  const go = path.join(dir, "go");
  // Each wait ends when told, or after a minute at most: a failed test leaves no job behind.
  const job = script(
    dir,
    "job.sh",
    `#!/bin/sh
echo started > "$OUT/started"
i=0; while [ ! -e "${go}" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
cronvisor mark k 2>>"$OUT/err"; echo "mark=$?" >> "$OUT/r"
i=0; while [ ! -e "${go}.stop" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
echo end >> "$OUT/r"
`,
  );
  const cfg = writeConfig(
    dir,
    `env: { PATH: "${path.join(ROOT, "bin")}:${NODE_DIR}:/usr/bin:/bin", OUT: "${out}" }
jobs:
  waits:
    schedule: "@reboot"
    command: [sh, ${job}]
`,
  );
  const stateDir = path.join(dir, ".cronvisor");
  const d = startDaemon(t, cfg);
  await waitFor(() => fs.existsSync(path.join(out, "started")), "the job's start");
  // The run is registered with the broker and may mark at any moment; nothing has marked yet.
  assert.equal(storeConnections(d.pid, stateDir), 1, "the daemon's own connection only");
  fs.writeFileSync(go, "");
  await waitFor(() => results(path.join(out, "r")).mark !== undefined, "the job's mark");
  assert.equal(
    results(path.join(out, "r")).mark,
    "0",
    fs.readFileSync(path.join(out, "err"), "utf8"),
  );
  assert.equal(storeConnections(d.pid, stateDir), 2, "the store thread's connection too");
  assert.deepEqual(readStore(stateDir).markerKeys(), ["k"]);
  fs.writeFileSync(`${go}.stop`, "");
  await waitFor(() => done(path.join(out, "r")), "the job's end");
  await stopDaemon(d);
});

test("the broker's store thread closes when no request came for a while, and the next request starts it again", async (t) => {
  const dir = tmpdir(t);
  const stateDir = path.join(dir, "state");
  const { SqliteStore } = await import("../dist/store/sqlite-store.js");
  const { startBroker } = await import("../dist/markers/broker.js");
  const { BrokerClient } = await import("../dist/markers/broker-client.js");
  const store = SqliteStore.open(stateDir, { create: true });
  const run = await reserveManualRun(store, stateDir, "j");
  await store.close();
  const logged = [];
  const broker = await startBroker(stateDir, "idle.sock", (l) => logged.push(l), 1500);
  t.after(() => broker.close());
  const secret = broker.register({ job: "j", runId: run.id, fence: run.fence });
  const w = { job: "j", run: { id: run.id, fence: run.fence } };
  assert.equal(storeConnections(process.pid, stateDir), 0, "no thread before a request");
  const mark = async (key) => {
    const c = new BrokerClient(broker.socketPath, secret);
    try {
      return await c.markDone(w, [key]);
    } finally {
      await c.close();
    }
  };
  assert.equal(await mark("k1"), 1);
  assert.equal(storeConnections(process.pid, stateDir), 1, "the thread holds its connection");
  await waitFor(() => storeConnections(process.pid, stateDir) === 0, "the idle thread to close");
  assert.equal(await mark("k2"), 1);
  assert.deepEqual(readStore(stateDir).markerKeys(), ["k1", "k2"]);
  await broker.close();
  assert.equal(storeConnections(process.pid, stateDir), 0, "closed with the broker");
  assert.deepEqual(logged, []);
});
