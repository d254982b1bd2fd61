// The status page's benchmark rows (issue 15): `GET /` on a big store next to `node -e 0` (the
// bar `status --json` is held to), and slot-to-spawn lateness while a client loads `/` every
// second next to the same daemon without that client. Rows as in rows.js.
import http from "node:http";
import net from "node:net";
import path from "node:path";
import {
  median,
  openDb,
  sleep,
  startDaemon,
  stopDaemon,
  summary,
  timeRun,
  tmpdir,
  waitFor,
  row,
} from "./lib.js";
import { alternate, cvxSegment, fillStore } from "./rows.js";

let O = { quick: false, log: () => {}, nodeArgs: [] };
export function configure(o) {
  O = { ...O, ...o };
}

/** A loopback port nobody listens on now (the daemon binds it a moment later). */
async function freePort() {
  const s = net.createServer();
  await new Promise((resolve) => s.listen(0, "127.0.0.1", resolve));
  const { port } = s.address();
  await new Promise((resolve) => s.close(resolve));
  return port;
}

/** One GET with its whole body read, timed from the request to the last byte. */
function timedGet(port, path) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.get({ host: "127.0.0.1", port, path, agent: false }, (res) => {
      let bytes = 0;
      res.on("data", (d) => (bytes += d.length));
      res.on("end", () => resolve({ ms: performance.now() - t0, status: res.statusCode, bytes }));
    });
    req.on("error", reject);
    req.setTimeout(60_000, () => req.destroy(new Error("no answer in 60 s")));
  });
}

/**
 * A client that loads `/` every second (each load a second after the last one began, or at once
 * if it took longer) until stopped; the stopper returns { loads, failed, ms }.
 */
function pageLoader(port) {
  let stop = false;
  const ms = [];
  let failed = 0;
  const done = (async () => {
    while (!stop) {
      const t0 = Date.now();
      try {
        const r = await timedGet(port, "/");
        if (r.status === 200) ms.push(r.ms);
        else failed++;
      } catch {
        failed++;
      }
      await sleep(1000 - (Date.now() - t0));
    }
  })();
  return async () => {
    stop = true;
    await done;
    return { loads: ms.length, failed, ms };
  };
}

/** Wait for `/` to answer 200 (the first load also starts the page's worker); that load. */
function pageUp(port) {
  return waitFor(
    async () => {
      const r = await timedGet(port, "/").catch(() => null);
      return r?.status === 200 ? r : null;
    },
    "the page",
    120_000,
    200,
  );
}

/**
 * Wait until the daemon has nothing running and has written no run for 2 s: the filled store's
 * hourly jobs have a slot catch-up runs at start (1,000 spawns) when the hour has turned since.
 */
async function quiet(state) {
  const db = await openDb(state);
  try {
    let last = -1;
    let since = Date.now();
    await waitFor(
      () => {
        const { n, top } = db
          .prepare(
            "SELECT (SELECT COUNT(*) FROM runs WHERE status = 'running') AS n, (SELECT MAX(id) FROM runs) AS top",
          )
          .get();
        if (top !== last || n > 0) [last, since] = [top, Date.now()];
        return Date.now() - since >= 2000;
      },
      "the daemon to go quiet",
      300_000,
      250,
    );
  } finally {
    db.close();
  }
}

