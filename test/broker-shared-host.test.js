// The marker broker on a shared host, second pass (issue 36), each attack run for real against a
// root daemon whose `user:` jobs mark meanwhile:
// - a leftover of a run, holding the run's secret, keeps 1,100 connections alive (a byte every
//   second) through the run's end: other runs' marks must be answered, and the leftover's
//   connections are closed when its run ends;
// - 8 processes of another user flood connect/close loops: every mark of the victim succeeds;
//   the other user cannot connect to the victim's socket at all.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { after, test } from "node:test";
import {
  startDaemon,
  stopDaemon,
  testUser,
  tmpdir,
  userCli,
  waitFor,
  writeConfig,
  readStore,
} from "./helpers.js";
import { needs, needsNow } from "./needs.js";

const NODE_DIR = path.dirname(process.execPath);
/** How long one victim `mark` may take under attack (the client's own retries end at 5 s). */
const MARK_MS = 8000;

/**
 * A job that publishes its broker, secret, run and fence in $OUT/NAME.env, then marks the keys
 * listed in $OUT/NAME.go.N (one `cronvisor mark` each), its exit code in $OUT/NAME.r.N, until
 * $OUT/NAME.stop appears.
 */
const WORKER = `#!/bin/sh
umask 022
n=$1
echo "$CRONVISOR_BROKER $CRONVISOR_SECRET $CRONVISOR_RUN_ID $CRONVISOR_FENCE" > "$OUT/$n.env.tmp" && mv "$OUT/$n.env.tmp" "$OUT/$n.env"
i=0
while [ ! -e "$OUT/$n.stop" ]; do
  if [ -e "$OUT/$n.go.$i" ]; then
    cronvisor mark $(cat "$OUT/$n.go.$i") 2> "$OUT/$n.err.$i"; echo $? > "$OUT/$n.r.$i.tmp"; mv "$OUT/$n.r.$i.tmp" "$OUT/$n.r.$i"
    i=$((i+1))
  else
    sleep 0.02
  fi
done
`;

/**
 * The attackers, run as a user. argv: MODE N SOCKET... Every 200 ms prints a JSON line of counts.
 *   hold SECRET JOB   keeps N connections, each authenticated with a `check` of the secret, then
 *                     alive with a byte every second; a closed one is opened again after 50 ms.
 *                     live: open with a reply; refused: replies that refused
 *   flood             N connect/close loops on every SOCKET; errors by code
 */
const ATTACKER = `import net from "node:net";
const [mode, n, ...rest] = process.argv.slice(2);
const N = Number(n);
const c = { live: 0, refused: 0, replies: 0, opened: 0, errors: {} };
setInterval(() => console.log(JSON.stringify(c)), 200);
if (mode === "hold") {
  const [sock, secret, job] = rest;
  const line = JSON.stringify({ secret, op: "check", job, key: "k" }) + "\\n";
  const conn = () => {
    const s = net.createConnection(sock);
    let got = "", live = false, timer = null;
    s.setEncoding("utf8");
    s.on("connect", () => { c.opened++; s.write(line); timer = setInterval(() => s.write(" "), 1000); });
    s.on("data", (d) => {
      got += d;
      if (!live && got.includes("\\n")) {
        c.replies++;
        if (JSON.parse(got.slice(0, got.indexOf("\\n"))).ok) { live = true; c.live++; } else c.refused++;
      }
    });
    s.on("error", (e) => (c.errors[e.code] = (c.errors[e.code] ?? 0) + 1));
    s.on("close", () => { clearInterval(timer); if (live) c.live--; setTimeout(conn, 50); });
  };
  for (let i = 0; i < N; i++) conn();
} else {
  const loop = (sock) => {
    const s = net.createConnection(sock);
    s.on("connect", () => { c.opened++; s.destroy(); });
    s.on("error", (e) => (c.errors[e.code] = (c.errors[e.code] ?? 0) + 1));
    s.on("close", () => setImmediate(loop, sock));
  };
  for (const sock of rest) for (let i = 0; i < N; i++) loop(sock);
}
`;

/**
 * A daemon with `victim` and `leaver` as user A, `bjob` as user B. Returns what the tests need:
 * env(NAME) (broker, secret, run, fence), mark(NAME, keys), stop(NAME), the attacker's path.
 */
