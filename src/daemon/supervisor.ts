// The daemon's loop: slot -> lock -> run -> record. One timer over every job's next slot (never
// armed for more than 30 s, so a clock step or a suspend is noticed), adoption of runs that
// outlived a previous daemon, a disposition for every slot, and an ordered, idempotent stop().
// The decisions (what is due, overlap, catch-up, retries, orphans) are pure functions in their
// own modules; this class calls them and does the I/O.
import { bootId, isAlive, startTimeOf } from "../core/proc.js";
import { nextSlotAt } from "../schedule/schedule.js";
import { daemonTrust, makeDirs } from "../core/safe-path.js";
import os from "node:os";
import { openStoreAt, storeTarget, StoreError } from "../store/store.js";
import { VERSION } from "../core/version.js";
import { clearSpares } from "../run/spare.js";
import { DRAIN_MS } from "../run/runner.js";
import { Spawner } from "../run/spawner.js";
import {
  containmentRecord,
  releaseBase,
  setupContainment,
  sweepCgroups,
  tellJobCgroupKills,
} from "../run/cgroup.js";
import { holdLease, type Lease } from "./hold-lease.js";
import { accepted, forNode, jobHashes } from "./nodes.js";
import { keepRestartOnly, restartOnlyChanges } from "../core/restart-only.js";
import type { Config, RunBroker } from "../core/types.js";
import { clockSteppedBack, gapSlots, lateEvents, planDue, widenGap, type LateSlot } from "./due.js";
import { writeHeartbeatFile } from "./heartbeat.js";
import { collectGarbageSoon } from "./settle.js";
import { catchUp, watchJobs } from "./jobs.js";
import { Runs } from "./runs.js";
import { Runtime } from "./runtime.js";
import type { SupervisorHooks } from "../monitor/hooks.js";
import { TickBatch } from "./starts.js";
import { scheduled, wakeAt, type JobState } from "./state.js";
import { forceAll, stopRuns } from "./stop.js";
import { recordMissed } from "./writes.js";

/** Never sleep longer than this: re-read the wall clock at least this often. */
const MAX_SLEEP_MS = 30_000;
/** The store's paused jobs, for a tick whose due jobs the config pauses all (none read). */
const NONE_PAUSED: ReadonlySet<string> = new Set();
/** How often a fenced node's timer wakes (its lease's renewal wakes it at once anyway). */
const FENCED_SLEEP_MS = 1000;

export interface SupervisorOptions {
  config: Config;
  hooks?: SupervisorHooks;
  now?: () => number;
  log?: (line: string) => void;
  /** The sha256 of the config file's bytes that `config` was parsed from (recorded with it). */
  configHash?: string | null;
  /** Re-read the config (SIGHUP / `cronvisor reload`), with its file's sha256 when it parsed. */
  loadConfig?: () => { config: Config | null; errors: string[]; hash?: string | null };
  /**
   * Start the marker broker of the state dir (src/markers/broker.ts), once the state dir is ours
   * and before any run starts. A rejection stops the start.
   */
  broker?: (stateDir: string) => Promise<RunBroker>;
}

export class DaemonBusyError extends Error {}

export class Supervisor {
  private readonly now: () => number;
  private readonly log: (line: string) => void;
  /** Set by start(): the open store and everything the daemon's parts share. */
  private live: { rt: Runtime; runs: Runs } | null = null;
  private timer: NodeJS.Timeout | null = null;
  private beat: NodeJS.Timeout | null = null;
  /** A shared store's lease: renewed apart from the serial queue (a hung tick must not stop it). */
  private lease: Lease | null = null;
  private lastWake = 0;
  /** Ticks, heartbeats and reloads run one at a time: each waits for the one before to settle. */
  private queue: Promise<unknown> = Promise.resolve();
  private stopping: Promise<void> | null = null;

  constructor(private readonly opts: SupervisorOptions) {
    this.now = opts.now ?? Date.now;
    this.log = opts.log ?? ((l) => process.stderr.write(`${l}\n`));
  }
  private get on(): { rt: Runtime; runs: Runs } {
    if (!this.live) throw new Error("the daemon is not started");
    return this.live;
  }

