// Alerts, pings, metrics and the HTTP endpoint, attached to the daemon through its hooks.
//
// The monitor reads the store, never the other way round: on a beat it looks at the rows of each
// job whose health can have changed (new finished runs feed the counters and `interrupted`
// alerts; the same `inspectJob` that `status` uses judges the job's health, and a change of
// condition is an alert). A job is looked at again only when something says it may have changed
// (new run or event rows from any process, a live run, a marker attempt from another process,
// its `late` deadline passing, a reload): an idle daemon with 1,000 jobs does a few indexed
// queries per beat, not 1,000 judgements. A run's end also triggers an immediate look at its
// job, so `failed` does not wait for the next beat. The work per beat is bounded (BEAT_BUDGET_MS,
// then the next beat carries on), and everything sent goes through queues that never block: a
// slow webhook cannot delay a slot.
import { performance } from "node:perf_hooks";
import {
  interruptedEvent,
  makeAlert,
  Outbox,
  pingBody,
  pingKindOf,
  pingUrl,
  runUuid,
  transitions,
  type Alert,
  type PingKind,
  type Transition,
} from "./alerts.js";
import { alertBox, pingBox, type PingItem } from "./deliver.js";
import { healthChangesAt, type Assessment, type HealthWord } from "../health/health.js";
import {
  formatAnnounced,
  nextRealertAt,
  parseAnnounced,
  type Announced,
} from "../health/alert-rules.js";
import type { Endpoint } from "./endpoint.js";
import { Metrics } from "./metrics.js";
import { newRows, type Cursor } from "./scan.js";
import type { PageClient } from "./page-client.js";
import { inspectJob } from "../health/status.js";
import type { NodeRow, RunRow, Store } from "../store/store.js";
import type { SupervisorHooks } from "./hooks.js";
import type { AlertTarget, Config, JobConfig } from "../core/types.js";
import { storeTarget } from "../store/store.js";

/** Time a beat may spend judging jobs before it yields to the scheduler (the rest: next beat). */
const BEAT_BUDGET_MS = 50;

/**
 * How long the judging runs before it lets the loop's other work in (an HTTP request, the page
 * worker's answer): SQLite's calls answer at once, so the loop would otherwise see nothing else
 * for the whole budget, and a page loaded at a beat would wait behind it.
 */
const YIELD_MS = 5;
/** How long `stop` waits for queued alerts and pings. */
const STOP_DRAIN_MS = 3000;

export interface MonitorOptions {
  log?: (line: string) => void;
  now?: () => number;
}

/** Start the HTTP endpoint (if configured) and return the hooks the supervisor calls. */
export async function createMonitor(
  config: Config,
  opts: MonitorOptions = {},
): Promise<SupervisorHooks> {
  const m = new Monitor(config, opts);
  await m.start();
  return m.hooks;
}

export class Monitor {
  private config: Config;
  private readonly log: (line: string) => void;
  private readonly now: () => number;
  private store: Store | null = null;
  /** When this daemon started: a job's rows finished before are history, not news. */
  private startedAt = 0;
  private readonly cursors = new Map<string, Cursor>();
  /** The latest health word per job, for the metrics. */
  private readonly judged = new Map<string, HealthWord>();
  /** The conditions last announced per job, and when (mirrors the store's alert_state). */
  private readonly announced = new Map<string, Announced>();
  /** Jobs to look at on the next beat(s). */
  private readonly dirty = new Set<string>();
  /**
   * When a job's health or alerts change with time alone (its `late` or `idle` deadline, a
   * `realert_every` repeat), if they can.
   */
  private readonly dueAt = new Map<string, number>();
  /** The newest run and event ids, attempt time and data version the last beat saw. */
  private seen = { runId: 0, eventId: 0, attemptAt: 0, dataVersion: -1 };
  private targets: { target: AlertTarget; box: Outbox<Alert> }[] = [];
  private alertsKey: string | null = null;
  private readonly pings = new Map<string, Outbox<PingItem>>();
  /** The `http:` endpoint, when configured. */
  private endpoint: Endpoint | null = null;
  /** The status page's worker (with the endpoint). */
  private pages: PageClient | null = null;
  readonly metrics: Metrics;

