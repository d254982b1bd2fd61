// The daemon's loop: slot -> lock -> run -> record. One timer over every job's next slot (never
// armed for more than 30 s, so a clock step or a suspend is noticed), adoption of runs that
// outlived a previous daemon, a disposition for every slot, and an ordered, idempotent stop().
import fs from "node:fs";
import path from "node:path";
import { exitFileFor, removeExitFile, reserve, spawnRun, type RunContext } from "../run/execute.js";
import { bootId, groupAlive, isAlive, signalGroup, startTimeOf } from "../run/proc.js";
import type { RunHandle } from "../run/runner.js";
import { missedSlots, nextSlotAt } from "../schedule/schedule.js";
import type { Owner, RunRow, Store } from "../store/store.js";
import { LegacyStore } from "./legacy-store.js";
import type { Config, JobConfig, RunResult, Trigger } from "../core/types.js";

/** Never sleep longer than this: re-read the wall clock at least this often. */
const MAX_SLEEP_MS = 30_000;
/** A timer this late (or a clock this far off) is recorded as an event. */
const LATE_MS = 5_000;
/** Missed slots recorded one by one per job and downtime; the rest are counted in one event. */
const MISSED_ROWS = 100;
/** How often adopted orphans (runs we did not spawn) are checked for their end. */
const ADOPT_POLL_MS = 500;

/**
 * Observers of the daemon (alerts, pings, metrics, HTTP). Called after the store has recorded the
 * fact; a hook must not block or throw (errors are logged and ignored): monitoring never delays
 * a slot and never loses a run's record.
 */
export interface SupervisorHooks {
  runStarted?(run: RunRow, job: JobConfig): void;
  runEnded?(run: RunRow, job: JobConfig): void;
  /** Every heartbeat, after the beat is recorded. */
  beat?(store: Store, config: Config, now: number): void;
  reloaded?(config: Config): void;
  /** On stop, after the runs are recorded and before the store closes. */
  stopping?(): Promise<void> | void;
}

export interface SupervisorOptions {
  config: Config;
  hooks?: SupervisorHooks;
  now?: () => number;
  log?: (line: string) => void;
  /** Re-read the config (SIGHUP / `cronvisor reload`). */
  loadConfig?: () => { config: Config | null; errors: string[] };
}

interface Active {
  run: RunRow;
  job: JobConfig;
  /** Our own child; null for a run adopted from a previous daemon. */
  handle: RunHandle | null;
  finished: Promise<unknown>;
  stopAdopt?: () => void;
}

interface Pending {
  slot: number | null;
  claimSlot: boolean;
  trigger: Trigger;
  attempt: number;
}

const SCHEDULED: Pending = { slot: null, claimSlot: true, trigger: "schedule", attempt: 1 };

interface JobState {
  cfg: JobConfig;
  next: number | null;
  /** Slots waiting for the job's current run to end: `queue` overlap, `catchup: all`, resumes. */
  pending: Pending[];
  retryTimer: NodeJS.Timeout | null;
  /** Runs ended since old runs were last pruned (pruning is spread out: it takes the write lock). */
  sincePrune: number;
  /** A slot could not be recorded (the store refused a write): record the gap when it can. */
  gap: boolean;
}

/** A slot to start, or (with `record`) a disposition to write, in the tick's one transaction. */
interface BatchItem {
  name: string;
  p: Pending;
  record?: { status: "skipped" | "missed"; reason: string };
}

/** A job whose slot a tick handled late (suspend, clock step, a slow start-up). */
interface LateSlot {
  name: string;
  slot: number;
  /** Older slots of the same job recorded missed by the same tick. */
  missed: number;
  capped: boolean;
}

/** More late jobs than this in one tick are summed up in one event, not one event per job. */
const LATE_EVENTS_PER_TICK = 5;

export class DaemonBusyError extends Error {}

