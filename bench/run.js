// `npm run bench`: cronvisor next to the floor it is built on, measured in the same run, as one
// table. Not part of CI. See BENCHMARKS.md for what each row measures and the last results.
//
//   node bench/run.js [--quick] [--only NAME[,NAME...]] [--json FILE] [--root DIR] [--tmp DIR]
//                     [--profile DIR] [--node-args "ARGS"]
//
// NAME: per-run lateness scheduler idle throughput markers marks-daemon status page
//       pg-claim nodes-paused failover (issue 14: PostgreSQL and several nodes; bench/nodes.js)
//       nodes-spread pg-commits (issue 41: slots spread over nodes, commits per slot; bench/spread.js)
//   (idle: CPU and RSS at 1,000 and RSS at 10,000 hourly jobs, with the NODE_OPTIONS of
//   examples/cronvisor.service as the README says to run it, and RSS without them; markers: `mark KEY` without and
//   through the daemon's broker, `mark --stdin`, the library)
// --quick      shorter windows (about 6 minutes instead of 8 to 10)
// --root DIR   measure the cronvisor checkout in DIR (its dist/ and bin/), e.g. a patched copy
// --tmp DIR    where state dirs go (default: the OS temp dir; the disk matters: every mark fsyncs)
// --profile D  run the daemons and CLI calls under `node --cpu-prof --cpu-prof-dir D`
// --node-args  more node options for the daemons and CLI calls, e.g. "--max-semi-space-size=1"
//              (what examples/cronvisor.service sets through NODE_OPTIONS; the idle rows add the
//              unit's themselves)
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {
  cleanup,
  fsyncCommitMs,
  machine,
  setRoot,
  setTmp,
  stampCommand,
  tmpBase,
  ROOT,
} from "./lib.js";
import * as nodes from "./nodes.js";
import * as spread from "./spread.js";
import * as rows from "./rows.js";
import * as pageRows from "./page.js";

const argv = process.argv.slice(2);
if (argv.includes("--help") || argv.includes("-h")) {
  // The usage is this file's opening comment.
  const text = fs.readFileSync(new URL(import.meta.url), "utf8");
  const usage = text.slice(0, text.indexOf("\nimport ")).replace(/^\/\/ ?/gm, "");
  process.stdout.write(`${usage}\n`);
  process.exit(0);
}
const flag = (name) => argv.includes(`--${name}`);
const opt = (name) => {
  const i = argv.indexOf(`--${name}`);
  return i < 0 ? null : argv[i + 1];
};

