// Starting and ending runs: the overlap decision applied to each run to start (into the caller's
// batch, the job's queue, a `skipped` disposition, or a replace), and what follows an end
// (retention, a retry, the next queued slot).
import type { DrainRow, RunRow, TakenOver } from "../store/store.js";
import type { JobConfig } from "../core/types.js";
import { adoptOrphans } from "./adopt.js";
import { planBlocked } from "./blocked.js";
import { planResume } from "./catchup.js";
import { Endings } from "./endings.js";
import { YIELD_RETRY_MS } from "./spread.js";
import type { Offer } from "./jobs.js";
import { decideOverlap } from "./overlap.js";
import { planRetry } from "./retry.js";
import type { Runtime } from "./runtime.js";
import { startBatch, TickBatch } from "./starts.js";
import { holdReason } from "./hold.js";
import type { TickWrite } from "./writes.js";
import { chainedStart, type Active, type JobState, type Pending } from "./state.js";
import { terminate } from "./stop.js";

export class Runs {
  private readonly endings: Endings;

  /** Chain starts offered and not yet settled (waiting in a queue, or in a batch being written). */
  private readonly chained = new Set<string>();

  /** Jobs due a prune (their keep_runs), and the prune under way (pruneDue). */
  private readonly prunes = new Map<string, number>();
  private pruning: Promise<void> | null = null;

  constructor(private readonly rt: Runtime) {
    this.endings = new Endings(rt, this.ended, () => rt.guard(() => this.pollChains(), "chains"));
  }

