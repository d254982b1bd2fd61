// What the status page shows, read from the store through the same builders as `status`: the
// report of every job (so the verdict is `status --check`'s), then, for the jobs shown, their
// runs and slot dispositions in the time range and their recent successful durations. Runs in
// the page's worker thread (page-worker.ts), never on the scheduler's loop.
import { diskFacts } from "../core/disk.js";
import { HEALTH_ORDER, WARNING_WORDS } from "../health/health.js";
import { buildStatus, checkCode, type JobReport, type StatusReport } from "../health/status.js";
import type { RunFacts, TimelineRow } from "../store/store.js";
import type { Config, JobConfig } from "../core/types.js";
import type { PageReads } from "./page-reads.js";
import { pageVerdict } from "./page-verdict.js";

/** The timeline's ranges: the last 24 hours, or (the switch) the last 7 days. */
export const RANGES = { "24h": 86_400_000, "7d": 7 * 86_400_000 } as const;
export type RangeName = keyof typeof RANGES;

/**
 * Jobs on one page: problems come first, so they are on the first; the filter finds any job.
 * (All of 1,000 jobs with a day of history each were 7 MB of HTML, seconds for a browser.)
 */
export const PAGE_JOBS = 100;

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

export interface JobView {
  job: JobConfig;
  report: JobReport;
  /** A problem: a WARNING word, or a problem sentence (a slow run) under another word. */
  problem: boolean;
  /** Runs and dispositions running now or finished in the range, oldest first. */
  rows: TimelineRow[];
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

/** `reads`: the store's rows, kept while it has not changed (page-reads.ts); judged at `now`. */
export async function pageModel(
  config: Config,
  reads: PageReads,
  now: number,
  query: PageQuery,
): Promise<PageModel> {
  await reads.check();
  // The newest finished runs of every job, as status read them (its p95's): the trends.
  const recent = new Map<string, RunFacts[]>();
  const disk = diskFacts(config.stateDir, config.store === null);
  const report = await buildStatus(config, reads.statusStore(), now, null, null, recent, disk);
  const byName = new Map(config.jobs.map((j) => [j.name, j]));
  // Each job's rank once, not at each of the sort's 10,000 comparisons.
  const matching = report.jobs
    .filter((r) => r.name.includes(query.q) && (!query.problems || isProblem(r)))
    .map((r) => ({ r, k: rank(r) }))
    .sort((a, b) => a.k - b.k)
    .map((x) => x.r);
  const offset = (query.page - 1) * PAGE_JOBS;
  const shown = matching.slice(offset, offset + PAGE_JOBS);
  const from = now - RANGES[query.range];
  const timelines = await reads.timelines(
    shown.map((r) => r.name),
    from,
  );
  const jobs: JobView[] = [];
  for (const r of shown) {
    const job = byName.get(r.name);
    if (!job) continue;
    const rows = timelines.get(r.name) ?? [];
    const trend = (recent.get(r.name) ?? [])
      .slice(0, TREND_RUNS)
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
