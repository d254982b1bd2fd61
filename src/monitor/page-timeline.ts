// A job's timeline and duration trend as inline SVG, pure. The timeline spans the page's range
// (the last 24 hours or 7 days) in 1,000 units: each run is a bar from its start to its end (a
// running run to now, so it grows at every refresh), coloured by status, its width its true
// length (a stroke of the same colour, in screen pixels, keeps a short run visible); each skipped or missed
// slot is a thin tick at the slot's instant. Every bar and tick is a link to `why` for its slot
// (a manual run, which has no slot, to its run page), named by a <title> that shows on hover and
// is read out as the link's name. Positions are SVG attributes, never inline styles, so the page's
// Content-Security-Policy needs no 'unsafe-inline'.
import { formatDurationRounded, formatSeconds } from "../core/duration.js";
import { esc, localTime, trusted, type Markup } from "./page-html.js";
import type { JobView, RangeName } from "./page-data.js";
import type { TimelineRow } from "../store/store.js";

const W = 1000;
const H = 24;
/** A bar is never narrower than this (an SVG rect of width 0 is not drawn at all). */
const MIN_BAR = 0.001;
const TICK = 1.5;

/** ISO strings of recent instants: 1,000 hourly jobs share 24 slots (a page makes 20,000 links). */
const isoOf = new Map<number, string>();
function iso(t: number): string {
  let s = isoOf.get(t);
  if (s === undefined) {
    if (isoOf.size >= 10_000) isoOf.clear();
    s = new Date(t).toISOString();
    isoOf.set(t, s);
  }
  return s;
}

/** A run's length: `1.2s` (tenths) up to two minutes, then `8m`, `3h` (as `status` rounds ages). */
export const runLength = (ms: number): string =>
  ms < 120_000 ? formatSeconds(ms) : formatDurationRounded(ms);
/** A coordinate to three decimals, without trailing zeros. */
const fixed = (n: number): string => String(Math.round(n * 1000) / 1000);

/** The `why` of a job's slot at `at` (ISO UTC: every character of it is safe in a query). */
export const whyHref = (job: string, at: string): string =>
  `/why/${encodeURIComponent(job)}?at=${at}`;

/** The `why` of a row's slot, or the run itself when it has none (a manual run). */
export function rowHref(job: string, r: Pick<TimelineRow, "id" | "slot">): string {
  return r.slot === null ? `/runs/${r.id}` : whyHref(job, iso(r.slot));
}

/** `failed (exit 1)`, `ok`, `killed (signal SIGTERM)`: the status with its recorded reason. */
export function statusText(r: {
  status: string;
  reason: string | null;
  exit_code: number | null;
  signal: string | null;
}): string {
  const why =
    r.reason ??
    (r.signal
      ? `signal ${r.signal}`
      : r.exit_code !== null && r.status !== "ok"
        ? `exit ${r.exit_code}`
        : null);
  return why === null ? r.status : `${r.status} (${why})`;
}

/** `5 ms`, `1.2s`, `3m`: how long after its slot a run started. */
const lateness = (ms: number): string =>
  ms < 1000 ? `${Math.max(0, Math.round(ms))} ms` : runLength(ms);

/** `, node app01`: the node that ran or recorded the row (page-data.ts keeps it on a shared store). */
const onNode = (r: TimelineRow): string => (r.node ? `, node ${r.node}` : "");

function barTitle(r: TimelineRow, zone: string, now: number): string {
  const end = r.finished_at ?? now;
  const took =
    r.finished_at === null
      ? `running for ${formatDurationRounded(now - r.started_at)}`
      : runLength(end - r.started_at);
  // Its start as its lateness after the slot: what a reader of a timeline asks (and one local
  // time per bar instead of two: formatting a time is what a page of 20,000 bars spends most on).
  const start =
    r.slot === null
      ? `no slot, started ${localTime(r.started_at, zone, true)}`
      : `slot ${localTime(r.slot, zone, true)}, started ${lateness(r.started_at - r.slot)} after it`;
  // A scheduled run's trigger goes without saying (a page of 2,400 bars says it 2,400 times).
  const trigger = r.trigger === null || r.trigger === "schedule" ? "" : `, ${r.trigger}`;
  return `run ${r.id}: ${statusText(r)}${trigger}, ${start}, ${took}${onNode(r)}`;
}

function tickTitle(r: TimelineRow, slot: number, zone: string): string {
  return `slot ${localTime(slot, zone, true)}: ${r.status}${r.reason ? `: ${r.reason}` : ""}${onNode(r)}`;
}

/**
 * The labels under the timelines, shown once above the list: every 6 hours, or every day. (The
 * grid lines are the timeline's CSS background: 1,000 jobs' worth of SVG lines slowed the page.)
 */
export function axisLabels(range: RangeName): Markup {
  const steps = range === "24h" ? 4 : 7;
  const unit = range === "24h" ? 6 : 1;
  const sym = range === "24h" ? "h" : "d";
  const labels = [];
  for (let i = steps; i > 0; i--) labels.push(`<span>${i * unit} ${sym} ago</span>`);
  labels.push("<span>now</span>");
  return trusted(`<div class="axis" aria-hidden="true">${labels.join("")}</div>`);
}