  /** Open the store, claim the state dir, adopt or record what the last daemon left, start ticking. */
  async start(): Promise<void> {
    const cfg = this.opts.config;
    // One component at a time, each checked as it is made: a recursive mkdir would follow a link
    // planted at a missing parent (as root, `daemon` made and checked it already: config/safety.ts).
    const unsafe = makeDirs(cfg.stateDir, daemonTrust());
    if (unsafe.length > 0)
      throw new StoreError(`refusing the state dir ${cfg.stateDir}: ${unsafe.join("; ")}`, "io");
    const target = storeTarget(cfg);
    const store = await openStoreAt(target, { create: true, check: true, busyTimeoutMs: 2000 });
    const owner = { pid: process.pid, start: startTimeOf(process.pid) };
    const now = this.now();
    const record = accepted(cfg, this.opts.configHash, now);
    const contained = setupContainment(cfg.stateDir, true); // said in the row, for status
    const containment = containmentRecord(contained, cfg.jobs, this.log);
    const [host, version, leaseMs] = [os.hostname(), VERSION, cfg.leaseMs];
    const self = { name: target.node, host, bootId: bootId(), version, leaseMs, containment };
    const holder = await store
      .claimDaemon(owner, now, cfg.heartbeatMs, cfg.file, isAlive, record, self)
      .catch(async (e: unknown) => {
        await store.close();
        throw e;
      });
    if (holder) {
      await store.close();
      throw new DaemonBusyError(
        store.shared
          ? `another cronvisor daemon of node ${target.node} (pid ${holder.pid}, started ${new Date(holder.started_at ?? 0).toISOString()}) is live on the store ${target.url}; give this one another \`node:\` name, or stop that one`
          : `another cronvisor daemon (pid ${holder.pid}, started ${new Date(holder.started_at ?? 0).toISOString()}) holds the state dir ${cfg.stateDir}; it was left untouched`,
      );
    }
    const renewedFrom = performance.now();
    // The jobs whose `hosts:` name this node; the record above keeps the whole config.
    const rt = new Runtime(
      store,
      forNode(cfg, target.node),
      owner,
      this.now,
      this.log,
      this.opts.hooks,
    );
    try {
      rt.broker = (await this.opts.broker?.(cfg.stateDir)) ?? null;
    } catch (e) {
      await store.releaseDaemon(process.pid, now).catch(() => {});
      await store.close();
      throw e;
    }
    sweepCgroups(true); // cgroups a dead spawner left empty; a populated one's run is adopted
    const spawner = (rt.spawner = new Spawner(DRAIN_MS, contained.base, true));
    tellJobCgroupKills((name) => spawner.jobCgroupKilled(name));
    const runs = new Runs(rt);
    this.live = { rt, runs };
    clearSpares(cfg.stateDir); // an earlier daemon's, which it held in memory only
    // The lease is renewed from now on, not once start-up is done: adoption and catch-up can take
    // longer than the two thirds of a short lease after which a node fences itself.
    if (store.shared) this.lease = holdLease(rt, renewedFrom, () => this.timer && this.arm());
    writeHeartbeatFile(cfg.stateDir, now);
    // The runs start-up starts (@reboot, resumes, catch-ups) go in one batch.
    const batch = new TickBatch();
    try {
      runs.offerAll(await watchJobs(rt, rt.config, now, new Map()), batch);
      await runs.adopt(batch);
      runs.offerAll(await catchUp(rt, now), batch);
    } finally {
      await runs.flush(batch);
    }
    // Definitions are compared across nodes: a store of one node (SQLite) has nothing to compare.
    if (store.shared) await store.setJobHashes(jobHashes(rt.config));
    this.lastWake = now;
    this.arm();
    this.beat = setInterval(() => void this.serially(() => this.heartbeat()), cfg.heartbeatMs);

    // Monitors (HTTP, alerts) get their first beat now, not one interval later.
    rt.hook("beat", (h) => h.beat?.(store, rt.config, now));
    this.log(
      `cronvisor: daemon ${process.pid} started with ${rt.config.jobs.length} job(s), state in ${cfg.stateDir}`,
    );
    // Idle from here on: what start-up built once is garbage that no allocation will collect.
    collectGarbageSoon();
  }

  /** One at a time, in order; a failure is logged, never thrown out of the loop. */
  private serially<T>(fn: () => Promise<T>): Promise<T | undefined> {
    const run = this.queue.then(fn).catch((e: unknown) => {
      this.log(`cronvisor: ${(e as Error).message}`);
      return undefined;
    });
    this.queue = run;
    return run;
  }

  // ---- the tick -------------------------------------------------------------------------------

  /** Arm the one timer for the earliest next slot, never for longer than MAX_SLEEP_MS. */
  private arm(): void {
    const { rt } = this.on;
    if (rt.stopping) return;
    if (this.timer) clearTimeout(this.timer);
    let due = Infinity;
    // A linear scan: with 10,000 jobs this is microseconds, and it keeps reload trivially right.
    for (const st of rt.jobs.values()) due = Math.min(due, wakeAt(st, st.lag));
    // A fenced node handles no slot until its lease is renewed (then arm() is called at once).
    if (rt.fenced) due = this.now() + FENCED_SLEEP_MS;
    const delay = Math.max(0, Math.min(due - this.now(), MAX_SLEEP_MS));
    this.timer = setTimeout(() => void this.serially(() => this.tick()), delay);
  }

