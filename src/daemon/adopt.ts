// Runs that outlived the daemon that started them (or `cronvisor run`): a run with a live process
// (in its cgroup, or its group) is adopted (its lock stays held, its end is recorded once nothing of
// it is left); a dead one is recorded from its exit file, or `interrupted` without one. A run whose
// pid was never recorded (its daemon died between the spawn and the record) is found by its
// cgroup, named by its id, or by the pid file the spawner wrote before its exec. The exit file is
// read in one place.
import { exitFileFor, pidFileFor, readExitFile, readPidFile } from "../run/execute.js";
import { signalRun } from "../run/cgroup.js";
import { awaitingItsSpawner, cgroupPopulated, groupAlive, isAlive } from "../core/proc.js";
import { retire } from "../run/spare.js";
import { lookupUser } from "../core/passwd.js";
import type { RunRow } from "../store/store.js";
import { exited, interrupted, runResult, stopped, stopStatus } from "../core/result.js";
import type { JobConfig, RunResult } from "../core/types.js";
import type { Runtime } from "./runtime.js";
import type { Active } from "./state.js";
import { chainsAfter } from "./chains.js";

/** How often adopted orphans (runs we did not spawn) are checked for their end. */
const ADOPT_POLL_MS = 500;

/**
 * After an adopted run's main process has ended, how long its previous spawner (if it lives) has
 * to deal with what is left (`leftovers:`) before this daemon kills it: the lock never outlives
 * the run, and a run is never left half in and half out of it.
 */
const LEFTOVER_GRACE_MS = 2000;

export type OrphanAction =
  /** Not an orphan: watched by this daemon, or owned by another live process. */
  | "ignore"
  /** Its group lives: watch it until it ends. */
  | "adopt"
  /** Its group lives but its job is gone from the config: left alone, reaped later. */
  | "leave"
  /** Its processes are gone: record its end now. */
  | "reap";

/**
 * A `running` row this daemon does not watch. A run this daemon owns but no longer watches is
 * one whose end could not be recorded (a full disk): it is reaped like an orphan.
 */
export function orphanAction(f: {
  watched: boolean;
  ownerAlive: boolean;
  groupAlive: boolean;
  jobKnown: boolean;
}): OrphanAction {
  if (f.watched || f.ownerAlive) return "ignore";
  if (f.groupAlive) return f.jobKnown ? "adopt" : "leave";
  return "reap";
}

/** An orphan's end: found dead at start-up or a heartbeat, or an adopted run that exited. */
export type OrphanEnd = "found-dead" | "adopted";

/**
 * The result recorded for an orphan, from its exit code (null: no exit file). An adopted run this
 * daemon stopped (`stoppedFor`, the reason) is `killed`, with its exit code if it wrote one.
 */
export function orphanResult(
  r: RunRow,
  code: number | null,
  now: number,
  how: OrphanEnd,
  stoppedFor?: string,
): RunResult {
  const log = { bytes: r.log_bytes ?? 0, truncated: false };
  if (stoppedFor !== undefined)
    return runResult(
      stopped(stopStatus(stoppedFor), stoppedFor, code, null),
      r.started_at,
      now,
      log,
    );
  if (code === null) {
    const reason =
      how === "found-dead"
        ? "its processes died with the daemon"
        : "adopted after a daemon restart; exit status unknown";
    return runResult(interrupted(reason), r.started_at, now, log);
  }
  // An adopted run's end reads as any run's (`exit 3`); one found dead says it was read late.
  const late =
    how === "found-dead" ? `exit ${code} (recorded late, from its exit file)` : undefined;
  return runResult(exited(code, null, late), r.started_at, now, log);
}

/**
 * The orphan's main process has ended but its waiter (the previous daemon's spawner, alive) has
 * not reaped it yet, nor written its exit file: its end is not known yet, and is looked at again
 * at the next poll or beat rather than recorded `interrupted` for want of a file about to come.
 */
function exitPending(rt: Runtime, r: RunRow): boolean {
  return (
    r.pid !== null &&
    awaitingItsSpawner(r.pid, r.pid_start) &&
    readExitFile(exitFileFor(rt.config.stateDir, r.id)) === null
  );
}

/**
 * Record an orphan's end from its exit file and remove the file. A run found dead whose end the
 * store refuses is left `running` (the next heartbeat tries again); an adopted run's end is
 * logged and dropped, as its watcher is gone.
 */
