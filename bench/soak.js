// `npm run soak`: the restarted-runner kill test, long. A real daemon runs a 200-item job whose
// items each go through `cronvisor once` (the side effect is a line in items.log), plus per-second
// jobs, while this script SIGKILLs the daemon and/or every job process at random moments and
// restarts the daemon after a random pause. Not part of CI; the last result is in BENCHMARKS.md.
//
//   node bench/soak.js [--kills 100] [--duration 1h] [--items 200] [--item-ms 100]
//                      [--tick-jobs 10] [--root DIR] [--keep] [--json FILE] [--seed N]
//   node bench/soak.js --nodes     the many-hosts tests, long (see below)
//
// Checks, at the end:
//   - every item of every round is done (marker present, side effect present);
//   - items whose side effect happened more than once ("repeats") <= kills that hit the jobs;
//   - no slot of a per-second job ran twice (their side-effect log and the store agree);
//   - every second of the soak has a disposition for every per-second job (ran/skipped/missed).
// When a round of 200 items is done and time is left, the next round starts (new keys), so the
// kills keep landing inside the item job. Exit 0 if every check holds, 1 otherwise.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(`--${name}`);
  return i < 0 ? dflt : argv[i + 1];
};
const seconds = (s) => {
  const m = /^(\d+(?:\.\d+)?)(s|m|h)?$/.exec(String(s));
  if (!m) throw new Error(`bad duration ${s} (use 300, 300s, 5m, 1h)`);
  return Number(m[1]) * { s: 1, m: 60, h: 3600 }[m[2] ?? "s"];
};
// `--nodes`: the many-hosts tests (test/nodes*.test.js) in their long form instead: a minute of
// per-second slots on three nodes, ten SIGKILLs of the node running a job.
if (argv.includes("--nodes")) {
  const files = ["nodes.test.js", "nodes-faults.test.js"].map((f) =>
    path.join(HERE, "..", "test", f),
  );
  const r = spawnSync(process.execPath, ["--test", "--test-concurrency=1", ...files], {
    stdio: "inherit",
    env: { ...process.env, CRONVISOR_SOAK: "1" },
  });
  process.exit(r.status ?? 1);
}
const KILLS = Number(opt("kills", "100"));
const DURATION_S = seconds(opt("duration", "1h"));
const ITEMS = Number(opt("items", "200"));
const ITEM_MS = Number(opt("item-ms", "100"));
const TICK_JOBS = Number(opt("tick-jobs", "10"));
const ROOT = path.resolve(opt("root", path.join(HERE, "..")));
const BIN = path.join(ROOT, "bin", "cronvisor");

// A seeded PRNG (mulberry32) so a failing soak can be replayed with --seed.
let seed = Number(opt("seed", String(Date.now() % 2 ** 31)));
const SEED = seed;
const random = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};

const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
const t0 = Date.now();
const log = (s) =>
  process.stderr.write(`[${((Date.now() - t0) / 1000).toFixed(0).padStart(5)} s] ${s}\n`);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cvx-soak-"));
const state = path.join(dir, "state");
const itemsLog = path.join(dir, "items.log");
const ticksLog = path.join(dir, "ticks.log");
const roundFile = path.join(dir, "round");
const daemonLog = path.join(dir, "daemon.log");
fs.writeFileSync(roundFile, "1\n");

// ---- the jobs ---------------------------------------------------------------------------------

fs.writeFileSync(
  path.join(dir, "items.sh"),
  `#!/bin/sh
# One round of the item job. Each item's side effect (a line in items.log) runs under
# \`cronvisor once\`, which marks the item right after the side effect: a rerun skips it.
round=$(cat "$SOAK/round")
cronvisor check "round-$round-done" && exit 0
i=1
while [ "$i" -le "$ITEMS" ]; do
  cronvisor once "r$round-$i" -- /bin/sh -c 'sleep "$0"; echo "$1" >> "$SOAK/items.log"' "$ITEM_S" "r$round-$i" || exit 1
  i=$((i + 1))
done
cronvisor mark "round-$round-done"
`,
  { mode: 0o755 },
);
const env = {
  PATH: `${path.join(ROOT, "bin")}:${path.dirname(process.execPath)}:/usr/bin:/bin`,
  SOAK: dir,
  ITEMS: String(ITEMS),
  ITEM_S: String(ITEM_MS / 1000),
};
const yaml = [
  `state_dir: ${JSON.stringify(state)}`,
  "timezone: UTC",
  "heartbeat: 2s",
  `env: ${JSON.stringify(env)}`,
  "jobs:",
  "  items:",
  '    schedule: "* * * * * *"',
  `    command: ${JSON.stringify(["/bin/sh", path.join(dir, "items.sh")])}`,
  "    catchup: once",
  "    kill_grace: 2s",
  // Keep every run row (the default prunes to 100 per job): the checks read them all.
  "    log: { keep_runs: 10000000 }",
];
for (let i = 0; i < TICK_JOBS; i++) {
  yaml.push(
    `  tick${String(i).padStart(2, "0")}:`,
    '    schedule: "* * * * * *"',
    `    command: ${JSON.stringify(["/bin/sh", "-c", 'echo "$CRONVISOR_JOB $CRONVISOR_SLOT $CRONVISOR_RUN_ID $CRONVISOR_TRIGGER" >> "$SOAK/ticks.log"'])}`,
    // An interrupted per-second run is not run again: any slot seen twice is a fault.
    "    catchup: skip",
    "    log: { keep_runs: 10000000 }",
  );
}
const config = path.join(dir, "jobs.yaml");
fs.writeFileSync(config, `${yaml.join("\n")}\n`);