  /** Every due job's slot, in one batch; a failure is logged with its job and the loop goes on. */
  private async tick(): Promise<void> {
    const { rt, runs } = this.on;
    // Fenced: the slots stay due. Once the lease is renewed, each gets its disposition (a slot
    // another node ran is refused by the store, so none runs twice).
    if (rt.fenced) return this.arm();
    const batch = new TickBatch();
    const late: LateSlot[] = [];
    try {
      const now = this.now();
      if (clockSteppedBack(this.lastWake, now)) {
        await rt.event(
          null,
          "clock",
          `wall clock stepped back ${now - this.lastWake} ms; slots already handled will not run again`,
        );
        for (const st of rt.jobs.values()) st.next = nextSlotAt(st.cfg, now);
        this.lastWake = now;
      }
      this.lastWake = Math.max(this.lastWake, now);
      // `cronvisor pause` writes the store from another process: read once per tick that needs it.
      let paused: ReadonlySet<string> | null = null;
      for (const st of rt.jobs.values()) {
        // Another node's job: handled `lag` late, as if by a clock that far behind (spread.ts);
        // set as a slot is handled, so the slots of a job changing owner never come bunched.
        const [slot, lag] = [st.next, st.lag ?? 0];
        if (slot === null || slot + lag > now) continue;
        st.lag = rt.delayOf(st.cfg.name);
        try {
          if (!st.cfg.paused) paused ??= await runs.paused(batch); // and the drain, into the batch
          // Slots that came due while the store refused writes: recorded once a write works again.
          if (st.gap !== null) await this.recordGap(st, now);
          // Awaited only when there is something to wait for: 10,000 due jobs are not 10,000
          // microtask turns before the batch, and its time, are written.
          const offered = this.due(st, now - lag, batch, late, paused ?? NONE_PAUSED);
          if (offered !== null) await offered;
        } catch (e) {
          this.log(`cronvisor: error handling slot: ${(e as Error).message} (job: ${st.cfg.name})`);
          st.next = nextSlotAt(st.cfg, now);
          st.gap = widenGap(st.gap, slot, e);
        }
      }
      // After the due slots: a catch-up then waits behind a slot's start in this batch.
      await runs.lookAgain(now, batch);
    } finally {
      await runs.flush(batch);
      const now = this.now();
      for (const e of lateEvents(late, now)) await rt.event(e.job, "late", e.detail);
      this.arm();
    }
  }
  private async recordGap(st: JobState, now: number): Promise<void> {
    const { cfg, gap } = st;
    if (gap === null) return;
    const slots = gapSlots(cfg, gap, st.next as number);
    await recordMissed(this.on.rt.store, [{ job: cfg.name, slots, reason: gap.reason }], now);
    st.gap = null;
  }

  /**
   * A due job's slot into the tick's batch: the missed slots of a late timer, then a skip if
   * paused, a jittered start, or the overlap decision (the one part that may wait: its promise).
   */
  private due(
    st: JobState,
    now: number,
    batch: TickBatch,
    late: LateSlot[],
    paused: ReadonlySet<string>,
  ): Promise<void> | null {
    const { rt, runs } = this.on;
    const { cfg } = st;
    const plan = planDue(cfg, st.next as number, now);
    st.next = plan.next;
    if (plan.late) late.push(plan.late);
    for (const s of plan.missed)
      batch.record(cfg, s, "missed", "timer late (suspend or clock step)");
    if (cfg.paused || paused.has(cfg.name)) {
      batch.record(cfg, plan.fire, "skipped", "paused");
    } else if (cfg.jitterMs > 0) {
      // The slot stays the nominal time; only the start moves (in a batch of its own).
      const p = scheduled(plan.fire);
      rt.later(Math.floor(Math.random() * cfg.jitterMs), () => runs.offerNow(cfg.name, p));
    } else {
      return runs.offer(st, scheduled(plan.fire), batch);
    }
    return null;
  }

  // ---- liveness, reload, stop ----------------------------------------------------------------

