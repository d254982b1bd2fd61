// Several nodes on one store share each tick's slots instead of racing for all of them: each job
// has one owner among the live nodes (those whose lease runs, as the store's node rows say, and
// whom the job's `hosts:` allow), and a node claims the slots of the jobs it owns when they come
// due, and another's only `graceMs` later: by then the owner has claimed them (the claim finds
// them taken and writes nothing), unless it is late or gone, when a node that is on time runs
// them. A node that died is left out of the live list once its lease ends, and its jobs get new
// owners; until then its slots run `graceMs` late. Pure, except the list it is given.
//
// Ownership is a balanced deal, not a hash: the jobs that may run on the same nodes are sorted by
// a hash of their name and dealt round the nodes in name order, so each node owns its share to
// within one job (a hash alone leaves the largest of 3 nodes about 10% over its share at 400
// jobs). Nodes with the same config and the same list agree; where they do not (a reload not yet
// everywhere, a node that has not seen another's lease yet), a slot is claimed by two nodes
// (one wins: the claim is the slot's unique key) or by none until the grace runs out.
import { runsOn } from "../core/hosts.js";
import { renewEveryMs } from "./lease.js";
import type { JobConfig } from "../core/types.js";
import type { NodeRow } from "../store/store.js";

type SpreadJob = Pick<JobConfig, "name" | "hosts">;

/** The nodes whose lease runs now, by the store's clock, in name order (with `self`). */
export function liveNodes(rows: readonly NodeRow[], self: string): string[] {
  const live = rows.filter(
    (r) =>
      r.pid !== null &&
      r.stopped_at === null &&
      r.renewed_at !== null &&
      r.lease_ms !== null &&
      r.renewed_at + r.lease_ms >= r.db_now,
  );
  return [...new Set([...live.map((r) => r.name), self])].sort();
}

/** How long a node waits past a slot of another node's job before it claims it. */
export function graceMs(heartbeatMs: number): number {
  return Math.max(200, Math.min(Math.floor(heartbeatMs / 2), 1_000));
}

/**
 * A late claim of another node's slot gives way while a run of the job on a node that renewed
 * its lease within this long holds the lock: that node is alive, and may only be late to record
 * the run's end (it rides with its next tick: endings.ts). A node silent for longer is judged
 * by the lock as before (its slots recorded skipped for its lease, then caught up).
 */
export function yieldMs(heartbeatMs: number, leaseMs: number): number {
  return renewEveryMs(heartbeatMs, leaseMs) + 250;
}

/** How often a claim that gave way is tried again (until claimed, or the lease's time). */
export const YIELD_RETRY_MS = 250;

/** FNV-1a: a fast, stable hash of a job's name, for the order in which jobs are dealt. */
function hash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** Each job's owner among `live` (sorted): dealt round its allowed nodes in hash order. */
export function owners(jobs: readonly SpreadJob[], live: readonly string[]): Map<string, string> {
  const groups = new Map<string, { nodes: string[]; jobs: SpreadJob[] }>();
  for (const j of jobs) {
    const nodes = live.filter((n) => runsOn(j, n));
    const key = nodes.join("\u0000");
    const g = groups.get(key) ?? { nodes, jobs: [] };
    g.jobs.push(j);
    groups.set(key, g);
  }
  const out = new Map<string, string>();
  for (const { nodes, jobs: list } of groups.values()) {
    if (nodes.length === 0) continue;
    const dealt = list
      .map((j) => ({ name: j.name, h: hash(j.name) }))
      .sort((a, b) => a.h - b.h || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    dealt.forEach((j, i) => out.set(j.name, nodes[i % nodes.length] as string));
  }
  return out;
}

/** A node's view: which of its jobs it owns, and how late it takes the others' slots. */
export class Spread {
  private live: string[] = [];
  private owner = new Map<string, string>();
  private jobs: readonly SpreadJob[] = [];

  constructor(
    readonly node: string,
    readonly graceMs: number,
  ) {}

  /** The node rows as last read; true when the live list changed. */
  setNodes(rows: readonly NodeRow[]): boolean {
    const live = liveNodes(rows, this.node);
    if (live.join("\u0000") === this.live.join("\u0000")) return false;
    this.live = live;
    this.owner = owners(this.jobs, live);
    return true;
  }

  /**
   * How long after a slot of this job the node claims it: 0 for its own (or an unknown) job.
   * `jobs`: the jobs this node runs (dealt again when the config's list is a new one).
   */
  delay(job: string, jobs: readonly SpreadJob[]): number {
    if (jobs !== this.jobs) {
      this.jobs = jobs;
      this.owner = owners(jobs, this.live);
    }
    const o = this.owner.get(job);
    return o === undefined || o === this.node ? 0 : this.graceMs;
  }

  /** The live nodes, in name order (empty until the first read). */
  get nodes(): readonly string[] {
    return this.live;
  }
}
