// The benchmarks of issue 14 (many hosts: a PostgreSQL store several daemons share), one function
// per row, in the shape of rows.js: { what, cvx, base, baseName, ratio, target, pass, note }.
// The PostgreSQL server is test/pg.js's throwaway cluster (Debian's postgresql-15 binaries, run
// as an unprivileged user, listening only on a Unix socket in a temp dir, fsync on, stopped and
// removed when this process exits). Without the binaries the rows say so and are not judged.
//
//   pg-claim      slot claim + run record through the Store, PostgreSQL vs SQLite
//   nodes-paused  1,000 per-second paused jobs on 3 daemons sharing PostgreSQL vs 1 on SQLite
//   failover      SIGKILL of the node running a job until its next run starts on the other node
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {
  jobName,
  median,
  pct,
  procCpu,
  openDb,
  sleepUntil,
  startDaemon,
  stopDaemon,
  summary,
  tmpdir,
  waitFor,
  writeConfig,
  importDist,
  range,
  row,
} from "./lib.js";
import { scheduledReserve } from "../test/helpers.js";
import { freshDatabase, pgMissing, rawClient } from "../test/pg.js";

let O = { quick: false, log: () => {}, nodeArgs: [] };
export function configure(o) {
  O = { ...O, ...o };
}

/** A row that could not be measured here (no PostgreSQL binaries): not judged, with the reason. */
const notRun = (what, baseName, target, why) =>
  row(what, NaN, NaN, baseName, target, null, `not measured: ${why}`);

const load = () => os.loadavg()[0].toFixed(2);

/**
 * Start a daemon on each config at once; if one fails to start, stop those that did and throw.
 * The daemons come back in the order of the configs.
 */
async function startAll(cfgs, opts = {}) {
  const got = await Promise.allSettled(
    cfgs.map((c) => startDaemon(c, { nodeArgs: O.nodeArgs, ...opts })),
  );
  const failed = got.find((g) => g.status === "rejected");
  if (failed) {
    for (const g of got) if (g.status === "fulfilled") await stopDaemon(g.value, { kill: true });
    throw failed.reason;
  }
  return got.map((g) => g.value);
}

// ---- 1. slot claim + run record -------------------------------------------------------------

/**
 * One claim + record: the tick's reservation (one transaction), then the run's end (another on
 * SQLite, one statement on PostgreSQL). The reservation is the tests' (scheduledReserve), timed
 * by the wall clock.
 */
async function claimAndRecord(store, job, slot) {
  const [o] = await store.reserveRuns([scheduledReserve(job, slot, { now: () => Date.now() })]);
  if (o.kind !== "started") throw new Error(`claim of ${job}@${slot}: ${JSON.stringify(o)}`);
  const now = Date.now();
  await store.finishRuns([
    {
      runId: o.run.id,
      result: {
        status: "ok",
        reason: null,
        exitCode: 0,
        signal: null,
        startedAt: o.run.started_at,
        finishedAt: now,
        durationMs: now - o.run.started_at,
        logBytes: 0,
        logTruncated: false,
      },
    },
  ]);
}

/** A one-row INSERT committed through a plain pg client: PostgreSQL's own floor for one commit. */
async function pgCommitMs(url, n) {
  const c = await rawClient(url);
  try {
    await c.query("CREATE TABLE bench_floor (k BIGSERIAL PRIMARY KEY, v TEXT)");
    const ms = [];
    for (let i = 0; i < n + 5; i++) {
      const t = performance.now();
      await c.query({
        name: "floor",
        text: "INSERT INTO bench_floor (v) VALUES ($1)",
        values: [`v${i}`],
      });
      if (i >= 5) ms.push(performance.now() - t);
    }
    return median(ms);
  } finally {
    await c.end();
  }
}

