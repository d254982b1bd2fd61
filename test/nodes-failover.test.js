// What a node's death costs the survivor (issue 34): two nodes on one PostgreSQL store (lease 5 s,
// heartbeat 1 s), ten jobs that each write their slot to a file, a CPU burner beside them; node
// n1's whole process group is SIGKILLed while it has runs started, and n2 runs on. A job with no
// run left `running` by n1 runs every slot on n2 on time. A job whose run n1 left `running`: when
// n1 ran on another machine, its slots are skipped for n1's lock (saying when the lease ends)
// until the lease ends, then caught up per its `catchup:`; when n1 ran on this machine, n2 sees
// that n1's daemon and that run are dead and takes the job over at once. No slot runs twice.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import test from "node:test";
import { readPgStore, startDaemon, stopDaemon, tmpdir, waitFor } from "./helpers.js";
import { assertEachSlotOnce, nodeConfig, started } from "./nodes-helpers.js";
import { freshDatabase, pgMissing, rawClient } from "./pg.js";
import { needs } from "./needs.js";

const skip = pgMissing();
const LEASE_MS = 5000;
/** How late after its slot a run may start and still count as on time, on a loaded machine. */
const ON_TIME_MS = 1500;
/**
 * j0-j4 every second, each run 0.2 s long (in flight on n1 at the kill: blocked), j5-j9 every
 * other second (idle at the kill: on time on n2); catch-up policies: j0 all, j1 skip, the others
 * once (the default).
 */
const JOBS = Array.from({ length: 10 }, (_, i) => ({
  name: `j${i}`,
  every: i < 5 ? 1 : 2,
  catchup: i === 0 ? "all" : i === 1 ? "skip" : "once",
}));

/** A busy loop in a process of its own (killed when the test ends): the machine under load. */
function burnCpu(t) {
  const p = spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" });
  t.after(() => p.kill("SIGKILL"));
}

const iso = (ms) => new Date(ms).toISOString();

/**
 * The scenario: start both nodes (n1 behind `wrapper`), kill n1 with runs in flight, let n2 run
 * `windowMs`; what ran (the file), the rows, and a diagnostic of every slot not run on time.
 */
async function killOneNode(t, wrapper, windowMs) {
  const url = await freshDatabase();
  const raw = await rawClient(url, t);
  const dir = tmpdir(t);
  const out = path.join(dir, "ran");
  fs.writeFileSync(out, "");
  const jobs = JOBS.map(
    (j) =>
      `  ${j.name}:\n    schedule: "*/${j.every} * * * * *"\n    catchup: ${j.catchup}\n    command: 'echo "$CRONVISOR_JOB $CRONVISOR_SLOT $CRONVISOR_TRIGGER" >> ${out}${j.every === 1 ? "; sleep 0.2" : ""}'\n`,
  ).join("");
  const cfgs = ["n1", "n2"].map((n) => nodeConfig(dir, n, url, jobs, `${LEASE_MS / 1000}s`));
  // Each daemon leads a process group of its own (with its spawner): the kill takes them all.
  const [d1, d2] = cfgs.map((c, i) =>
    startDaemon(t, c, {}, { detached: true, wrapper: i === 0 ? wrapper : undefined }),
  );
  await started([d1, d2]);
  burnCpu(t);
  await waitFor(
    async () =>
      new Set((await readPgStore(raw).runs({ status: "ok" })).map((r) => r.node)).size === 2,
    "both nodes running jobs",
    30_000,
  );
  // Killed while n1 has runs of an odd second started (of j0-j4 only): they stay `running` in
  // the store; j5-j9's last runs ended a second before.
  const settled = Date.now() + 2000;
  await waitFor(() => Date.now() > settled, "both nodes running a while", 10_000, 100);
  await waitFor(
    async () =>
      (await readPgStore(raw).runs({ node: "n1", status: "running" })).some(
        (r) => r.slot % 2000 === 1000,
      ),
    "n1 running a run of an odd second",
    20_000,
    5,
  );
  const killedAt = Date.now();
  process.kill(-d1.pid, "SIGKILL");
  await d1.exited;
  const from = Math.ceil(killedAt / 1000) * 1000;
  const to = from + windowMs;
  await waitFor(() => Date.now() > to + 2500, "the window after the kill", 30_000, 100);
  await stopDaemon(d2);
  const lines = fs.readFileSync(out, "utf8").split("\n").filter(Boolean);
  const ran = new Map();
  for (const l of lines) {
    const [job, slot] = l.split(" ");
    ran.set(`${job} ${slot}`, (ran.get(`${job} ${slot}`) ?? 0) + 1);
  }
  const rows = await readPgStore(raw).runs({ slot: { ge: from - 1000, le: to } });
  const left = await readPgStore(raw).runs({ node: "n1", status: ["fenced", "interrupted"] });
  const blockedJobs = new Set(left.map((r) => r.job));
  // The diagnostic: each slot of the window that did not run on n2 on time, relative to the
  // kill, with what history says of it.
  const table = [];
  const lost = [];
  for (const j of JOBS) {
    for (let s = from; s <= to; s += 1000) {
      if ((s / 1000) % j.every !== 0) continue;
      const mine = rows.filter((r) => r.job === j.name && r.slot === s);
      const times = ran.get(`${j.name} ${iso(s)}`) ?? 0;
      const first = mine.find((r) => r.attempt === 1);
      const onTime =
        times === 1 &&
        first?.status === "ok" &&
        first.node === "n2" &&
        first.started_at - s <= ON_TIME_MS;
      if (onTime) continue;
      const said = mine
        .map(
          (r) =>
            `${r.trigger}#${r.attempt} ${r.node} ${r.status}${r.reason ? ` (${r.reason})` : ""} started +${r.started_at - s}ms`,
        )
        .join("; ");
      table.push(
        `${j.name} +${((s - killedAt) / 1000).toFixed(1)}s ran ${times}x: ${said || "no row"}`,
      );
      lost.push({ job: j, slot: s, times, rows: mine });
    }
  }
  const diag = `killed at ${iso(killedAt)}; n1's runs left running: ${left.map((r) => `${r.job}#${r.id}`).join(", ") || "none"}; slots not run on time on n2:\n${table.join("\n") || "(none)"}\n--- n2:\n${d2.err.slice(-3000)}`;
  for (const l of diag.split("\n").slice(0, 80)) t.diagnostic(l);

  return { raw, killedAt, from, to, ran, rows, left, blockedJobs, lost, diag };
}

