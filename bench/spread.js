// The benchmarks of issue 41 (several hosts that add capacity on PostgreSQL), in the shape of
// rows.js: { what, cvx, base, baseName, ratio, target, pass, note }. The PostgreSQL server is
// test/pg.js's throwaway cluster (fsync on). Without its binaries the rows say so.
//
//   nodes-spread  400 per-second jobs (`true`) on 3 daemons sharing PostgreSQL for 30 s: the
//                 ratio is N x the largest node's share of the runs (1.0: an even spread); the
//                 notes give the runs on time for 1 and 3 nodes at 400 and 550 jobs
//   pg-commits    fsync'd commits per slot with 1 and 100 slots per tick, written as the daemon
//                 writes them on a shared store (claims and starts in one transaction, the pids
//                 and ends riding with the next): counted exactly (transaction ids given out:
//                 one per transaction that wrote) and as WAL syncs (pg_stat_wal.wal_sync)
import os from "node:os";
import {
  importDist,
  jobName,
  range,
  row,
  sleepUntil,
  startDaemon,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./lib.js";
import { scheduledReserve } from "../test/helpers.js";
import { freshDatabase, pgMissing, rawClient } from "../test/pg.js";

let O = { quick: false, log: () => {}, nodeArgs: [] };
export function configure(o) {
  O = { ...O, ...o };
}

const load = () => os.loadavg()[0].toFixed(2);
const notRun = (what, baseName, target, why) =>
  row(what, NaN, NaN, baseName, target, null, `not measured: ${why}`);

/** A run is on time when it started within this long of its slot (and ran: not skipped). */
const ON_TIME_MS = 1000;

/**
 * `nodes` daemons sharing a fresh database, `jobs` per-second jobs running `true`, for `seconds`
 * whole seconds after they all started: each node's share of the runs, and the slots whose run
 * started on time.
 */
async function spreadOnce({ jobs, nodes, seconds }) {
  const url = await freshDatabase();
  const list = range(jobs).map((i) => ({
    name: jobName(i),
    schedule: "* * * * * *",
    command: ["/bin/true"],
  }));
  const cfgs = range(nodes).map((i) =>
    writeConfig(tmpdir(), {
      jobs: list,
      heartbeat: "2s",
      top: { store: url, node: `n${i + 1}`, lease: "10s" },
    }),
  );
  const ds = [];
  const raw = await rawClient(url);
  try {
    for (const c of cfgs) ds.push(await startDaemon(c, { nodeArgs: O.nodeArgs }));
    // A few seconds for every node to see the others' leases (the jobs are dealt then).
    const from = (Math.floor(Date.now() / 1000) + 5) * 1000;
    const to = from + seconds * 1000;
    await sleepUntil(to + 3000);
    let rows = [];
    const expected = jobs * seconds;
    const read = async () =>
      (
        await raw.query(
          "SELECT job, slot, status, started_at, node FROM runs WHERE slot >= $1 AND slot < $2 AND trigger = 'schedule'",
          [from, to],
        )
      ).rows;
    await waitFor(async () => (rows = await read()).length >= expected, "rows", 20_000, 500).catch(
      () => {},
    );
    const byNode = {};
    const byStatus = {};
    let onTime = 0;
    for (const r of rows) {
      byStatus[r.status] = (byStatus[r.status] ?? 0) + 1;
      if (r.status === "skipped" || r.status === "missed") continue;
      byNode[r.node] = (byNode[r.node] ?? 0) + 1;
      if (Number(r.started_at) - Number(r.slot) <= ON_TIME_MS) onTime++;
    }
    const ran = Object.values(byNode).reduce((s, n) => s + n, 0);
    const largest = Math.max(0, ...Object.values(byNode));
    return {
      jobs,
      nodes,
      expected,
      ran,
      onTime,
      byNode,
      byStatus,
      spread: ran > 0 ? (nodes * largest) / ran : NaN,
    };
  } finally {
    await raw.end();
    await Promise.all(ds.map((d) => stopDaemon(d, { kill: true })));
  }
}

export async function nodesSpread() {
  const what = "runs spread over 3 nodes: N x the largest node's share, 400 per-second jobs";
  const baseName = "an even spread (1.0)";
  const target = "≤ 1.15";
  const why = pgMissing();
  if (why) return [notRun(what, baseName, target, why)];
  const seconds = O.quick ? 10 : 30;
  const load0 = load();
  const results = [];
  for (const jobs of [400, 550]) {
    for (const nodes of [1, 3]) {
      O.log(`nodes-spread: ${jobs} per-second jobs on ${nodes} node(s), ${seconds} s`);
      results.push(await spreadOnce({ jobs, nodes, seconds }));
    }
  }
  const main = results.find((r) => r.jobs === 400 && r.nodes === 3);
  const pctOf = (n, d) => `${((100 * n) / d).toFixed(1)}%`;
  const fmt = (r) =>
    `M=${r.jobs} N=${r.nodes}: ${pctOf(r.onTime, r.expected)} on time (${r.onTime}/${r.expected}), runs per node ${JSON.stringify(r.byNode)}, rows ${JSON.stringify(r.byStatus)}`;
  return [
    row(
      what,
      main.spread,
      1,
      baseName,
      target,
      main.spread <= 1.15,
      `${seconds} s per case, jobs running true, heartbeat 2 s, lease 10 s; on time = started within ${ON_TIME_MS} ms of the slot; ${results.map(fmt).join("; ")}; load ${load0} -> ${load()}; cores ${os.cpus().length}`,
    ),
  ];
}

const okResult = (at) => ({
  status: "ok",
  reason: null,
  exitCode: 0,
  signal: null,
  finishedAt: at,
  durationMs: 1,
  logBytes: 0,
  cpuS: null,
  memoryPeakBytes: null,
});

/** `ticks` ticks of `perTick` slots as the daemon writes them: commits and WAL syncs per slot. */
async function commitsOnce(perTick, ticks) {
  const { openPgStore } = await importDist("store/store.js");
  // As the daemon of the measured build writes them (--root: an older build): pids and ends
  // riding with the next tick (endings.ts FOLD_MS), or each their own write.
  const folds = "FOLD_MS" in (await importDist("daemon/endings.js"));
  const url = await freshDatabase();
  const raw = await rawClient(url);
  const store = await openPgStore(url, { create: true, node: "n1" });
  const counts = async () => {
    await raw.query("SELECT pg_stat_clear_snapshot()");
    const r = await raw.query(
      "SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS x, (SELECT wal_sync FROM pg_stat_wal) AS s",
    );
    return { xid: Number(r.rows[0].x), sync: Number(r.rows[0].s) };
  };
  try {
    const jobs = range(perTick).map((i) => jobName(i));
    let riders = { procs: [], ends: [] };
    const base = (Math.floor(Date.now() / 1000) - 100_000) * 1000;
    const tick = async (k) => {
      const items = jobs.map((j) =>
        scheduledReserve(j, base + k * 1000, { now: () => Date.now() }),
      );
      const out = await store.reserveRuns(items, folds ? riders : undefined);
      const ids = out.map((o) => {
        if (o.kind !== "started") throw new Error(`tick ${k}: ${JSON.stringify(o)}`);
        return o.run.id;
      });
      riders = {
        procs: ids.map((runId) => ({ runId, pid: process.pid, pidStart: "x", pgid: process.pid })),
        ends: ids.map((runId) => ({ runId, result: okResult(Date.now()) })),
      };
      if (folds) return;
      await store.setRunProcesses(riders.procs);
      await store.finishRuns(riders.ends);
    };
    for (let k = 0; k < 3; k++) await tick(k); // warm-up: rows made, statements prepared
    // The WAL counts of a backend reach pg_stat_wal when it goes idle, at most once a second.
    await new Promise((r) => setTimeout(r, 1500));
    const c0 = await counts();
    for (let k = 3; k < ticks + 3; k++) await tick(k);
    if (folds) await store.reserveRuns([], riders);
    await store.close();
    await new Promise((r) => setTimeout(r, 1500));
    const c1 = await counts();
    const slots = perTick * ticks;
    return { commits: (c1.xid - c0.xid) / slots, syncs: (c1.sync - c0.sync) / slots, folds };
  } finally {
    await store.close();
    await raw.end();
  }
}

export async function pgCommits() {
  const rows = [];
  const why = pgMissing();
  for (const [perTick, ticks, target] of [
    [1, 200, 1.2],
    [100, 20, 0.2],
  ]) {
    const what = `fsync'd commits per slot, ${perTick} slot(s) per tick (PostgreSQL)`;
    const baseName = "1 commit per slot";
    if (why) {
      rows.push(notRun(what, baseName, `≤ ${target}`, why));
      continue;
    }
    O.log(`pg-commits: ${ticks} ticks of ${perTick} slot(s)`);
    const r = await commitsOnce(perTick, ticks);
    rows.push(
      row(
        what,
        r.commits,
        1,
        baseName,
        `≤ ${target}`,
        r.commits <= target,
        `${ticks} ticks; counted as transaction ids given out (each transaction that wrote; all but unsynced ones wait for an fsync); WAL syncs per slot (pg_stat_wal, the whole cluster): ${r.syncs.toFixed(3)}; ${r.folds ? "per tick: one transaction with the claims, starts, and the previous tick's pids and ends" : "per tick: claims and starts, then pids, then ends, each its own transaction (a build without riders)"}; load ${load()}`,
      ),
    );
  }
  return rows;
}
