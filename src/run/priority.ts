// The CPU priority a run starts at: JOB_NICE_OFFSET lower than the process that starts it (the
// daemon, or `cronvisor run`). On 2 cores, a few busy jobs (four shells looping on `mark`) made
// the daemon fire its next slots 2.5x later than on an idle machine; with its jobs at a higher
// nice, the scheduler wins the CPU whenever it wakes up, and the jobs share the rest as before.
import os from "node:os";

/** A run's nice is its starter's + this: nice 0 under the shipped unit's Nice=-5, as under cron. */
export const JOB_NICE_OFFSET = 5;

/** The nice a run starts at, given its starter's (pure): at most 19, the kernel's lowest. */
export function jobNice(own: number): number {
  return Math.min(19, own + JOB_NICE_OFFSET);
}

/**
 * How a run gets its nice:
 * - "fork": the calling thread goes to the job's nice for the spawn and back after it. Linux
 *   keeps a nice per thread and a child inherits it at fork (libuv forks in the calling thread),
 *   so the run and all it forks start there, with no window. Going back needs CAP_SYS_NICE (root).
 *   Profiled under outside load, the thread sometimes loses the CPU at that step (4-5% of the
 *   daemon's samples sit in setPriority): renicing the child after the spawn instead avoids it,
 *   but a shell forks its first command before the daemon gets there (measured: a run's first
 *   `cut` read its parent's old nice), and busy loops forked at once would keep the daemon's
 *   priority, which is what this is for.
 * - "after": without that capability, the run's main process is reniced right after spawn()
 *   returns; what it forks within that first moment keeps the starter's nice.
 * (A starter at nice 19 already starts its runs at 19.)
 */
let mode: "fork" | "after" | null = null;

/** Decided once per process: may this thread lower its nice again? (Tried, not guessed.) */
function decide(own: number): "fork" | "after" {
  try {
    os.setPriority(0, own + 1);
  } catch {
    return "after";
  }
  try {
    os.setPriority(0, own);
    return "fork";
  } catch {
    return "after"; // one step lower from now on; the runs still get their offset from there
  }
}

/**
 * `start()` (a spawn) with the child at the job's nice; `pidOf` names the child for "after".
 * Never throws for priority reasons: a run starts at the starter's nice rather than not at all.
 */
export function spawnNiced<T>(start: () => T, pidOf: (child: T) => number | undefined): T {
  if (batchAtJobNice) return start(); // the thread is at the job's nice already
  // Read each time (one syscall): an operator may have reniced the daemon since.
  const own = os.getPriority(0);
  const nice = jobNice(own);
  if (nice === own) return start();
  mode ??= decide(own);
  if (mode === "fork") {
    try {
      os.setPriority(0, nice);
    } catch {
      return start(); // the run starts at the starter's nice rather than not at all
    }
    try {
      return start();
    } finally {
      try {
        os.setPriority(0, own);
      } catch {
        mode = "after"; // the capability is gone: the daemon stays at this nice rather than fail a run
      }
    }
  }
  const child = start();
  const pid = pidOf(child);
  try {
    if (pid !== undefined) os.setPriority(pid, nice);
  } catch {
    // the run has exited already
  }
  return child;
}

/** Inside spawnBatch(): the forking thread is at the jobs' nice for the whole batch. */
let batchAtJobNice = false;

/**
 * `spawns()` (a tick's spawns, back to back) with the forking thread at the jobs' nice once for
 * all of them, instead of there and back around each: profiled under outside load, the thread
 * lost the CPU at each step down (setPriority was 6.6-8.9% of the throughput daemon's samples,
 * about a millisecond a spawn). The batch's own work then runs at the nice the bare daemon runs
 * at all the time; the daemon is back at its own before it waits for anything. Where the
 * thread cannot come back ("after"), each spawn renices its child as before.
 */
export function spawnBatch<T>(spawns: () => T): T {
  if (batchAtJobNice) return spawns();
  const own = os.getPriority(0);
  const nice = jobNice(own);
  if (nice === own) return spawns();
  mode ??= decide(own);
  if (mode !== "fork") return spawns();
  try {
    os.setPriority(0, nice);
  } catch {
    return spawns(); // each spawn tries on its own, and starts at the starter's nice if it fails
  }
  batchAtJobNice = true;
  try {
    return spawns();
  } finally {
    batchAtJobNice = false;
    try {
      os.setPriority(0, own);
    } catch {
      mode = "after"; // the capability is gone: the daemon stays at this nice rather than fail a run
    }
  }
}