  constructor(config: Config, opts: MonitorOptions = {}) {
    this.config = config;
    this.log = opts.log ?? ((l) => process.stderr.write(`${l}\n`));
    this.now = opts.now ?? Date.now;
    this.metrics = new Metrics(
      () =>
        this.store && this.store.isOpen()
          ? {
              store: this.store,
              jobs: this.config.jobs.map((j) => j.name),
              health: (job) => this.judged.get(job) ?? null,
              pausedInConfig: new Set(this.config.jobs.filter((j) => j.paused).map((j) => j.name)),
            }
          : null,
      // Only an endpoint serves them, and `http` is read at start only (see applyConfig).
      config.http !== null,
    );
    this.applyConfig(config);
  }

  /**
   * The hooks return at once; the store work they start runs one piece at a time, in order
   * (see `serial`), and the promise they return never rejects.
   */
  readonly hooks = {
    runStarted: (run: RunRow, job: JobConfig): void => this.ping(job, run, "start"),
    runEnded: (run: RunRow, job: JobConfig): Promise<void> => {
      this.ping(job, run, pingKindOf(run.status));
      const now = this.now();
      return this.serial(async () => {
        if (this.store && this.judging) await this.watch(job, now);
      });
    },
    beat: (store: Store, config: Config, now: number): Promise<void> =>
      this.serial(async () => {
        if (this.store !== store) await this.attach(store, now);
        if (config !== this.config) this.applyConfig(config);
        if (this.endpoint) {
          // Up at last: nobody read a judgement while it was down, so judge every job now.
          if (await this.endpoint.ensure(now)) this.judgeAll();
          await this.endpoint.record(store, process.pid);
        }
        await this.sweep(now);
      }),
    reloaded: (config: Config): Promise<void> => this.serial(async () => this.applyConfig(config)),
    stopping: (): Promise<void> => this.stop(),
  } satisfies SupervisorHooks;

  /** The tail of the monitor's store work: each piece starts when the one before has ended. */
  private work: Promise<void> = Promise.resolve();

  /**
   * Run fn after the monitor's earlier work: a beat and a run's end must not scan the same job's
   * rows at once (each row is counted once). A failure is logged, never thrown into the daemon.
   */
  private serial(fn: () => Promise<void>): Promise<void> {
    const next = this.work.then(fn).catch((e: unknown) => {
      this.log(`cronvisor: monitor: ${(e as Error).message}`);
    });
    this.work = next;
    return next;
  }

  /** Bind the endpoint, if configured; a failure is kept and retried on every beat. */
  async start(): Promise<void> {
    const bind = this.config.http;
    if (!bind) return;
    // Only a daemon with an endpoint loads it: node:http, the routes and the page's client.
    const [{ Endpoint }, { monitorRoutes }, { PageClient }] = await Promise.all([
      import("./endpoint.js"),
      import("./routes.js"),
      import("./page-client.js"),
    ]);
    this.pages = new PageClient(storeTarget(this.config), this.log);
    const routes = monitorRoutes({
      store: () => this.store,
      config: () => this.config,
      now: this.now,
      metrics: this.metrics,
      pages: this.pages,
    });
    this.endpoint = new Endpoint(bind, routes, this.log);
    await this.endpoint.ensure(this.now());
  }

  private async attach(store: Store, now: number): Promise<void> {
    this.store = store;
    const d = await store.daemon();
    this.startedAt = d?.pid === process.pid && d.started_at !== null ? d.started_at : now;
    this.cursors.clear();
    // Everything is looked at once; after that, only what changed.
    this.seen = {
      ...(await store.maxIds()),
      attemptAt: now,
      dataVersion: await store.dataVersion(),
    };
    this.judgeAll();
  }

