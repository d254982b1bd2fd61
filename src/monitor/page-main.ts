// The status page (`GET /`), pure: a PageModel in, HTML out. On top the one-line verdict of
// `status --check`, the daemon's liveness and heartbeat age and the config it runs; then the
// filter (a GET form: it works without the script, which filters as the user types) and one
// entry per job, problems first: its health word and problem sentences, next fire in its own
// time zone, last success, markers, its timeline and its duration trend.
import { diskLines } from "../health/disk.js";
import { formatDurationRounded } from "../core/duration.js";
import { h, page, timeEl, trusted, type Markup } from "./page-html.js";
import { PAGE_JOBS, querySearch, type JobView, type PageModel } from "./page-data.js";
import {
  axisLabels,
  rowHref,
  statusText,
  timelineSvg,
  runLength,
  trendSvg,
} from "./page-timeline.js";
import type { HttpResponse } from "./http.js";
import type { DaemonReport, StatusReport } from "../health/status.js";
import { CLOCK_OFF_MS, type NodeReport } from "../health/nodes.js";

/** How often the script fetches the page again (seconds). */
export const LIVE_EVERY_S = 5;

const age = (s: number): string => formatDurationRounded(s * 1000);

function daemonPart(d: DaemonReport, zone: string): Markup {
  const every = d.heartbeat_interval_s === null ? "" : ` (every ${age(d.heartbeat_interval_s)})`;
  const beat = d.heartbeat_age_s === null ? "never" : `${age(d.heartbeat_age_s)} ago${every}`;
  const state =
    d.state === "running"
      ? h`running, pid ${d.pid}, started ${timeEl(d.started_at, zone)}`
      : d.state === "unresponsive"
        ? h`<strong class="err">unresponsive</strong>: pid ${d.pid} is alive but not beating`
        : h`<strong class="err">down</strong>: no daemon process`;
  const accepted = d.config_accepted_at
    ? h`accepted
      ${timeEl(d.config_accepted_at, zone)}${d.config_hash ? h`, sha256 <code>${d.config_hash.slice(0, 12)}</code>` : ""}`
    : h`not recorded`;
  const reload = d.config_error
    ? h`<dt>reload error</dt>
        <dd>
          <div class="err">${d.config_error.split("\n").map((l) => h`${l}\n`)}</div>
          the daemon keeps running its previous config
        </dd>`
    : h`<dt>reload</dt>
        <dd>no error</dd>`;
  const fileErrors = d.config_file_errors?.length
    ? h`<dt>config file</dt>
        <dd><div class="err">${d.config_file_errors.map((l) => h`${l}\n`)}</div></dd>`
    : "";
  const httpError = d.http_error
    ? h`<dt>http</dt>
        <dd class="err">${d.http_error}</dd>`
    : "";
  // `cronvisor pause --all`: said beside the verdict's WARNING, with its end and reason.
  const drain = d.drain
    ? h`<dt>drained</dt>
        <dd class="err" data-drain="">since ${d.drain.since}, ${d.drain.until === null ? "until `cronvisor resume --all`" : `until ${d.drain.until}`}${d.drain.reason === null ? "" : ` (maintenance: ${d.drain.reason})`}: nothing new starts</dd>`
    : "";
  return h`<dl class="daemon" aria-label="The daemon">
    <dt>daemon</dt>
    <dd>${state}</dd>
    <dt>heartbeat</dt>
    <dd>${beat}</dd>
    <dt>running config</dt>
    <dd>${accepted}</dd>
    ${reload}${fileErrors}${httpError}${drain}${diskPart(d)}${containmentPart(d)}
  </dl>`;
}

/** Where runs are contained (a cgroup each, or process groups only), and limits not enforced. */
function containmentPart(d: DaemonReport): Markup | string {
  const c = d.containment;
  if (!c) return "";
  const what = c.mode === "cgroup" ? "a cgroup per run" : "process groups only";
  const warn = c.mode !== "cgroup" || c.warnings.length > 0;
  return h`<dt>containment</dt>
    <dd${warn ? h` class="err"` : ""} data-containment="${c.mode}">${what}: ${c.reason}${c.warnings.map((w) => h`<br />${w}`)}</dd>`;
}

/** What the store and the logs take and what is free; a warning when little is. */
function diskPart(d: DaemonReport): Markup | string {
  if (!d.disk) return "";
  const line = diskLines(d.disk)[0]?.replace(/^ {2}disk: /, "") ?? "";
  return h`<dt>disk</dt>
    <dd${d.disk.low_space ? h` class="err"` : ""}>${line}${d.disk.low_space ? h`<br />${d.disk.low_space}` : ""}</dd>`;
}

/** `+0.1s`, as `status` writes a clock's offset from the store's. */
const signed = (ms: number): string =>
  `${ms <= -50 ? "-" : "+"}${(Math.abs(ms) / 1000).toFixed(1)}s`;