export async function pgClaim() {
  const what = "slot claim + run record (ms each): Store.reserveRuns + finishRuns on PostgreSQL";
  const baseName = "the same on SQLite";
  const target = "≤ 5×";
  const why = pgMissing();
  if (why) return [notRun(what, baseName, target, why)];
  const n = O.quick ? 200 : 1000;
  const block = O.quick ? 20 : 50;
  const load0 = load();
  O.log(
    `pg-claim: ${n} claims + records each on PostgreSQL and SQLite, alternating blocks of ${block}`,
  );
  const { openPgStore, openStore } = await importDist("store/store.js");
  const url = await freshDatabase();
  const pg = await openPgStore(url, { create: true, node: "bench" });
  const sq = await openStore(path.join(tmpdir(), "state"), { create: true, node: "bench" });
  const ms = { pg: [], sq: [] };
  try {
    const stores = { pg, sq };
    const base = Math.floor(Date.now() / 1000) * 1000;
    for (const s of Object.values(stores)) {
      await s.addJobs([{ name: "a", bootId: null }], Date.now());
      // Warm-up: connections made, statements prepared, pages cached (not counted).
      for (let i = 0; i < 20; i++) await claimAndRecord(s, "a", base - (i + 1) * 1000);
    }
    let slot = base;
    for (let b = 0; b < n / block; b++) {
      for (const k of b % 2 ? ["sq", "pg"] : ["pg", "sq"]) {
        for (let i = 0; i < block; i++) {
          const t = performance.now();
          await claimAndRecord(stores[k], "a", (slot += 1000));
          ms[k].push(performance.now() - t);
        }
      }
    }
  } finally {
    await pg.close();
    await sq.close();
  }
  const floor = await pgCommitMs(url, 100);
  const p = summary(ms.pg);
  const s = summary(ms.sq);
  return [
    row(
      what,
      p.p50,
      s.p50,
      baseName,
      target,
      p.p50 / s.p50 <= 5,
      `median of ${n} each, alternating blocks of ${block}; p99 ${p.p99.toFixed(2)} vs ${s.p99.toFixed(2)} ms; a reservation (one transaction) and an end (one statement) per claim, as the daemon writes them; one fsync'd 1-row INSERT through pg: ${floor.toFixed(2)} ms; load ${load0} -> ${load()}`,
      "ms",
    ),
  ];
}

// ---- 2. 1,000 paused jobs over 3 nodes ------------------------------------------------------

const pausedJobs = (n) =>
  range(n).map((i) => ({
    name: jobName(i),
    schedule: "* * * * * *",
    command: ["/bin/true"],
    extra: { paused: true },
  }));

/**
 * `nodes` real daemons with the same `jobs` per-second paused jobs: on SQLite (one node, its state
 * dir) or sharing one PostgreSQL database (`url`, each node its own state dir). Every slot in a
 * window of `seconds` whole seconds should get exactly one `skipped` row, from whichever node
 * claimed it first. Lateness = the row's started_at (the claiming daemon's clock) - its slot, as
 * pausedDaemon in rows.js measures it.
 */