/** The timeline of one job over [from, now]. */
export function timelineSvg(v: JobView, from: number, now: number, range: RangeName): Markup {
  const span = Math.max(1, now - from);
  const x = (t: number): number => (Math.min(Math.max(t, from), now) - from) * (W / span);
  const name = v.job.name;
  const zone = v.job.timezone;
  // rowHref's link, its job part escaped once per job rather than once per bar (an ISO time and
  // a run id need no escaping).
  const why = esc(whyHref(name, ""));
  const href = (r: TimelineRow): string => (r.slot === null ? `/runs/${r.id}` : why + iso(r.slot));
  let marks = "";
  for (const r of v.rows) {
    const disposition = r.status === "skipped" || r.status === "missed";
    if (disposition) {
      const slot = r.slot ?? r.started_at;
      if (slot < from) continue;
      const x0 = Math.min(x(slot), W - TICK);
      marks += `<a href="${href(r)}"><title>${esc(tickTitle(r, slot, zone))}</title><rect class="tick s-${r.status}" x="${fixed(x0)}" y="0" width="${TICK}" height="${H}"/></a>`;
      continue;
    }
    const x0 = Math.min(x(r.started_at), W - MIN_BAR);
    const w = Math.max(MIN_BAR, x(r.finished_at ?? now) - x0);
    const running = r.status === "running" ? ` data-running="1"` : "";
    marks += `<a href="${href(r)}"><title>${esc(barTitle(r, zone, now))}</title><rect class="bar s-${esc(r.status)}"${running} x="${fixed(x0)}" y="5" width="${fixed(w)}" height="${H - 10}"/></a>`;
  }

  const cut = prunedBefore(v, from);
  let gap = "";
  let note = "";
  if (cut !== null) {
    // Not an idle stretch: the records before were pruned (or the job is that new).
    const words = `No record before ${localTime(cut, zone)}: ${name} keeps its last ${v.job.log.keepRuns} runs (log.keep_runs), older ones are pruned`;
    gap = `<rect class="pruned" x="0" y="0" width="${fixed(x(cut))}" height="${H}"><title>${esc(words)}</title></rect>`;
    note = `<div class="trendrow pruned-note">${esc(words)}</div>`;
  }
  const label = `Runs and slots of ${name} in the last ${range === "24h" ? "24 hours" : "7 days"}`;
  return trusted(
    `<svg class="tl tl-${range}" viewBox="0 0 ${W} ${H}" preserveAspectRatio="none" role="group" aria-label="${esc(label)}" data-from="${from}" data-now="${now}">${gap}${marks}</svg>${note}`,
  );
}

/**
 * Where the job's kept records start, when that is inside the range and may hide runs: a job
 * keeps its newest log.keep_runs finished runs and dispositions (src/daemon/runs.ts prunes the
 * rest). With that many in the range, the range holds every record kept, and an empty stretch
 * before the oldest says nothing of what ran there. With fewer, the kept ones reach back past
 * the range and none of it was pruned: null.
 */
export function prunedBefore(v: Pick<JobView, "job" | "rows">, from: number): number | null {
  let finished = 0;
  let oldest = Infinity;
  for (const r of v.rows) {
    if (r.status === "running") continue;
    finished++;
    oldest = Math.min(oldest, r.slot ?? r.started_at, r.started_at);
  }
  return finished >= v.job.log.keepRuns && oldest > from ? oldest : null;
}

/** The recent successful durations as a line, with the p95 of `status` as a dashed line. */
export function trendSvg(v: JobView): Markup {
  const d = v.trend;
  const p95 = v.report.p95_duration_ms;
  if (d.length < 2) {
    return trusted(
      `<div class="trendrow">duration trend: ${d.length === 1 ? `one successful run (${esc(runLength(d[0] as number))})` : "no successful run yet"}</div>`,
    );
  }
  const top = Math.max(...d, p95 ?? 0) * 1.15 || 1;
  const y = (ms: number): string => fixed(H - 1 - (ms / top) * (H - 2));
  const xs = (i: number): string => fixed((i * 100) / (d.length - 1));
  const points = d.map((ms, i) => `${xs(i)},${y(ms)}`).join(" ");
  const line =
    p95 === null ? "" : `<line class="p95" x1="0" x2="100" y1="${y(p95)}" y2="${y(p95)}"/>`;
  const last = d[d.length - 1] as number;
  const words = `last ${runLength(last)}, p95 ${p95 === null ? "not known yet (fewer than 5 successes)" : runLength(p95)}`;
  const label = `Durations of the last ${d.length} successful runs of ${v.job.name}: ${d.map(runLength).join(", ")}`;
  return trusted(
    // Its <title> is its accessible name (role img) and its hover text: said once, not twice.
    `<div class="trendrow"><svg class="trend" viewBox="0 0 100 ${H}" preserveAspectRatio="none" role="img"><title>${esc(label)}</title><polyline points="${points}"/>${line}</svg><span>${esc(words)}</span></div>`,
  );
}