export class Supervisor {
  private config: Config;
  private readonly now: () => number;
  private readonly log: (line: string) => void;
  private store: LegacyStore | null = null;
  private owner: Owner = { pid: process.pid, start: startTimeOf(process.pid) };
  private readonly jobs = new Map<string, JobState>();
  private readonly active = new Map<number, Active>();
  private timer: NodeJS.Timeout | null = null;
  private beat: NodeJS.Timeout | null = null;
  private lastWake = 0;
  private stopping: Promise<void> | null = null;
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Starts collected during one tick, reserved in one transaction (one fsync, not one per job). */
  private batch: BatchItem[] | null = null;
  /** Jobs with a start in `batch`: a second start of one waits like one behind a running run. */
  private readonly batchStarts = new Set<string>();
  /** Jobs handled late during one tick, reported together once it is done. */
  private late: LateSlot[] = [];
  /** Jobs paused from the command line, read once per tick that fires a slot. */
  private pausedInStore: Set<string> | null = null;
  /** Ends waiting to be recorded together, on the next turn of the event loop. */
  private endings: { a: Active; result: RunResult; done: () => void }[] = [];
  /** Results of runs whose end the store refused (a full disk): retried every heartbeat. */
  private readonly unrecorded = new Map<number, { result: RunResult; job: JobConfig }>();

  constructor(private readonly opts: SupervisorOptions) {
    this.config = opts.config;
    this.now = opts.now ?? Date.now;
    this.log = opts.log ?? ((l) => process.stderr.write(`${l}\n`));
  }

  private get ctx(): RunContext {
    return {
      config: this.config,
      store: this.store as LegacyStore,
      owner: this.owner,
      now: this.now,
    };
  }

  /** Open the store, claim the state dir, adopt or record what the last daemon left, start ticking. */
  start(): void {
    const cfg = this.config;
    fs.mkdirSync(cfg.stateDir, { recursive: true, mode: 0o700 });
    this.store = LegacyStore.open(cfg.stateDir, { create: true, check: true, busyTimeoutMs: 2000 });
    const store = this.store;
    const now = this.now();
    const holder = store.claimDaemon(this.owner, now, cfg.heartbeatMs, cfg.file, isAlive);
    if (holder) {
      store.close();
      this.store = null;
      throw new DaemonBusyError(
        `another cronvisor daemon (pid ${holder.pid}, started ${new Date(holder.started_at ?? 0).toISOString()}) holds the state dir ${cfg.stateDir}; it was left untouched`,
      );
    }
    this.writeHeartbeatFile(now);
    // One transaction for every job's row and stamp (two autocommits each, i.e. 20,000 fsyncs
    // at 10,000 jobs, made start-up take seconds), and the runs they start in one batch.
    this.batch = [];
    try {
      store.tx(() => {
        for (const job of cfg.jobs) this.addJob(job, now);
      });
      this.adoptOrphans();
      store.tx(() => {
        for (const st of this.jobs.values()) this.catchUp(st, now);
      });
    } finally {
      this.flushBatch();
    }
    this.lastWake = now;
    this.arm();
    this.beat = setInterval(() => this.heartbeat(), cfg.heartbeatMs);
    // Monitors (HTTP, alerts) get their first beat now, not one interval later.
    this.hook("beat", (h) => h.beat?.(store.store, this.config, now));
    this.log(
      `cronvisor: daemon ${process.pid} started with ${cfg.jobs.length} job(s), state in ${cfg.stateDir}`,
    );
  }

  // ---- jobs and slots ------------------------------------------------------------------------

  private addJob(cfg: JobConfig, now: number): void {
    const store = this.store as LegacyStore;
    const row = store.ensureJob(cfg.name, now);
    // A job seen for the first time has missed nothing: its slots count from now.
    if (row.scanned_to === null) store.setScannedTo(cfg.name, now);
    const from = Math.max(now, row.scanned_to ?? now);
    this.jobs.set(cfg.name, {
      cfg,
      next: this.nextAfter(cfg, from),
      pending: [],
      retryTimer: null,
      sincePrune: 0,
      gap: false,
    });
    if (cfg.pattern === null && store.claimReboot(cfg.name, bootId(), now)) {
      this.enqueue(cfg.name, { slot: null, claimSlot: false, trigger: "reboot", attempt: 1 });
    }
  }

  private nextAfter(cfg: JobConfig, at: number): number | null {
    return nextSlotAt(cfg, at);
  }

