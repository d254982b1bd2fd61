// Chains (`then:`, `then_on_failure:`): which downstream jobs a run's end starts, for its slot.
// A pure function of (job, run, its end, next slot, now); the starts are written in the end's
// own store transaction (Endings), and started from the store (Runs.pollChains), so a daemon
// killed in between starts each once after a restart.
import type { JobConfig, RunStatus } from "../core/types.js";
import type { ChainStart } from "../store/store.js";
import { planRetry } from "./retry.js";

/** Ends that count as a failure for `then_on_failure:` (a killed or interrupted run is neither). */
const FAILED: readonly RunStatus[] = ["failed", "timeout", "spawn_failed"];

export function chainsAfter(
  job: Pick<JobConfig, "name" | "then" | "thenOnFailure" | "overlap" | "retries">,
  run: { id: number; slot: number | null; attempt: number },
  status: RunStatus,
  next: number | null,
  now: number,
): ChainStart[] {
  // A run with no slot (`cronvisor run`, @reboot) has no slot to hand on.
  if (run.slot === null) return [];
  let targets: readonly string[] = [];
  if (status === "ok") targets = job.then ?? [];
  else if (FAILED.includes(status)) {
    // Only a failure for good: a run that will be retried hands on nothing yet.
    const retry = planRetry(job, { ...run, status }, next, now);
    if (retry.kind !== "retry") targets = job.thenOnFailure ?? [];
  }
  return targets.map((name) => ({
    job: name,
    slot: run.slot as number,
    upstream: job.name,
    upstreamRun: run.id,
  }));
}
