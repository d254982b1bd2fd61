// What the daemon's parts share once it has started: the store (open and ours), the config, the
// jobs and live runs, and the small helpers every part needs (hooks, timers, events). Created by
// Supervisor.start() only, so the store is never null here.
import { graceMs, Spread } from "./spread.js";
import type { RunContext } from "../run/execute.js";
import type { Spawner } from "../run/spawner.js";
import type { JobConfig, Config, RunBroker, RunResult } from "../core/types.js";
import type { Owner, Store } from "../store/store.js";
import { decideAdmission } from "./admit.js";
import { KeptWrites } from "./kept.js";
import { LogBudget } from "./log-budget.js";
import { recycleLog } from "../run/spare.js";
import type { Active, JobState } from "./state.js";
import { Waiting } from "./waiting.js";
import type { SupervisorHooks } from "../monitor/hooks.js";

export class Runtime {
  readonly jobs = new Map<string, JobState>();
  readonly active = new Map<number, Active>();
  /** Results of runs whose end the store refused (a full disk): retried every heartbeat. */
  readonly unrecorded = new Map<number, { result: RunResult; job: JobConfig }>();
  /**
   * Runs reserved and not yet watched (being spawned): no orphans, though `running` and not in
   * `active`. A start outside a tick (a queued slot, a retry) may be there when a beat looks.
   */
  readonly starting = new Set<number>();
  /** Reload and daemon-row writes the store refused: retried every heartbeat. */
  readonly kept: KeptWrites;
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Set once stop() begins: nothing new starts. */
  stopping = false;
  /** Set while this node cannot renew its lease on a shared store: nothing new starts. */
  fenced = false;
  /** The marker broker jobs reach the store through; null when none was started. */
  broker: RunBroker | null = null;
  /** What starts the runs (src/run/spawner.ts); set once the daemon has claimed its state dir. */
  spawner: Spawner | null = null;
  /** The bytes the run logs take, and logs.max_total. */
  readonly logs: LogBudget;
  /** Slots waiting for a named lock or their group (waiting.ts). */
  readonly waiting = new Waiting();
  /** On a shared store: which jobs' slots this node claims at once, and others' after a grace. */
  readonly spread: Spread | null;

  constructor(
    readonly store: Store,
    public config: Config,
    readonly owner: Owner,
    readonly now: () => number,
    readonly log: (line: string) => void,
    private readonly hooks: SupervisorHooks | undefined,
  ) {
    this.kept = new KeptWrites(log);
    this.logs = new LogBudget(
      config.stateDir,
      () => this.config.logsMaxTotalBytes,
      (file) => {
        const sp = this.spawner;
        recycleLog(file, config.stateDir, sp && ((spare) => sp.recycle(spare)));
      },
    );
    this.spread = store.shared ? new Spread(store.node, graceMs(config.heartbeatMs)) : null;
  }

  /** How long after its slot this node claims a slot of the job (spread.ts): 0 for its own. */
  delayOf(name: string): number {
    return this.spread === null ? 0 : this.spread.delay(name, this.config.jobs);
  }

  get ctx(): RunContext {
    return {
      config: this.config,
      store: this.store,
      owner: this.owner,
      now: this.now,
      broker: this.broker,
      spawner: this.spawner,
      admit: (job, o) => (facts) =>
        decideAdmission(
          { policy: job.overlap, trigger: o.trigger, waiting: this.waiting.has(job.name) },
          facts,
        ),
    };
  }

  /** The job's runs this daemon watches. */
  runningOf(name: string): Active[] {
    return [...this.active.values()].filter((a) => a.run.job === name && a.exited !== true);
  }

  hook(name: string, fn: (h: SupervisorHooks) => void): void {
    const h = this.hooks;
    if (!h) return;
    try {
      fn(h);
    } catch (e) {
      this.log(`cronvisor: ${name} hook failed: ${(e as Error).message}`);
    }
  }

  async stoppingHook(): Promise<void> {
    try {
      await this.hooks?.stopping?.();
    } catch (e) {
      this.log(`cronvisor: monitor stop failed: ${(e as Error).message}`);
    }
  }

  /** A timer whose callback never throws out of the loop: a rejection is logged. */
  later(ms: number, fn: () => Promise<void> | void): NodeJS.Timeout {
    const t = setTimeout(() => {
      this.timers.delete(t);
      this.guard(fn);
    }, ms);
    this.timers.add(t);
    return t;
  }

  clearTimers(): void {
    for (const t of this.timers) clearTimeout(t);
  }

  /** Run a callback from a timer, a signal or a hook: log a throw or a rejection, never pass it on. */
  guard(fn: () => Promise<void> | void, context = ""): void {
    const where = context ? ` (${context})` : "";
    const fail = (e: unknown): void => this.log(`cronvisor: ${(e as Error).message}${where}`);
    try {
      void Promise.resolve(fn()).catch(fail);
    } catch (e) {
      fail(e);
    }
  }

  /** Logged, and recorded best effort (the log line stands if the store refuses it). */
  async event(job: string | null, kind: string, detail: string): Promise<void> {
    this.log(`cronvisor: ${kind}${job ? ` (job: ${job})` : ""}: ${detail}`);
    try {
      await this.store.event(this.now(), job, kind, detail);
    } catch {
      // recording an event is best effort; the log line above stands
    }
  }
}
