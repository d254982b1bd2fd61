// Process identity and liveness, read from /proc and the runs' cgroups: one definition shared by
// run/, markers/, health/ and the daemon's adoption. A pid alone is never an identity (pids are
// reused): every holder is recorded as pid + the kernel's start time of that pid; a run's
// processes are its cgroup's (src/run/cgroup.ts), or without one its process group's.
import fs from "node:fs";

/** The directory of this process's runs' cgroups (run/cgroup.ts sets it once), or null. */
let runCgroups: string | null = null;

/** Set once a process knows its containment (src/run/cgroup.ts): null, process groups. */
export function setRunCgroups(base: string | null): void {
  runCgroups = base;
}

/** A run as its cgroups know it: by its id, and by its job. */
export interface RunRef {
  id: number;
  job: string;
}

/**
 * The name of a job's cgroup, which a daemon's spawner keeps from one run of the job to the next
 * (making a cgroup costs the kernel more than the rest of containment: src/run/spawner.c,
 * pool_take). One run of a job at a time holds the job's lock, so what is in it is that run's.
 */
export function jobCgroupName(job: string): string {
  return `job-${job}`;
}

/**
 * The cgroups a run's processes may be in, or [] without containment: its own (`run-ID`: a
 * `cronvisor run`, a job with limits, or a job's kept cgroup in use) and its job's.
 */
export function runCgroupsOf(run: RunRef): string[] {
  if (runCgroups === null) return [];
  return [`${runCgroups}/run-${run.id}`, `${runCgroups}/${jobCgroupName(run.job)}`];
}

/**
 * Is any process of the run still in its cgroup (escaped from its group or not)? `populated` is
 * the kernel's own answer, zombies aside. False without a cgroup, or when it is gone.
 */
export function cgroupPopulated(run: RunRef): boolean {
  return runCgroupsOf(run).some((dir) => {
    try {
      return fs.readFileSync(`${dir}/cgroup.events`, "utf8").includes("populated 1");
    } catch {
      return false;
    }
  });
}

/** The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or null if gone. */
export function startTimeOf(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may contain spaces and parentheses: split after the last ")".
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (rest[0] === "Z" || rest[0] === "X") return null; // a zombie has finished its work
    return rest[19] ?? null;
  } catch {
    return null;
  }
}

/**
 * Has this process ended, and does a spawner (src/run/spawner.c) still hold it unreaped? The
 * spawner writes the run's exit file in that moment, before it reaps it: until then the run's end
 * is not known yet, and its lock is still held. A zombie whose parent is anything else (init,
 * after its spawner died) is just dead.
 */
export function awaitingItsSpawner(pid: number, startTime: string | null = null): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (rest[0] !== "Z" || (startTime !== null && rest[19] !== startTime)) return false;
    // comm is cut to 15 bytes: "cronvisor-spawner" reads "cronvisor-spawn".
    return fs.readFileSync(`/proc/${rest[1]}/comm`, "utf8").startsWith("cronvisor-spawn");
  } catch {
    return false;
  }
}

/** Is this exact process (pid + start time) still alive? */
export function isAlive(pid: number, startTime: string | null): boolean {
  const now = startTimeOf(pid);
  return now !== null && (startTime === null || now === startTime);
}

/**
 * Does any live process of this process group still exist (stopped ones count, zombies don't:
 * a killed job whose parent died stays a zombie until init reaps it, and it does no work)?
 */
export function groupAlive(pgid: number): boolean {
  if (pgid <= 1) return false;
  try {
    process.kill(-pgid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  // The group exists. The common case: its leader is alive. Otherwise look for any member
  // that is not a zombie (a scan of /proc, done only when the leader is gone).
  if (startTimeOf(pgid) !== null || awaitingItsSpawner(pgid)) return true;
  let pids: string[];
  try {
    pids = fs.readdirSync("/proc");
  } catch {
    return true;
  }
  for (const p of pids) {
    if (p.charCodeAt(0) < 48 || p.charCodeAt(0) > 57) continue;
    try {
      const stat = fs.readFileSync(`/proc/${p}/stat`, "utf8");
      const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      // rest[0] is the state, rest[2] the process group.
      if (rest[2] === String(pgid) && rest[0] !== "Z" && rest[0] !== "X") return true;
    } catch {
      // the process exited while we looked
    }
  }
  return false;
}

/** The columns of a run row that say who may still be running it or recording its end. */
export interface RunProcesses {
  /** The run's id and job: its cgroups' names (runCgroupsOf). */
  id?: number;
  job?: string;
  pgid: number | null;
  owner_pid: number | null;
  owner_start: string | null;
}

/**
 * The one "is this run live" check (the lock's holder test, and what `status` shows as running):
 * a run lives while any process of its cgroup or of its group lives, or while its owner (the
 * daemon or `cronvisor run` that will record its end) lives. A stopped (SIGSTOP) process is alive:
 * a lock never expires by time.
 */
export function runAlive(r: RunProcesses): boolean {
  // The owner first (the answer is the same either way): the lock holders a daemon checks at
  // each reservation are mostly its own runs, which need no /proc read at all, while a group
  // whose leader has just exited costs a scan of all of /proc (9.5% of the throughput row's
  // daemon, profiled, sat in those reads).
  if (r.owner_pid !== null && ownerAlive(r.owner_pid, r.owner_start)) return true;
  if (r.pgid !== null && groupAlive(r.pgid)) return true;
  return r.id !== undefined && r.job !== undefined && cgroupPopulated({ id: r.id, job: r.job });
}

/** This process's own start time, read once: it never changes. */
let ownStart: string | null | undefined;

/** isAlive(), without a read of /proc for this very process. */
function ownerAlive(pid: number, startTime: string | null): boolean {
  if (pid !== process.pid) return isAlive(pid, startTime);
  ownStart ??= startTimeOf(pid);
  return startTime === null || startTime === ownStart;
}

/** Signal a whole process group; false if it no longer exists. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  if (pgid <= 1) return false;
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

let cachedBootId: string | null = null;
/** The kernel's boot id: `@reboot` fires once per boot, not once per daemon start. */
export function bootId(): string {
  if (cachedBootId === null) {
    try {
      cachedBootId = fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
    } catch {
      cachedBootId = "unknown";
    }
  }
  return cachedBootId;
}

/** The process group of a live process (field 5 of /proc/PID/stat), or null if it is gone. */
export function processGroupOf(pid: number): number | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (rest[0] === "Z" || rest[0] === "X") return null;
    const pgid = Number(rest[2]);
    return Number.isInteger(pgid) ? pgid : null;
  } catch {
    return null;
  }
}
