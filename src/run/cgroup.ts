// Containment: where a process that starts runs (the daemon, `cronvisor run`) puts each run's
// processes. With a cgroup v2 directory of its own, every run gets a cgroup named by its id
// (BASE/run-ID, made by the spawner, spawner.c), so that a process that leaves the run's process
// group (setsid, a double fork) is still the run's: the lock, `timeout:`, `stop` and the record
// reach it. Without one, the run's process group is the run, as before, and status says so.
//
// Which directory: decideContainment (pure) from the facts that setupContainment reads.
// - CRONVISOR_CGROUP_ROOT=DIR: runs go under DIR/<state dir's hash> (DIR is made if missing);
//   `off`: process groups. Tests use it for a subtree of their own.
// - A base recorded by a daemon of this state dir (`cgroup` in the state dir) that still exists:
//   the same one, so that `cronvisor run` beside a systemd-run daemon shares its subtree.
// - Under systemd, a unit with Delegate=yes: the daemon moves itself (and so its spawner) into
//   UNIT/supervisor, and runs go under UNIT/runs (cgroup v2's "no process in an inner node").
// - As root in the root cgroup of a cgroup2 mount (no systemd): MOUNT/cronvisor/<hash>.
// Never: a cgroup it did not create (a systemd unit without delegation, a session's scope), and
// no process but its own (the daemon, the spawner, its runs) is ever moved.
import { createHash } from "node:crypto";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { runCgroupsOf, setRunCgroups, signalGroup, type RunRef } from "../core/proc.js";
import { CONTROLLER, limitWarnings } from "../core/limits.js";
import type { Limits } from "../core/types.js";

export interface Containment {
  mode: "cgroup" | "process-group";
  /** In words: where runs go, or why they cannot be contained by a cgroup here. */
  reason: string;
  /** The directory holding each run's cgroup (`run-ID`); null for process groups. */
  base: string | null;
  /** The controllers the runs' cgroups have (memory, cpu, pids); [] for process groups. */
  controllers: string[];
}

/** What containment is decided from; read by setupContainment, passed in for tests. */
export interface ContainmentFacts {
  uid: number;
  /** CRONVISOR_CGROUP_ROOT, if set. */
  override: string | undefined;
  /** /proc/self/mountinfo. */
  mountinfo: string;
  /** /proc/self/cgroup. */
  selfCgroup: string;
  /** INVOCATION_ID is set: started by systemd. */
  underSystemd: boolean;
  /** The unit's Delegate= (systemctl show), null when unknown or not asked. */
  delegated: boolean | null;
  /** A base a daemon of this state dir recorded, if that directory still exists. */
  recorded: string | null;
  stateDir: string;
}

/** Where runs go: a base and, under systemd, the leaf the daemon moves itself to first. */
export type ContainmentPlan =
  | {
      mode: "cgroup";
      base: string;
      leaf: string | null;
      reason: string;
      /** The cgroups whose controllers it turns on for its children, top first: its own only. */
      owned: string[];
    }
  | { mode: "process-group"; reason: string };

/** The mount point of the (first) cgroup2 file system in a mountinfo text, or null (pure). */
export function cgroup2Mount(mountinfo: string): string | null {
  for (const line of mountinfo.split("\n")) {
    const [left, right] = line.split(" - ");
    if (right?.split(" ")[0] !== "cgroup2") continue;
    const mountPoint = left?.split(" ")[4];
    // mountinfo escapes spaces and the like as octal (\040)
    if (mountPoint)
      return mountPoint.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)));
  }
  return null;
}

/** This process's cgroup v2 path ("0::/path" in /proc/self/cgroup), or null (pure). */
export function ownCgroup(selfCgroup: string): string | null {
  const line = selfCgroup.split("\n").find((l) => l.startsWith("0::"));
  return line ? line.slice(3) : null;
}

/** The state dir's short name among other daemons' subtrees (pure). */
export function stateDirKey(stateDir: string): string {
  return createHash("sha256").update(path.resolve(stateDir)).digest("hex").slice(0, 12);
}