function nodeRow(n: NodeReport): Markup {
  const beat = n.heartbeat_age_s === null ? "never" : `${age(n.heartbeat_age_s)} ago`;
  const off = n.clock_offset_ms;
  const far = off !== null && n.state !== "gone" && Math.abs(off) > CLOCK_OFF_MS;
  const clock =
    off === null
      ? "-"
      : far
        ? h`<strong class="err">${signed(off)}</strong> (over 2 s)`
        : signed(off);
  return h`<tr><th scope="row">${n.name}</th><td class="n-${n.state}">${n.state}</td><td>${beat}</td><td>${clock}</td><td>${n.version ?? "-"}</td></tr>`;
}

/**
 * The nodes of the store, as `status` lists them: a table on a shared store (every name and
 * version there was written by another node: escaped like everything else), one line with SQLite.
 */
function nodesPart(r: StatusReport): Markup {
  if (!r.shared) {
    const n = r.nodes[0];
    const who = n
      ? h`one node: ${n.name} (${n.state}, version ${n.version ?? "unknown"})`
      : "no node recorded yet";
    return h`<p class="nodes" id="nodes">store: SQLite, ${who}</p>`;
  }
  return h`<table class="nodes" id="nodes">
    <caption>nodes of the store (PostgreSQL): a slot runs on one of them</caption>
    <tr><th scope="col">node</th><th scope="col">state</th><th scope="col">heartbeat</th><th scope="col">clock offset</th><th scope="col">version</th></tr>
    ${r.nodes.map(nodeRow)}
  </table>`;
}

/** Named locks with their holders, groups with their runs (docs/locks.md); none: nothing. */
function holdsPart(r: StatusReport): Markup | string {
  if (r.locks.length === 0 && r.groups.length === 0) return "";
  const lock = (l: StatusReport["locks"][number]): Markup =>
    h`<li data-lock="${l.name}">lock ${l.name}: ${l.holder ? h`held by ${l.holder.job} (<a href="/runs/${l.holder.run_id}">run ${l.holder.run_id}</a>${l.holder.node && r.shared ? ` on ${l.holder.node}` : ""})` : "free"}</li>`;
  const group = (g: StatusReport["groups"][number]): Markup =>
    h`<li data-group="${g.name}"${g.running >= g.max_running ? h` class="err"` : ""}>group ${g.name}: ${g.running} of ${g.max_running} running</li>`;
  return h`<ul class="holds" id="holds">${r.locks.map(lock)}${r.groups.map(group)}</ul>`;
}

function filterForm(m: PageModel): Markup {
  const q = m.query;
  const range = (name: "24h" | "7d", label: string): Markup =>
    h`<a
      href="/${querySearch(q, { range: name, page: 1 })}"
      ${q.range === name ? trusted(' aria-current="page"') : ""}
      >${label}</a
    >`;
  return h`<form class="filter" method="get" action="/" role="search">
    <label for="q">Filter jobs</label>
    <input id="q" name="q" type="search" value="${q.q}" autocomplete="off" placeholder="job name" />
    <label
      ><input
        id="problems"
        name="problems"
        type="checkbox"
        value="1"
        ${q.problems ? trusted(" checked") : ""}
      />
      problems only</label
    >
    ${q.range === "7d" ? trusted('<input type="hidden" name="range" value="7d">') : ""}
    <button type="submit">Filter</button>
    <span class="range">timeline: ${range("24h", "24 hours")} · ${range("7d", "7 days")}</span>
  </form>`;
}

/** ` on node app01`, on a shared store (with one node, every run is its). */
const on = (shared: boolean, node: string | null | undefined): string =>
  shared && typeof node === "string" ? ` on node ${node}` : "";

function lastRun(j: JobView, shared: boolean): Markup {
  const last = j.report.last_finished_run;
  if (!last) return h`none yet`;
  const ended = last.finished_at ?? last.started_at;
  const took = last.duration_ms === null ? "" : `, took ${runLength(last.duration_ms)}`;
  return h`<a href="/runs/${last.run_id}">run ${last.run_id}</a>${on(shared, last.node)} ${statusText(last)}${took},
    ended ${timeEl(ended, j.job.timezone)}`;
}

// The per-job templates are written compactly: a page of 1,000 jobs carries them 1,000 times.

function runningFact(r: JobView["report"], zone: string, shared: boolean): Markup | "" {
  const run = r.running;
  if (!run) return "";
  const lock = r.lock?.run_id === run.run_id ? " (it holds the job's lock)" : "";
  const progress = run.progress_age_s === null ? "none" : `${age(run.progress_age_s)} ago`;
  const message = run.progress_message === null ? "" : h`: ${run.progress_message}`;
  return h`<dt>running</dt><dd><a href="/runs/${run.run_id}">run ${run.run_id}</a>${on(shared, run.node)} since ${timeEl(run.started_at, zone)}${lock}, last progress ${progress}${message}${run.slow ? " (slow)" : ""}</dd>`;
}

