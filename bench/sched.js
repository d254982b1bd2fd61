// Scheduler lateness in one process: N no-op jobs, each due every second, and for every fire the
// time from its slot to the moment the scheduler hands it over ("tick handled - slot"). Run as a
// child of bench/run.js, one scheduler per process:
//
//   node bench/sched.js --impl floor|croner|node-cron|cronvisor --jobs 1000 --seconds 8 [--root DIR]
//
// - floor: one setTimeout armed for the next whole second, then a loop over the jobs. Nothing
//   can do less per slot, so this is the floor the others are compared with.
// - croner: one `new Cron("* * * * * *", fn)` per job (croner's own timers).
// - node-cron: one `cron.schedule("* * * * * *", fn)` per job.
// - cronvisor: the daemon's scheduling path, without the store, on the shipping code of the
//   measured build: the jobs are parsed by its parseConfig (dist/config/parse.js), each job's
//   state is its jobState (dist/daemon/state.js), the one timer is armed for the earliest
//   wakeAt like Supervisor.arm(), and a tick asks planDue (dist/daemon/due.js) for each due job,
//   as Supervisor.tick() and due() do, up to the batch (here record()). Only the timer and the
//   loops are this file's; the real daemon (with the store) is measured by bench/run.js with
//   paused jobs.
//
// Prints one JSON line: { impl, jobs, seconds, n, p50, p99, max, delivered, expected, dup,
// setupMs, rssMiB }.
import path from "node:path";
import { pathToFileURL } from "node:url";

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? dflt : process.argv[i + 1];
};
const impl = arg("impl", "floor");
const jobs = Number(arg("jobs", "1000"));
const seconds = Number(arg("seconds", "8"));
const warmup = Number(arg("warmup", "1"));
const root = path.resolve(
  arg("root", path.join(path.dirname(new URL(import.meta.url).pathname), "..")),
);

// Wall time with sub-millisecond resolution that never disagrees with Date.now() (the clock the
// slots are on): performance.now() plus an offset, re-based whenever the two clocks drift apart.
let offset = Date.now() - performance.now();
const wall = () => {
  const d = Date.now();
  let t = performance.now() + offset;
  if (t < d || t >= d + 1) {
    offset = d + 0.5 - performance.now();
    t = d + 0.5;
  }
  return t;
};

// The measured window: whole seconds [from, to). Set once the jobs exist.
let from = Infinity;
let to = Infinity;
const late = [];
const lastSlot = new Float64Array(jobs).fill(-1);
let delivered = 0;
let dup = 0;
/** A fire of job i for `slot`, handled now. */
function record(i, slot) {
  const t = wall();
  // A scheduler that saturates the event loop would hold off the timer that ends the run.
  if (t > to + graceMs) finish();
  if (slot < from || slot >= to) return;
  if (lastSlot[i] === slot) {
    dup++;
    return;
  }
  lastSlot[i] = slot;
  delivered++;
  late.push(t - slot);
}

const stoppers = [];
// Late fires of the last slots still count: the run ends this long after the window.
const graceMs = 3000;
const t0 = performance.now();

if (impl === "floor") {
  let timer;
  const arm = () => {
    const next = Math.floor(Date.now() / 1000) * 1000 + 1000;
    timer = setTimeout(() => {
      for (let i = 0; i < jobs; i++) record(i, next);
      arm();
    }, next - Date.now());
  };
  arm();
  stoppers.push(() => clearTimeout(timer));
} else if (impl === "croner") {
  const { Cron } = await import("croner");
  for (let i = 0; i < jobs; i++) {
    // croner fires at or after the slot (never before): the slot is the whole second.
    const c = new Cron("* * * * * *", () => record(i, Math.floor(Date.now() / 1000) * 1000));
    stoppers.push(() => c.stop());
  }
} else if (impl === "node-cron") {
  const { default: cron } = await import("node-cron");
  for (let i = 0; i < jobs; i++) {
    // node-cron passes the slot it runs as ctx.date.
    const t = cron.schedule("* * * * * *", (ctx) => record(i, ctx.date.getTime()), {
      suppressMissedWarning: true,
    });
    t.on("execution:missed", () => {});
    stoppers.push(() => t.destroy());
  }
} else if (impl === "cronvisor") {
  const dist = (file) => import(pathToFileURL(path.join(root, "dist", file)).href);
  const { parseConfig } = await dist("config/parse.js");
  const { jobState, wakeAt } = await dist("daemon/state.js");
  const { planDue } = await dist("daemon/due.js");
  // Supervisor's MAX_SLEEP_MS.
  const MAX_SLEEP_MS = 30_000;
  const now = Date.now;
  let yaml = "timezone: UTC\njobs:\n";
  for (let i = 0; i < jobs; i++)
    yaml += `  j${i}:\n    schedule: "* * * * * *"\n    command: "true"\n`;
  const parsed = parseConfig(yaml, path.join(root, "bench-sched.yaml"), { hostTimezone: "UTC" });
  if (!parsed.config) throw new Error(JSON.stringify(parsed.errors.slice(0, 3)));
  const start = now();
  const states = parsed.config.jobs.map((cfg) => jobState(cfg, null, start));
  let timer = null;
  const tick = () => {
    try {
      const n = now();
      for (let i = 0; i < states.length; i++) {
        const st = states[i];
        if (st.next === null || st.next > n) continue;
        const plan = planDue(st.cfg, st.next, n);
        st.next = plan.next;
        record(i, plan.fire);
      }
    } finally {
      arm();
    }
  };
  const arm = () => {
    if (timer) clearTimeout(timer);
    let due = Infinity;
    for (const st of states) if (wakeAt(st) < due) due = wakeAt(st);
    timer = setTimeout(tick, Math.max(0, Math.min(due - now(), MAX_SLEEP_MS)));
  };
  arm();
  stoppers.push(() => clearTimeout(timer));
} else {
  process.stderr.write(`unknown --impl ${impl}\n`);
  process.exit(2);
}

const setupMs = performance.now() - t0;
from = (Math.floor(Date.now() / 1000) + 1 + warmup) * 1000;
to = from + seconds * 1000;
let finish = function () {
  for (const s of stoppers) s();
  const sorted = Float64Array.from(late).sort();
  const at = (p) =>
    sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] : null;
  const out = {
    impl,
    jobs,
    seconds,
    n: late.length,
    p50: at(0.5),
    p99: at(0.99),
    max: sorted.length ? sorted[sorted.length - 1] : null,
    delivered,
    expected: jobs * seconds,
    dup,
    setupMs,
    rssMiB: process.memoryUsage().rss / 2 ** 20,
  };
  process.stdout.write(`${JSON.stringify(out)}\n`, () => process.exit(0));
  // Nothing more is recorded while the line is written.
  finish = () => {};
};
setTimeout(finish, to + graceMs - Date.now());