  /**
   * Slots that passed while no daemon ran get a disposition: the ones `catchup` runs are queued
   * (trigger `catchup`), the rest are recorded `missed` (the latest MISSED_ROWS one by one,
   * older ones counted in one event so a long downtime cannot write millions of rows).
   */
  private catchUp(st: JobState, now: number): void {
    const store = this.store as LegacyStore;
    const row = store.job(st.cfg.name);
    const from = row?.scanned_to ?? now;
    if (from > now + LATE_MS) {
      store.event(
        now,
        st.cfg.name,
        "clock",
        `last slot stamp ${new Date(from).toISOString()} is in the future; continuing from now`,
      );
      this.log(
        `cronvisor: warning: job ${st.cfg.name} has a slot stamp in the future (clock was wrong?); continuing from now`,
      );
      store.setScannedTo(st.cfg.name, now);
      st.next = this.nextAfter(st.cfg, now);
      return;
    }
    const missed = missedSlots(st.cfg, new Date(from), new Date(now), MISSED_ROWS);
    if (missed.slots.length === 0) return;
    const windowStart = now - st.cfg.catchupWindowMs;
    const eligible = missed.slots.filter((s) => s.getTime() >= windowStart).map((s) => s.getTime());
    let runs: number[] = [];
    if (st.cfg.catchup === "once") runs = eligible.slice(-1);
    else if (st.cfg.catchup === "all") runs = eligible;
    const toRun = new Set(runs);
    store.tx(() => {
      if (missed.earlier > 0) {
        store.event(
          now,
          st.cfg.name,
          "missed",
          `${missed.earlierCapped ? "more than " : ""}${missed.earlier} earlier slot(s) missed while the daemon was down (not listed one by one)`,
        );
      }
      for (const s of missed.slots) {
        if (!toRun.has(s.getTime()))
          store.disposition(st.cfg.name, s.getTime(), "missed", "daemon down", now);
      }
    });
    for (const slot of runs)
      this.enqueue(st.cfg.name, { slot, claimSlot: true, trigger: "catchup", attempt: 1 });
  }

  /** Arm the one timer for the earliest next slot, never for longer than MAX_SLEEP_MS. */
  private arm(): void {
    if (this.stopping) return;
    if (this.timer) clearTimeout(this.timer);
    let due = Infinity;
    // A linear scan: with 10,000 jobs this is microseconds, and it keeps reload trivially right.
    for (const st of this.jobs.values()) if (st.next !== null && st.next < due) due = st.next;
    const delay = Math.max(0, Math.min(due - this.now(), MAX_SLEEP_MS));
    this.timer = setTimeout(() => this.tick(), delay);
  }

  /** The tick handler never throws: every failure is logged with its job and the loop goes on. */
  private tick(): void {
    try {
      const now = this.now();
      if (now < this.lastWake - LATE_MS) {
        this.event(
          null,
          "clock",
          `wall clock stepped back ${now - this.lastWake} ms; slots already handled will not run again`,
        );
        // Plan from the wall clock again: waiting for the old next slots would stall every job for
        // as long as the step. A slot that already has a disposition is refused by the store.
        for (const st of this.jobs.values()) st.next = this.nextAfter(st.cfg, now);
        this.lastWake = now;
      }
      this.lastWake = Math.max(this.lastWake, now);
      this.batch = [];
      this.late = [];
      this.pausedInStore = null;
      for (const st of this.jobs.values()) {
        if (st.next === null || st.next > now) continue;
        try {
          this.due(st, now);
        } catch (e) {
          this.log(`cronvisor: error handling slot: ${(e as Error).message} (job: ${st.cfg.name})`);
          st.next = this.nextAfter(st.cfg, now);
          st.gap = true;
        }
      }
    } finally {
      this.flushBatch();
      this.reportLate(this.now());
      this.arm();
    }
  }

  /** One event per late job, or one for them all when a tick found many (a slow start-up). */
  private reportLate(now: number): void {
    const late = this.late;
    this.late = [];
    const older = (l: LateSlot[]): string => {
      const n = l.reduce((sum, x) => sum + x.missed, 0);
      return `${l.some((x) => x.capped) ? "more than " : ""}${n} older slot(s) recorded missed`;
    };
    if (late.length <= LATE_EVENTS_PER_TICK) {
      for (const l of late) {
        this.event(
          l.name,
          "late",
          `timer fired ${now - l.slot} ms after slot ${new Date(l.slot).toISOString()} (suspend or clock step)${l.missed > 0 || l.capped ? `; ${older([l])}` : ""}`,
        );
      }
      return;
    }
    const worst = Math.max(...late.map((l) => now - l.slot));
    this.event(
      null,
      "late",
      `timer fired up to ${worst} ms after the slots of ${late.length} jobs (suspend, clock step or a slow start-up); ${older(late)}`,
    );
  }

