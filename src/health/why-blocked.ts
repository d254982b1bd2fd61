// What `why` says of a slot skipped for another node's run (daemon/blocked.ts): that node's lease
// held the job's lock. Once the lease ended, the node that took the job over ran the slots its
// `catchup:` picks (the slot's later rows); none if the node renewed its lease instead (it was
// alive, its run still running). Pure: the reason is written by the store's reservation.
import { formatDuration } from "../core/duration.js";
import type { JobConfig } from "../core/types.js";

/** The sentences; `later`: a sentence per later run of the slot (its catch-up), oldest first. */
export function heldElsewhere(
  reason: string,
  job: Pick<JobConfig, "catchup" | "catchupWindowMs">,
  later: readonly string[],
): string[] {
  const head = `Skipped: ${reason}: another node's run held the job's lock, and only that node's lease ending frees it.`;
  if (later.length > 0)
    return [head, `Caught up once the lease ended (catchup: ${job.catchup}):`, ...later];
  const plan =
    job.catchup === "skip"
      ? "catchup: skip runs none of the slots it blocked"
      : job.catchup === "once"
        ? "catchup: once runs only the latest slot it blocked"
        : `catchup: all runs the slots it blocked within catchup_window (${formatDuration(job.catchupWindowMs)})`;
  return [
    head,
    `Not run again: when the lease ends, the node that takes the job over catches up (${plan}); if that node renews its lease instead, its run was still running and the slot stays skipped.`,
  ];
}
