// Health is derived from what runs produced, never from what a worker says about itself: a pure
// function of store rows and `now`, so it can be tested without a clock or a daemon.
import type { DaemonRow, RunRow } from "./store.js";
import type { JobConfig } from "./types.js";

export type HealthWord = "ok" | "late" | "stuck" | "failing" | "repeating" | "paused" | "never-run";
export type DaemonState = "running" | "unresponsive" | "down";

/** No beat for more than this many intervals while the pid lives: stalled or SIGSTOPped. */
export const UNRESPONSIVE_BEATS = 3;
/** A running run longer than this multiple of its recent p95 is flagged slow. */
const SLOW_FACTOR = 2;
const SLOW_MIN_SAMPLES = 5;

export function daemonState(row: DaemonRow | null, pidAlive: boolean, now: number): DaemonState {
  if (!row || row.pid === null || row.stopped_at !== null || !pidAlive) return "down";
  const interval = row.heartbeat_ms ?? 10_000;
  if (row.heartbeat_at === null || now - row.heartbeat_at > UNRESPONSIVE_BEATS * interval) return "unresponsive";
  return "running";
}

export interface JobFacts {
  now: number;
  job: Pick<JobConfig, "name" | "health">;
  paused: boolean;
  /** When the daemon (or, failing that, the job's first sighting) started watching this job. */
  watchedSince: number | null;
  lastSuccessAt: number | null;
  /** Finished runs that had a process, newest first. */
  recent: RunRow[];
  running: RunRow[];
  repeating: { key: string; count: number }[];
}

export interface Assessment {
  health: HealthWord;
  problems: string[];
}

const ago = (ms: number): string => {
  const s = Math.round(ms / 1000);
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172_800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86_400)}d`;
};

/** The health word (worst first) and every problem, as plain sentences. */
export function assessJob(f: JobFacts): Assessment {
  const problems: string[] = [];
  const words = new Set<HealthWord>();
  const { now, job } = f;

  if (f.paused) {
    words.add("paused");
    problems.push("paused: its slots are skipped until `cronvisor resume`");
  }

  const within = job.health.progressWithinMs;
  for (const r of f.running) {
    const since = r.progress_at ?? r.started_at;
    if (within !== null && now - since > within) {
      words.add("stuck");
      problems.push(`run ${r.id} has shown no progress for ${ago(now - since)} (limit ${ago(within)})`);
    }
    const p95 = percentile95(f.recent.filter((x) => x.status === "ok").map((x) => x.duration_ms ?? 0));
    if (p95 !== null && now - r.started_at > SLOW_FACTOR * Math.max(p95, 1000)) {
      problems.push(`run ${r.id} has run ${ago(now - r.started_at)}, over ${SLOW_FACTOR}× its usual ${ago(p95)} (p95)`);
    }
  }

  const last = f.recent[0];
  if (last && last.status !== "ok") {
    let n = 0;
    while (n < f.recent.length && f.recent[n]?.status !== "ok") n++;
    words.add("failing");
    problems.push(
      `the last ${n === 1 ? "run" : `${n} runs`} failed (run ${last.id}: ${last.status}${last.reason ? `, ${last.reason}` : ""})`,
    );
  }

  if (f.repeating.length > 0) {
    words.add("repeating");
    const [worst] = f.repeating;
    problems.push(
      `${f.repeating.length} key(s) attempted more than ${job.health.repeatLimit} times without being marked done (worst: ${JSON.stringify(worst?.key)} ${worst?.count} times)`,
    );
  }

  const sw = job.health.successWithinMs;
  if (sw !== null) {
    const ref = f.lastSuccessAt ?? f.watchedSince;
    if (ref !== null && now - ref > sw) {
      words.add("late");
      problems.push(
        f.lastSuccessAt === null
          ? `no successful run since it was first watched ${ago(now - ref)} ago (limit ${ago(sw)})`
          : `last success ${ago(now - ref)} ago (limit ${ago(sw)})`,
      );
    }
  }

  if (f.recent.length === 0 && f.running.length === 0 && words.size === 0) words.add("never-run");

  const order: HealthWord[] = ["paused", "stuck", "failing", "repeating", "late", "never-run"];
  return { health: order.find((w) => words.has(w)) ?? "ok", problems };
}

function percentile95(xs: number[]): number | null {
  if (xs.length < SLOW_MIN_SAMPLES) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(0.95 * s.length) - 1)] ?? null;
}