  /** A job's slot is due. If the timer woke late (suspend, clock step), older slots are missed. */
  private due(st: JobState, now: number): void {
    const first = st.next as number;
    if (st.gap) this.recordGap(st, first, now);
    const after = this.nextAfter(st.cfg, first);
    if (after === null || after > now) {
      // The common case, one slot due: no walk over passed slots.
      st.next = after;
      if (now - first > LATE_MS)
        this.late.push({ name: st.cfg.name, slot: first, missed: 0, capped: false });
      this.fire(st, first);
      return;
    }
    const passed = missedSlots(st.cfg, new Date(first - 1), new Date(now), MISSED_ROWS);
    const slots = passed.slots.map((d) => d.getTime());
    const slot = slots.pop() ?? first;
    st.next = this.nextAfter(st.cfg, Math.max(now, slot));
    if (now - slot > LATE_MS || slots.length > 0) {
      this.late.push({
        name: st.cfg.name,
        slot: first,
        missed: slots.length + passed.earlier,
        capped: passed.earlierCapped,
      });
      for (const s of slots)
        this.dispose(st.cfg.name, s, "missed", "timer late (suspend or clock step)");
    }
    this.fire(st, slot);
  }

  /**
   * Slots that came due while the store could not be written (a full disk) never got a
   * disposition: once a write works again, record them `missed` with the reason.
   */
  private recordGap(st: JobState, before: number, now: number): void {
    const store = this.store as LegacyStore;
    const from = store.job(st.cfg.name)?.scanned_to ?? before;
    const gap = missedSlots(st.cfg, new Date(from), new Date(before - 1), MISSED_ROWS);
    store.tx(() => {
      for (const s of gap.slots) {
        store.disposition(
          st.cfg.name,
          s.getTime(),
          "missed",
          "the store could not be written (disk full?)",
          now,
        );
      }
    });
    st.gap = false;
  }

  /** Record a slot's disposition with the tick's other writes, in its one transaction. */
  private dispose(name: string, slot: number, status: "skipped" | "missed", reason: string): void {
    const item = { name, p: { ...SCHEDULED, slot }, record: { status, reason } };
    if (this.batch) this.batch.push(item);
    else this.startBatch([item]);
  }

  private fire(st: JobState, slot: number): void {
    const p: Pending = { ...SCHEDULED, slot };
    // `cronvisor pause` writes the store from another process: read it once per tick.
    this.pausedInStore ??= (this.store as LegacyStore).pausedJobs();
    if (st.cfg.paused || this.pausedInStore.has(st.cfg.name)) {
      this.dispose(st.cfg.name, slot, "skipped", "paused");
      return;
    }
    if (st.cfg.jitterMs > 0) {
      // The slot stays the nominal time; only the start moves.
      this.later(Math.floor(Math.random() * st.cfg.jitterMs), () =>
        this.startOrQueue(st.cfg.name, p),
      );
    } else {
      this.startOrQueue(st.cfg.name, p);
    }
  }

  private runningOf(name: string): Active[] {
    return [...this.active.values()].filter((a) => a.run.job === name);
  }

  /** Apply the overlap policy to a scheduled slot. */
  private startOrQueue(name: string, p: Pending): void {
    const st = this.jobs.get(name);
    if (!st || this.stopping) return;
    const running = this.runningOf(name);
    if (running.length > 0) {
      switch (st.cfg.overlap) {
        case "queue":
          if (st.pending.length === 0) {
            st.pending.push(p);
            return;
          }
          (this.store as LegacyStore).recordDisposition(
            name,
            p.slot as number,
            "skipped",
            `overlap: run ${running[0]?.run.id} holds the lock and a slot is already queued`,
            this.now(),
          );
          return;
        case "replace":
          this.replace(running, () => this.startNow(name, p));
          return;
        case "skip":
        case "allow":
          break;
      }
    }
    this.startNow(name, p);
  }

  /** Revoke the old runs' fences first, so a replaced run can no longer write markers, then stop them. */
  private replace(running: Active[], then: () => void): void {
    const store = this.store as LegacyStore;
    for (const a of running) store.revokeRun(a.run.id);
    for (const a of running) this.terminate(a, "replaced", a.job.killGraceMs);
    void Promise.all(running.map((a) => a.finished)).then(then);
  }