/** `GET /` against the daemon on a bulk-filled store, alternating with `node -e 0`. */
async function pageWall() {
  const dir = tmpdir();
  const port = await freePort();
  const t0 = performance.now();
  const cfg = await fillStore(dir, 1000, 100_000, { http: `127.0.0.1:${port}` });
  O.log(
    `page: store filled in ${((performance.now() - t0) / 1000).toFixed(1)} s; starting the daemon`,
  );
  const d = await startDaemon(cfg, { nodeArgs: O.nodeArgs, timeoutMs: 600_000 });
  try {
    await quiet(path.join(dir, "state"));
    // The first load starts the page's worker: not counted.
    const first = await pageUp(port);
    const n = O.quick ? 5 : 9;
    const page = [];
    const node = [];
    let bytes = 0;
    for (let i = 0; i < n; i++) {
      const r = await timedGet(port, "/");
      if (r.status !== 200) throw new Error(`GET / answered ${r.status}`);
      page.push(r.ms);
      bytes = r.bytes;
      node.push(timeRun(process.execPath, ["-e", "0"]).ms);
    }
    const cold = await coldLoads(path.join(dir, "state"), port, O.quick ? 3 : 5);
    return [
      row(
        "`GET /` wall (ms), 1,000 jobs, 100,000 runs (24 h timeline)",
        median(page),
        median(node),
        "node -e 0",
        "≤ 2×",
        median(page) / median(node) <= 2,
        `median of ${n} loads one after another (the store unchanged between most of them) after a first load of ${first.ms.toFixed(0)} ms (which starts the page's worker); page ${(bytes / 1024).toFixed(0)} KiB; NODE_EXTRA_CA_CERTS unset`,
        "ms",
      ),
      row(
        "`GET /` wall (ms), the same, each load the first after a commit (the daemon's heartbeat)",
        median(cold.page),
        median(cold.node),
        "node -e 0",
        "≤ 2×",
        median(cold.page) / median(cold.node) <= 2,
        `median of ${cold.page.length}: every load reads what changed since the last (the summaries again, the timelines' changes)`,
        "ms",
      ),
    ];
  } finally {
    await stopDaemon(d);
  }
}

/**
 * Loads of `/` each made as soon as the daemon has committed something since the last (its
 * heartbeat): the page's worker cannot reuse its kept rows as they are, and reads what changed
 * since (src/monitor/page-reads.ts).
 */
async function coldLoads(state, port, n) {
  const db = await openDb(state);
  const out = { page: [], node: [] };
  try {
    for (let i = 0; i < n; i++) {
      const v = db.pragma("data_version", { simple: true });
      await waitFor(
        () => db.pragma("data_version", { simple: true }) !== v,
        "a commit by the daemon",
        60_000,
        10,
      );
      const r = await timedGet(port, "/");
      if (r.status !== 200) throw new Error(`GET / answered ${r.status}`);
      out.page.push(r.ms);
      out.node.push(timeRun(process.execPath, ["-e", "0"]).ms);
    }
  } finally {
    db.close();
  }
  return out;
}

/** Slot-to-spawn p99 of 50 stamp jobs with and without a client loading `/` every second. */
async function pageLateness(stamps) {
  const jobs = 50;
  const seconds = O.quick ? 4 : 10;
  const rounds = 2;
  O.log(
    `page vs the daemon: ${jobs} jobs, with and without a client loading / every second, ${rounds} x ${seconds} s each`,
  );
  const segment = async (loaded) => {
    const port = await freePort();
    return cvxSegment({
      jobs,
      seconds,
      stamps,
      top: { http: `127.0.0.1:${port}` },
      during: loaded ? async () => (await pageUp(port), pageLoader(port)) : undefined,
    });
  };
  const [withPage, without] = await alternate(
    rounds,
    () => segment(true),
    () => segment(false),
  );
  const w = summary(withPage.flatMap((s) => s.late.late));
  const wo = summary(without.flatMap((s) => s.late.late));
  const loads = withPage.reduce((s, x) => s + x.load.loads, 0);
  const failed = withPage.reduce((s, x) => s + x.load.failed, 0);
  const pageMs = median(withPage.flatMap((s) => s.load.ms));
  return row(
    "slot-to-spawn p99 (ms) while a client loads `/` every second",
    w.p99,
    wo.p99,
    "the same daemon without the client",
    "≤ 1.1×",
    w.p99 / wo.p99 <= 1.1 && failed === 0,
    `p50 ${w.p50.toFixed(1)} vs ${wo.p50.toFixed(1)} ms; ${loads} page loads meanwhile (median ${pageMs.toFixed(0)} ms), ${failed} failed; both daemons serve http`,
    "ms",
  );
}

export async function page(stamps) {
  return [...(await pageWall()), await pageLateness(stamps)];
}
