// The daemon's writes that must commit together, each one whole transaction in one function
// (never a transaction held across an await: better-sqlite3 would commit at the first await).
// Each is the shape of one Store method, so a second store implementation replaces the body
// with one call. Start-up and a tick's batch pay one fsync each, however many jobs.
import { reserve, type RunContext } from "../run/execute.js";
import type { RunRow, Store } from "../store/store.js";
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
  return store.tx(() =>
    jobs.map((cfg) => {
      const row = store.ensureJob(cfg.name, now);
      if (row.scanned_to === null) store.setScannedTo(cfg.name, now);
      const reboot = cfg.pattern === null && store.claimReboot(cfg.name, bootId(), now);
      return { name: cfg.name, scannedTo: row.scanned_to ?? now, reboot };
    }),
  );
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
  store.tx(() => {
    for (const w of writes) {
      if (w.event) store.event(now, w.job, w.event.kind, w.event.detail);
      if (w.scannedTo !== undefined) store.setScannedTo(w.job, w.scannedTo);
      for (const s of w.slots) store.disposition(w.job, s, "missed", w.reason, now);
    }
  });
}

/** One write of a tick's batch: reserve a run, or record a slot's disposition. */
export interface TickWrite {
  job: JobConfig;
  p: Pending;
  record?: { status: "skipped" | "missed"; reason: string };
}

export type TickOutcome =
  | { kind: "started"; run: RunRow }
  | { kind: "locked"; holder: RunRow }
  | { kind: "duplicate" }
  | { kind: "recorded" };

/** Reserve every run (locks, slots, fences, rows) and record every disposition, in one transaction. */
export async function writeTick(ctx: RunContext, writes: TickWrite[]): Promise<TickOutcome[]> {
  const { store } = ctx;
  const now = ctx.now();
  return store.tx(() =>
    writes.map(({ job, p, record }): TickOutcome => {
      if (record !== undefined) {
        store.disposition(job.name, p.slot as number, record.status, record.reason, now);
        return { kind: "recorded" };
      }
      return reserve(ctx, job, p);
    }),
  );
}

/** The pids of runs just spawned, in one transaction. */
export async function recordProcesses(
  store: Store,
  procs: { runId: number; pid: number; pidStart: string | null; pgid: number }[],
): Promise<void> {
  store.tx(() => {
    for (const p of procs) store.setRunProcess(p.runId, p.pid, p.pidStart, p.pgid);
  });
}

/** Ends that arrived together (a tick's worth of short jobs), in one transaction. */
export async function recordEnds(
  store: Store,
  ends: { runId: number; result: Parameters<Store["finishRun"]>[1] }[],
): Promise<void> {
  store.tx(() => {
    for (const e of ends) store.finishRun(e.runId, e.result);
  });
}
