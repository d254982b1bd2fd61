// What the status page shows, read from the store through the same builders as `status`: the
// report of every job (so the verdict is `status --check`'s), then, for the jobs shown, their
// runs and slot dispositions in the time range and their recent successful durations. Runs in
// the page's worker thread (page-worker.ts), never on the scheduler's loop.
import { HEALTH_ORDER, WARNING_WORDS } from "../health/health.js";
import { buildStatus, checkCode, type JobReport, type StatusReport } from "../health/status.js";
import type { RunFacts, Store, TimelineRow } from "../store/store.js";
import type { Config, JobConfig } from "../core/types.js";
import { pageVerdict } from "./page-verdict.js";

/** The timeline's ranges: the last 24 hours, or (the switch) the last 7 days. */
export const RANGES = { "24h": 86_400_000, "7d": 7 * 86_400_000 } as const;
export type RangeName = keyof typeof RANGES;

/**
 * Jobs on one page: problems come first, so they are on the first; the filter finds any job.
 * (All of 1,000 jobs with a day of history each were 7 MB of HTML, seconds for a browser.)
 */
export const PAGE_JOBS = 200;

/** How many finished runs the trend looks back over: the ones the p95 of `status` is taken from. */
const TREND_RUNS = 20;

/** What the page's URL asks for: `?q=TEXT&problems=1&range=7d`. */
export interface PageQuery {
  /** Show jobs whose name contains this (lower case; empty: all). */
  q: string;
  /** Show only jobs with a problem. */
  problems: boolean;
  range: RangeName;
  /** Which page of PAGE_JOBS jobs (1-based). */
  page: number;
}

export function pageQuery(query: URLSearchParams): PageQuery {
  const range = query.get("range");
  return {
    q: (query.get("q") ?? "").trim().toLowerCase().slice(0, 200),
    problems: query.get("problems") === "1",
    range: range === "7d" ? "7d" : "24h",
    page: Math.max(1, Math.min(1_000_000, Math.floor(Number(query.get("page"))) || 1)),
  };
}

/** The query as a URL's search part (`?q=x&range=7d`), defaults left out; `change` overrides. */
export function querySearch(q: PageQuery, change: Partial<PageQuery> = {}): string {
  const v = { ...q, ...change };
  const p = new URLSearchParams();
  if (v.q) p.set("q", v.q);
  if (v.problems) p.set("problems", "1");
  if (v.range !== "24h") p.set("range", v.range);
  if (v.page > 1) p.set("page", String(v.page));
  const s = p.toString();
  return s ? `?${s}` : "";
}

/** A timeline's row; on a shared store with the node that ran (or recorded) it. */
export type PageRow = TimelineRow & { node?: string | null };

export interface JobView {
  job: JobConfig;
  report: JobReport;
  /** A problem: a WARNING word, or a problem sentence (a slow run) under another word. */
  problem: boolean;
  /** Runs and dispositions running now or finished in the range, oldest first. */
  rows: PageRow[];
  /** Durations (ms) of the recent successful runs, oldest first. */
  trend: number[];
}

export interface PageModel {
  now: number;
  /** Where the timeline starts. */
  from: number;
  query: PageQuery;
  /** Of every job: the verdict is the whole config's. */
  report: StatusReport;
  code: number;
  verdict: string;
  /** The jobs shown (this page of them), problems first (worst first), then in the config's order. */
  jobs: JobView[];
  /** How many jobs match the filter, and the number of this page's first (0-based). */
  matching: number;
  offset: number;
}

const isProblem = (r: JobReport): boolean =>
  WARNING_WORDS.includes(r.health) || r.problems.length > 0;

/** Problems first, the worst word first; otherwise the config's order (a stable sort). */
function rank(r: JobReport): number {
  if (WARNING_WORDS.includes(r.health)) return HEALTH_ORDER.indexOf(r.health);
  return r.problems.length > 0 ? HEALTH_ORDER.length : HEALTH_ORDER.length + 1;
}

const DISPOSITIONS: ReadonlySet<string> = new Set(["running", "skipped", "missed"]);

/**
 * The job's newest TREND_RUNS finished runs, newest first (what `status` takes the p95 from):
 * from its timeline's rows when the range holds that many, else read (a job that never
 * finished a run needs no read).
 */
async function recentRuns(
  store: Store,
  r: JobReport,
  rows: readonly TimelineRow[],
): Promise<Pick<RunFacts, "status" | "duration_ms">[]> {
  const finished = rows.filter((x) => !DISPOSITIONS.has(x.status));
  if (finished.length >= TREND_RUNS)
    return finished.sort((a, b) => b.id - a.id).slice(0, TREND_RUNS);
  return r.last_finished_run ? store.recentFinished(r.name, TREND_RUNS) : [];
}

/**
 * The rows of the jobs' timelines. A shared store's carry their node (a bar says which node ran
 * it): read as whole rows, since the timeline's columns have none.
 */
async function timelinesOf(
  store: Store,
  jobs: string[],
  from: number,
): Promise<Map<string, PageRow[]>> {
  if (!store.shared) return store.timelines(jobs, from);
  const out = new Map<string, PageRow[]>();
  for (const job of jobs) out.set(job, await store.runsRunningOrFinishedSince(job, from));
  return out;
}

export async function pageModel(
  config: Config,
  store: Store,
  now: number,
  query: PageQuery,
): Promise<PageModel> {
  const report = await buildStatus(config, store, now);
  const byName = new Map(config.jobs.map((j) => [j.name, j]));
  const matching = report.jobs
    .filter((r) => r.name.includes(query.q) && (!query.problems || isProblem(r)))
    .sort((a, b) => rank(a) - rank(b));
  const offset = (query.page - 1) * PAGE_JOBS;
  const shown = matching.slice(offset, offset + PAGE_JOBS);
  const from = now - RANGES[query.range];
  const timelines = await timelinesOf(
    store,
    shown.map((r) => r.name),
    from,
  );
  const jobs: JobView[] = [];
  for (const r of shown) {
    const job = byName.get(r.name);
    if (!job) continue;
    const rows = timelines.get(r.name) ?? [];
    const recent = await recentRuns(store, r, rows);
    const trend = recent
      .filter((f) => f.status === "ok" && f.duration_ms !== null)
      .map((f) => f.duration_ms as number)
      .reverse();
    jobs.push({ job, report: r, problem: isProblem(r), rows, trend });
  }
  return {
    now,
    from,
    query,
    report,
    code: checkCode(report, config),
    verdict: pageVerdict(report, config),
    jobs,
    matching: matching.length,
    offset,
  };
}