const ALL = [
  "per-run",
  "lateness",
  "scheduler",
  "idle",
  "throughput",
  "markers",
  "marks-daemon",
  "status",
  "pg-claim",
  "nodes-paused",
  "failover",
  "page",
  "nodes-spread",
  "pg-commits",
];
const only = opt("only")?.split(",") ?? ALL;
for (const n of only) {
  if (!ALL.includes(n)) {
    process.stderr.write(`unknown benchmark ${JSON.stringify(n)}; one of: ${ALL.join(" ")}\n`);
    process.exit(2);
  }
}
if (opt("root")) setRoot(opt("root"));
if (opt("tmp")) setTmp(opt("tmp"));
const quick = flag("quick");
const profileDir = opt("profile");
if (profileDir) fs.mkdirSync(profileDir, { recursive: true });
const started = Date.now();
const log = (s) =>
  process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${s}\n`);
const options = {
  quick,
  log,
  nodeArgs: [
    ...(profileDir ? ["--cpu-prof", "--cpu-prof-dir", profileDir] : []),
    ...(opt("node-args") ?? "").split(" ").filter((a) => a !== ""),
  ],
};
rows.configure(options);
nodes.configure(options);
spread.configure(options);
pageRows.configure(options);

process.on("SIGINT", () => {
  cleanup();
  process.exit(130);
});

/** The commit of the tree under test: git, or a COMMIT file in an exported copy. */
function revision(dir) {
  try {
    const rev = execFileSync("git", ["-C", dir, "rev-parse", "--short", "HEAD"], {
      encoding: "utf8",
      stdio: "pipe",
    });
    const dirty = execFileSync(
      "git",
      ["-C", dir, "status", "--porcelain", "--untracked-files=no", "src"],
      {
        encoding: "utf8",
      },
    );
    return `commit ${rev.trim()}${dirty.trim() ? " + uncommitted changes in src/" : ""}`;
  } catch {
    const f = path.join(dir, "COMMIT");
    return fs.existsSync(f)
      ? `commit ${fs.readFileSync(f, "utf8").trim()} (exported)`
      : "commit unknown";
  }
}

const m = machine();
const scratch = fs.mkdtempSync(path.join(tmpBase(), "cvx-bench-scratch-"));
const fsync = await fsyncCommitMs(scratch);
const load0 = os.loadavg();
const header = [
  `cronvisor benchmarks${quick ? " (--quick)" : ""}: ${new Date().toISOString()}`,
  `machine: ${m.cores} cores, ${m.model}, ${m.memGiB.toFixed(0)} GiB RAM, Linux ${m.kernel}; Node ${m.node}`,
  `disk: ${m.disk}; one WAL+synchronous=FULL commit: ${fsync.wallMs.toFixed(3)} ms wall, ${fsync.cpuMs.toFixed(3)} ms CPU`,
  `cronvisor under test: ${ROOT} (${revision(ROOT)})`,
  "NODE_EXTRA_CA_CERTS is unset for every process started here (it triples Node's start-up in this environment).",
];
for (const h of header) log(h);

const stamps = stampCommand(scratch);
const plan = {
  "per-run": () => rows.perRun(),
  lateness: () => rows.lateness(stamps),
  scheduler: () => rows.scheduler(),
  idle: () => rows.idleCost(),
  throughput: () => rows.throughput(),
  markers: () => rows.markers(),
  "marks-daemon": () => rows.marksVsDaemon(stamps),
  status: () => rows.status(),
  "pg-claim": () => nodes.pgClaim(),
  "nodes-paused": () => nodes.nodesPaused(),
  failover: () => nodes.failover(),
  "nodes-spread": () => spread.nodesSpread(),
  "pg-commits": () => spread.pgCommits(),
  page: () => pageRows.page(stamps),
};

const results = [];
for (const name of ALL) {
  if (!only.includes(name)) continue;
  const t0 = Date.now();
  try {
    const r = await plan[name]();
    for (const x of r) results.push({ group: name, ...x });
  } catch (e) {
    log(`${name}: failed: ${e.stack ?? e}`);
    results.push({ group: name, what: `${name}: ERROR ${e.message.split("\n")[0]}`, pass: false });
  } finally {
    cleanup(); // the state dirs of this benchmark (the scratch dir lives for the whole run)
  }
  log(`${name}: done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
}
const load1 = os.loadavg();

// ---- the table ------------------------------------------------------------------------------

const num = (v, unit) => {
  if (v === null || v === undefined || !Number.isFinite(v)) return "-";
  const d = Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : Math.abs(v) >= 1 ? 2 : 3;
  return `${v.toFixed(d)}${unit === "%" ? "%" : ""}`;
};
const lines = [
  "| benchmark | cronvisor | baseline | ratio | target | result | notes |",
  "| --- | ---: | --- | ---: | --- | --- | --- |",
];
for (const r of results) {
  const result = r.pass === null || r.pass === undefined ? "ref" : r.pass ? "pass" : "**MISS**";
  lines.push(
    `| ${r.what} | ${num(r.cvx, r.unit)} | ${r.base === undefined ? "" : `${num(r.base, r.unit)} (${r.baseName})`} | ${Number.isFinite(r.ratio) ? `${r.ratio.toFixed(2)}×` : "-"} | ${r.target ?? ""} | ${result} | ${r.note ?? ""} |`,
  );
}
const footer = `load average (1 min) ${load0[0].toFixed(2)} at start, ${load1[0].toFixed(2)} at end; whole run ${((Date.now() - started) / 1000).toFixed(0)} s`;
process.stdout.write(`${header.join("\n")}\n\n${lines.join("\n")}\n\n${footer}\n`);
if (opt("json")) {
  fs.writeFileSync(
    opt("json"),
    `${JSON.stringify({ header, machine: m, fsync, results, load: [load0, load1] }, null, 2)}\n`,
  );
}
fs.rmSync(scratch, { recursive: true, force: true });
