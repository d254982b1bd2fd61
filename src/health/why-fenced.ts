// What `fenced` meant for a run, told from the reason its recorder wrote: by `why` (a sentence)
// and the run's page. Pure; the reasons are written by the store's reaper (another node took the
// job over) and daemon/hold-lease.ts (the run's own node could not renew its lease).
import type { RunRow } from "../store/store.js";

/** How a run came to be `fenced`, from the reason its recorder wrote (see `fencing`). */
export type Fencing =
  | { kind: "taken_over"; lost: string; by: string }
  | { kind: "self"; node: string; silent: string }
  | { kind: "unknown" };

/**
 * Who fenced a run: another node that took the job over once the run's node's lease ran out
 * (the store's reaper writes `node A's lease ran out; node B took the job over`), or its own node,
 * which could not renew its lease and stopped it (`fenced: node A could not renew its lease for
 * 20s`, daemon/hold-lease.ts).
 */
export function fencing(reason: string | null): Fencing {
  const taken = /^node (.+)'s lease ran out; node (.+) took the job over$/.exec(reason ?? "");
  if (taken) return { kind: "taken_over", lost: taken[1] as string, by: taken[2] as string };
  const self = /^fenced: node (.+) could not renew its lease for (.+)$/.exec(reason ?? "");
  if (self) return { kind: "self", node: self[1] as string, silent: self[2] as string };
  return { kind: "unknown" };
}

const AS_INTERRUPTED = "(health, alerts and catch-up count it as interrupted)";

/** What `fenced` meant for this run. */
export function fencedSentence(r: RunRow): string {
  const f = fencing(r.reason);
  if (f.kind === "taken_over")
    return `Fenced: node ${f.lost}'s lease ran out while run ${r.id} ran, and node ${f.by} took the job over; from then on none of the run's marker writes was applied ${AS_INTERRUPTED}.`;
  if (f.kind === "self")
    return `Fenced: node ${f.node} could not renew its lease for ${f.silent}, so it stopped run ${r.id} before the lease ran out, leaving the job to the nodes that hold theirs ${AS_INTERRUPTED}.`;
  return `Fenced: run ${r.id}'s node lost its lease, and the run was stopped or taken over by another node ${AS_INTERRUPTED}.`;
}