function facts(j: JobView, shared: boolean): Markup {
  const r = j.report;
  const zone = j.job.timezone;
  const next = r.paused ? h`paused` : timeEl(r.next_slot, zone);
  const markers =
    r.markers_new_last_run === null
      ? h`${r.markers} in its namespace`
      : h`last run ${r.markers_new_last_run} new, ${r.markers_skipped_last_run} already done; ${r.markers} in its namespace`;
  return h`<dl class="facts"><dt>next</dt><dd>${next}</dd><dt>last success</dt><dd>${timeEl(r.last_success_at, zone)}</dd><dt>last run</dt><dd>${lastRun(j, shared)}</dd>${runningFact(r, zone, shared)}<dt>markers</dt><dd>${markers}</dd></dl>`;
}

/** Statuses that judge a job; killed, interrupted and fenced judge an operator, a crash, a node. */
const JUDGED = new Set(["ok", "failed", "timeout", "spawn_failed"]);

/**
 * The health word. `ok` beside a last run that was killed, interrupted or fenced is not drawn as
 * a success: health looks past those runs, the badge says what the last one was.
 */
function badge(r: JobView["report"]): Markup {
  const last = r.last_finished_run;
  if (r.health !== "ok" || !last || JUDGED.has(last.status) || r.running)
    return h`<span class="health h-${r.health}">${r.health}</span>`;
  return h`<span class="health h-unjudged" title="healthy: the last run was ${last.status}, which judges the operator, a crash or a node, not the job">ok, last run ${last.status}</span>`;
}

function jobItem(j: JobView, m: PageModel): Markup {
  const r = j.report;
  const problems = r.problems.length
    ? h`<ul class="problems">${r.problems.map((p) => h`<li>${p}</li>`)}</ul>`
    : "";
  const latest = j.rows.length ? j.rows[j.rows.length - 1] : undefined;
  const why = latest ? rowHref(r.name, latest) : `/why/${encodeURIComponent(r.name)}`;
  return h`<li id="job-${r.name}" data-name="${r.name}" data-health="${r.health}" data-problem="${j.problem ? "1" : "0"}">
<div><h2><a href="${why}">${r.name}</a></h2>${badge(r)}<code class="sched">${r.schedule}</code> <span class="sched">${r.timezone}</span>
${problems}${facts(j, m.report.shared)}</div>
<div>${timelineSvg(j, m.from, m.now, m.query.range)}${trendSvg(j)}</div>
</li>
`;
}

const LEGEND = trusted(
  `<div class="legend" aria-hidden="true"><span><i class="k-ok"></i>ok</span><span><i class="k-failed"></i>failed</span><span><i class="k-timeout"></i>timeout</span><span><i class="k-killed"></i>killed</span><span><i class="k-interrupted"></i>interrupted</span><span><i class="k-fenced"></i>fenced</span><span><i class="k-running"></i>running</span><span><i class="k-skipped"></i>skipped slot</span><span><i class="k-missed"></i>missed slot</span></div>`,
);

/** How many jobs are shown of how many, and the links to the pages before and after. */
function countLine(m: PageModel, total: number): Markup {
  const q = m.query;
  const first = m.jobs.length ? m.offset + 1 : 0;
  const last = m.offset + m.jobs.length;
  const of = m.matching === total ? `${total} jobs` : `${m.matching} matching jobs (of ${total})`;
  const range = m.matching > PAGE_JOBS ? ` (${first}–${last})` : "";
  const prev =
    q.page > 1
      ? h` <a href="/${querySearch(q, { page: q.page - 1 })}" rel="prev">previous ${PAGE_JOBS}</a>`
      : "";
  const next =
    last < m.matching
      ? h` <a href="/${querySearch(q, { page: q.page + 1 })}" rel="next">next ${PAGE_JOBS}</a>`
      : "";
  return h`<p class="count" id="count" data-live-part>Showing <span id="shown">${m.jobs.length}</span> of ${of}${range}, problems first.${prev}${next} Each bar is a run, each tick a skipped or missed slot; each links to why.</p>`;
}

/** The whole status page. */
export function renderMain(m: PageModel, configZone: string): HttpResponse {
  const total = m.report.jobs.length;
  const list = m.jobs.length
    ? m.jobs.map((j) => jobItem(j, m))
    : h`<li class="count">No job matches.</li>`;
  const body = h`<header id="top" data-live-part>
      <h1>cronvisor</h1>
      <p class="verdict v-${m.code}">${m.verdict}</p>
      ${daemonPart(m.report.daemon, configZone)}
      ${nodesPart(m.report)}${holdsPart(m.report)}
    </header>
    ${filterForm(m)}
    ${countLine(m, total)}
    ${LEGEND}
    <div class="jobs-head" aria-hidden="true"><span>job</span>${axisLabels(m.query.range)}</div>
    <ol id="jobs" class="jobs" data-live-part>
      ${list}
    </ol>
    <footer id="foot" data-live-part>
      Page built ${timeEl(new Date(m.now).toISOString(), configZone, true)}.
      <span id="live">Reload the page for fresh data.</span> The same report as JSON:
      <a href="/status">/status</a>.
    </footer>`;
  return page({ title: `cronvisor: ${m.verdict}`, body, live: LIVE_EVERY_S });
}