  private applyConfig(config: Config): void {
    const old = this.config;
    this.config = config;
    for (const job of config.jobs) this.metrics.addJob(job.name);
    // Thresholds may have changed: judge every job again.
    this.judgeAll();
    if (old !== config && JSON.stringify(old.http) !== JSON.stringify(config.http)) {
      this.log("cronvisor: http: a changed `http` address takes effect when the daemon restarts");
    }
    const key = JSON.stringify(config.alerts);
    if (key === this.alertsKey) return;
    this.alertsKey = key;
    for (const t of this.targets) t.box.close();
    this.targets = config.alerts.map((target) => ({
      target,
      box: alertBox(target, () => this.config, this.metrics, this.log),
    }));
  }

  // ---- watching the store ---------------------------------------------------------------------

  private judgeAll(): void {
    this.dueAt.clear();
    for (const job of this.config.jobs) this.dirty.add(job.name);
  }

  /** Without alert targets or an HTTP endpoint nobody reads a judgement: none is made. */
  private get judging(): boolean {
    return this.targets.length > 0 || this.endpoint?.serving === true;
  }

  /**
   * Look at every job whose health can have changed since the last beat, within a time budget
   * (the rest stay marked for the next beat).
   */
  private async sweep(now: number): Promise<void> {
    // (A reload that adds alerts judges every job from then on: applyConfig marks them all.)
    if (!this.judging) return;
    const store = this.store as Store;
    try {
      const changed = await store.jobsChangedSince(this.seen.runId, this.seen.eventId);
      this.seen.runId = changed.runId;
      this.seen.eventId = changed.eventId;
      for (const name of changed.jobs) this.dirty.add(name);
      // Marker attempts leave no run or event row; only another process (`once --job`) can
      // make them outside a live run, so look only when another connection has written.
      const version = await store.dataVersion();
      if (version !== this.seen.dataVersion) {
        for (const name of await store.jobsAttemptedSince(this.seen.attemptAt))
          this.dirty.add(name);
        this.seen.dataVersion = version;
        this.seen.attemptAt = now;
      }
    } catch (e) {
      this.log(`cronvisor: monitor: ${(e as Error).message}`);
      this.judgeAll();
    }
    for (const [name, c] of this.cursors) if (c.pending.size > 0) this.dirty.add(name);
    for (const [name, at] of this.dueAt) if (at <= now) this.dirty.add(name);
    if (this.dirty.size === 0) return;
    const byName = new Map(this.config.jobs.map((j) => [j.name, j]));
    const nodes = await this.nodes(store);
    // A job judged now may mark itself for the next beat (a live run): take this beat's list first.
    const todo = [...this.dirty];
    this.dirty.clear();
    const t0 = performance.now();
    let yielded = t0;
    for (let i = 0; i < todo.length; i++) {
      if (performance.now() - t0 > BEAT_BUDGET_MS) {
        for (const name of todo.slice(i)) this.dirty.add(name);
        return;
      }
      if (performance.now() - yielded > YIELD_MS) {
        await new Promise(setImmediate);
        yielded = performance.now();
      }
      const job = byName.get(todo[i] as string);
      if (job) await this.watch(job, now, nodes);
    }
  }

  /** A shared store's nodes: another node's run is judged by its lease, as `status` does. */
  private async nodes(store: Store): Promise<NodeRow[]> {
    if (!store.shared) return [];
    return store.nodes().catch((e: unknown) => {
      this.log(`cronvisor: monitor: ${(e as Error).message}`);
      return [];
    });
  }

  /** New rows of the job (counters, `interrupted`), then its health (transition alerts). */
  private async watch(job: JobConfig, now: number, nodes: NodeRow[] = []): Promise<void> {
    try {
      // A fenced run (taken over from a node that lost its lease) is alerted as interrupted.
      const interrupted = (await this.scan(job)).filter(
        (r) => r.status === "interrupted" || r.status === "fenced",
      );
      await this.judge(job, now, interrupted, nodes);
    } catch (e) {
      this.log(`cronvisor: monitor: ${(e as Error).message} (job: ${job.name})`);
    }
  }

  /** The job's rows finished since the last look, each returned once per daemon life. */
  private async scan(job: JobConfig): Promise<RunRow[]> {
    const rows = await newRows(this.store as Store, this.cursors, job.name, this.startedAt);
    for (const r of rows) this.metrics.countRow(r);
    return rows;
  }