/** n1 as if on another machine: a host name of its own (a UTS namespace; needs root). */
const OTHER_MACHINE = [
  "unshare",
  "--uts",
  "--",
  "sh",
  "-c",
  'hostname cronvisor-other-machine && exec "$0" "$@"',
];

test(
  "SIGKILL of one of two nodes on two machines, under CPU load: every slot after the kill runs once on the survivor on time, or is skipped for the dead node's lock and caught up after its lease",
  needs(
    skip ||
      (process.getuid() !== 0 && "needs root: unshare --uts gives node n1 a machine of its own"),
  ),
  async (t) => {
    const { raw, killedAt, from, to, ran, left, blockedJobs, lost, diag } = await killOneNode(
      t,
      OTHER_MACHINE,
      LEASE_MS + 3000,
    );
    await assertEachSlotOnce(raw);
    for (const [l, n] of ran) assert.equal(n, 1, `${l} ran ${n} times\n${diag}`);
    // The case under test happened: n1 left runs of j0-j4 running, none of j5-j9.
    assert.ok(blockedJobs.size > 0, `n1 left no run running\n${diag}`);
    for (const j of blockedJobs) assert.ok(Number(j.slice(1)) < 5, `${j} blocked\n${diag}`);
    // A slot that did not run on time is one of a blocked job: skipped for n1's lock, saying when
    // the lease ends, and while it ran. (After the lease, a slot that comes while a catch-up run
    // of its job runs is skipped by `overlap: skip`, as on one node: allowed, and not counted.)
    let until = null;
    const catchUpIds = new Set(
      (await readPgStore(raw).runs({ trigger: "catchup", slot: { ge: from } })).map((r) => r.id),
    );
    const behindCatchUp = (l) => {
      const m = /^overlap: run (\d+) holds the lock$/.exec(l.rows[0]?.reason ?? "");
      return m !== null && catchUpIds.has(Number(m[1])) && l.times === 0;
    };
    for (const l of lost.filter((x) => !behindCatchUp(x))) {
      assert.ok(blockedJobs.has(l.job.name), `${l.job.name} ${iso(l.slot)} lost\n${diag}`);
      const skipped = l.rows.find((r) => r.attempt === 1);
      assert.equal(skipped?.status, "skipped", `${l.job.name} ${iso(l.slot)}\n${diag}`);
      const m = /^lock held by node n1 \(run (\d+), lease until (\S+)\)$/.exec(skipped.reason);
      assert.ok(m, `${skipped.reason}\n${diag}`);
      // n1's own run of that job, left running; its lease renewed before the kill.
      assert.ok(
        left.some((r) => r.id === Number(m[1]) && r.job === l.job.name),
        diag,
      );
      const end = Date.parse(m[2]);
      assert.ok(l.slot <= end && end <= killedAt + LEASE_MS + 100, `${m[2]}\n${diag}`);
      until = Math.max(until ?? 0, end);
    }
    // After the lease: each blocked job caught up per its policy, on n2, after the lease's end.
    for (const job of blockedJobs) {
      const j = JOBS.find((x) => x.name === job);
      const skipped = lost.filter((l) => l.job === j && !behindCatchUp(l)).map((l) => l.slot);
      const caught = (await readPgStore(raw).runs({ job, trigger: "catchup" })).filter(
        (r) => r.slot >= from,
      );
      const want = j.catchup === "all" ? skipped : j.catchup === "once" ? skipped.slice(-1) : [];
      assert.deepEqual(
        caught.map((r) => r.slot),
        want,
        `${job} (catchup: ${j.catchup}) caught up\n${diag}\n${(await readPgStore(raw).runs({ job, slot: { ge: from } })).map((r) => `${r.id} ${r.slot} ${r.trigger} ${r.status} ${r.attempt} ${r.node} ${r.started_at} ${r.reason}`).join("\n")}`,
      );
      for (const r of caught) {
        assert.equal(r.status, "ok", diag);
        assert.equal(r.node, "n2", diag);
        // (started_at is this machine's clock read before the store's judged the lease: 50 ms)
        assert.ok(r.started_at > until - 50, `${job} caught up before the lease ended\n${diag}`);
        assert.equal(ran.get(`${job} ${iso(r.slot)}`), 1, diag);
      }
      // and its slots from the lease's end on ran on time, but those behind a catch-up run.
      for (let s = Math.ceil((until + 1) / 1000) * 1000; s <= to; s += 1000) {
        const l = lost.find((x) => x.job === j && x.slot === s);
        assert.ok(l === undefined || behindCatchUp(l), `${job} ${iso(s)} after the lease\n${diag}`);
      }
    }
    // The figures (BENCHMARKS.md, docs/node-failure.md): slots on time, skipped and caught up;
    // the takeover (a blocked job's first run on n2) after the kill and after the lease's end.
    const idle = JOBS.filter((j) => !blockedJobs.has(j.name));
    let idleSlots = 0;
    for (const j of idle)
      for (let s = from; s <= to; s += 1000) if ((s / 1000) % j.every === 0) idleSlots++;
    const idleLate = lost.filter((l) => !blockedJobs.has(l.job.name)).length;
    // The first start on n2 of each blocked job after the kill: the earliest of them.
    const takeover = Math.min(
      ...(
        await readPgStore(raw).runs({
          node: "n2",
          job: [...blockedJobs],
          started_at: { gt: killedAt },
        })
      )
        .filter((r) => r.status !== "skipped")
        .map((r) => r.started_at),
    );
    const caughtUp = (await readPgStore(raw).runs({ trigger: "catchup", slot: { ge: from } }))
      .length;
    t.diagnostic(
      `figures: idle jobs ${idleSlots - idleLate}/${idleSlots} slots on time; blocked jobs ${lost.filter((l) => !behindCatchUp(l)).length} slots skipped, ${caughtUp} caught up, ${lost.filter(behindCatchUp).length} skipped behind a catch-up; takeover ${takeover - killedAt} ms after the kill, ${takeover - until} ms after the lease's end (${until - killedAt} ms after the kill)`,
    );
  },
);

test(
  "SIGKILL of one of two nodes on one machine, under CPU load: the survivor sees the dead daemon and its runs gone and runs every slot on time",
  needs(skip),
  async (t) => {
    const { raw, ran, rows, lost, diag } = await killOneNode(t, undefined, 5000);
    await assertEachSlotOnce(raw);
    for (const [l, n] of ran) assert.equal(n, 1, `${l} ran ${n} times\n${diag}`);
    assert.deepEqual(lost, [], diag);
    // n1's runs left running: ended by n2's first reservation of their jobs, no lease waited for.
    const ended = rows.filter((r) => r.node === "n1" && r.status === "interrupted");
    assert.ok(ended.length > 0, diag);
    for (const r of ended)
      assert.equal(
        r.reason,
        "its processes and node n1's daemon died on this machine; node n2 took the job over",
      );
    assert.deepEqual(
      await readPgStore(raw).runs({ node: "n1", status: ["running", "fenced"] }),
      [],
    );
  },
);
