// The HTTP endpoint against a local user who keeps it busy (issue 13, item 6, as the security
// review found it): slowloris connections that re-open the moment each one is dropped, for ten
// seconds, while a poller asks /healthz every 200 ms. A connection that has not sent a whole
// request gives way to a new one when the endpoint is full, so the poller keeps being answered;
// afterwards the daemon still runs its job.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { connectionCap } from "../dist/monitor/http.js";
import {
  freePort,
  killDaemon,
  request,
  startDaemon,
  stopDaemon,
  testUser,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";

const ATTACK_MS = 10_000;
const POLL_EVERY_MS = 200;
const POLL_TIMEOUT_MS = 1_000;

/**
 * The attacker, in a process of its own (as the throwaway user when the tests run as root):
 * `count` connections, each sending a request line and never the end of its head, each re-opened
 * as soon as it is closed. Prints how many it opened and how many were closed on it when stopped.
 */
const ATTACKER = `
const net = require("node:net");
const [port, count] = process.argv.slice(1).map(Number);
let opened = 0, closed = 0, stopping = false;
function open() {
  if (stopping) return;
  opened++;
  const s = net.connect(port, "127.0.0.1", () => s.write("GET /healthz HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n"));
  s.on("error", () => {});
  s.on("data", () => {});
  s.on("close", () => { closed++; setImmediate(open); });
}
for (let i = 0; i < count; i++) open();
process.on("SIGTERM", () => {
  stopping = true;
  process.stdout.write(JSON.stringify({ opened, closed }) + "\\n", () => process.exit(0));
});
process.stdout.write("ready\\n");
`;

function startAttacker(t, port, count) {
  const user = testUser();
  const argv = [process.execPath, "-e", ATTACKER, String(port), String(count)];
  // Not a skip: the attack is the same from any local user. As the second user where root can
  // make one (as in CI), else as this process's own.
  const [cmd, ...args] = user.skip
    ? argv
    : ["setpriv", `--reuid=${user.uid}`, `--regid=${user.gid}`, "--clear-groups", "--", ...argv];
  const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
  child.out = "";
  child.err = "";
  child.stdout.on("data", (d) => (child.out += d));
  child.stderr.on("data", (d) => (child.err += d));
  // 'close', not 'exit': its counts are written in its SIGTERM handler just before it exits,
  // and 'exit' can come before that last line has been read from the pipe.
  child.exited = new Promise((resolve) => child.on("close", resolve));
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  return child;
}

/** Stop the attacker and return what it did: { opened, closed }. */
async function stopAttacker(child) {
  child.kill("SIGTERM");
  await child.exited;
  const line = child.out.split("\n").find((l) => l.startsWith("{"));
  assert.ok(line, `the attacker said: ${child.out} ${child.err}`);
  return JSON.parse(line);
}

/** Ask /healthz every POLL_EVERY_MS for `ms`: each answer's time, or null for none in time. */
async function poll(port, ms) {
  const start = Date.now();
  const polls = [];
  while (Date.now() - start < ms) {
    const asked = Date.now();
    const r = await request(port, { path: "/healthz", timeoutMs: POLL_TIMEOUT_MS }).catch(
      () => ({}),
    );
    const took = Date.now() - asked;
    polls.push({ at: asked - start, ok: r.status === 200 && took <= POLL_TIMEOUT_MS, took });
    const next = asked + POLL_EVERY_MS;
    if (next > Date.now()) await new Promise((resolve) => setTimeout(resolve, next - Date.now()));
  }
  const answered = polls.filter((p) => p.ok);
  // The longest stretch without an answer, from the start of the attack to its end.
  const times = [0, ...answered.map((p) => p.at + p.took), ms];
  let gap = 0;
  for (let i = 1; i < times.length; i++) gap = Math.max(gap, times[i] - times[i - 1]);
  return { polls: polls.length, answered: answered.length, gap };
}

async function attackAndPoll(t, { count, wrapper, ms = ATTACK_MS }) {
  // The daemon is killed before its dir is removed (after hooks run in the order they were
  // added), also when the test fails half-way: a daemon left writing there fails the removal.
  let d = null;
  t.after(() => d && killDaemon(d));
  const dir = tmpdir(t);
  const port = await freePort();
  const ran = path.join(dir, "ran");
  const cfg = writeConfig(
    dir,
    [
      // Not 1s: on a loaded machine a late beat would make /healthz say 503 with no attack at all.
      "heartbeat: 5s",
      `http: 127.0.0.1:${port}`,
      "jobs:",
      "  beat:",
      // Every 3 s, not every second: fewer fsyncs on the daemon's loop of a loaded machine.
      '    schedule: "*/3 * * * * *"',
      `    command: echo x >> ${ran}`,
      "",
    ].join("\n"),
  );
  d = startDaemon(t, cfg, {}, wrapper ? { wrapper } : {});
  await waitFor(
    async () => (await request(port, { path: "/healthz" }).catch(() => ({}))).status === 200,
    "healthz 200 before the attack",
  );
  const attacker = startAttacker(t, port, count);
  await waitFor(() => attacker.out.includes("ready"), "the attacker starts");
  const result = await poll(port, ms);
  const did = await stopAttacker(attacker);
  t.diagnostic(
    `${count} slowloris connections: ${did.opened} opened, ${did.closed} dropped by the daemon; ` +
      `${result.answered}/${result.polls} polls answered within ${POLL_TIMEOUT_MS} ms, longest gap ${result.gap} ms`,
  );
  assert.ok(did.closed > 0, "the daemon dropped attacking connections (the attack re-opened them)");
  assert.ok(
    result.answered >= 0.9 * result.polls,
    `${result.answered} of ${result.polls} polls answered within ${POLL_TIMEOUT_MS} ms`,
  );
  assert.ok(result.gap < 3_000, `/healthz went ${result.gap} ms without an answer`);
  // The daemon still runs its job and is still up.
  const before = fs.existsSync(ran) ? fs.readFileSync(ran, "utf8").length : 0;
  await waitFor(
    () => fs.existsSync(ran) && fs.readFileSync(ran, "utf8").length > before,
    "the job runs after the attack",
  );
  assert.equal(d.exitCode, null, d.err);
  await stopDaemon(d);
}

test("http: 300 slowloris connections re-opened as each is dropped do not blind /healthz", async (t) => {
  await attackAndPoll(t, { count: 300 });
});

test("http: full (fd limit 256: 64 connections), a new connection evicts the oldest unfinished one", async (t) => {
  // Under a low descriptor limit the endpoint takes a quarter of it; 100 attackers then fill it,
  // and every poll's connection gets in only by pushing out an attacker's.
  await attackAndPoll(t, {
    count: 100,
    wrapper: ["prlimit", "--nofile=256:256", "--"],
    ms: 6_000,
  });
});

test("http: the connection cap is a quarter of the descriptor limit, at most 1024", () => {
  const limits = (soft) =>
    `Limit                     Soft Limit           Hard Limit           Units\nMax open files            ${soft}                 ${soft}                 files\n`;
  assert.equal(connectionCap(limits(256)), 64);
  assert.equal(connectionCap(limits(20000)), 1024);
  assert.equal(connectionCap(limits("unlimited")), 1024);
  assert.equal(connectionCap(limits(16)), 8);
  assert.equal(connectionCap(null), 1024);
});
