// Health is derived from what runs produced, never from what a worker says about itself: a pure
// function of store rows and `now`, so it can be tested without a clock or a daemon. `status`,
// `--check`, the alerts and the metrics all read the words from here, so they cannot disagree.
//
// The rules (the README's "Is it healthy?" explains them to operators):
//   paused     the job is paused (config or `cronvisor pause`); it outranks every other word
//   stuck      a live run has shown no progress (start, marker, `progress`) for progress_within
//   failing    the newest run with a verdict (ok, failed, timeout, spawn_failed) did not succeed;
//              killed and interrupted runs carry no verdict on the job's own code (an operator
//              stopped the daemon, a replace policy, a crash) and are looked past
//   repeating  a marker key was attempted more than repeat_limit times without being marked, and
//              is still being attempted (its last attempt is no older than the start of the
//              newest finished run: a key the job has given up on stops counting)
//   late       no success for success_within, counted from the last success or, if there never
//              was one, from when the job was first seen (the daemon's first start with it in the
//              config, the reload that added it, or its first manual run); never from the current
//              daemon's start, so a restart neither hides lateness nor makes it flap
//   idle       runs succeed but none recorded new work (a new marker or a `progress` call) for
//              new_work_within: success without work; counted from the last new work or, if
//              there never was any, from when the job was first seen, and only once a successful
//              run has ended since (a job that has not run since its last work is not idle)
//   never-run  no run at all yet, and nothing above applies
//   ok         none of the above
// A run that has lasted more than SLOW_FACTOR x the p95 of the job's recent successes is reported
// as a problem sentence without changing the word: slow is a warning sign, not a failure.
import type { DaemonRow, JobRow, RunFacts } from "../store/rows.js";
import type { RecentDigest } from "../store/status-rows.js";
import { VERDICT_STATUSES } from "../store/digest.js";
import type { JobConfig } from "../core/types.js";
import { formatDurationRounded } from "../core/duration.js";

export type HealthWord =
  "ok" | "late" | "stuck" | "failing" | "repeating" | "idle" | "paused" | "never-run";
export type DaemonState = "running" | "unresponsive" | "down";

/** Worst first: the first word that applies is the job's health. */
export const HEALTH_ORDER: readonly HealthWord[] = [
  "paused",
  "stuck",
  "failing",
  "repeating",
  "late",
  "idle",
  "never-run",
  "ok",
];
/** The words that make `status --check` say WARNING (and that alerts announce). */
export const WARNING_WORDS: readonly HealthWord[] = [
  "stuck",
  "failing",
  "repeating",
  "late",
  "idle",
];

/** No beat for more than this many intervals while the pid lives: stalled or SIGSTOPped. */
export const UNRESPONSIVE_BEATS = 3;
/** A running run longer than this multiple of its recent p95 is flagged slow. */
export const SLOW_FACTOR = 2;
/** Runs shorter than this are never called slow (a 20 ms job taking 50 ms is noise). */
const SLOW_FLOOR_MS = 1000;
/** How many finished runs the failing streak is counted over (the job summary's SUMMARY_RECENT). */
const STREAK_WINDOW = 20;

/** Statuses that judge the job's own code; the others (killed, interrupted) are looked past. */
const VERDICTS: ReadonlySet<string> = new Set(VERDICT_STATUSES);

export function daemonState(row: DaemonRow | null, pidAlive: boolean, now: number): DaemonState {
  if (!row || row.pid === null || row.stopped_at !== null || !pidAlive) return "down";
  return beating(row, now) ? "running" : "unresponsive";
}

/** Has the daemon beaten within UNRESPONSIVE_BEATS intervals? (The pid check is the caller's.) */
export function beating(
  row: Pick<DaemonRow, "heartbeat_at" | "heartbeat_ms">,
  now: number,
): boolean {
  const interval = row.heartbeat_ms ?? 10_000;
  return row.heartbeat_at !== null && now - row.heartbeat_at <= UNRESPONSIVE_BEATS * interval;
}

/** The columns of a run that health reads (so tests can build rows by hand). */
export type { RecentDigest, RunFacts };

export interface JobFacts {
  now: number;
  job: Pick<JobConfig, "name" | "health">;
  paused: boolean;
  /** When the job was first seen (its row's first_seen_at). */
  firstSeenAt: number | null;
  lastSuccessAt: number | null;
  /** The last new work: a new marker or a `progress` call (the job row's last_work_at). */
  lastWorkAt?: number | null;
  /** Successful runs since lastWorkAt that did nothing new (the job row's idle_runs). */
  idleRuns?: number;
  /** What is judged of the finished runs that had a process, as the job's row keeps it. */
  recent: RecentDigest;
  /** Runs whose processes (or supervisor) still live, oldest first. */
  running: RunFacts[];
  /** Marker keys attempted more than `health.repeat_limit` times without being marked. */
  attempts: { key: string; count: number; last_at: number }[];
}