async function recordOrphanEnd(
  rt: Runtime,
  r: RunRow,
  job: JobConfig | null,
  how: OrphanEnd,
  stoppedFor?: string,
): Promise<RunRow> {
  const file = exitFileFor(rt.config.stateDir, r.id);
  const now = rt.now();
  const result = orphanResult(r, readExitFile(file), now, how, stoppedFor);
  // An end that came while no daemon watched still starts its chain (in the end's transaction).
  const next = rt.jobs.get(r.job)?.next ?? null;
  const chains = job ? chainsAfter(job, r, result.status, next, now) : [];
  try {
    await rt.store.finishRun(r.id, result, chains);
  } catch (e) {
    if (how === "found-dead") throw e;
    rt.log(`cronvisor: could not record adopted run ${r.id}: ${(e as Error).message}`);
  }
  retire(file, rt.config.stateDir);
  return (await rt.store.run(r.id)) as RunRow;
}

/**
 * Adopt or reap every orphan. `onReaped` gets each run recorded now (an interrupted one's slot
 * follows the job's catch-up policy); `ended` is called when an adopted run ends.
 */
export async function adoptOrphans(
  rt: Runtime,
  onReaped: (row: RunRow, job: JobConfig) => void,
  ended: (a: Active, row: RunRow) => Promise<void>,
): Promise<void> {
  const { store, owner } = rt;
  for (let r of await store.runningRuns()) {
    // A run this daemon watches is no orphan: checked first, so that a beat with many running
    // runs reads no /proc entry for them.
    if (rt.active.has(r.id) || rt.unrecorded.has(r.id) || rt.starting.has(r.id)) continue;
    // Another node's run is not ours to adopt or reap: its node's lease decides (store/).
    if (store.shared && r.node !== store.node) continue;
    const mine = r.owner_pid === owner.pid && r.owner_start === owner.start;
    const job = rt.jobs.get(r.job)?.cfg ?? null;
    const ownerAlive = !mine && r.owner_pid !== null && isAlive(r.owner_pid, r.owner_start);
    // Its pid, if its daemon died before recording it: the spawner's pid file says it.
    const found =
      ownerAlive || r.pid !== null ? null : readPidFile(pidFileFor(rt.config.stateDir, r.id));
    const pgid = r.pgid ?? found?.pid ?? null;
    const action = orphanAction({
      watched: false,
      ownerAlive,
      groupAlive: (pgid !== null && groupAlive(pgid)) || cgroupPopulated(r),
      jobKnown: job !== null,
    });
    if (action === "adopt" && job) {
      if (found) {
        await store.setRunProcess(r.id, found.pid, found.start, found.pid);
        r = { ...r, pid: found.pid, pid_start: found.start, pgid: found.pid };
      }
      await store.adoptRun(r.id, owner);
      const uid = job.user === null ? undefined : lookupUser(job.user)?.uid;
      rt.broker?.adopt({ job: r.job, runId: r.id, fence: r.fence ?? 0, pgid: r.pgid, uid });
      watchAdopted(rt, r, job, ended);
    } else if (action === "reap") {
      if (exitPending(rt, r)) continue;
      const row = await recordOrphanEnd(rt, r, job, "found-dead");
      rt.broker?.unregister(r.id); // forgets the secret a previous daemon kept for it
      if (job) onReaped(row, job);
    }
  }
}

/** The adopted run is not our child: poll its main process, then clean up its group. */
function watchAdopted(
  rt: Runtime,
  r: RunRow,
  job: JobConfig,
  ended: (a: Active, row: RunRow) => Promise<void>,
): void {
  rt.log(`cronvisor: adopted run ${r.id} of ${r.job} (pid ${r.pid}) left by a previous daemon`);
  let resolve!: (row: RunRow) => void;
  const finished = new Promise<RunRow>((res) => (resolve = res));
  const a: Active = { run: r, job, handle: null, finished };
  let mainEnded: number | null = null;
  const poll = setInterval(() => {
    if (r.pid !== null && (isAlive(r.pid, r.pid_start) || exitPending(rt, r))) return;
    if (cgroupPopulated(r)) {
      // The main process has ended; what is left of the run is its previous spawner's to settle
      // (wait for, kill, move out). Waited for as long as the job says; else killed after a grace
      // if that spawner is gone.
      mainEnded ??= Date.now();
      if (job.leftovers !== "wait" && Date.now() - mainEnded >= LEFTOVER_GRACE_MS)
        signalRun(r, r.pgid, "SIGKILL");
      return;
    }
    clearInterval(poll);
    if (job.leftovers === "kill") signalRun(r, r.pgid, "SIGKILL");
    rt.guard(async () => {
      let row = r;
      try {
        row = await recordOrphanEnd(rt, r, job, "adopted", a.stoppedFor);
      } finally {
        resolve(row); // stop() waits for this
      }
    }, `job: ${r.job}, run: ${r.id}`);
  }, ADOPT_POLL_MS);
  a.stopAdopt = () => clearInterval(poll);
  rt.active.set(r.id, a);
  a.finished = finished.then((row) => ended(a, row));
}
