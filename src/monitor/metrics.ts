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
import { createRequire } from "node:module";
import type { Counter, Histogram, Registry } from "prom-client";
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

type Prom = typeof import("prom-client");
/**
 * prom-client and its modules (about 4.5 MiB of a daemon's memory), loaded only by a daemon that
 * serves them: synchronously, as the monitor is built before the daemon starts.
 */
const loadProm = (): Prom => createRequire(import.meta.url)("prom-client") as Prom;

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
function registerGauges(
  { Gauge }: Prom,
  registers: Registry[],
  snapshot: () => Snapshot | null,
): void {
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
    help: "1 for the job's current health word (ok late stuck failing repeating idle paused never-run), as `status` shows it.",
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

/** The series a daemon's rows and deliveries feed, in one registry. */
interface Series {
  registry: Registry;
  runs: Counter<"job_name" | "status">;
  duration: Histogram<"job_name">;
  cpu: Counter<"job_name">;
  memoryPeak: Histogram<"job_name">;
  markersWritten: Counter<"job_name">;
  markersSkipped: Counter<"job_name">;
  slotsSkipped: Counter<"job_name">;
  slotsMissed: Counter<"job_name">;
  alertsSent: Counter<"event" | "target">;
  alertsFailed: Counter<"event" | "target">;
  alertsDropped: Counter<"target">;
  pingsFailed: Counter<"job_name">;
}

/** 16 MiB to 8 GiB, doubling: what a cron job's peak memory usually spans. */
const MEMORY_BUCKETS = Array.from({ length: 10 }, (_, i) => 2 ** (24 + i));

function buildSeries(prom: Prom, snapshot: () => Snapshot | null): Series {
  const registry = new prom.Registry();
  const registers = [registry];
  registerGauges(prom, registers, snapshot);
  const counter = <L extends string>(name: string, help: string, labelNames: L[]) =>
    new prom.Counter<L>({ name, help, labelNames, registers });
  return {
    registry,
    runs: counter(
      "cronvisor_runs_total",
      "Finished runs by status (ok failed timeout killed interrupted spawn_failed) since the daemon started.",
      ["job_name", "status"],
    ),
    duration: new prom.Histogram({
      name: "cronvisor_run_duration_seconds",
      help: "How long finished runs took, since the daemon started.",
      labelNames: ["job_name"],
      buckets: DURATION_BUCKETS,
      registers,
    }),
    cpu: counter(
      "cronvisor_run_cpu_seconds_total",
      "CPU seconds (user + system) of all the processes of finished runs, since the daemon started.",
      ["job_name"],
    ),
    memoryPeak: new prom.Histogram({
      name: "cronvisor_run_memory_peak_bytes",
      help: "The peak memory of finished runs (their cgroup's, else their largest process's).",
      labelNames: ["job_name"],
      buckets: MEMORY_BUCKETS,
      registers,
    }),
    markersWritten: counter(
      "cronvisor_markers_written_total",
      "Done-markers written by finished runs (new work done).",
      ["job_name"],
    ),
    markersSkipped: counter(
      "cronvisor_markers_skipped_total",
      "Marker checks by finished runs that found the key already done (work skipped).",
      ["job_name"],
    ),
    slotsSkipped: counter(
      "cronvisor_slots_skipped_total",
      "Slots that did not run because the job was locked (overlap) or paused.",
      ["job_name"],
    ),
    slotsMissed: counter(
      "cronvisor_slots_missed_total",
      "Slots recorded missed (the daemon was down or its timer was late).",
      ["job_name"],
    ),
    alertsSent: counter(
      "cronvisor_alerts_sent_total",
      "Alerts delivered, by event and target kind (webhook, command).",
      ["event", "target"],
    ),
    alertsFailed: counter(
      "cronvisor_alerts_failed_total",
      "Alerts given up on after every retry, by event and target kind.",
      ["event", "target"],
    ),
    alertsDropped: counter(
      "cronvisor_alerts_dropped_total",
      "Alerts dropped because a target's queue was full.",
      ["target"],
    ),
    pingsFailed: counter(
      "cronvisor_pings_failed_total",
      "healthchecks-style pings given up on after every retry.",
      ["job_name"],
    ),
  };
}

/** A counter of a daemon nobody can scrape: what deliver.ts counts goes nowhere. */
const UNCOUNTED = { inc: (): void => {} };

export class Metrics {
  private snap: Snapshot | null = null;
  /** null when nothing can scrape this daemon (no `http:`): prom-client is then never loaded. */
  private readonly s: Series | null;
  /**
   * The jobs added, and whether their zeroed series exist yet. prom-client keeps a label set per
   * series (about 1.7 KB a job for the zeroes below: 17 MiB at 10,000 jobs), so they are made
   * only when something can see them: the first scrape, or the job's first counted row.
   */
  private readonly known = new Map<string, boolean>();
  readonly alertsSent: Pick<Counter<"event" | "target">, "inc">;
  readonly alertsFailed: Pick<Counter<"event" | "target">, "inc">;
  readonly alertsDropped: Pick<Counter<"target">, "inc">;
  readonly pingsFailed: Pick<Counter<"job_name">, "inc">;

  /**
   * `served`: whether anything can scrape these metrics (the daemon has an `http:` endpoint; a
   * changed `http` takes effect only at a restart). Unserved, nothing is counted or kept.
   */
  constructor(
    private readonly source: () => ScrapeSource | null,
    served = true,
  ) {
    this.s = served ? buildSeries(loadProm(), () => this.snap) : null;
    this.alertsSent = this.s?.alertsSent ?? UNCOUNTED;
    this.alertsFailed = this.s?.alertsFailed ?? UNCOUNTED;
    this.alertsDropped = this.s?.alertsDropped ?? UNCOUNTED;
    this.pingsFailed = this.s?.pingsFailed ?? UNCOUNTED;
  }

  /** Make a job's counters exist at 0, so rate() and absent() work before its first run. */
  addJob(job: string): void {
    if (this.s && !this.known.has(job)) this.known.set(job, false);
  }

  /** The added job's zeroed series, once, before anything is counted for it or a scrape reads it. */
  private makeZeroes(s: Series, job: string): void {
    if (this.known.get(job) !== false) return;
    this.known.set(job, true);
    for (const status of ["ok", "failed"] as const) s.runs.inc({ job_name: job, status }, 0);
    const l = { job_name: job };
    s.markersWritten.inc(l, 0);
    s.markersSkipped.inc(l, 0);
    s.slotsSkipped.inc(l, 0);
    s.slotsMissed.inc(l, 0);
    s.duration.zero(l);
    s.cpu.inc(l, 0);
    s.memoryPeak.zero(l);
  }

  /** Count one store row the monitor saw finished (a run, or a skipped/missed slot). */
  countRow(r: RunRow): void {
    const s = this.s;
    if (!s) return;
    this.makeZeroes(s, r.job);
    const l = { job_name: r.job };
    if (r.status === "skipped") return s.slotsSkipped.inc(l);
    if (r.status === "missed") return s.slotsMissed.inc(l);
    if (!(RUN_STATUSES as readonly string[]).includes(r.status)) return;
    s.runs.inc({ ...l, status: r.status });
    if (r.duration_ms !== null) s.duration.observe(l, seconds(Math.max(0, r.duration_ms)));
    if ((r.cpu_s ?? null) !== null) s.cpu.inc(l, r.cpu_s as number);
    if ((r.memory_peak_bytes ?? null) !== null)
      s.memoryPeak.observe(l, r.memory_peak_bytes as number);
    if (r.markers_new > 0) s.markersWritten.inc(l, r.markers_new);
    if (r.markers_skipped > 0) s.markersSkipped.inc(l, r.markers_skipped);
  }

  /**
   * The text exposition, or null while there is no store to read (before the daemon's first
   * beat) or nothing is served.
   */
  render(now: number): Promise<string | null> {
    // One scrape at a time: the gauges read the snapshot across the registry's awaits.
    const next = this.last.then(() => this.renderNow(now));
    this.last = next.catch(() => undefined);
    return next;
  }

  private last: Promise<unknown> = Promise.resolve();

  private async renderNow(now: number): Promise<string | null> {
    const src = this.source();
    const s = this.s;
    if (!src || !s) return null;
    const wanted = new Set(src.jobs);
    this.snap = {
      pausedInConfig: src.pausedInConfig,
      daemon: await src.store.daemon(),
      jobs: (await src.store.jobGauges()).filter((j) => wanted.has(j.name)),
      health: src.health,
      now,
    };
    for (const [job, made] of this.known) if (!made) this.makeZeroes(s, job);
    try {
      return await s.registry.metrics();
    } finally {
      this.snap = null;
    }
  }

  get contentType(): string {
    return this.s?.registry.contentType ?? "text/plain";
  }
}