/** One reason behind the health word, as a plain sentence. `word` null: worth saying, not a health word. */
export interface Finding {
  word: HealthWord | null;
  runId: number | null;
  message: string;
  /** `failing`: how many verdicts in a row failed (the streak, counted over the newest 20). */
  count?: number;
}

export interface Assessment {
  /** The worst word that applies. */
  health: HealthWord;
  /** Every word that applies, worst first (`ok` only when nothing else does). */
  words: HealthWord[];
  /** Every finding's sentence, worst first. */
  problems: string[];
  findings: Finding[];
  /** p95 of recent successful durations, when there are enough of them to say. */
  p95DurationMs: number | null;
  /** Running runs past SLOW_FACTOR x p95. */
  slowRunIds: number[];
}

const describeRun = (r: Pick<RunFacts, "id" | "status" | "reason">): string =>
  `run ${r.id}: ${r.status}${r.reason ? `, ${r.reason}` : ""}`;

/**
 * The health word (worst first) and every problem, as plain sentences. `status` calls it for
 * every job in a fresh process, mostly before the JIT compiles it: one pass per fact, and no
 * sort or filter where there is nothing to sort or filter.
 */
export function assessJob(f: JobFacts): Assessment {
  const findings: Finding[] = [];
  const add: AddFinding = (word, runId, message, count) => {
    findings.push(count === undefined ? { word, runId, message } : { word, runId, message, count });
  };

  if (f.paused) add("paused", null, "paused: its slots are skipped until `cronvisor resume`");

  const { newest, okP95: p95, failing } = f.recent;
  const slowRunIds = f.running.length > 0 ? judgeRunning(f, p95, add) : [];

  if (failing !== null) {
    const { run: verdict, streak: n } = failing;
    // The streak is counted over the newest 20 runs (the summary's window): at 20 it may be
    // longer, so say since when instead of a count that stops there.
    const since =
      f.lastSuccessAt === null
        ? "none has ever succeeded"
        : `none has succeeded since ${new Date(f.lastSuccessAt)
            .toISOString()
            .replace("T", " ")
            .replace(/:\d\d\.\d{3}Z$/, "Z")}`;
    add(
      "failing",
      verdict.id,
      n === 1
        ? `the last run failed (${describeRun(verdict)})`
        : n >= STREAK_WINDOW
          ? `the last ${n} or more runs failed: ${since} (latest ${describeRun(verdict)})`
          : `the last ${n} runs failed (latest ${describeRun(verdict)})`,
      n,
    );
  }
  if (newest && !VERDICTS.has(newest.status) && f.running.length === 0) {
    add(null, newest.id, `the last run was ${newest.status} (${describeRun(newest)})`);
  }

  if (f.attempts.length > 0) judgeAttempts(f, newest, add);

  const late = lateness(f);
  if (late !== null) add("late", null, late);

  const idle = idleness(f);
  if (idle !== null) add("idle", null, idle);

  if (newest === null && f.running.length === 0 && !findings.some((x) => x.word !== null)) {
    add("never-run", null, "it has not run yet");
  }
  return assessment(findings, p95, slowRunIds);
}

/** The findings, worst first (notes, word null, at the end), as an Assessment. */
function assessment(findings: Finding[], p95: number | null, slowRunIds: number[]): Assessment {
  if (findings.length === 0) {
    return { health: "ok", words: ["ok"], problems: [], findings, p95DurationMs: p95, slowRunIds };
  }
  const rank = (x: Finding): number =>
    x.word === null ? HEALTH_ORDER.length : HEALTH_ORDER.indexOf(x.word);
  if (findings.length > 1) findings.sort((a, b) => rank(a) - rank(b));
  const words = HEALTH_ORDER.filter((w) => findings.some((x) => x.word === w));
  if (words.length === 0) words.push("ok");
  return {
    health: words[0] as HealthWord,
    words,
    // `never-run` is a state, not a problem: it is not listed among the problems.
    problems: findings.filter((x) => x.word !== "never-run").map((x) => x.message),
    findings,
    p95DurationMs: p95,
    slowRunIds,
  };
}