async function setUp(t) {
  const a = testUser();
  // No second user (not root): the caller's needsNow skips with the reason, or fails under CI.
  if (a.skip) return a;
  const b = testUser("cvx-test2");
  if (b.skip) return b;
  const copy = userCli(a);
  if (copy.skip) return copy;
  const dir = tmpdir(t);
  fs.chmodSync(dir, 0o711);
  const out = path.join(dir, "out");
  fs.mkdirSync(out, { mode: 0o777 });
  fs.chmodSync(out, 0o1777);
  const worker = path.join(dir, "worker.sh");
  fs.writeFileSync(worker, WORKER, { mode: 0o755 });
  const attacker = path.join(dir, "attacker.mjs");
  fs.writeFileSync(attacker, ATTACKER, { mode: 0o644 });
  const job = (name, user) =>
    `  ${name}:\n    schedule: "@reboot"\n    command: [sh, ${worker}, ${name}]\n    user: ${user}\n    cwd: /\n`;
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s
env: { PATH: "${copy.bin}:${NODE_DIR}:/usr/bin:/bin", OUT: "${out}" }
jobs:
${job("victim", a.name)}${job("leaver", a.name)}${job("bjob", b.name)}`,
  );
  const d = startDaemon(t, cfg);
  const state = path.join(dir, ".cronvisor");
  const env = (name) => {
    const [sock, secret, runId, fence] = fs
      .readFileSync(path.join(out, `${name}.env`), "utf8")
      .trim()
      .split(" ");
    return { sock, secret, runId: Number(runId), fence: Number(fence) };
  };
  for (const name of ["victim", "leaver", "bjob"])
    await waitFor(() => fs.existsSync(path.join(out, `${name}.env`)), `${name} to start`, 30_000);
  const counts = new Map();
  const mark = async (name, keys) => {
    const i = counts.get(name) ?? 0;
    counts.set(name, i + 1);
    const t0 = Date.now();
    fs.writeFileSync(path.join(out, "go.tmp"), keys.join(" "));
    fs.renameSync(path.join(out, "go.tmp"), path.join(out, `${name}.go.${i}`));
    const r = path.join(out, `${name}.r.${i}`);
    await waitFor(() => fs.existsSync(r), `${name}'s mark #${i}`, MARK_MS, 10);
    return {
      code: Number(fs.readFileSync(r, "utf8")),
      err: fs.readFileSync(path.join(out, `${name}.err.${i}`), "utf8"),
      ms: Date.now() - t0,
    };
  };
  const stop = (name) => fs.writeFileSync(path.join(out, `${name}.stop`), "");
  const stopAll = async () => {
    for (const name of ["victim", "leaver", "bjob"]) stop(name);
    await stopDaemon(d);
  };
  // Started now, judged by the last test: IDLE_MS is 30 s, longer than the other tests take.
  const trickle = trickleConn(env("bjob"), "bjob");
  return { a, b, d, state, env, mark, stop, stopAll, attacker, trickle };
}

/**
 * A connection that makes one request of `job`'s run, then sends a byte every 200 ms and never
 * a whole request again: when it was answered, and when the broker closed it.
 */
function trickleConn({ sock, secret }, job) {
  const c = { answeredAt: 0, closedAt: 0 };
  const s = net.createConnection(sock);
  s.setEncoding("utf8");
  s.on("error", () => {});
  s.on("data", () => (c.answeredAt ||= Date.now()));
  s.on("connect", () => s.write(`${JSON.stringify({ secret, op: "check", job, key: "k" })}\n`));
  const timer = setInterval(() => s.writable && s.write(" "), 200);
  s.on("close", () => {
    clearInterval(timer);
    c.closedAt = Date.now();
  });
  c.destroy = () => s.destroy();
  return c;
}

/** Start an attacker as `user`; its latest counts in .last; killed at the test's end. */
function attack(t, s, user, args) {
  const argv = [process.execPath, s.attacker, ...args];
  const p = spawn(
    "setpriv",
    [`--reuid=${user.uid}`, `--regid=${user.gid}`, "--clear-groups", "--", ...argv],
    { stdio: ["ignore", "pipe", "inherit"], cwd: "/" },
  );
  const me = { last: null, exited: new Promise((r) => p.on("exit", r)) };
  let buf = "";
  p.stdout.setEncoding("utf8");
  p.stdout.on("data", (d) => {
    buf += d;
    const lines = buf.split("\n");
    buf = lines.pop();
    if (lines.length) me.last = JSON.parse(lines[lines.length - 1]);
  });
  me.kill = async () => {
    if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
    await me.exited;
  };
  t.after(me.kill);
  return me;
}

let shared = null;
const cleanups = [];
const setUpOnce = () => (shared ??= setUp({ after: (f) => cleanups.push(f) }));
after(async () => {
  const s = await shared;
  try {
    if (s && !s.skip) await s.stopAll();
  } finally {
    for (const f of cleanups.reverse()) await f();
  }
});

const notRoot = process.getuid?.() === 0 ? false : "the attacks need other users (root)";

/** `count` marks by the victim, one key each: all exit 0 within MARK_MS; their times. */
async function victimMarks(s, prefix, count) {
  const times = [];
  for (let i = 0; i < count; i++) {
    const r = await s.mark("victim", [`${prefix}-${i}`]);
    assert.equal(r.code, 0, `mark ${prefix}-${i}: ${r.err}`);
    times.push(r.ms);
  }
  const stored = readStore(s.state).markerKeys("victim");
  for (let i = 0; i < count; i++) assert.ok(stored.includes(`${prefix}-${i}`));
  return times;
}

