// The daemon's writes that must commit together, each one Store call (one transaction: never a
// transaction held across an await, which better-sqlite3 would commit at the first await).
// Start-up and a tick's batch pay one fsync each, however many jobs.
import { reservation, type RunContext } from "../run/execute.js";
import type { HolderLease, Riders, RunRow, Store, TakenOver } from "../store/store.js";
import type { JobConfig } from "../core/types.js";
import type { Pending } from "./state.js";

/** A job the daemon starts watching: its slot stamp, and whether this boot's @reboot run is its. */
export interface AddedJob {
  name: string;
  scannedTo: number;
  /** An @reboot job whose run for this boot this daemon claimed. */
  reboot: boolean;
}

/** Ensure each job's row and slot stamp (a new job's slots count from now); claim @reboot runs. */
export async function addJobs(
  store: Store,
  jobs: JobConfig[],
  now: number,
  bootId: () => string,
): Promise<AddedJob[]> {
  const added = await store.addJobs(
    jobs.map((cfg) => ({ name: cfg.name, bootId: cfg.pattern === null ? bootId() : null })),
    now,
  );
  return jobs.map((cfg, i) => {
    const a = added[i] as (typeof added)[number];
    return { name: cfg.name, scannedTo: a.row.scanned_to ?? now, reboot: a.rebootClaimed };
  });
}

/** A job's slots recorded `missed`, with an event first and a new slot stamp if given. */
export interface MissedWrite {
  job: string;
  slots: number[];
  reason: string;
  event?: { kind: string; detail: string };
  scannedTo?: number;
}

/** Missed slots of any number of jobs (a start-up after downtime), in one transaction. */
export async function recordMissed(
  store: Store,
  writes: MissedWrite[],
  now: number,
): Promise<void> {
  // A new stamp only moves forward (the store keeps the greater), so it need not share the
  // dispositions' transaction.
  for (const w of writes)
    if (w.scannedTo !== undefined) await store.setScannedTo(w.job, w.scannedTo);
  await store.recordDispositions(
    writes.flatMap((w) =>
      w.slots.map((slot) => ({ job: w.job, slot, status: "missed" as const, reason: w.reason })),
    ),
    now,
    writes.flatMap((w) =>
      w.event ? [{ job: w.job, kind: w.event.kind, detail: w.event.detail }] : [],
    ),
  );
}

/** One write of a tick's batch: reserve a run, or record a slot's disposition. */
export interface TickWrite {
  job: JobConfig;
  p: Pending;
  record?: { status: "skipped" | "missed"; reason: string };
  /** Another node's slot, claimed late: give way to a live node's run (ReserveRequest.yieldMs). */
  yieldMs?: number;
}

export type TickOutcome =
  | { kind: "started"; run: RunRow; tookOver?: TakenOver[] }
  | { kind: "locked"; holder: RunRow; lease?: HolderLease }
  | { kind: "held"; admission: { kind: "wait" | "skip"; reason: string } }
  | { kind: "duplicate"; yielded?: boolean }
  | { kind: "recorded" };

/** Reserve every run (locks, slots, fences, rows) and record every disposition, in one transaction. */
export async function writeTick(
  ctx: RunContext,
  writes: TickWrite[],
  riders?: Riders,
): Promise<TickOutcome[]> {
  const now = ctx.now();
  const outcomes = await ctx.store.reserveRuns(
    writes.map(({ job, p, record, yieldMs }) =>
      record !== undefined
        ? { dispose: { job: job.name, slot: p.slot as number, ...record }, now }
        : { reserve: { ...reservation(ctx, job, p), ...(yieldMs ? { yieldMs } : {}) } },
    ),
    riders,
  );
  return outcomes.map((o): TickOutcome => {
    if (o.kind === "started" || o.kind === "locked" || o.kind === "held") return o;
    if (o.kind === "duplicate" && o.yielded) return { kind: "duplicate", yielded: true };
    return { kind: o.kind };
  });
}

/** The pids of runs just spawned, in one transaction. */
export async function recordProcesses(
  store: Store,
  procs: { runId: number; pid: number; pidStart: string | null; pgid: number }[],
): Promise<void> {
  await store.setRunProcesses(procs);
}

/** Ends that arrived together (a tick's worth of short jobs), in one transaction. */
export async function recordEnds(
  store: Store,
  ends: { runId: number; result: Parameters<Store["finishRun"]>[1] }[],
): Promise<void> {
  await store.finishRuns(ends);
}
