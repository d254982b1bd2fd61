// Run endings: results that arrive together (a tick's worth of short jobs) are recorded in one
// transaction on the next turn of the event loop; results the store refused (a full disk) wait
// in memory and are retried every heartbeat, holding the job's lock until they are recorded.
import { retireExitFile } from "../run/execute.js";
import type { RunRow } from "../store/store.js";
import type { RunResult } from "../core/types.js";
import type { Runtime } from "./runtime.js";
import type { Active } from "./state.js";
import { recordEnds } from "./writes.js";
import { chainsAfter } from "./chains.js";

/** A run ended and is recorded (or, on a full disk, still `running`): retries, queued slots, retention. */
export type Ended = (a: Active, row: RunRow) => Promise<void>;

export class Endings {
  private waiting: { a: Active; result: RunResult; done: () => void }[] = [];

  constructor(
    private readonly rt: Runtime,
    private readonly ended: Ended,
    /** Chain starts were written with the ends: start them (Runs.pollChains). */
    private readonly chained: () => void,
  ) {}

  readonly push = (a: Active, result: RunResult, done: () => void): void => {
    this.waiting.push({ a, result, done });
    if (this.waiting.length === 1) setImmediate(() => this.rt.guard(() => this.flush()));
  };

  private async flush(): Promise<void> {
    const { rt } = this;
    const batch = this.waiting;
    this.waiting = [];
    let recorded = true;
    const now = rt.now();
    const ends = batch.map(({ a, result }) => {
      const chains = chainsAfter(
        a.job,
        a.run,
        result.status,
        rt.jobs.get(a.run.job)?.next ?? null,
        now,
      );
      return { runId: a.run.id, result, ...(chains.length > 0 ? { chains } : {}) };
    });
    try {
      await recordEnds(rt.store, ends);
    } catch (e) {
      recorded = false;
      for (const { a } of batch) {
        rt.log(`cronvisor: could not record the end of run ${a.run.id}: ${(e as Error).message}`);
      }
    }
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