async function pausedNodes({ jobs, seconds, url, nodes }) {
  const dirs = range(nodes).map(() => tmpdir());
  const cfgs = dirs.map((dir, i) =>
    writeConfig(dir, {
      jobs: pausedJobs(jobs),
      top: url ? { store: url, node: `n${i + 1}` } : {},
    }),
  );
  const t0 = performance.now();
  const ds = await startAll(cfgs, { timeoutMs: 600_000 });
  const startMs = performance.now() - t0;
  const raw = url ? await rawClient(url) : null;
  try {
    const from = (Math.floor(Date.now() / 1000) + 2) * 1000;
    const to = from + seconds * 1000;
    // A row's started_at is the time its tick began writing (read once per tick, before the
    // transaction): it does not show how long the write took. So, beside it, when each slot's
    // dispositions were all committed, as a reader sees it: polled every 100 ms.
    const committed = watchCommits({ raw, stateDir: path.join(dirs[0], "state"), from, to, jobs });
    await sleepUntil(from);
    const c0 = ds.map((d) => procCpu(d.pid).total);
    await sleepUntil(to);
    const cpu = ds.map((d, i) => ((procCpu(d.pid).total - c0[i]) / seconds) * 100);
    const expected = jobs * seconds;
    const sql = `SELECT job, slot, status, started_at, node FROM runs WHERE slot >= ${url ? "$1" : "?"} AND slot < ${url ? "$2" : "?"}`;
    const read = async () => {
      if (raw) return (await raw.query(sql, [from, to])).rows;
      const db = await openDb(path.join(dirs[0], "state"));
      try {
        return db.prepare(sql).all(from, to);
      } finally {
        db.close();
      }
    };
    // Poll until every slot has its row, or 20 s after the window: what is missing then is lost.
    let rows = [];
    await waitFor(
      async () => (rows = await read()).length >= expected,
      "every slot's disposition",
      20_000,
      250,
    ).catch(() => {});
    const bySlot = new Map();
    for (const r of rows) {
      const k = `${r.job}@${Number(r.slot)}`;
      bySlot.set(k, [...(bySlot.get(k) ?? []), r]);
    }
    let twice = 0;
    for (const v of bySlot.values()) if (v.length > 1) twice++;
    // Delivered: the slot has exactly one row, and it is `skipped` (paused), as a slot should be
    // recorded; `missed` means the node's timer came too late for it (it fell behind).
    const once = [...bySlot.values()].filter((v) => v.length === 1 && v[0].status === "skipped");
    const byNode = {};
    const byStatus = {};
    for (const r of rows) {
      byNode[r.node ?? "-"] = (byNode[r.node ?? "-"] ?? 0) + 1;
      byStatus[r.status] = (byStatus[r.status] ?? 0) + 1;
    }
    const commitLate = await committed.stop();
    // Every row's lateness, `missed` ones included: when the slot got its disposition.
    const late = rows.map((r) => Number(r.started_at) - Number(r.slot));
    // The slots without a row: per second of the window, to see whether they cluster.
    const missingBySecond = {};
    for (let s = from; s < to; s += 1000) {
      const m = range(jobs).filter((j) => !bySlot.has(`${jobName(j)}@${s}`)).length;
      if (m > 0) missingBySecond[new Date(s).toISOString().slice(11, 19)] = m;
    }
    return {
      ...summary(late),
      commit: summary(commitLate.late),
      commitIncomplete: commitLate.incomplete,
      expected,
      delivered: once.length,
      twice,
      missing: expected - bySlot.size,
      missingBySecond,
      byNode,
      byStatus,
      cpu,
      startMs,
      logs: ds.map((d) => d.err),
    };
  } finally {
    await raw?.end();
    // A daemon deep in a long tick answers SIGTERM only when the tick ends: kill it (as
    // pausedDaemon does). The database is a fresh one per segment, never reused.
    await Promise.all(ds.map((d) => stopDaemon(d, { kill: true })));
  }
}

/**
 * When all `jobs` dispositions of each slot (a whole second) in [from, to) were committed: polled
 * from the slots table every 100 ms (+ the query's time) until each slot is complete or stop()
 * is called. `late`: those times minus their slots (ms); `incomplete`: slots never complete.
 */