  private enqueue(name: string, p: Pending): void {
    const st = this.jobs.get(name);
    if (!st) return;
    const busy = this.runningOf(name).length > 0 || this.batchStarts.has(name);
    if (busy && st.cfg.overlap !== "allow") st.pending.push(p);
    else this.startNow(name, p);
  }

  private startNow(name: string, p: Pending): void {
    if (!this.jobs.has(name) || this.stopping) return;
    if (this.batch) {
      this.batch.push({ name, p });
      this.batchStarts.add(name);
    } else {
      this.startBatch([{ name, p }]);
    }
  }

  private flushBatch(): void {
    const batch = this.batch ?? [];
    this.batch = null;
    this.batchStarts.clear();
    this.startBatch(batch);
  }

  /**
   * Start runs: reserve them all (locks, slots, fences, rows) in one transaction, commit, spawn
   * each, then record their pids in a second transaction. Two fsyncs per tick however many jobs
   * are due, and no store work between one spawn and the next.
   */
  private startBatch(items: BatchItem[]): void {
    if (items.length === 0) return;
    const store = this.store as LegacyStore;
    let reserved;
    try {
      const now = this.now();
      reserved = store.tx(() =>
        items.map(({ name, p, record }) => {
          const st = this.jobs.get(name) as JobState;
          if (record !== undefined) {
            store.disposition(name, p.slot as number, record.status, record.reason, now);
            return { name, p, st, out: { kind: "recorded" as const } };
          }
          const out = reserve(this.ctx, st.cfg, {
            slot: p.slot,
            claimSlot: p.claimSlot,
            trigger: p.trigger,
            attempt: p.attempt,
          });
          return { name, p, st, out };
        }),
      );
    } catch (e) {
      // The store refused the write (a full disk): these slots get their disposition later.
      for (const { name } of items) {
        this.log(`cronvisor: error handling slot: ${(e as Error).message} (job: ${name})`);
        const st = this.jobs.get(name);
        if (st) st.gap = true;
      }
      return;
    }
    const started: { st: JobState; run: RunRow; handle: RunHandle }[] = [];
    for (const { name, p, st, out } of reserved) {
      if (out.kind === "locked") {
        // A scheduled slot's `skipped` disposition was recorded in the transaction that saw the lock.
        if (p.slot === null || !p.claimSlot)
          this.log(
            `cronvisor: ${p.trigger} of ${name} skipped: run ${out.holder.id} holds the lock`,
          );
      } else if (out.kind === "duplicate") {
        this.log(
          `cronvisor: slot ${new Date(p.slot ?? 0).toISOString()} of ${name} already has a disposition; not run again`,
        );
      } else if (out.kind === "started") {
        started.push({ st, run: out.run, handle: spawnRun(this.ctx, st.cfg, out.run) });
      }
    }
    try {
      store.tx(() => {
        for (const { run, handle } of started) {
          if (handle.pid !== null && handle.pgid !== null) {
            store.setRunProcess(run.id, handle.pid, handle.pidStart, handle.pgid);
          }
        }
      });
    } catch (e) {
      // The runs go on and this daemon watches them; only a restart in this state loses sight.
      this.log(
        `cronvisor: could not record the pids of ${started.length} run(s): ${(e as Error).message}`,
      );
    }
    for (const { st, run, handle } of started) {
      let done!: () => void;
      const a: Active = {
        run,
        job: st.cfg,
        handle,
        finished: new Promise<void>((r) => (done = r)),
      };
      this.active.set(run.id, a);
      this.hook("runStarted", (h) => h.runStarted?.(run, st.cfg));
      void handle.done.then((result) => this.queueEnd(a, result, done));
    }
  }

  /** Ends that arrive together (a tick's worth of short jobs) are recorded in one transaction. */
  private queueEnd(a: Active, result: RunResult, done: () => void): void {
    this.endings.push({ a, result, done });
    if (this.endings.length === 1) setImmediate(() => this.flushEndings());
  }

  private flushEndings(): void {
    const batch = this.endings;
    this.endings = [];
    const store = this.store as LegacyStore;
    let recorded = true;
    try {
      store.tx(() => {
        for (const { a, result } of batch) store.finishRun(a.run.id, result);
      });
    } catch (e) {
      // A full disk: the results wait in memory and are retried every heartbeat.
      recorded = false;
      for (const { a } of batch) {
        this.log(`cronvisor: could not record the end of run ${a.run.id}: ${(e as Error).message}`);
      }
    }
    for (const { a, result, done } of batch) {
      if (recorded) removeExitFile(this.config.stateDir, a.run.id);
      else this.unrecorded.set(a.run.id, { result, job: a.job });
      const row = recorded
        ? (store.run(a.run.id) as RunRow)
        : { ...a.run, status: "running" as const };
      try {
        this.ended(a, row);
      } finally {
        done(); // stop() and `replace` wait for this
      }
    }
  }

