// GET /metrics: the Prometheus text format, written by prom-client.
//
// Two kinds of numbers. Gauges (up, heartbeat, per-job last success and progress, running runs,
// markers, paused, health) are read from the store at each scrape. Counters and the duration
// histogram count the store rows the daemon saw being finished (runs by status, markers written
// and skipped, skipped and missed slots), fed by the monitor's scan of the store, so runs that
// another process recorded (`cronvisor run`) count too; like every Prometheus counter they start
// from zero when the daemon starts.
//
// The job is labelled `job_name`, not `job`: Prometheus gives every scraped series its own `job`
// label (the scrape config's), and a clash would rename ours to `exported_job`.
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { beating, type HealthWord } from "../health/health.js";
import type { DaemonRow, JobGauge, RunRow, Store } from "../store/store.js";

/** Seconds: from a quick script to a nightly batch. */
const DURATION_BUCKETS = [
  0.1, 0.5, 1, 5, 15, 30, 60, 300, 900, 1800, 3600, 7200, 14_400, 43_200, 86_400,
];
const RUN_STATUSES = ["ok", "failed", "timeout", "killed", "interrupted", "spawn_failed"] as const;

/** What a scrape reads, taken once per scrape. */
export interface ScrapeSource {
  store: Store;
  /** Configured job names (removed jobs still in the store are not reported). */
  jobs: string[];
  /** The latest health word per job, as the monitor last judged it. */
  health: (job: string) => HealthWord | null;
  /** Jobs paused in the config (the store knows only `cronvisor pause`). */
  pausedInConfig: ReadonlySet<string>;
}

type Snapshot = {
  pausedInConfig: ReadonlySet<string>;
  daemon: DaemonRow | null;
  jobs: JobGauge[];
  health: (job: string) => HealthWord | null;
  now: number;
};

const seconds = (ms: number): number => ms / 1000;

/** The daemon's gauges, read at each scrape: a value of null leaves the gauge without a sample. */
const DAEMON_GAUGES: readonly {
  name: string;
  help: string;
  value: (s: Snapshot | null) => number | null;
}[] = [
  {
    name: "cronvisor_up",
    help: "1 while the daemon beats (its heartbeat is no older than 3 intervals), else 0.",
    value: (s) => (s?.daemon && beating(s.daemon, s.now) ? 1 : 0),
  },
  {
    name: "cronvisor_heartbeat_timestamp_seconds",
    help: "When the daemon last recorded its heartbeat (Unix time).",
    value: (s) => (s?.daemon?.heartbeat_at != null ? seconds(s.daemon.heartbeat_at) : null),
  },
  {
    name: "cronvisor_start_time_seconds",
    help: "When the daemon started (Unix time).",
    value: (s) => (s?.daemon?.started_at != null ? seconds(s.daemon.started_at) : null),
  },
];

/** The per-job gauges (label job_name), read at each scrape; null: no sample for that job. */
const JOB_GAUGES: readonly {
  name: string;
  help: string;
  value: (j: JobGauge, s: Snapshot) => number | null;
}[] = [
  {
    name: "cronvisor_job_last_success_timestamp_seconds",
    help: "When the job last finished a run successfully (Unix time); absent if it never did.",
    value: (j) => (j.last_success_at === null ? null : seconds(j.last_success_at)),
  },
  {
    name: "cronvisor_job_last_progress_timestamp_seconds",
    help: "The job's last progress: a success, a new marker or a progress call (Unix time).",
    value: (j) => (j.last_progress_at === null ? null : seconds(j.last_progress_at)),
  },
  { name: "cronvisor_job_running", help: "Runs of the job running now.", value: (j) => j.running },
  {
    name: "cronvisor_job_markers",
    help: "Done-markers in the job's namespace.",
    value: (j) => j.markers,
  },
  {
    name: "cronvisor_job_paused",
    help: "1 if the job is paused (config or `cronvisor pause`), else 0.",
    value: (j, s) => (j.paused === 1 || s.pausedInConfig.has(j.name) ? 1 : 0),
  },
];

/** The gauges, each read from the scrape's snapshot when the registry collects it. */
function registerGauges(registers: Registry[], snapshot: () => Snapshot | null): void {
  for (const g of DAEMON_GAUGES) {
    new Gauge({
      name: g.name,
      help: g.help,
      registers,
      collect() {
        this.reset();
        const v = g.value(snapshot());
        if (v !== null) this.set(v);
      },
    });
  }
  for (const g of JOB_GAUGES) {
    new Gauge<"job_name">({
      name: g.name,
      help: g.help,
      labelNames: ["job_name"],
      registers,
      collect() {
        this.reset();
        const s = snapshot();
        for (const j of s?.jobs ?? []) {
          const v = g.value(j, s as Snapshot);
          if (v !== null) this.set({ job_name: j.name }, v);
        }
      },
    });
  }
  new Gauge<"job_name" | "health">({
    name: "cronvisor_job_health",
    help: "1 for the job's current health word (ok late stuck failing repeating paused never-run), as `status` shows it.",
    labelNames: ["job_name", "health"],
    registers,
    collect() {
      this.reset();
      const s = snapshot();
      if (!s) return;
      for (const j of s.jobs) {
        const h = s.health(j.name);
        if (h !== null) this.set({ job_name: j.name, health: h }, 1);
      }
    },
  });
}

