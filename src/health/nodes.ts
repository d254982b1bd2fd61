// The nodes of a store as `status` reports them, and which runs are live: pure judgements of the
// store's rows and its clock. On a shared store (PostgreSQL) a node is judged by its lease, by
// the database's clock, never by a process on this machine; a store of one node (SQLite) by its
// daemon's process, as the `daemon` entry is.
import { runsOn } from "../core/hosts.js";
import type { StatusConfig } from "../core/types.js";
import type { NodeRow, RunRow } from "../store/rows.js";
import { UNRESPONSIVE_BEATS, type DaemonState } from "./health.js";

/** `running` beats; `late` has missed 3 beats but its lease has not run out; `gone` has. */
export type NodeState = "running" | "late" | "gone";

/** A node's clock this far from the store's is a WARNING. */
export const CLOCK_OFF_MS = 2000;

export interface NodeReport {
  name: string;
  state: NodeState;
  pid: number | null;
  heartbeat_at: string | null;
  heartbeat_age_s: number | null;
  /** The node's clock minus the store's at its last beat (ms, plus the beat's latency). */
  clock_offset_ms: number | null;
  version: string | null;
}

/** Is the node's lease running, by the store's clock at the read? */
export function leaseLive(n: NodeRow): boolean {
  return n.renewed_at !== null && n.lease_ms !== null && n.db_now < n.renewed_at + n.lease_ms;
}

/** A node of a shared store, judged by its lease. */
export function nodeState(n: NodeRow): NodeState {
  if (n.stopped_at !== null || !leaseLive(n)) return "gone";
  const beats = UNRESPONSIVE_BEATS * (n.heartbeat_ms ?? 10_000);
  return n.db_now - (n.renewed_at as number) <= beats ? "running" : "late";
}

/** The one node of a SQLite store takes its state from its daemon's (judged by its process). */
const FROM_DAEMON: Record<DaemonState, NodeState> = {
  running: "running",
  unresponsive: "late",
  down: "gone",
};

const iso = (t: number | null): string | null => (t === null ? null : new Date(t).toISOString());

/** The `nodes` of `status --json`. `daemon`: the state of a SQLite store's one daemon. */
export function nodeReports(rows: readonly NodeRow[], shared: boolean, daemon: DaemonState) {
  return rows.map((n): NodeReport => {
    const state = shared ? nodeState(n) : FROM_DAEMON[daemon];
    const beat = shared ? n.renewed_at : n.heartbeat_at;
    return {
      name: n.name,
      state,
      pid: state === "gone" ? null : n.pid,
      heartbeat_at: iso(n.heartbeat_at),
      heartbeat_age_s: beat === null ? null : Math.max(0, (n.db_now - beat) / 1000),
      clock_offset_ms:
        shared && n.heartbeat_at !== null && n.renewed_at !== null
          ? n.heartbeat_at - n.renewed_at
          : shared
            ? null
            : 0,
      version: n.version,
    };
  });
}

/**
 * Is a `running` row live? A run of another node of a shared store lives while its node's lease
 * does; a run of this machine by its processes (`local`).
 */
export function runLiveness(
  rows: readonly NodeRow[],
  shared: boolean,
  here: string,
  local: (r: RunRow) => boolean,
): (r: RunRow) => boolean {
  if (!shared) return local;
  const live = new Map(rows.map((n) => [n.name, leaseLive(n)]));
  return (r) => (r.node === null || r.node === here ? local(r) : (live.get(r.node) ?? false));
}

/** Per job, the live nodes that record different definitions of it (only where they differ). */
export function definitionsDiffer(
  hashes: readonly { node: string; job: string; hash: string }[],
  live: ReadonlySet<string>,
): Map<string, string[]> {
  const byJob = new Map<string, Map<string, string>>();
  for (const h of hashes) {
    if (!live.has(h.node)) continue;
    const m = byJob.get(h.job) ?? new Map<string, string>();
    m.set(h.node, h.hash);
    byJob.set(h.job, m);
  }
  const out = new Map<string, string[]>();
  for (const [job, m] of byJob)
    if (new Set(m.values()).size > 1) out.set(job, [...m.keys()].sort());
  return out;
}

/** On a shared store: the jobs that no running node may run (CRITICAL). */
export function unrunnable(s: { nodes: NodeReport[] }, config: StatusConfig | undefined): string[] {
  const running = s.nodes.filter((n) => n.state === "running").map((n) => n.name);
  const jobs = config?.jobs ?? [];
  if (jobs.length === 0) return running.length === 0 ? ["(every job)"] : [];
  return jobs.filter((j) => !running.some((n) => runsOn(j, n))).map((j) => j.name);
}

/** On a shared store: what is wrong with nodes (WARNING), one phrase each. */
export function nodeTrouble(s: { nodes: NodeReport[] }): string[] {
  return s.nodes.flatMap((n) => [
    ...(n.state !== "running" ? [`node ${n.name} ${n.state}`] : []),
    ...(n.state !== "gone" &&
    n.clock_offset_ms !== null &&
    Math.abs(n.clock_offset_ms) > CLOCK_OFF_MS
      ? [`node ${n.name}'s clock is off by ${(n.clock_offset_ms / 1000).toFixed(1)} s`]
      : []),
  ]);
}