  /** A run ended and is recorded: retries, the next waiting slot, retention. */
  private ended(a: Active, row: RunRow): void {
    this.active.delete(a.run.id);
    a.stopAdopt?.();
    this.hook("runEnded", (h) => h.runEnded?.(row, a.job));
    const name = a.run.job;
    const st = this.jobs.get(name);
    // Prune about every tenth of keep_runs: retention stays within 10% and most ends skip it.
    if (st && ++st.sincePrune >= Math.max(1, Math.floor(a.job.log.keepRuns / 10))) {
      st.sincePrune = 0;
      try {
        const logs = (this.store as LegacyStore).pruneRuns(name, a.job.log.keepRuns);
        for (const p of logs) fs.rmSync(p, { force: true });
      } catch (e) {
        this.log(`cronvisor: pruning old runs failed: ${(e as Error).message} (job: ${name})`);
      }
    }
    if (!st || this.stopping) return;
    if (
      (row.status === "failed" || row.status === "timeout") &&
      row.attempt <= st.cfg.retries.attempts
    ) {
      const delay = st.cfg.retries.backoffMs * 2 ** (row.attempt - 1);
      const at = this.now() + delay;
      // A retry never outlives the next slot (unless runs may overlap anyway).
      if (st.cfg.overlap === "allow" || st.next === null || at < st.next) {
        st.retryTimer = this.later(delay, () => {
          st.retryTimer = null;
          this.enqueue(name, {
            slot: row.slot,
            claimSlot: false,
            trigger: "retry",
            attempt: row.attempt + 1,
          });
        });
      } else {
        this.event(
          name,
          "retry",
          `retry ${row.attempt} of run ${row.id} dropped: it would start after the next slot`,
        );
      }
    }
    const next = st.pending.shift();
    if (next) this.startNow(name, next);
  }

  // ---- adoption: runs that outlived the daemon that started them ------------------------------

  /**
   * Runs left `running` by a daemon (or `cronvisor run`) that died: a live process group is
   * adopted (its lock stays held, its end is recorded); a dead one is recorded `interrupted` and
   * its slot follows the job's catch-up policy (trigger `resume`).
   */
  private adoptOrphans(): void {
    const store = this.store as LegacyStore;
    for (const r of store.runningRuns()) {
      if (this.active.has(r.id) || this.unrecorded.has(r.id)) continue;
      // Another live owner records its own runs. A run this daemon owns but no longer watches
      // is one whose end could not be recorded (a full disk): it is reaped like an orphan.
      const mine = r.owner_pid === this.owner.pid && r.owner_start === this.owner.start;
      if (!mine && r.owner_pid !== null && isAlive(r.owner_pid, r.owner_start)) continue;
      const st = this.jobs.get(r.job);
      const job = st?.cfg ?? null;
      if (r.pgid !== null && groupAlive(r.pgid)) {
        if (!job) continue; // a job removed from the config: its group is left alone and reaped later
        store.adoptRun(r.id, this.owner);
        this.adopt(r, job);
        continue;
      }
      const code = readExitFile(exitFileFor(this.config.stateDir, r.id));
      const now = this.now();
      const result: RunResult =
        code === null
          ? endResult(r, now, "interrupted", "its processes died with the daemon", null)
          : endResult(
              r,
              now,
              code === 0 ? "ok" : "failed",
              `exit ${code} (recorded late, from its exit file)`,
              code,
            );
      store.finishRun(r.id, result);
      fs.rmSync(exitFileFor(this.config.stateDir, r.id), { force: true });
      if (st) this.hook("runEnded", (h) => h.runEnded?.(store.run(r.id) as RunRow, st.cfg));
      if (result.status === "interrupted" && st) this.resume(st, r, now);
    }
  }

  private resume(st: JobState, r: RunRow, now: number): void {
    if (st.cfg.catchup === "skip") return;
    const slotTime = r.slot ?? r.started_at;
    if (slotTime < now - st.cfg.catchupWindowMs) return;
    this.enqueue(st.cfg.name, {
      slot: r.slot,
      claimSlot: false,
      trigger: "resume",
      attempt: r.attempt + 1,
    });
  }