/** Where this process's runs go (pure): see the top of this file. */
export function decideContainment(f: ContainmentFacts): ContainmentPlan {
  const pg = (reason: string): ContainmentPlan => ({ mode: "process-group", reason });
  if (f.override === "off") return pg("turned off (CRONVISOR_CGROUP_ROOT=off)");
  const mount = cgroup2Mount(f.mountinfo);
  if (f.override !== undefined && f.override !== "") {
    const base = path.join(f.override, stateDirKey(f.stateDir));
    const owned = [f.override, base];
    return { mode: "cgroup", base, leaf: null, reason: `a cgroup per run under ${base}`, owned };
  }
  if (mount === null) return pg("no cgroup2 file system is mounted");
  if (f.uid !== 0) return pg("not root: a cgroup per run needs root or a delegated systemd unit");
  if (f.recorded !== null) {
    const reason = `a cgroup per run under ${f.recorded}`;
    return { mode: "cgroup", base: f.recorded, leaf: null, reason, owned: [f.recorded] };
  }
  const own = ownCgroup(f.selfCgroup);
  if (own === null) return pg(`no cgroup v2 hierarchy in /proc/self/cgroup`);
  if (f.underSystemd && own !== "/") {
    const unit = path.join(mount, own);
    if (f.delegated !== true)
      return pg(`systemd's cgroup ${own} is not delegated (Delegate=yes in the unit)`);
    // A restarted daemon's first move already happened when the unit was started anew.
    const top = path.basename(own) === "supervisor" ? path.dirname(unit) : unit;
    const base = path.join(top, "runs");
    return {
      mode: "cgroup",
      base,
      leaf: path.join(top, "supervisor"),
      reason: `a cgroup per run under ${base} (systemd, Delegate=yes)`,
      owned: [top, base],
    };
  }
  if (own !== "/")
    return pg(
      `its cgroup ${own} is not its own to divide (run it from a unit with Delegate=yes, or set CRONVISOR_CGROUP_ROOT)`,
    );
  const base = path.join(mount, "cronvisor", stateDirKey(f.stateDir));
  const owned = [path.join(mount, "cronvisor"), base];
  return { mode: "cgroup", base, leaf: null, reason: `a cgroup per run under ${base}`, owned };
}

/** The file in the state dir that names a daemon's runs' base, for `cronvisor run` beside it. */
function recordFile(stateDir: string): string {
  return path.join(stateDir, "cgroup");
}

function readOr(file: string, fallback: string): string {
  try {
    return fs.readFileSync(file, "utf8");
  } catch {
    return fallback;
  }
}

/** The unit's Delegate= as systemd says it (one `systemctl show`, at start), or null. */
function unitDelegated(own: string | null): boolean | null {
  const unit = own?.split("/").find((p) => p.endsWith(".service"));
  if (!unit) return null;
  const r = spawnSync("systemctl", ["show", "--property=Delegate", "--value", unit], {
    encoding: "utf8",
    timeout: 5000,
  });
  return r.status === 0 ? r.stdout.trim() === "yes" : null;
}

let current: Containment | null = null;

/** This process's containment, once setupContainment ran; process groups before. */
export function containment(): Containment {
  return current ?? { mode: "process-group", reason: "not set up", base: null, controllers: [] };
}

/**
 * Decide and prepare this process's containment: make the base (and move the daemon into its
 * leaf under systemd), record it for `cronvisor run`. Any failure falls back to process groups
 * with the reason. `record`: the daemon records its base; `cronvisor run` only reads it.
 */
export function setupContainment(stateDir: string, record: boolean): Containment {
  const selfCgroup = readOr("/proc/self/cgroup", "");
  const underSystemd = !!process.env.INVOCATION_ID;
  let recorded: string | null = readOr(recordFile(stateDir), "").trim() || null;
  if (recorded !== null && !fs.existsSync(path.join(recorded, "cgroup.procs"))) recorded = null;
  const plan = decideContainment({
    uid: process.getuid?.() ?? -1,
    override: process.env.CRONVISOR_CGROUP_ROOT,
    mountinfo: readOr("/proc/self/mountinfo", ""),
    selfCgroup,
    underSystemd,
    delegated: underSystemd ? unitDelegated(ownCgroup(selfCgroup)) : null,
    recorded,
    stateDir,
  });
  current = prepare(plan, stateDir, record);
  setRunCgroups(current.base);
  return current;
}

function prepare(plan: ContainmentPlan, stateDir: string, record: boolean): Containment {
  if (plan.mode === "process-group")
    return { mode: plan.mode, reason: plan.reason, base: null, controllers: [] };
  try {
    if (plan.leaf !== null) {
      fs.mkdirSync(plan.leaf, { recursive: true });
      // Only this process (its spawner, started later, follows it): nothing it did not start.
      fs.writeFileSync(path.join(plan.leaf, "cgroup.procs"), String(process.pid));
    }
    fs.mkdirSync(plan.base, { recursive: true });
    if (!fs.existsSync(path.join(plan.base, "cgroup.procs")))
      throw new Error(`${plan.base} is not in a cgroup2 file system`);
    if (record) fs.writeFileSync(recordFile(stateDir), `${plan.base}\n`, { mode: 0o600 });
  } catch (e) {
    return {
      mode: "process-group",
      reason: `could not make ${plan.base}: ${(e as Error).message}`,
      base: null,
      controllers: [],
    };
  }
  // The limits' controllers, turned on down the cgroups it made, as far as each one has them.
  const words = (f: string) =>
    readOr(f, "")
      .trim()
      .split(/\s+/)
      .filter((c) => c !== "");
  const wanted: readonly string[] = Object.values(CONTROLLER);
  for (const dir of plan.owned)
    for (const c of words(path.join(dir, "cgroup.controllers")))
      if (wanted.includes(c))
        try {
          fs.writeFileSync(path.join(dir, "cgroup.subtree_control"), `+${c}`);
        } catch {
          // taken by processes in it, or refused: the limit is then warned of, not enforced
        }
  const controllers = words(path.join(plan.base, "cgroup.subtree_control"));
  return { mode: "cgroup", reason: plan.reason, base: plan.base, controllers };
}