  private async judge(
    job: JobConfig,
    now: number,
    interrupted: RunRow[],
    nodes: NodeRow[],
  ): Promise<void> {
    const store = this.store as Store;
    const { paused, row, running, assessment } = await inspectJob(store, job, now, nodes);
    this.judged.set(job.name, assessment.health);
    // A live run can turn stuck or slow at any moment: look at it every beat. Otherwise only
    // `late` and `idle` change by time alone (and a repeated alert): look again when one is due.
    if (running.length > 0) this.dirty.add(job.name);
    const changes = healthChangesAt(job, row, now);
    this.setDue(job.name, [changes]);
    if (this.targets.length === 0) return;
    for (const r of interrupted) this.raise(job.name, interruptedEvent(r), assessment, now);
    // A paused job is the operator's: no alerts, and what was announced stays until it resumes.
    if (paused) return;
    let before = this.announced.get(job.name);
    if (before === undefined) {
      const saved = await store.alertState(job.name);
      before = parseAnnounced(saved?.active ?? "", saved?.since ?? now);
    }
    const failing = assessment.findings.find((f) => f.word === "failing");
    const failingStatus =
      failing?.runId != null ? ((await store.run(failing.runId))?.status ?? null) : null;
    // The job's failures_before_alert and realert_every are its alert rules.
    const t = transitions(job.name, before, assessment, failingStatus, job, now);
    this.announced.set(job.name, t.announced);
    this.setDue(job.name, [changes, nextRealertAt(t.announced, job)]);
    if (formatAnnounced(t.announced) !== formatAnnounced(before)) {
      try {
        await store.setAlertState(job.name, formatAnnounced(t.announced), now);
      } catch (e) {
        // Remembered in memory all the same: no repeats while this daemon lives.
        this.log(
          `cronvisor: monitor: could not record alert state: ${(e as Error).message} (job: ${job.name})`,
        );
      }
    }
    for (const e of t.events) this.raise(job.name, e, assessment, now);
  }

  /** The earliest of a job's deadlines (its health's, its next repeated alert), or none. */
  private setDue(job: string, at: readonly (number | null)[]): void {
    const due = at.filter((t): t is number => t !== null);
    if (due.length > 0) this.dueAt.set(job, Math.min(...due));
    else this.dueAt.delete(job);
  }

  // ---- alerts and pings (their queues: deliver.ts) -------------------------------------------------------------------

  private raise(job: string, e: Transition["events"][number], a: Assessment, now: number): void {
    const alert = makeAlert(job, e, a.health, a.problems, now);
    this.log(`cronvisor: alert: ${alert.message}`);
    for (const t of this.targets) t.box.push(alert);
  }

  private ping(job: JobConfig, run: RunRow, kind: PingKind): void {
    if (job.ping === null) return;
    let box = this.pings.get(job.name);
    if (!box) {
      box = pingBox(job.name, job.ping, this.metrics, this.log);
      this.pings.set(job.name, box);
    }
    try {
      const url = pingUrl(job.ping, kind, runUuid(this.config.stateDir, run));
      box.push({ job: job.name, kind, runId: run.id, url, body: pingBody(run, kind) });
    } catch (e) {
      this.log(`cronvisor: ping: ${(e as Error).message} (job: ${job.name}, run: ${run.id})`);
    }
  }

  // ---- stop ------------------------------------------------------------------------------

  /** Close the endpoint, give queued alerts and pings a moment, then stop retrying. */
  async stop(): Promise<void> {
    await this.work; // no store work after the daemon closes the store
    await this.endpoint?.close();
    await this.pages?.close();
    const boxes = [...this.targets.map((t) => t.box), ...this.pings.values()];
    const left = await Promise.all(boxes.map((b) => b.drain(STOP_DRAIN_MS)));
    const n = left.reduce((a, b) => a + b, 0);
    if (n > 0) this.log(`cronvisor: monitor: ${n} alert(s)/ping(s) not delivered at stop`);
    for (const b of boxes) b.close();
  }
}