  private adopt(r: RunRow, job: JobConfig): void {
    const store = this.store as LegacyStore;
    this.log(`cronvisor: adopted run ${r.id} of ${r.job} (pid ${r.pid}) left by a previous daemon`);
    let resolve!: (row: RunRow) => void;
    const finished = new Promise<RunRow>((res) => (resolve = res));
    const a: Active = { run: r, job, handle: null, finished };
    // The adopted run is not our child: poll its main process, then clean up its group.
    const poll = setInterval(() => {
      if (r.pid !== null && isAlive(r.pid, r.pid_start)) return;
      clearInterval(poll);
      if (r.pgid !== null) signalGroup(r.pgid, "SIGKILL");
      const code = readExitFile(exitFileFor(this.config.stateDir, r.id));
      const now = this.now();
      const result =
        code === null
          ? endResult(
              r,
              now,
              "interrupted",
              "adopted after a daemon restart; exit status unknown",
              null,
            )
          : endResult(
              r,
              now,
              code === 0 ? "ok" : "failed",
              code === 0 ? null : `exit ${code}`,
              code,
            );
      try {
        store.finishRun(r.id, result);
      } catch (e) {
        this.log(`cronvisor: could not record adopted run ${r.id}: ${(e as Error).message}`);
      }
      fs.rmSync(exitFileFor(this.config.stateDir, r.id), { force: true });
      resolve(store.run(r.id) as RunRow);
    }, ADOPT_POLL_MS);
    a.stopAdopt = () => clearInterval(poll);
    this.active.set(r.id, a);
    a.finished = finished.then((row) => this.ended(a, row));
  }

  /** Retry recording the ends the store refused; the lock is free once they are recorded. */
  private recordUnrecorded(): void {
    const store = this.store as LegacyStore;
    for (const [id, { result, job }] of this.unrecorded) {
      store.finishRun(id, result); // throws while the disk is still full: next beat, again
      this.unrecorded.delete(id);
      fs.rmSync(exitFileFor(this.config.stateDir, id), { force: true });
      this.log(
        `cronvisor: recorded the end of run ${id} (${result.status}) after the store recovered`,
      );
      this.hook("runEnded", (h) => h.runEnded?.(store.run(id) as RunRow, job));
    }
  }

  // ---- liveness ---------------------------------------------------------------------------

  private heartbeat(): void {
    try {
      const now = this.now();
      (this.store as LegacyStore).heartbeat(process.pid, now, this.config.heartbeatMs);
      this.writeHeartbeatFile(now);
      this.recordUnrecorded();
      this.adoptOrphans();
      this.hook("beat", (h) => h.beat?.((this.store as LegacyStore).store, this.config, now));
    } catch (e) {
      this.log(`cronvisor: heartbeat failed: ${(e as Error).message}`);
    }
  }

  /** A file an external `stat`-based check can watch, independent of SQLite. */
  private writeHeartbeatFile(now: number): void {
    try {
      fs.writeFileSync(
        path.join(this.config.stateDir, "heartbeat"),
        `${process.pid} ${new Date(now).toISOString()}\n`,
        {
          mode: 0o600,
        },
      );
    } catch {
      // a full disk: the store row is the primary beat; status reads that
    }
  }

  // ---- reload --------------------------------------------------------------------------------

