// The retry schedule: after a failed or timed-out run, attempt n+1 starts backoff * 2^(n-1)
// later, up to `retries.attempts` extra runs, and never after the job's next slot.
import type { JobConfig, RunStatus } from "../core/types.js";
import type { Pending } from "./state.js";

export type RetryPlan =
  | { kind: "none" }
  | { kind: "retry"; delayMs: number; pending: Pending }
  /** The retry would start after the next slot: recorded as an event instead. */
  | { kind: "drop"; detail: string };

/** The delay before the retry that follows attempt `attempt` (1 = the first run). */
export function retryDelay(backoffMs: number, attempt: number): number {
  return backoffMs * 2 ** (attempt - 1);
}

export function planRetry(
  job: Pick<JobConfig, "overlap" | "retries">,
  run: { id: number; slot: number | null; status: RunStatus; attempt: number },
  next: number | null,
  now: number,
): RetryPlan {
  if (run.status !== "failed" && run.status !== "timeout") return { kind: "none" };
  if (run.attempt > job.retries.attempts) return { kind: "none" };
  const delayMs = retryDelay(job.retries.backoffMs, run.attempt);
  // A retry never outlives the next slot (unless runs may overlap anyway).
  if (job.overlap === "allow" || next === null || now + delayMs < next) {
    const pending: Pending = {
      slot: run.slot,
      claimSlot: false,
      trigger: "retry",
      attempt: run.attempt + 1,
    };
    return { kind: "retry", delayMs, pending };
  }
  return {
    kind: "drop",
    detail: `retry ${run.attempt} of run ${run.id} dropped: it would start after the next slot`,
  };
}
