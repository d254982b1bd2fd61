// A tick's batch and how it starts: reserve every run (locks, slots, fences, rows) in one
// transaction, commit, spawn each (all asked of the spawner at once), then record their pids in
// a second transaction. Two fsyncs per tick however many jobs are due, and no store work between
// one spawn and the next. On a shared store the pids, and the ends of runs that exited since,
// ride with the next tick's transaction instead (endings.ts): one fsync per tick.
import { spawnRun } from "../run/execute.js";
import type { RunHandle } from "../run/runner.js";
import type { DrainRow, RunRow, TakenOver } from "../store/store.js";
import type { JobConfig } from "../core/types.js";
import type { Runtime } from "./runtime.js";
import { scheduled, type Active, type Pending } from "./state.js";
import { writeTick, type TickWrite } from "./writes.js";
import type { Endings } from "./endings.js";
import { yieldMs } from "./spread.js";
import { widenGap } from "./due.js";
import { addBlocked } from "./blocked.js";
import { inTurn } from "./waiting.js";

/**
 * The starts and dispositions one tick (or start-up) collects, written in its one transaction.
 * Passed explicitly from the tick to everything that adds to it; a start outside a tick (a
 * retry, a queued slot, a jittered start) writes a batch of its own at once.
 */
export class TickBatch {
  readonly writes: TickWrite[] = [];
  /** The drain as the tick read it (hold.ts); undefined: not read, the flush reads it. */
  drain?: DrainRow | null;
  /** Jobs with a start here: a second start of one waits like one behind a running run. */
  private readonly starts = new Set<string>();
  /** The last disposition recorded, whose slot and record the next one may share. */
  private lastRecord: Required<Omit<TickWrite, "yieldMs">> | null = null;

  start(job: JobConfig, p: Pending): void {
    this.writes.push({ job, p });
    this.starts.add(job.name);
  }

  record(job: JobConfig, slot: number, status: "skipped" | "missed", reason: string): void {
    // Many jobs record the same slot alike (10,000 paused jobs, one slot): they share one Pending
    // and one record (neither is changed once made), so the batch holds one object per job, not
    // three, until it is written; fewer for the young generation's scavenges to copy.
    const last = this.lastRecord;
    const same =
      last !== null &&
      last.p.slot === slot &&
      last.record.status === status &&
      last.record.reason === reason;
    const w = same
      ? { job, p: last.p, record: last.record }
      : { job, p: scheduled(slot), record: { status, reason } };
    this.lastRecord = w;
    this.writes.push(w);
  }

  starting(name: string): boolean {
    return this.starts.has(name);
  }
}

/** A reservation took the job over from a dead node's run: the slots it blocked, to catch up. */
export type OnTakeOver = (job: JobConfig, taken: TakenOver[]) => void;

/** A late claim of another node's slot gave way to a live node's run: to try again. */
export type OnYield = (job: JobConfig, p: Pending) => void;

/**
 * The scheduled slots of other nodes' jobs (claimed late: spread.ts) give way to a live node's
 * run, for as long as a lease lasts after the slot; after that they are claimed as any.
 */
function markLate(rt: Runtime, writes: TickWrite[]): void {
  if (rt.spread === null) return;
  const { heartbeatMs, leaseMs } = rt.config;
  const now = rt.now();
  for (const w of writes) {
    const { p } = w;
    if (w.record !== undefined || !p.claimSlot || p.slot === null || p.trigger !== "schedule")
      continue;
    if (rt.delayOf(w.job.name) > 0 && now - p.slot < leaseMs)
      w.yieldMs = yieldMs(heartbeatMs, leaseMs);
  }
}

export async function startBatch(
  rt: Runtime,
  batch: TickBatch,
  endings: Endings,
  onTakeOver: OnTakeOver,
  onYield: OnYield,
): Promise<void> {
  // Grouped starts in their turn (earlier slot, then higher priority): the first gets the room.
  const writes = inTurn(batch.writes);
  // A fenced node claims nothing: the nodes that hold their leases run and record these slots.
  if (writes.length === 0 || rt.fenced) return;
  markLate(rt, writes);
  let outcomes;
  const riding = endings.take();
  try {
    outcomes = await writeTick(rt.ctx, writes, riding?.riders);
  } catch (e) {
    await riding?.settle(false);
    // The store refused the write (a full disk): these slots get their disposition later.
    for (const { job, p } of writes) {
      rt.log(`cronvisor: error handling slot: ${(e as Error).message} (job: ${job.name})`);
      const st = rt.jobs.get(job.name);
      if (st && p.slot !== null) st.gap = widenGap(st.gap, p.slot, e);
    }
    return;
  }
  await riding?.settle(true);
  const reserved = outcomes.flatMap((o) => (o.kind === "started" ? [o.run.id] : []));
  for (const id of reserved) rt.starting.add(id);
  try {
    await spawnReserved(rt, writes, outcomes, endings, onTakeOver, onYield);
  } finally {
    for (const id of reserved) rt.starting.delete(id);
  }
}