  /** Apply the overlap decision to a run to start: into the batch, the queue, skipped, or replace. */
  async offer(st: JobState, p: Pending, batch: TickBatch): Promise<void> {
    const { rt } = this;
    if (rt.stopping) return;
    const name = st.cfg.name;
    // The drain (if the batch has read it) and blackouts come before the overlap decision: a slot
    // in a window is skipped for it. Nothing awaited before the start is in the batch: start-up
    // and takeovers offer without waiting, and flush() holds what this could not judge.
    if (p.slot !== null && p.claimSlot) {
      const held = holdReason(st.cfg, p.slot, batch.drain ?? null, rt.now());
      if (held !== null) return batch.record(st.cfg, p.slot, "skipped", held);
    }
    // A slot of the job already waits for a lock or its group: this one cannot start before
    // it, and `queue` keeps one waiting (admit.ts).
    const waits = rt.waiting.reasonOf(name);
    if (waits !== null && p.trigger === "schedule" && p.slot !== null)
      return batch.record(st.cfg, p.slot, "skipped", `${waits} and a slot is already waiting`);
    const running = rt.runningOf(name);
    const d = decideOverlap(st.cfg.overlap, p, {
      running: running.map((a) => a.run.id),
      inBatch: batch.starting(name),
      queued: st.pending.length,
    });
    if (d.kind === "queued-first") {
      batch.start(st.cfg, st.pending.shift() as Pending);
      return this.offer(st, p, batch);
    }
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

  /** Write and start a batch: held starts (drain, blackouts) become dispositions first. */
  async flush(batch: TickBatch): Promise<void> {
    await this.hold(batch);
    await startBatch(
      this.rt,
      batch,
      this.endings,
      (job, taken) => this.tookOver(job.name, taken),
      (job, p) => void this.rt.later(YIELD_RETRY_MS, () => this.offerNow(job.name, p)),
    );
    // A fault hook (test/chains.test.js): killed after a chained run's start, before its chain
    // start is settled; the restarted daemon finds its slot taken and starts no second run.
    if (
      process.env.CRONVISOR_FAULT === "die-before-chain-settle" &&
      batch.writes.some((w) => w.p.trigger === "chained")
    )
      process.kill(process.pid, "SIGKILL");
    await this.settleChains(batch);
  }

  /**
   * The drain and the jobs' blackouts, applied to every start of the batch, whatever offered it
   * (a slot, a catch-up, a queued slot, a retry, a chain): a start that claims a slot is recorded
   * `skipped` with the reason; one that does not (a retry, a resume) is not started.
   */
  private async hold(batch: TickBatch): Promise<void> {
    const { rt } = this;
    const writes = batch.writes;
    if (!writes.some((w) => w.record === undefined)) return;
    if (batch.drain === undefined) batch.drain = await this.readDrain();
    const now = rt.now();
    for (let i = 0; i < writes.length; i++) {
      const w = writes[i] as TickWrite;
      if (w.record !== undefined) continue;
      const why = holdReason(w.job, w.p.slot, batch.drain, now);
      if (why === null) continue;
      if (w.p.claimSlot && w.p.slot !== null) {
        writes[i] = { job: w.job, p: w.p, record: { status: "skipped", reason: why } };
      } else {
        writes.splice(i--, 1);
        rt.log(`cronvisor: ${w.p.trigger} of ${w.job.name} not started: ${why}`);
      }
    }
  }

  /** The tick's read of `cronvisor pause JOB` flags, and of the drain into its batch. */
  async paused(batch: TickBatch): Promise<ReadonlySet<string>> {
    if (batch.drain === undefined) batch.drain = await this.readDrain();
    return this.rt.store.pausedJobs();
  }

  private async readDrain(): Promise<DrainRow | null> {
    try {
      return await this.rt.store.drain();
    } catch (e) {
      // The write of the batch says what is wrong with the store; nothing is held meanwhile.
      this.rt.log(`cronvisor: could not read the drain: ${(e as Error).message}`);
      return null;
    }
  }

  /**
   * Chain starts (`then:`) waiting in the store for this node's jobs, offered like any start
   * (overlap, drain, blackouts); a paused job's is recorded `skipped`. Into `batch`, or a batch
   * of their own. Each is offered once; the store keeps it until its slot has a disposition.
   */
  async pollChains(batch?: TickBatch): Promise<void> {
    const { rt } = this;
    if (rt.stopping) return;
    const key = (job: string, slot: number) => `${job}@${slot}`;
    const fresh = (await rt.store.pendingChains()).filter(
      (c) => rt.jobs.has(c.job) && !this.chained.has(key(c.job, c.slot)),
    );
    if (fresh.length === 0) return;
    for (const c of fresh) this.chained.add(key(c.job, c.slot));
    const paused = await rt.store.pausedJobs();
    const own = batch ?? new TickBatch();
    for (const c of fresh) {
      const st = rt.jobs.get(c.job);
      if (!st) continue;
      if (st.cfg.paused || paused.has(c.job)) own.record(st.cfg, c.slot, "skipped", "paused");
      else await this.offer(st, chainedStart(c.slot), own);
    }
    if (!batch) await this.flush(own);
  }

  /** The chain starts of a written batch: settled in the store if their slot has a disposition. */
  private async settleChains(batch: TickBatch): Promise<void> {
    if (this.chained.size === 0) return;
    const done: { job: string; slot: number }[] = [];
    for (const w of batch.writes) {
      const k = `${w.job.name}@${w.p.slot}`;
      if (w.p.slot !== null && this.chained.delete(k))
        done.push({ job: w.job.name, slot: w.p.slot });
    }
    if (done.length === 0) return;
    try {
      await this.rt.store.settleChains(done);
    } catch (e) {
      // Looked at again by the next poll: its slot's disposition keeps it from running twice.
      this.rt.log(`cronvisor: could not settle chain starts: ${(e as Error).message}`);
    }
  }

  /** What waits for another run: jobs another node's run blocked, then slots waiting for holds. */
  async lookAgain(now: number, batch: TickBatch): Promise<void> {
    await this.takeOverBlocked(now, batch);
    await this.wakeWaiting(batch);
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

  /**
   * The slots waiting for a named lock or their group, offered again in their turn (a run
   * ended, a tick, a heartbeat): each meets the overlap decision again, and the store's
   * admission; one refused again waits again.
   */
  async wakeWaiting(batch: TickBatch): Promise<void> {
    for (const { job, p, reason } of this.rt.waiting.drain()) {
      const st = this.rt.jobs.get(job.name);
      // A start of the job is in this batch already (a retry): the waiter stays behind it.
      if (st && batch.starting(job.name)) this.rt.waiting.add(job, p, reason ?? "");
      else if (st) await this.offer(st, p, batch);
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
      if (st) this.prune(st, a.job);
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
      // The job's next queued slot, and the slots waiting for the named locks and group this
      // run held, in one batch: in their turn (waiting.ts), an older waiting slot first.
      const next = st.pending.shift();
      const batch = new TickBatch();
      if (next) batch.start(st.cfg, next);
      if (rt.waiting.size > 0) await this.wakeWaiting(batch);
      await this.flush(batch);
    } catch (e) {
      rt.log(`cronvisor: ${(e as Error).message} (job: ${name}, run: ${a.run.id})`);
    }
  };

  /**
   * Prune about every tenth of keep_runs: retention stays within 10% and most ends skip it. The
   * jobs due are pruned together once the ends at hand are handled (pruneDue): a transaction per
   * run end was a third of the daemon's CPU at 500 runs a second.
   */
  private prune(st: JobState, job: JobConfig): void {
    if (++st.sincePrune < Math.max(1, Math.floor(job.log.keepRuns / 10))) return;
    st.sincePrune = 0;
    this.prunes.set(job.name, job.log.keepRuns);
    this.pruning ??= this.pruneDue();
  }

  private async pruneDue(): Promise<void> {
    await new Promise(setImmediate); // the ends read together join this one transaction
    while (this.prunes.size > 0) {
      const due = [...this.prunes].map(([job, keep]) => ({ job, keep }));
      this.prunes.clear();
      try {
        // A log's inode serves a later run only if no reader holds it open (`logs --follow`, the
        // page), who must never see a later run's output in it (run/spare.ts, recycleLog).
        for (const p of await this.rt.store.pruneRuns(due)) this.rt.logs.remove(p);
      } catch (e) {
        const jobs = due.map((d) => d.job).join(", ");
        this.rt.log(`cronvisor: pruning old runs failed: ${(e as Error).message} (jobs: ${jobs})`);
      }
    }
    this.pruning = null;
  }

  /** The prunes under way are done (a stopping daemon, before it closes the store). */
  async pruned(): Promise<void> {
    await this.pruning;
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

  /**
   * Adopt or reap the runs no daemon watches (adopt.ts), then offer the chain starts waiting in
   * the store: ones a killed daemon wrote and never started, or another node's runs wrote.
   */
  async adopt(batch: TickBatch): Promise<void> {
    await adoptOrphans(this.rt, (row, job) => this.reaped(row, job, batch), this.ended);
    await this.pollChains(batch);
  }

  /** An orphan recorded dead: its `interrupted` slot follows the job's catch-up policy. */
  reaped(row: RunRow, job: JobConfig, batch: TickBatch): void {
    this.rt.hook("runEnded", (h) => h.runEnded?.(row, job));
    if (row.status !== "interrupted") return;
    const p = planResume(job, row, this.rt.now());
    if (p) this.offerAll([{ name: job.name, p }], batch);
  }
}