export class Metrics {
  readonly registry = new Registry();
  private snap: Snapshot | null = null;
  /**
   * The jobs added, and whether their zeroed series exist yet. prom-client keeps a label set per
   * series (about 1.7 KB a job for the zeroes below: 17 MiB at 10,000 jobs), so they are made
   * only when something can see them: the first scrape, or the job's first counted row. A daemon
   * without `http:` is never scraped and holds a name per job.
   */
  private readonly known = new Map<string, boolean>();
  private readonly runs: Counter<"job_name" | "status">;
  private readonly duration: Histogram<"job_name">;
  private readonly markersWritten: Counter<"job_name">;
  private readonly markersSkipped: Counter<"job_name">;
  private readonly slotsSkipped: Counter<"job_name">;
  private readonly slotsMissed: Counter<"job_name">;
  readonly alertsSent: Counter<"event" | "target">;
  readonly alertsFailed: Counter<"event" | "target">;
  readonly alertsDropped: Counter<"target">;
  readonly pingsFailed: Counter<"job_name">;

  constructor(private readonly source: () => ScrapeSource | null) {
    const registers = [this.registry];
    registerGauges(registers, () => this.snap);
    const counter = <L extends string>(name: string, help: string, labelNames: L[]) =>
      new Counter<L>({ name, help, labelNames, registers });
    this.runs = counter(
      "cronvisor_runs_total",
      "Finished runs by status (ok failed timeout killed interrupted spawn_failed) since the daemon started.",
      ["job_name", "status"],
    );
    this.duration = new Histogram({
      name: "cronvisor_run_duration_seconds",
      help: "How long finished runs took, since the daemon started.",
      labelNames: ["job_name"],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.markersWritten = counter(
      "cronvisor_markers_written_total",
      "Done-markers written by finished runs (new work done).",
      ["job_name"],
    );
    this.markersSkipped = counter(
      "cronvisor_markers_skipped_total",
      "Marker checks by finished runs that found the key already done (work skipped).",
      ["job_name"],
    );
    this.slotsSkipped = counter(
      "cronvisor_slots_skipped_total",
      "Slots that did not run because the job was locked (overlap) or paused.",
      ["job_name"],
    );
    this.slotsMissed = counter(
      "cronvisor_slots_missed_total",
      "Slots recorded missed (the daemon was down or its timer was late).",
      ["job_name"],
    );
    this.alertsSent = counter(
      "cronvisor_alerts_sent_total",
      "Alerts delivered, by event and target kind (webhook, command).",
      ["event", "target"],
    );
    this.alertsFailed = counter(
      "cronvisor_alerts_failed_total",
      "Alerts given up on after every retry, by event and target kind.",
      ["event", "target"],
    );
    this.alertsDropped = counter(
      "cronvisor_alerts_dropped_total",
      "Alerts dropped because a target's queue was full.",
      ["target"],
    );
    this.pingsFailed = counter(
      "cronvisor_pings_failed_total",
      "healthchecks-style pings given up on after every retry.",
      ["job_name"],
    );
  }

  /** Make a job's counters exist at 0, so rate() and absent() work before its first run. */
  addJob(job: string): void {
    if (!this.known.has(job)) this.known.set(job, false);
  }

  /** The added job's zeroed series, once, before anything is counted for it or a scrape reads it. */
  private makeZeroes(job: string): void {
    if (this.known.get(job) !== false) return;
    this.known.set(job, true);
    for (const status of ["ok", "failed"] as const) this.runs.inc({ job_name: job, status }, 0);
    const l = { job_name: job };
    this.markersWritten.inc(l, 0);
    this.markersSkipped.inc(l, 0);
    this.slotsSkipped.inc(l, 0);
    this.slotsMissed.inc(l, 0);
    this.duration.zero(l);
  }

  /** Count one store row the monitor saw finished (a run, or a skipped/missed slot). */
  countRow(r: RunRow): void {
    this.makeZeroes(r.job);
    const l = { job_name: r.job };
    if (r.status === "skipped") return this.slotsSkipped.inc(l);
    if (r.status === "missed") return this.slotsMissed.inc(l);
    if (!(RUN_STATUSES as readonly string[]).includes(r.status)) return;
    this.runs.inc({ ...l, status: r.status });
    if (r.duration_ms !== null) this.duration.observe(l, seconds(Math.max(0, r.duration_ms)));
    if (r.markers_new > 0) this.markersWritten.inc(l, r.markers_new);
    if (r.markers_skipped > 0) this.markersSkipped.inc(l, r.markers_skipped);
  }

  /** The text exposition, or null while there is no store to read (before the daemon's first beat). */
  render(now: number): Promise<string | null> {
    // One scrape at a time: the gauges read the snapshot across the registry's awaits.
    const next = this.last.then(() => this.renderNow(now));
    this.last = next.catch(() => undefined);
    return next;
  }

  private last: Promise<unknown> = Promise.resolve();

  private async renderNow(now: number): Promise<string | null> {
    const src = this.source();
    if (!src) return null;
    const wanted = new Set(src.jobs);
    this.snap = {
      pausedInConfig: src.pausedInConfig,
      daemon: await src.store.daemon(),
      jobs: (await src.store.jobGauges()).filter((j) => wanted.has(j.name)),
      health: src.health,
      now,
    };
    for (const [job, made] of this.known) if (!made) this.makeZeroes(job);
    try {
      return await this.registry.metrics();
    } finally {
      this.snap = null;
    }
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