/** Spawn the batch's reserved runs, record their pids, watch them. */
async function spawnReserved(
  rt: Runtime,
  writes: readonly TickWrite[],
  outcomes: Awaited<ReturnType<typeof writeTick>>,
  endings: Endings,
  onTakeOver: OnTakeOver,
  onYield: OnYield,
): Promise<void> {
  const spawning: Promise<{ job: JobConfig; run: RunRow; handle: RunHandle }>[] = [];
  const tookOver: { job: JobConfig; taken: TakenOver[] }[] = [];
  const spawnAll = () =>
    outcomes.forEach((out, i) => {
      const { job, p } = writes[i] as TickWrite;
      if (out.kind === "locked") {
        // A scheduled slot's `skipped` disposition was recorded in the transaction that saw the lock.
        const st = rt.jobs.get(job.name);
        const ours =
          out.holder.owner_pid === rt.owner.pid && out.holder.owner_start === rt.owner.start;
        if (st && ours && (p.trigger === "catchup" || p.trigger === "resume"))
          // A run of this daemon started first (a slot that came due as the queued run's turn
          // came): it waits behind that one again, as the overlap decision would have had it.
          st.pending.unshift(p);
        else if (p.slot === null || !p.claimSlot)
          rt.log(
            `cronvisor: ${p.trigger} of ${job.name} skipped: run ${out.holder.id} holds the lock`,
          );
        else if (out.lease) {
          // Another node's run: looked at again when that node's lease ends.
          if (st) st.blocked = addBlocked(job, st.blocked, out.holder.id, out.lease, rt.now());
        }
      } else if (out.kind === "held") {
        // A named lock or the group refused it: a skipped slot was recorded with the reason.
        if (out.admission.kind === "wait") rt.waiting.add(job, p, out.admission.reason);
        else if (p.slot === null || !p.claimSlot)
          rt.log(`cronvisor: ${p.trigger} of ${job.name} skipped: ${out.admission.reason}`);
      } else if (out.kind === "duplicate") {
        // Gave way to a live node's run: tried again shortly (spread.ts).
        if (out.yielded) return onYield(job, p);
        // On a shared store another node claiming a slot first is the normal case.
        if (rt.store.shared) return;
        rt.log(
          `cronvisor: slot ${new Date(p.slot ?? 0).toISOString()} of ${job.name} already has a disposition; not run again`,
        );
      } else if (out.kind === "started") {
        const run = out.run;
        spawning.push(spawnRun(rt.ctx, job, run).then((handle) => ({ job, run, handle })));
        if (out.tookOver) tookOver.push({ job, taken: out.tookOver });
      }
    });
  // Back to back: every request sent to the spawner (which sets each run's nice) before any
  // answer is awaited.
  spawnAll();
  const started = await Promise.all(spawning);
  // A fault hook for the test of a daemon killed between its runs' spawn and the record of their
  // pids (test/containment.test.js): the runs are found by their cgroup or pid file.
  if (process.env.CRONVISOR_FAULT === "die-before-pids" && started.length > 0)
    process.kill(process.pid, "SIGKILL");
  await recordPids(rt, endings, started);
  for (const { job, run, handle } of started) {
    let done!: () => void;
    const a: Active = { run, job, handle, finished: new Promise<void>((r) => (done = r)) };
    rt.active.set(run.id, a);
    rt.hook("runStarted", (h) => h.runStarted?.(run, job));
    void handle.done.then((result) => endings.push(a, result, done));
  }
  // Once the new runs are watched: a catch-up of the slots a taken-over run blocked waits for them.
  for (const { job, taken } of tookOver) onTakeOver(job, taken);
}

async function recordPids(
  rt: Runtime,
  endings: Endings,
  started: { run: RunRow; handle: RunHandle }[],
): Promise<void> {
  const procs = [];
  for (const { run, handle: h } of started) {
    if (h.pid !== null && h.pgid !== null)
      procs.push({ runId: run.id, pid: h.pid, pidStart: h.pidStart, pgid: h.pgid });
  }
  try {
    await endings.addProcs(procs);
  } catch (e) {
    // The runs go on and this daemon watches them; only a restart in this state loses sight.
    rt.log(
      `cronvisor: could not record the pids of ${started.length} run(s): ${(e as Error).message}`,
    );
  }
}