/** `repeating`: keys attempted over the limit and still being attempted. */
function judgeAttempts(f: JobFacts, newest: RecentDigest["newest"], add: AddFinding): void {
  const limit = f.job.health.repeatLimit;
  const stillTried = newest ? newest.started_at : -Infinity;
  const repeating = f.attempts
    .filter((a) => a.count > limit && a.last_at >= stillTried)
    .sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : 1));
  const worst = repeating[0];
  if (worst) {
    add(
      "repeating",
      newest?.id ?? null,
      `${repeating.length === 1 ? "1 key was" : `${repeating.length} keys were`} attempted more than ${limit} times without being marked done (worst: ${JSON.stringify(worst.key)}, ${worst.count} times)`,
    );
  }
}

type AddFinding = (
  word: HealthWord | null,
  runId: number | null,
  message: string,
  count?: number,
) => void;

/** `stuck` for each live run past progress_within; a note for each past SLOW_FACTOR x p95. */
function judgeRunning(f: JobFacts, p95: number | null, add: AddFinding): number[] {
  const { now } = f;
  const within = f.job.health.progressWithinMs;
  const slowRunIds: number[] = [];
  for (const r of f.running) {
    const since = Math.max(r.progress_at ?? r.started_at, r.started_at);
    if (within !== null && now - since > within) {
      add(
        "stuck",
        r.id,
        `run ${r.id} has shown no progress for ${formatDurationRounded(now - since)} (limit ${formatDurationRounded(within)})`,
      );
    }
    if (p95 !== null && now - r.started_at > SLOW_FACTOR * Math.max(p95, SLOW_FLOOR_MS)) {
      slowRunIds.push(r.id);
      add(
        null,
        r.id,
        `run ${r.id} has run ${formatDurationRounded(now - r.started_at)}, over ${SLOW_FACTOR}× its usual ${formatDurationRounded(p95)} (p95 of recent successes)`,
      );
    }
  }
  return slowRunIds;
}

/** The `late` sentence, or null when the job succeeded within success_within (or has no limit). */
function lateness(f: JobFacts): string | null {
  const sw = f.job.health.successWithinMs;
  const ref = f.lastSuccessAt ?? f.firstSeenAt;
  if (sw === null || ref === null || f.now - ref <= sw) return null;
  const ago = formatDurationRounded(f.now - ref);
  return f.lastSuccessAt === null
    ? `no successful run since it was first seen ${ago} ago (limit ${formatDurationRounded(sw)})`
    : `last success ${ago} ago (limit ${formatDurationRounded(sw)})`;
}

/**
 * When an idle job's new work is due: its last new work (else when it was first seen) plus
 * new_work_within; null when idleness is not checked or has no reference yet.
 */
export function newWorkDueAt(f: {
  job: Pick<JobConfig, "health">;
  firstSeenAt: number | null;
  lastWorkAt?: number | null;
}): number | null {
  const within = f.job.health.newWorkWithinMs;
  const ref = f.lastWorkAt ?? f.firstSeenAt;
  return within === null || ref === null ? null : ref + within;
}

/**
 * When a job's health next changes with time alone (its `late` or `idle` deadline passing), or
 * null: the monitor looks at the job again then.
 */
export function healthChangesAt(
  job: Pick<JobConfig, "health">,
  row: Pick<JobRow, "first_seen_at" | "last_success_at" | "last_work_at"> | null,
  now: number,
): number | null {
  const sw = job.health.successWithinMs;
  const ref = row?.last_success_at ?? row?.first_seen_at ?? null;
  const firstSeenAt = row?.first_seen_at ?? null;
  const idle = newWorkDueAt({ job, firstSeenAt, lastWorkAt: row?.last_work_at ?? null });
  const at = [sw !== null && ref !== null ? ref + sw : null, idle].filter(
    (t): t is number => t !== null && now <= t,
  );
  return at.length > 0 ? Math.min(...at) + 1 : null;
}

/** The `idle` sentence, or null when a success did new work within new_work_within. */
function idleness(f: JobFacts): string | null {
  const n = f.idleRuns ?? 0;
  const due = newWorkDueAt(f);
  if (n === 0 || due === null || f.now <= due) return null;
  const within = formatDurationRounded(f.job.health.newWorkWithinMs as number);
  const runs = n === 1 ? "1 successful run" : `${n} successful runs`;
  const did = n === 1 ? "did" : "all did";
  return f.lastWorkAt == null
    ? `${runs} ${did} nothing new: no marker or progress call since it was first seen ${formatDurationRounded(f.now - (f.firstSeenAt as number))} ago (limit ${within})`
    : `${runs} ${did} nothing new: no new marker or progress call for ${formatDurationRounded(f.now - f.lastWorkAt)} (limit ${within})`;
}