function watchCommits({ raw, stateDir, from, to, jobs }) {
  const done = new Map();
  let stopping = false;
  const poll = (async () => {
    const db = raw ? null : await openDb(stateDir);
    try {
      for (let next = from; next < to && !stopping;) {
        const sql = `SELECT slot, count(*) AS n FROM slots WHERE slot >= ${raw ? "$1" : "?"} AND slot < ${raw ? "$2" : "?"} GROUP BY slot`;
        const rows = raw ? (await raw.query(sql, [next, to])).rows : db.prepare(sql).all(next, to);
        const now = Date.now();
        for (const r of rows)
          if (Number(r.n) >= jobs && !done.has(Number(r.slot))) done.set(Number(r.slot), now);
        while (done.has(next)) next += 1000;
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      db?.close();
    }
  })();
  return {
    async stop() {
      stopping = true;
      await poll;
      return {
        late: [...done].map(([slot, at]) => at - slot),
        incomplete: (to - from) / 1000 - done.size,
      };
    },
  };
}

/** The daemon log lines worth a look (not the start-up lines), deduplicated, for the notes. */
function logDigest(logs) {
  const seen = new Map();
  for (const [i, l] of logs.entries())
    for (const line of l.split("\n")) {
      if (line === "" || /daemon \d+ started|listening|broker/.test(line)) continue;
      const k = `n${i + 1}: ${line.replace(/\d+/g, "N").slice(0, 160)}`;
      seen.set(k, (seen.get(k) ?? 0) + 1);
    }
  return [...seen].map(([k, n]) => `${k}${n > 1 ? ` (x${n})` : ""}`);
}

export async function nodesPaused() {
  const jobs = 1000;
  const what = `lateness p99 (ms), ${jobs.toLocaleString("en")} paused jobs x 1/s on 3 nodes sharing PostgreSQL`;
  const baseName = "1 node on SQLite";
  const target = "≤ 2×, 100%";
  const why = pgMissing();
  if (why) return [notRun(what, baseName, target, why)];
  const seconds = O.quick ? 10 : 30;
  const rounds = 2;
  const load0 = load();
  const pg = [];
  const sq = [];
  for (let r = 0; r < rounds; r++) {
    for (const k of r % 2 ? ["pg", "sq"] : ["sq", "pg"]) {
      if (k === "sq") {
        O.log(`nodes-paused: 1 daemon on SQLite, ${jobs} paused jobs, ${seconds} s`);
        sq.push(await pausedNodes({ jobs, seconds, url: null, nodes: 1 }));
      } else {
        O.log(`nodes-paused: 3 daemons on one PostgreSQL, ${jobs} paused jobs, ${seconds} s`);
        pg.push(await pausedNodes({ jobs, seconds, url: await freshDatabase(), nodes: 3 }));
      }
    }
  }
  const worst = (xs, f) => Math.max(...xs.map(f));
  const p99 = (xs) => worst(xs, (x) => x.p99);
  const all = (xs, f) => xs.reduce((s, x) => s + f(x), 0);
  const statuses = (x) =>
    Object.entries(x.byStatus)
      .map(([k, n]) => `${n} ${k}`)
      .join(", ");
  const fmt = (x) =>
    `p50/p99/max ${x.p50.toFixed(0)}/${x.p99.toFixed(0)}/${x.max.toFixed(0)} ms, ${((100 * x.delivered) / x.expected).toFixed(1)}% delivered (${statuses(x)} of ${x.expected}), a second's rows all committed after p50/max ${x.commit.p50.toFixed(0)}/${x.commit.max.toFixed(0)} ms${x.commitIncomplete ? ` (${x.commitIncomplete} seconds never complete)` : ""}`;
  const pgDelivered = all(pg, (x) => x.delivered);
  const expected = all(pg, (x) => x.expected);
  const problems = [];
  for (const [side, xs] of [
    ["3 nodes", pg],
    ["1 node", sq],
  ]) {
    for (const [i, x] of xs.entries()) {
      const at = `${side}, round ${i + 1}`;
      if (x.missing > 0)
        problems.push(
          `${at}: ${x.missing} slots without a row (per second: ${JSON.stringify(x.missingBySecond)})`,
        );
      if (x.twice > 0) problems.push(`${at}: ${x.twice} slots with two rows`);
      const digest = logDigest(x.logs);
      if (digest.length > 0) problems.push(`${at}, daemon logs: ${digest.slice(0, 6).join("; ")}`);
    }
  }
  for (const p of problems) O.log(`nodes-paused: ${p}`);
  const c = p99(pg);
  const b = p99(sq);
  return [
    row(
      what,
      c,
      b,
      baseName,
      target,
      c / b <= 2 && pgDelivered === expected,
      `${rounds} rounds of ${seconds} s each, alternating (the worse round's p99 on each side); 3 nodes: ${pg.map(fmt).join(" / ")}; rows per node ${pg.map((x) => JSON.stringify(x.byNode)).join(" / ")} ("-": no node recorded); CPU per node ${pg.map((x) => x.cpu.map((v) => `${v.toFixed(0)}%`).join("+")).join(" / ")}; start-up ${pg.map((x) => (x.startMs / 1000).toFixed(1)).join(", ")} s. 1 node: ${sq.map(fmt).join(" / ")}; CPU ${sq.map((x) => `${x.cpu[0].toFixed(0)}%`).join(", ")}; start-up ${sq.map((x) => (x.startMs / 1000).toFixed(1)).join(", ")} s${problems.length ? `; ${problems.join("; ")}` : ""}; load ${load0} -> ${load()}`,
      "ms",
    ),
  ];
}

// ---- 3. failover ----------------------------------------------------------------------------

/**
 * Two nodes, one job every second running `sleep 60` (overlap: skip, the default), lease 3 s,
 * heartbeat 1 s. SIGKILL the node whose run holds the job; the time from the kill until the
 * other node's run of a later slot is `running` (its started_at: the claiming node's clock, the
 * same machine's). The victim's run lives on in its own process group (as it would on a lost
 * host whose network went): it is killed here afterwards.
 */
async function failoverOnce({ leaseMs, heartbeatMs, slotMs }) {
  const url = await freshDatabase();
  const raw = await rawClient(url);
  const dir = tmpdir();
  const job = {
    name: "long",
    schedule: slotMs === 1000 ? "* * * * * *" : `*/${slotMs / 1000} * * * * *`,
    command: "sleep 60",
  };
  const cfgs = ["n1", "n2"].map((n) => {
    const d = path.join(dir, n);
    fs.mkdirSync(d);
    return writeConfig(d, {
      jobs: [job],
      heartbeat: `${heartbeatMs}ms`,
      top: { store: url, node: n, lease: `${leaseMs}ms` },
    });
  });
  const ds = new Map();
  const pgids = new Set();
  const runs = async (where, params = []) =>
    (await raw.query(`SELECT * FROM runs WHERE ${where} ORDER BY id`, params)).rows.map((r) => ({
      ...r,
      id: Number(r.id),
      slot: r.slot === null ? null : Number(r.slot),
      started_at: Number(r.started_at),
    }));
  try {
    const started = await startAll(cfgs);
    started.forEach((d, i) => ds.set(`n${i + 1}`, d));
    // Steady state first: each node has renewed its lease at least twice since its claim (a
    // node's first renewal comes a beat after its start-up, see BENCHMARKS.md), ...
    const renewals = new Map();
    await waitFor(
      async () => {
        const r = await raw.query("SELECT node, renewed_at FROM daemon WHERE stopped_at IS NULL");
        for (const x of r.rows) {
          const seen = renewals.get(x.node) ?? new Set();
          seen.add(Number(x.renewed_at));
          renewals.set(x.node, seen);
        }
        return renewals.size === 2 && [...renewals.values()].every((v) => v.size >= 3);
      },
      "both nodes renewing their leases",
      30_000,
    );
    // ... then the kill at a random moment of a second (not in step with slots or beats), of the
    // node whose run holds the job then.
    const at = Date.now() + 200 + Math.floor(Math.random() * 1000);
    await waitFor(() => Date.now() >= at, "the moment of the kill", 5000, 5);
    const first = await waitFor(
      async () => (await runs("job = 'long' AND status = 'running' AND pgid IS NOT NULL"))[0],
      "the long job running",
      30_000,
    );
    pgids.add(Number(first.pgid));
    const victim = ds.get(first.node);
    const killedAt = Date.now();
    victim.kill("SIGKILL");
    await victim.exited;
    const next = await waitFor(
      async () => (await runs("job = 'long' AND id > $1 AND status = 'running'", [first.id]))[0],
      "the job taken over by the other node",
      30_000,
    );
    if (next.pgid !== null) pgids.add(Number(next.pgid));
    const [old] = await runs("id = $1", [first.id]);
    // The victim's last renewal, read now: one sent just before the kill still commits.
    const last = (
      await raw.query("SELECT renewed_at, lease_ms FROM daemon WHERE node = $1", [first.node])
    ).rows[0];
    // Every slot between the two runs: one row each, none run (the lock was the old run's).
    const between = await runs("job = 'long' AND slot > $1 AND slot < $2", [first.slot, next.slot]);
    // A slot twice: two first attempts, or two runs (a skipped slot caught up after the lease
    // has its `skipped` row and its catch-up run: one run).
    const dup = await raw.query(
      `SELECT count(*)::int AS n FROM (SELECT slot FROM runs WHERE job = 'long' AND slot IS NOT NULL
         GROUP BY slot HAVING count(*) FILTER (WHERE attempt = 1) > 1
           OR count(*) FILTER (WHERE status NOT IN ('skipped', 'missed')) > 1) x`,
    );
    const expiry = Number(last.renewed_at) + Number(last.lease_ms);
    return {
      tookMs: next.started_at - killedAt,
      renewedAgoMs: killedAt - Number(last.renewed_at),
      // The lease's end, on this machine's clock (the database's is the same machine's).
      killToExpiryMs: expiry - killedAt,
      expiryToSlotMs: next.slot - expiry,
      slotToStartMs: next.started_at - next.slot,
      // Taken over at the lease's end by a catch-up of the slots the old run blocked (issue 34),
      // or at the next slot.
      caughtUp: next.trigger === "catchup",
      expiryToStartMs: next.started_at - expiry,
      otherNode: next.node !== first.node,
      oldStatus: old.status,
      oldTakenOver:
        old.status === "fenced" &&
        /lease ran out; node \S+ took the job over/.test(old.reason ?? ""),
      selfFenced: [...ds.values()].filter((d) => /fenced: node \S+ could not renew/.test(d.err))
        .length,
      between:
        Object.entries(between.reduce((m, r) => ({ ...m, [r.status]: (m[r.status] ?? 0) + 1 }), {}))
          .map(([k, n]) => `${n} ${k}`)
          .join(", ") || "none",
      duplicateSlots: dup.rows[0].n,
      logs: [...ds.values()].map((d) => d.err),
    };
  } finally {
    await raw.end();
    for (const d of ds.values()) await stopDaemon(d, { graceMs: 15_000 });
    for (const g of pgids) {
      try {
        process.kill(-g, "SIGKILL");
      } catch {
        // gone already
      }
    }
  }
}

export async function failover() {
  const leaseMs = 3000;
  const heartbeatMs = 1000;
  const slotMs = 1000;
  const bound = leaseMs + heartbeatMs;
  const what =
    "failover (ms): SIGKILL of the node running a job until its next run starts on the other node";
  const baseName = `lease + heartbeat (${leaseMs / 1000} s + ${heartbeatMs / 1000} s)`;
  const target = `≤ lease + heartbeat + one slot (${(bound + slotMs) / 1000} s)`;
  const why = pgMissing();
  if (why) return [notRun(what, baseName, target, why)];
  const rounds = O.quick ? 3 : 5;
  const load0 = load();
  const res = [];
  for (let r = 0; r < rounds; r++) {
    O.log(
      `failover: round ${r + 1} of ${rounds}: 2 nodes, a job every ${slotMs / 1000} s running sleep 60, lease ${leaseMs / 1000} s`,
    );
    res.push(await failoverOnce({ leaseMs, heartbeatMs, slotMs }));
  }
  const worst = Math.max(...res.map((x) => x.tookMs));
  const sound = res.every((x) => x.otherNode && x.oldTakenOver && x.duplicateSlots === 0);
  const selfFenced = res.reduce((n, x) => n + x.selfFenced, 0);
  const f = (v) => (v / 1000).toFixed(2);
  return [
    row(
      what,
      worst,
      bound,
      baseName,
      target,
      worst <= bound + slotMs && sound,
      `the worst of ${rounds} kills; each kill: ${res.map((x) => `${f(x.tookMs)} s (last renewal ${f(x.renewedAgoMs)} s before the kill, ran out ${f(x.killToExpiryMs)} s after it; ${x.caughtUp ? `a catch-up of the last skipped slot started ${f(x.expiryToStartMs)} s after that;` : `next slot ${f(x.expiryToSlotMs)} s after that, started ${f(x.slotToStartMs)} s after its slot;`} old run ${x.oldTakenOver ? "fenced, taken over" : x.oldStatus}; slots between: ${x.between})`).join("; ")}; median ${f(
        pct(
          res.map((x) => x.tookMs),
          50,
        ),
      )} s; no slot twice: ${res.every((x) => x.duplicateSlots === 0)}; job every ${slotMs / 1000} s, overlap skip; ${selfFenced} of ${2 * rounds} nodes fenced themselves once just after start-up (before the kill; see BENCHMARKS.md); load ${load0} -> ${load()}`,
      "ms",
    ),
  ];
}
