// Run endings: results that arrive together (a tick's worth of short jobs) are recorded in one
// transaction on the next turn of the event loop; results the store refused (a full disk) wait
// in memory and are retried every heartbeat, holding the job's lock until they are recorded.
// On a shared store the ends, and the pids of runs just spawned, wait instead for the next
// transaction to ride in (a tick's: Store.reserveRuns' riders), or FOLD_MS at most: a slot then
// costs its tick's one fsync'd commit, not three (claim and start, pids, end).
import { retireExitFile } from "../run/execute.js";
import type { Riders, RunEnd, RunProcess, RunRow } from "../store/store.js";
import type { RunResult } from "../core/types.js";
import type { Runtime } from "./runtime.js";
import type { Active } from "./state.js";
import { recordEnds, recordProcesses } from "./writes.js";
import { chainsAfter } from "./chains.js";

/** A run ended and is recorded (or, on a full disk, still `running`): retries, queued slots, retention. */
export type Ended = (a: Active, row: RunRow) => Promise<void>;

/** The longest an end or a pid waits for a tick's transaction on a shared store. */
export const FOLD_MS = 1000;

type Ending = { a: Active; result: RunResult; done: () => void };

/** Riders taken for a transaction: `settle` once it committed (true) or failed (false). */
export interface Taken {
  riders: Riders;
  settle(recorded: boolean): Promise<void>;
}

export class Endings {
  private waiting: Ending[] = [];
  private procs: RunProcess[] = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly rt: Runtime,
    private readonly ended: Ended,
    /** Chain starts were written with the ends: start them (Runs.pollChains). */
    private readonly chained: () => void,
  ) {}

  /** Writes ride with a tick's on a shared store (each costs an fsync there, none waits here). */
  private get folds(): boolean {
    return this.rt.store.shared;
  }

  readonly push = (a: Active, result: RunResult, done: () => void): void => {
    // Exited: no longer running for the overlap decision, though its end waits to be recorded
    // (it is recorded before any start that transaction makes).
    if (this.folds) a.exited = true;
    this.waiting.push({ a, result, done });
    // A run that held named locks or a group slot is recorded at once: until its end is, the
    // other nodes see them taken, and this node, recording it with its next tick's start, would
    // take them again first every time (test/locks-nodes.test.js).
    this.soon(a.job.locks.length > 0 || a.job.group !== null);
  };

  /** The pids of runs just spawned: at once, or (shared store) with the next transaction. */
  async addProcs(procs: RunProcess[]): Promise<void> {
    if (procs.length === 0) return;
    if (!this.folds) return recordProcesses(this.rt.store, procs);
    this.procs.push(...procs);
    this.soon();
  }

  private soon(now = false): void {
    if (this.timer !== null && !now) return;
    if (this.timer !== null) clearTimeout(this.timer);
    const flush = () => {
      this.timer = null;
      this.rt.guard(() => this.flush());
    };
    if (this.folds && !this.rt.stopping && !now) this.timer = setTimeout(flush, FOLD_MS);
    else if (this.waiting.length + this.procs.length > 0) {
      this.timer = setTimeout(flush, 0);
    }
  }

  /** What waits, for a transaction to carry (null: nothing, or not a shared store). */
  take(): Taken | null {
    const t = this.takeWaiting();
    if (t === null) return null;
    return { riders: t.riders, settle: (recorded) => this.afterRide(t, recorded) };
  }

  private takeWaiting(): { batch: Ending[]; riders: Riders } | null {
    if (!this.folds || this.waiting.length + this.procs.length === 0) return null;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const [batch, procs] = [this.waiting, this.procs];
    [this.waiting, this.procs] = [[], []];
    return { batch, riders: { procs, ends: this.endsOf(batch) } };
  }

  /** The ends to record, each with the chain starts it makes (chains.ts): in the same write. */
  private endsOf(batch: readonly Ending[]): RunEnd[] {
    const now = this.rt.now();
    return batch.map(({ a, result }) => {
      const next = this.rt.jobs.get(a.run.job)?.next ?? null;
      const chains = chainsAfter(a.job, a.run, result.status, next, now);
      return { runId: a.run.id, result, ...(chains.length > 0 ? { chains } : {}) };
    });
  }

  /** A tick's transaction carried them (recorded), or failed: then back in line for the next. */
  private async afterRide(t: { batch: Ending[]; riders: Riders }, recorded: boolean) {
    if (recorded) return this.settle(t.batch, true, t.riders.ends);
    this.waiting.unshift(...t.batch);
    this.procs.unshift(...t.riders.procs);
    this.soon();
  }

  private async flush(): Promise<void> {
    const { rt } = this;
    let batch: Ending[];
    let ends: RunEnd[];
    let recorded = true;
    if (this.folds) {
      const t = this.takeWaiting();
      if (t === null) return;
      batch = t.batch;
      ends = [...t.riders.ends];
      try {
        await rt.store.reserveRuns([], t.riders);
      } catch (e) {
        // The pids are given up (a run is found by its cgroup or pid file); the ends wait in
        // memory and are retried every heartbeat, as below.
        recorded = false;
        rt.log(`cronvisor: could not record run ends or pids: ${(e as Error).message}`);
      }
    } else {
      batch = this.waiting;
      this.waiting = [];
      ends = this.endsOf(batch);
      try {
        await recordEnds(rt.store, ends);
      } catch (e) {
        recorded = false;
        for (const { a } of batch) {
          rt.log(`cronvisor: could not record the end of run ${a.run.id}: ${(e as Error).message}`);
        }
      }
    }
    await this.settle(batch, recorded, ends);
  }

  /** After the ends' write: exit files retired, the runs' ends handled (or kept in memory). */
  private async settle(batch: Ending[], recorded: boolean, ends: readonly RunEnd[]): Promise<void> {
    const { rt } = this;
    for (const { a, result, done } of batch) {
      try {
        if (recorded) {
          retireExitFile(rt.config.stateDir, a.run.id);
          rt.broker?.unregister(a.run.id); // a straggler of the run is refused from now on
        } else rt.unrecorded.set(a.run.id, { result, job: a.job });
        const row = recorded
          ? ((await rt.store.run(a.run.id)) as RunRow)
          : { ...a.run, status: "running" as const };
        await this.ended(a, row);
      } catch (e) {
        rt.log(`cronvisor: ${(e as Error).message} (job: ${a.run.job}, run: ${a.run.id})`);
      } finally {
        done(); // stop() and `replace` wait for this
      }
    }
    if (!recorded || !ends.some((e) => e.chains)) return;
    // A fault hook for the test of a daemon killed between an upstream run's end (its chain
    // start written with it) and the chain's start (test/chains.test.js): started once after.
    if (process.env.CRONVISOR_FAULT === "die-after-chain-end") process.kill(process.pid, "SIGKILL");
    this.chained();
  }

  /** Retry recording the ends the store refused; the lock is free once they are recorded. */
  async retryUnrecorded(): Promise<void> {
    const { rt } = this;
    for (const [id, { result, job }] of rt.unrecorded) {
      await rt.store.finishRun(id, result); // throws while the disk is still full: next beat, again
      rt.unrecorded.delete(id);
      retireExitFile(rt.config.stateDir, id);
      rt.broker?.unregister(id);
      rt.log(
        `cronvisor: recorded the end of run ${id} (${result.status}) after the store recovered`,
      );
      const row = (await rt.store.run(id)) as RunRow;
      rt.hook("runEnded", (h) => h.runEnded?.(row, job));
    }
  }
}