  /** Re-read the config. Invalid: keep the old one and show the error. Valid: apply it. */
  reload(): { ok: boolean; errors: string[] } {
    const store = this.store as LegacyStore;
    const res = this.opts.loadConfig?.() ?? { config: null, errors: ["no config loader"] };
    if (!res.config) {
      const msg = res.errors.join("\n");
      store.setConfigError(process.pid, msg);
      this.log(`cronvisor: reload failed; keeping the running config:\n${msg}`);
      return { ok: false, errors: res.errors };
    }
    const now = this.now();
    const old = this.jobs;
    const keep = new Map(old);
    this.jobs.clear();
    if (res.config.stateDir !== this.config.stateDir) {
      // The store, logs and locks stay where this daemon holds them.
      this.log(
        `cronvisor: a changed state_dir (${res.config.stateDir}) takes effect when the daemon restarts`,
      );
    }
    this.config = { ...res.config, stateDir: this.config.stateDir };
    for (const job of res.config.jobs) {
      const prev = keep.get(job.name);
      if (prev) {
        // A changed job's running run finishes under the lock it started with.
        this.jobs.set(job.name, {
          cfg: job,
          next: this.nextAfter(job, Math.max(now, store.job(job.name)?.scanned_to ?? now)),
          pending: prev.pending,
          retryTimer: prev.retryTimer,
          sincePrune: prev.sincePrune,
          gap: prev.gap,
        });
      } else {
        this.addJob(job, now);
      }
    }
    for (const [name, st] of keep) {
      if (!this.jobs.has(name) && st.retryTimer) clearTimeout(st.retryTimer);
    }
    store.setConfigError(process.pid, null);
    this.hook("reloaded", (h) => h.reloaded?.(this.config));
    this.log(`cronvisor: config reloaded: ${res.config.jobs.length} job(s)`);
    this.arm();
    return { ok: true, errors: [] };
  }

  // ---- stop ----------------------------------------------------------------------------------

  /** Ordered and idempotent: stop firing, TERM every run, wait its grace, KILL, record, close. */
  stop(): Promise<void> {
    this.stopping ??= this.doStop();
    return this.stopping;
  }

  /** The second signal: SIGKILL every run's group now. */
  force(): void {
    for (const a of this.active.values()) {
      if (a.handle) a.handle.terminate("killed: daemon stopped (forced)", 0);
      else if (a.run.pgid !== null) signalGroup(a.run.pgid, "SIGKILL");
    }
  }

  private async doStop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    if (this.beat) clearInterval(this.beat);
    for (const t of this.timers) clearTimeout(t);
    for (const st of this.jobs.values()) st.pending = [];
    const runs = [...this.active.values()];
    for (const a of runs) this.terminate(a, "killed: daemon stopping", a.job.killGraceMs);
    await Promise.all(runs.map((a) => a.finished));
    try {
      await this.opts.hooks?.stopping?.();
    } catch (e) {
      this.log(`cronvisor: monitor stop failed: ${(e as Error).message}`);
    }
    const store = this.store;
    if (store) {
      try {
        store.releaseDaemon(process.pid, this.now());
      } finally {
        store.close();
      }
    }
    this.log(`cronvisor: daemon ${process.pid} stopped`);
  }

  private terminate(a: Active, reason: string, graceMs: number): void {
    if (a.handle) {
      a.handle.terminate(reason, graceMs);
      return;
    }
    // An adopted run: signal its group ourselves; the poll records its end.
    if (a.run.pgid === null) return;
    const pgid = a.run.pgid;
    signalGroup(pgid, "SIGTERM");
    this.later(graceMs, () => signalGroup(pgid, "SIGKILL"));
  }

  // ---- small helpers ---------------------------------------------------------------------------

  private hook(name: string, fn: (h: SupervisorHooks) => void): void {
    const h = this.opts.hooks;
    if (!h) return;
    try {
      fn(h);
    } catch (e) {
      this.log(`cronvisor: ${name} hook failed: ${(e as Error).message}`);
    }
  }

  private later(ms: number, fn: () => void): NodeJS.Timeout {
    const t = setTimeout(() => {
      this.timers.delete(t);
      try {
        fn();
      } catch (e) {
        this.log(`cronvisor: ${(e as Error).message}`);
      }
    }, ms);
    this.timers.add(t);
    return t;
  }

  private event(job: string | null, kind: string, detail: string): void {
    this.log(`cronvisor: ${kind}${job ? ` (job: ${job})` : ""}: ${detail}`);
    try {
      (this.store as LegacyStore).event(this.now(), job, kind, detail);
    } catch {
      // recording an event is best effort; the log line above stands
    }
  }
}

function readExitFile(file: string): number | null {
  try {
    const n = Number.parseInt(fs.readFileSync(file, "utf8").trim(), 10);
    return Number.isFinite(n) ? n : null;
  } catch {
    return null;
  }
}

function endResult(
  r: RunRow,
  now: number,
  status: RunResult["status"],
  reason: string | null,
  exitCode: number | null,
): RunResult {
  return {
    status,
    reason,
    exitCode,
    signal: null,
    startedAt: r.started_at,
    finishedAt: now,
    durationMs: now - r.started_at,
    logBytes: r.log_bytes ?? 0,
    logTruncated: false,
  };
}