test(
  "a run's leftover holding 1,100 live connections with its secret cannot lock other runs out, and loses them when its run ends",
  needs(notRoot),
  async (t) => {
    const s = await setUpOnce();
    // Root, but no second user (testUser's reason).
    if (needsNow(t, s.skip)) return;
    const l = s.env("leaver");
    // As the jobs' own user: the leftover of `leaver` (same user as the victim: the worst case).
    const hog = attack(t, s, s.a, ["hold", "1100", l.sock, l.secret, "leaver"]);
    await waitFor(
      () => hog.last?.replies >= 1000,
      "1,000 of the leftover's requests answered",
      30_000,
    );
    // While the run lives, it holds at most its share (32): the rest are closed as they come.
    await waitFor(() => hog.last.live <= 40, "the leftover's live connections down to its share");
    const during = await victimMarks(s, "held", 5);
    // The run ends; its leftover stays (the attacker process is not in the run's group).
    s.stop("leaver");
    await waitFor(
      () => readStore(s.state).runs({ id: l.runId })[0]?.status === "ok",
      "the leaver's run recorded",
    );
    await waitFor(
      () => hog.last.live === 0 && hog.last.refused > 0,
      "the leftover's connections closed and refused",
      10_000,
    );
    const afterEnd = await victimMarks(s, "after-end", 5);
    await hog.kill();
    t.diagnostic(
      `victim's marks during: ${during.join(", ")} ms; after the end: ${afterEnd.join(", ")} ms`,
    );
  },
);

test(
  "8 processes of another user flooding connect/close: every mark of the victim succeeds; that user cannot reach the victim's socket",
  needs(notRoot),
  async (t) => {
    const s = await setUpOnce();
    // Root, but no second user (testUser's reason).
    if (needsNow(t, s.skip)) return;
    const victim = s.env("victim").sock;
    const own = s.env("bjob").sock;
    const floods = Array.from({ length: 8 }, () => attack(t, s, s.b, ["flood", "64", victim, own]));
    await waitFor(
      () => floods.every((f) => f.last && f.last.opened + (f.last.errors.EAGAIN ?? 0) > 1000),
      "the flood under way",
      30_000,
    );
    const times = await victimMarks(s, "flood", 20);
    const totals = {};
    for (const f of floods)
      for (const [k, v] of Object.entries({ opened: f.last.opened, ...f.last.errors }))
        totals[k] = (totals[k] ?? 0) + v;
    for (const f of floods) await f.kill();
    assert.ok(
      totals.EACCES > 0,
      `the victim's socket refused the other user: ${JSON.stringify(totals)}`,
    );
    t.diagnostic(
      `victim's 20 marks: max ${Math.max(...times)} ms, median ${times.sort((x, y) => x - y)[10]} ms; flood: ${JSON.stringify(totals)}`,
    );
  },
);

test(
  "4 processes of the victim's own user flooding its socket: the client's retries carry every mark through",
  needs(notRoot),
  async (t) => {
    const s = await setUpOnce();
    // Root, but no second user (testUser's reason).
    if (needsNow(t, s.skip)) return;
    const victim = s.env("victim").sock;
    // Its own user may slow its own runs (processes of one user are not kept apart): the retries
    // (5 s) carry a mark through a flood that keeps the socket's queue full most of the time.
    const floods = Array.from({ length: 4 }, () => attack(t, s, s.a, ["flood", "32", victim]));
    await waitFor(
      () => floods.every((f) => f.last && f.last.opened + (f.last.errors.EAGAIN ?? 0) > 1000),
      "the flood under way",
      30_000,
    );
    const times = await victimMarks(s, "own-flood", 20);
    const totals = {};
    for (const f of floods)
      for (const [k, v] of Object.entries({ opened: f.last.opened, ...f.last.errors }))
        totals[k] = (totals[k] ?? 0) + v;
    for (const f of floods) await f.kill();
    t.diagnostic(
      `victim's 20 marks: max ${Math.max(...times)} ms, median ${times.sort((x, y) => x - y)[10]} ms; flood: ${JSON.stringify(totals)}`,
    );
  },
);

test(
  "idle time counts from the last complete request: a trickle of bytes does not keep a connection",
  needs(notRoot),
  async (t) => {
    const s = await setUpOnce();
    // Root, but no second user (testUser's reason).
    if (needsNow(t, s.skip)) return;
    const c = s.trickle;
    t.after(() => c.destroy());
    await waitFor(() => c.closedAt > 0, "the broker to close the trickling connection", 45_000);
    assert.ok(c.answeredAt > 0, "its request was answered");
    const idle = c.closedAt - c.answeredAt;
    assert.ok(idle >= 29_000 && idle < 40_000, `closed ${idle} ms after its last request`);
  },
);