  private async heartbeat(): Promise<void> {
    const { rt, runs } = this.on;
    try {
      const now = this.now();
      await rt.kept.flush();
      // On a shared store the lease's own timer beats (holdLease).
      if (!rt.store.shared)
        await rt.store.heartbeat(process.pid, now, rt.config.heartbeatMs, rt.logs.bytes);
      writeHeartbeatFile(rt.config.stateDir, now);
      sweepCgroups(false); // the kept cgroups (`leftovers: keep`) whose processes are gone
      await runs.retryUnrecorded();
      const batch = new TickBatch();
      try {
        await runs.adopt(batch);
        await runs.wakeWaiting(batch); // another node's run may have ended
      } finally {
        await runs.flush(batch);
      }
      rt.hook("beat", (h) => h.beat?.(rt.store, rt.config, now));
    } catch (e) {
      this.log(`cronvisor: heartbeat failed: ${(e as Error).message}`);
    }
  }

  /** Re-read the config. Invalid: keep the old one and show the error. Valid: apply it. */
  async reload(): Promise<{ ok: boolean; errors: string[] }> {
    const res = await this.serially(() => this.applyReload());
    return res ?? { ok: false, errors: ["reload failed (see the daemon's log)"] };
  }

  private async applyReload(): Promise<{ ok: boolean; errors: string[] }> {
    const { rt } = this.on;
    const res = this.opts.loadConfig?.() ?? { config: null, errors: ["no config loader"] };
    if (!res.config) {
      const msg = res.errors.join("\n");
      this.log(`cronvisor: reload failed; keeping the running config:\n${msg}`);
      await rt.kept.write("reload", () => rt.store.setConfigError(process.pid, msg));
      return { ok: false, errors: res.errors };
    }
    // The store, logs and locks stay where this daemon holds them, and its http where it bound.
    const fixed = restartOnlyChanges(rt.config, res.config);
    if (fixed.length > 0)
      this.log(
        `cronvisor: takes effect when the daemon restarts (kept as it was until then): ${fixed.join("; ")}`,
      );
    const config = keepRestartOnly(rt.config, res.config);
    // Applied only once the store knows the new jobs; a busy store keeps it for the next beat.
    const ok = await rt.kept.write("reload", () => this.applyConfig(config, res.hash));
    return ok ? { ok, errors: [] } : { ok, errors: ["the store is busy: applied on a later beat"] };
  }

  private async applyConfig(config: Config, hash: string | null | undefined): Promise<void> {
    const { rt, runs } = this.on;
    const mine = forNode(config, rt.store.node);
    const offers = await watchJobs(rt, mine, this.now(), new Map(rt.jobs));
    rt.config = mine;
    if (rt.store.shared) await rt.store.setJobHashes(jobHashes(mine));
    const batch = new TickBatch();
    runs.offerAll(offers, batch);
    await runs.flush(batch);
    rt.hook("reloaded", (h) => h.reloaded?.(rt.config));
    this.log(`cronvisor: config reloaded: ${config.jobs.length} job(s)`);
    this.arm();
    // What the readers fall back on while the file is broken, and no refusal: one write.
    await rt.store.acceptConfig(process.pid, accepted(config, hash, this.now()));
    // The parse of the new config and its record are garbage now, as after start-up.
    collectGarbageSoon();
  }

  /** Ordered and idempotent: stop firing, TERM every run, wait its grace, KILL, record, close. */
  stop(): Promise<void> {
    this.stopping ??= this.doStop();
    return this.stopping;
  }

  /** The second signal: SIGKILL every run's group now. */
  force(): void {
    if (this.live) forceAll(this.live.rt);
  }

  private async doStop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    if (this.beat) clearInterval(this.beat);
    this.lease?.stop();
    const rt = this.live?.rt;
    if (rt) {
      rt.stopping = true;
      rt.clearTimers();
      for (const st of rt.jobs.values()) st.pending = [];
      // A tick or heartbeat still awaiting the store settles first; what it started stops below.
      await this.queue;
      await stopRuns(rt);
      await this.live?.runs.pruned();
      rt.spawner?.close(); // it has no run left to wait for, and exits
      releaseBase();
      await rt.stoppingHook();
      // Only now: a run's last marks during its kill_grace still go through.
      await rt.broker?.close().catch((e: unknown) => {
        this.log(`cronvisor: the marker broker did not stop cleanly: ${(e as Error).message}`);
      });
      try {
        await rt.kept.flush();
        await rt.store.releaseDaemon(process.pid, this.now());
      } catch (e) {
        // The next daemon finds this one's pid gone and takes over: nothing is lost but the stop time.
        throw new Error(`could not record the stop in the store: ${(e as Error).message}`, {
          cause: e,
        });
      } finally {
        await rt.store.close();
      }
    }
    this.log(`cronvisor: daemon ${process.pid} stopped`);
  }
}
