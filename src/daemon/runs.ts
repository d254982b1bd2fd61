// Starting and ending runs: the overlap decision applied to each run to start (into the caller's
// batch, the job's queue, a `skipped` disposition, or a replace), and what follows an end
// (retention, a retry, the next queued slot).
import type { RunRow, TakenOver } from "../store/store.js";
import type { JobConfig } from "../core/types.js";
import { planBlocked } from "./blocked.js";
import { planResume } from "./catchup.js";
import { Endings } from "./endings.js";
import { YIELD_RETRY_MS } from "./spread.js";
import type { Offer } from "./jobs.js";
import { decideOverlap } from "./overlap.js";
import { planRetry } from "./retry.js";
import type { Runtime } from "./runtime.js";
import { startBatch, TickBatch } from "./starts.js";
import type { Active, JobState, Pending } from "./state.js";
import { terminate } from "./stop.js";

export class Runs {
  private readonly endings: Endings;

  constructor(private readonly rt: Runtime) {
    this.endings = new Endings(rt, this.ended);
  }

  /** Apply the overlap decision to a run to start: into the batch, the queue, skipped, or replace. */
  async offer(st: JobState, p: Pending, batch: TickBatch): Promise<void> {
    const { rt } = this;
    if (rt.stopping) return;
    const name = st.cfg.name;
    const running = rt.runningOf(name);
    const d = decideOverlap(st.cfg.overlap, p, {
      running: running.map((a) => a.run.id),
      inBatch: batch.starting(name),
      queued: st.pending.length,
    });
    if (d.kind === "start") batch.start(st.cfg, p);
    else if (d.kind === "queue") st.pending.push(p);
    else if (d.kind === "skip") batch.record(st.cfg, p.slot as number, "skipped", d.reason);
    else {
      // Revoke the old runs' fences first, so a replaced run can no longer write markers.
      for (const a of running) await rt.store.revokeRun(a.run.id);
      for (const a of running) terminate(rt, a, "replaced", a.job.killGraceMs);
      void Promise.all(running.map((a) => a.finished)).then(() =>
        rt.guard(() => this.startNow(name, p), `job: ${name}`),
      );
    }
  }

  /** Offers from start-up, reload or a reaped orphan (never a scheduled slot, so never a replace). */
  offerAll(offers: Offer[], batch: TickBatch): void {
    for (const { name, p } of offers) {
      const st = this.rt.jobs.get(name);
      if (st) this.rt.guard(() => this.offer(st, p, batch), `job: ${name}`);
    }
  }

  /** Outside a tick (a jittered start, a retry): the decision and a batch of its own, written now. */
  async offerNow(name: string, p: Pending): Promise<void> {
    const st = this.rt.jobs.get(name);
    if (!st) return;
    const batch = new TickBatch();
    await this.offer(st, p, batch);
    await this.flush(batch);
  }

  /** Start now, past the overlap decision: a queued slot whose turn came, a replacing run. */
  private async startNow(name: string, p: Pending): Promise<void> {
    const st = this.rt.jobs.get(name);
    if (!st || this.rt.stopping) return;
    const batch = new TickBatch();
    batch.start(st.cfg, p);
    await this.flush(batch);
  }

  flush(batch: TickBatch): Promise<void> {
    return startBatch(
      this.rt,
      batch,
      this.endings,
      (job, taken) => this.tookOver(job.name, taken),
      (job, p) => void this.rt.later(YIELD_RETRY_MS, () => this.offerNow(job.name, p)),
    );
  }

  /**
   * The jobs whose slots another node's run blocked, once that node's lease has ended (as this
   * node saw it): taken over, if no other node did first, and caught up (blocked.ts).
   */
  async takeOverBlocked(now: number, batch: TickBatch): Promise<void> {
    const { rt } = this;
    for (const st of rt.jobs.values()) {
      if (st.blocked === null || st.blocked.at > now) continue;
      st.blocked = null;
      try {
        const { tookOver } = await rt.store.takeOver(st.cfg.name, now);
        this.tookOver(st.cfg.name, tookOver, batch);
      } catch (e) {
        rt.log(`cronvisor: error taking a job over: ${(e as Error).message} (job: ${st.cfg.name})`);
      }
    }
  }