// ---- the daemon and the kills -------------------------------------------------------------------

const childEnv = { ...process.env };
delete childEnv.NODE_EXTRA_CA_CERTS;
for (const k of Object.keys(childEnv)) if (k.startsWith("CRONVISOR_")) delete childEnv[k];

let daemon = null;
let starts = 0;
async function startDaemon() {
  const fd = fs.openSync(daemonLog, "a");
  const child = spawn(process.execPath, [BIN, "daemon", "-c", config], {
    env: childEnv,
    stdio: ["ignore", fd, fd],
    detached: true, // its own group: a kill here never reaches this script
  });
  fs.closeSync(fd);
  child.exitedAt = null;
  child.on("exit", () => (child.exitedAt = Date.now()));
  const deadline = Date.now() + 60_000;
  while (!fs.readFileSync(daemonLog, "utf8").includes(`daemon ${child.pid} started`)) {
    if (child.exitedAt !== null)
      throw new Error(`daemon ${child.pid} exited during start-up; see ${daemonLog}`);
    if (Date.now() > deadline)
      throw new Error(`daemon ${child.pid} did not start; see ${daemonLog}`);
    await sleep(25);
  }
  starts++;
  daemon = child;
}

/** Job processes of this soak: every process whose environment names our state dir. */
function jobPids() {
  const want = `CRONVISOR_STATE_DIR=${state}\0`;
  const pids = [];
  for (const p of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(p) || Number(p) === process.pid) continue;
    try {
      if (`${fs.readFileSync(`/proc/${p}/environ`, "latin1")}\0`.includes(want))
        pids.push(Number(p));
    } catch {
      // gone, or not ours
    }
  }
  return pids;
}

function killJobs() {
  let n = 0;
  // A few passes: a shell between two commands may fork a new one while we look.
  for (let pass = 0; pass < 3; pass++) {
    for (const pid of jobPids()) {
      try {
        process.kill(pid, "SIGKILL");
        n++;
      } catch {
        // already gone
      }
    }
  }
  return n;
}

async function killDaemon() {
  const d = daemon;
  process.kill(d.pid, "SIGKILL");
  while (d.exitedAt === null) await sleep(10);
}

let Database;
async function query(sql, ...params) {
  Database ??= (await import("better-sqlite3")).default;
  const db = new Database(path.join(state, "cronvisor.db"), {
    readonly: true,
    fileMustExist: true,
  });
  db.pragma("busy_timeout = 10000");
  try {
    return db.prepare(sql).all(...params);
  } finally {
    db.close();
  }
}

let round = 1;
async function advanceRound(allowNext) {
  const done = await query(
    "SELECT 1 FROM markers WHERE job = 'items' AND key = ?",
    `round-${round}-done`,
  );
  if (done.length === 0) return false;
  if (allowNext) {
    round++;
    fs.writeFileSync(roundFile, `${round}\n`);
    log(`round ${round - 1} done; round ${round} starts`);
  }
  return true;
}

// ---- the soak -----------------------------------------------------------------------------------

log(
  `soak in ${dir}: ${KILLS} kills over ${DURATION_S} s, ${ITEMS} items x ${ITEM_MS} ms, ${TICK_JOBS} per-second jobs, seed ${SEED}`,
);
await startDaemon();
const soakStart = Date.now();
const end = soakStart + DURATION_S * 1000;
const killAt = Array.from(
  { length: KILLS },
  () => soakStart + 5000 + random() * (DURATION_S * 1000 - 10_000),
).sort((a, b) => a - b);
const kills = { both: 0, daemon: 0, jobs: 0, jobProcesses: 0 };
for (const at of killAt) {
  while (Date.now() < at) {
    await advanceRound(true);
    await sleep(Math.min(1000, at - Date.now()));
  }
  const r = random();
  const mode = r < 0.6 ? "both" : r < 0.8 ? "daemon" : "jobs";
  kills[mode]++;
  if (mode !== "jobs") await killDaemon();
  if (mode !== "daemon") kills.jobProcesses += killJobs();
  if (mode !== "jobs") {
    await sleep(random() * 3000); // the daemon stays down a moment: slots are missed meanwhile
    await startDaemon();
  }
  log(`kill ${kills.both + kills.daemon + kills.jobs}/${KILLS} (${mode}) in round ${round}`);
}
while (Date.now() < end) {
  await advanceRound(true);
  await sleep(1000);
}
log(`no more kills; waiting for round ${round} to finish`);
const finishBy = Date.now() + 15 * 60_000;
while (!(await advanceRound(false))) {
  if (Date.now() > finishBy) break;
  await sleep(1000);
}
const soakEnd = Date.now();
daemon.kill("SIGTERM");
while (daemon.exitedAt === null) await sleep(20);