/**
 * What the daemon's row says of its containment (status reads it): mode, reason, controllers as
 * JSON. Each job limit it cannot enforce is said as a WARNING at the start, too.
 */
export function containmentRecord(
  c: Containment,
  jobs: readonly { name: string; limits: Limits }[],
  log: (line: string) => void,
): string {
  for (const w of limitWarnings(jobs, c.mode === "cgroup" ? c.controllers : null))
    log(`cronvisor: WARNING: ${w}`);
  return JSON.stringify({ mode: c.mode, reason: c.reason, controllers: c.controllers });
}

/**
 * For `validate`, which writes nothing: the controllers a daemon started here and now could give
 * its runs, read from its own cgroup; null when it would have no cgroup per run.
 */
export function likelyControllers(stateDir: string): string[] | null {
  const selfCgroup = readOr("/proc/self/cgroup", "");
  const mountinfo = readOr("/proc/self/mountinfo", "");
  const plan = decideContainment({
    uid: process.getuid?.() ?? -1,
    override: process.env.CRONVISOR_CGROUP_ROOT,
    mountinfo,
    selfCgroup,
    underSystemd: false,
    delegated: null,
    recorded: null,
    stateDir,
  });
  const mount = cgroup2Mount(mountinfo);
  if (plan.mode !== "cgroup" || mount === null) return null;
  const own = path.join(mount, ownCgroup(selfCgroup) ?? "/");
  return readOr(path.join(own, "cgroup.controllers"), "").trim().split(/\s+/).filter(Boolean);
}

/** The pids in one of a run's cgroups ([] without one). */
function cgroupPids(dir: string): number[] {
  return readOr(path.join(dir, "cgroup.procs"), "")
    .split("\n")
    .filter((l) => l !== "")
    .map(Number);
}

/**
 * Told of each job cgroup (`job-NAME`) that cgroup.kill was written to: the daemon's spawner,
 * which keeps those cgroups for the jobs' next runs and must never clone a child into a killed
 * one (the kernel SIGKILLs it at birth, spawner.c).
 */
let onJobCgroupKill: ((name: string) => void) | null = null;

export function tellJobCgroupKills(fn: ((name: string) => void) | null): void {
  onJobCgroupKill = fn;
}

/**
 * Signal every process of a run's cgroup (its group is signalled apart, runner.ts). SIGKILL goes
 * through cgroup.kill where the kernel has it (5.14), which also catches a process forking now.
 * A run with a cgroup of its own (`run-ID`) is in that one only: its job's kept cgroup, if there
 * is one, holds another run of the job, or none.
 */
export function signalCgroup(run: RunRef, signal: NodeJS.Signals): void {
  const [own, job] = runCgroupsOf(run);
  if (own === undefined || job === undefined) return;
  const dir = fs.existsSync(own) ? own : job;
  if (signal === "SIGKILL") {
    try {
      fs.writeFileSync(path.join(dir, "cgroup.kill"), "1");
      if (dir === job) onJobCgroupKill?.(path.basename(job));
      return;
    } catch {
      // an older kernel, or the cgroup is not there: one by one below
    }
  }
  for (const pid of cgroupPids(dir)) {
    try {
      process.kill(pid, signal);
    } catch {
      // exited meanwhile
    }
  }
}

/** A signal to every process of a run: its cgroup's, and its process group's (null: none known). */
export function signalRun(run: RunRef, pgid: number | null, signal: NodeJS.Signals): void {
  signalCgroup(run, signal);
  if (pgid !== null) signalGroup(pgid, signal);
}

/**
 * Remove the cgroups of the base that nothing uses any more: the kept ones (`kept-ID`, made for a
 * run's `leftovers: keep`) once their processes are gone, and, with `runsToo` (a daemon's start
 * before its spawner starts anything, or its clean exit after its spawner was told to end), the
 * run and job cgroups a spawner left. rmdir fails on a populated one.
 */
export function sweepCgroups(runsToo: boolean): void {
  const base = current?.base ?? null;
  if (base === null) return;
  let names: string[];
  try {
    names = fs.readdirSync(base);
  } catch {
    return;
  }
  for (const n of names) {
    if (!(n.startsWith("kept-") || (runsToo && (n.startsWith("run-") || n.startsWith("job-")))))
      continue;
    try {
      fs.rmdirSync(path.join(base, n));
    } catch {
      // still populated, or gone
    }
  }
}

/** At a clean exit: the base goes if nothing is left in it (a later start makes it again). */
export function releaseBase(): void {
  const base = current?.base ?? null;
  if (base === null) return;
  sweepCgroups(true); // the job cgroups its spawner kept, which it no longer uses once told to end
  try {
    fs.rmdirSync(base);
  } catch {
    // runs go on in it (they outlive the daemon), or it is gone
  }
}