  /**
   * This node took a job over from dead nodes' runs: the slots they blocked are caught up per the
   * job's `catchup:` (blocked.ts), into `batch` or a batch of their own; they wait behind a run
   * of the job that is running or starting.
   */
  tookOver(name: string, taken: readonly TakenOver[], batch?: TickBatch): void {
    const { rt } = this;
    const st = rt.jobs.get(name);
    if (!st) return;
    for (const t of taken) {
      if (st.blocked?.runId === t.runId) st.blocked = null;
      const offers = planBlocked(st.cfg, t.slots, rt.now());
      const how = t.diedHere
        ? `its daemon and run ${t.runId} died on this machine`
        : `its lease ran out with run ${t.runId} holding the lock`;
      const slots = `${t.slots.length} slot(s) it blocked, ${offers.length} caught up (catchup: ${st.cfg.catchup})`;
      rt.log(
        `cronvisor: took ${name} over from node ${t.node} (${how})${t.slots.length > 0 ? `: ${slots}` : ""}`,
      );
      for (const p of offers)
        rt.guard(() => (batch ? this.offer(st, p, batch) : this.offerNow(name, p)), `job: ${name}`);
    }
  }

  /** Retry recording the ends the store refused (every heartbeat). */
  retryUnrecorded(): Promise<void> {
    return this.endings.retryUnrecorded();
  }

  /** A run ended and is recorded: retention, a retry, the next waiting slot. Never rejects. */
  readonly ended = async (a: Active, row: RunRow): Promise<void> => {
    const { rt } = this;
    const name = a.run.job;
    try {
      rt.active.delete(a.run.id);
      a.stopAdopt?.();
      rt.hook("runEnded", (h) => h.runEnded?.(row, a.job));
      const st = rt.jobs.get(name);
      if (st) await this.prune(st, a.job);
      await this.budget(row);
      if (!st || rt.stopping) return;
      const retry = planRetry(st.cfg, row, st.next, rt.now());
      if (retry.kind === "retry") {
        st.retryTimer = rt.later(retry.delayMs, () => {
          st.retryTimer = null;
          return this.offerNow(name, retry.pending);
        });
      } else if (retry.kind === "drop") {
        await rt.event(name, "retry", retry.detail);
      }
      const next = st.pending.shift();
      if (next) await this.startNow(name, next);
    } catch (e) {
      rt.log(`cronvisor: ${(e as Error).message} (job: ${name}, run: ${a.run.id})`);
    }
  };

  /** Prune about every tenth of keep_runs: retention stays within 10% and most ends skip it. */
  private async prune(st: JobState, job: JobConfig): Promise<void> {
    if (++st.sincePrune < Math.max(1, Math.floor(job.log.keepRuns / 10))) return;
    st.sincePrune = 0;
    try {
      const logs = await this.rt.store.pruneRuns(job.name, job.log.keepRuns);
      // Removed, never kept as a spare (run/spare.ts): a reader may still hold a pruned log open
      // (`logs --follow`, the page), and must not see a later run's output in it.
      for (const p of logs) this.rt.logs.remove(p);
    } catch (e) {
      this.rt.log(`cronvisor: pruning old runs failed: ${(e as Error).message} (job: ${job.name})`);
    }
  }

  /** Count the run's log; past logs.max_total, remove the oldest finished runs' logs. */
  private async budget(row: RunRow): Promise<void> {
    const { rt } = this;
    if (row.log_path !== null) rt.logs.add(row.log_path);
    try {
      if (!rt.logs.over()) return;
      // The runs running now in any process (`cronvisor run` too): read only when over the cap.
      const running = new Set((await rt.store.runningRuns()).map((r) => r.id));
      const gone = rt.logs.prune(running);
      if (gone.length > 0)
        rt.log(
          `cronvisor: logs.max_total: removed the logs of ${gone.length} oldest finished runs`,
        );
    } catch (e) {
      rt.log(`cronvisor: pruning logs to logs.max_total failed: ${(e as Error).message}`);
    }
  }

  /** An orphan recorded dead: its `interrupted` slot follows the job's catch-up policy. */
  reaped(row: RunRow, job: JobConfig, batch: TickBatch): void {
    this.rt.hook("runEnded", (h) => h.runEnded?.(row, job));
    if (row.status !== "interrupted") return;
    const p = planResume(job, row, this.rt.now());
    if (p) this.offerAll([{ name: job.name, p }], batch);
  }
}