// ---- the checks ---------------------------------------------------------------------------------

const checks = [];
const check = (name, ok, detail) => {
  checks.push({ name, ok, detail });
  log(`${ok ? "ok  " : "FAIL"} ${name}: ${detail}`);
};

const lines = fs.existsSync(itemsLog)
  ? fs.readFileSync(itemsLog, "utf8").split("\n").filter(Boolean)
  : [];
const effects = new Map();
for (const l of lines) effects.set(l, (effects.get(l) ?? 0) + 1);
const markers = new Set(
  (await query("SELECT key FROM markers WHERE job = 'items'")).map((r) => r.key),
);
let missing = 0;
for (let r = 1; r <= round; r++) {
  for (let i = 1; i <= ITEMS; i++) {
    const k = `r${r}-${i}`;
    if (!markers.has(k) || !effects.has(k)) missing++;
  }
}
check("every item done", missing === 0, `${round} round(s) x ${ITEMS} items, ${missing} not done`);
const repeats = [...effects.values()].reduce((s, n) => s + (n - 1), 0);
const jobKills = kills.both + kills.jobs;
check(
  "repeats <= kills",
  repeats <= jobKills,
  `${repeats} repeated side effect(s); ${jobKills} kills hit the jobs (${kills.both} daemon+jobs, ${kills.jobs} jobs only), ${kills.daemon} hit the daemon alone`,
);

const ticks = fs.existsSync(ticksLog)
  ? fs.readFileSync(ticksLog, "utf8").split("\n").filter(Boolean)
  : [];
const seen = new Map();
for (const l of ticks) {
  const [job, slot] = l.split(" ");
  const k = `${job} ${slot}`;
  seen.set(k, (seen.get(k) ?? 0) + 1);
}
const twiceLog = [...seen.values()].filter((n) => n > 1).length;
const twiceStore = await query(
  "SELECT job, slot, COUNT(*) AS n FROM runs WHERE job LIKE 'tick%' AND slot IS NOT NULL GROUP BY job, slot HAVING COUNT(*) > 1",
);
const reruns = await query(
  "SELECT COUNT(*) AS n FROM runs WHERE job LIKE 'tick%' AND trigger != 'schedule'",
);
check(
  "no slot twice",
  twiceLog === 0 && twiceStore.length === 0 && reruns[0].n === 0,
  `${ticks.length} per-second runs logged; slots run twice: ${twiceLog} in the log, ${twiceStore.length} in the store; non-schedule reruns: ${reruns[0].n}`,
);

// Every whole second between the first start (+2 s) and the clean stop (-2 s), for every tick job.
const from = Math.ceil((soakStart + 2000) / 1000) * 1000;
const to = Math.floor((soakEnd - 2000) / 1000) * 1000;
const have = await query(
  "SELECT job, COUNT(*) AS n FROM slots WHERE job LIKE 'tick%' AND slot >= ? AND slot < ? GROUP BY job",
  from,
  to,
);
const expected = (to - from) / 1000;
const gaps = TICK_JOBS * expected - have.reduce((s, r) => s + r.n, 0);
const dispo = await query(
  "SELECT status, COUNT(*) AS n FROM runs WHERE job LIKE 'tick%' AND slot >= ? AND slot < ? GROUP BY status ORDER BY n DESC",
  from,
  to,
);
check(
  "every slot has a disposition",
  gaps === 0,
  `${TICK_JOBS} jobs x ${expected} s: ${gaps} slot(s) with none; ${dispo.map((r) => `${r.n} ${r.status}`).join(", ")}`,
);

const items = await query(
  "SELECT status, COUNT(*) AS n FROM runs WHERE job = 'items' GROUP BY status ORDER BY n DESC",
);
const dlog = fs.readFileSync(daemonLog, "utf8");
const adopted = (dlog.match(/adopted run/g) ?? []).length;
const summary = {
  seed: SEED,
  dir,
  root: ROOT,
  durationS: Math.round((soakEnd - soakStart) / 1000),
  kills,
  daemonStarts: starts,
  rounds: round,
  items: ITEMS,
  itemRuns: Object.fromEntries(items.map((r) => [r.status, r.n])),
  adopted,
  repeats,
  ticks: ticks.length,
  checks,
  ok: checks.every((c) => c.ok),
};
log(
  `item-job runs: ${items.map((r) => `${r.n} ${r.status}`).join(", ")}; ${adopted} run(s) adopted after a restart; ${starts} daemon starts`,
);
process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
if (opt("json", null)) fs.writeFileSync(opt("json"), `${JSON.stringify(summary, null, 2)}\n`);
if (argv.includes("--keep") || !summary.ok) log(`state kept in ${dir}`);
else fs.rmSync(dir, { recursive: true, force: true });
process.exit(summary.ok ? 0 : 1);
