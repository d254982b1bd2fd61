// Ending runs the daemon watches: on stop (TERM, the job's kill_grace, then KILL), on `replace`
// overlap, and on a second signal (KILL every run now).
import { signalRun } from "../run/cgroup.js";
import type { Runtime } from "./runtime.js";
import type { Active } from "./state.js";

export function terminate(rt: Runtime, a: Active, reason: string, graceMs: number): void {
  if (a.handle) {
    a.handle.terminate(reason, graceMs);
    return;
  }
  // An adopted run: signal its cgroup and group ourselves; its watcher records its end, `killed`
  // for this reason (its exit status alone would read as the job's own failure, or as unknown).
  const { run } = a;
  if (a.stoppedFor === undefined) {
    a.stoppedFor = reason;
    signalRun(run, run.pgid, "SIGTERM");
    signalRun(run, run.pgid, "SIGCONT"); // a stopped (SIGSTOP) member acts on SIGTERM only once continued
  }
  // Armed again on a second call: stop() clears the timers an earlier `replace` set.
  rt.later(graceMs, () => void signalRun(run, run.pgid, "SIGKILL"));
}

/** The second signal: SIGKILL every run's group now. */
export function forceAll(rt: Runtime): void {
  for (const a of rt.active.values()) {
    if (a.handle) a.handle.terminate("killed: daemon stopped (forced)", 0);
    else {
      a.stoppedFor ??= "killed: daemon stopped (forced)";
      signalRun(a.run, a.run.pgid, "SIGKILL");
    }
  }
}

/** TERM every run, wait for their ends to be recorded (each run's kill_grace bounds the wait). */
export async function stopRuns(rt: Runtime): Promise<void> {
  const runs = [...rt.active.values()];
  for (const a of runs) terminate(rt, a, "killed: daemon stopping", a.job.killGraceMs);
  await Promise.all(runs.map((a) => a.finished));
}
