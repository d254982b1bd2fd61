// The human view of `status`: the daemon line on top, then one line per job, health first, then
// each problem as a sentence. `status JOB` adds the job's detail and its last runs. Colour only
// when asked (the CLI asks on a terminal that has colours: not with NO_COLOR or TERM=dumb).
import { formatDurationRounded, formatSeconds } from "../core/duration.js";
import { printable } from "../core/printable.js";
import { renderTable } from "../core/table.js";
import type { RunRow } from "../store/rows.js";
import { diskLines } from "./disk.js";
import { holdsLines } from "./holds.js";
import { historyEntry, type HistoryEntry, type JobReport, type StatusReport } from "./status.js";

const RED = "31";
const GREEN = "32";
const YELLOW = "33";
const CYAN = "36";

const COLORS: Record<string, string> = {
  ok: GREEN,
  running: GREEN,
  paused: CYAN,
  "never-run": CYAN,
  late: YELLOW,
  repeating: YELLOW,
  idle: YELLOW,
  stuck: RED,
  failing: RED,
  unresponsive: RED,
  down: RED,
  gone: RED,
};

/** `42s`, `7m`, `3h`, `2d`; null as `-`. */
const age = (s: number | null): string => (s === null ? "-" : formatDurationRounded(s * 1000));

const ago = (iso: string | null, now: number): string =>
  iso === null ? "never" : `${age(Math.max(0, now - Date.parse(iso)) / 1000)} ago`;

/** `2026-03-29 01:00Z`: minutes are enough in a table. */
const short = (iso: string | null): string =>
  iso === null ? "-" : iso.replace("T", " ").replace(/:\d\d\.\d{3}Z$/, "Z");

export interface RenderOptions {
  color: boolean;
  now?: number;
}

export function renderStatus(r: StatusReport, detail: RunRow[], opts: RenderOptions): string {
  const now = opts.now ?? Date.now();
  const paint = (word: string): string =>
    opts.color && COLORS[word] ? `\x1b[${COLORS[word]}m${word}\x1b[0m` : word;
  const lines: string[] = [daemonLine(r, now, paint)];
  const d = r.daemon;
  if (d.config_error) {
    lines.push(`  config error (the daemon keeps its previous config):`);
    for (const l of d.config_error.split("\n")) lines.push(`    ${printable(l)}`);
  }
  if (d.drain) {
    const until =
      d.drain.until === null ? "until `cronvisor resume --all`" : `until ${short(d.drain.until)}`;
    const why = d.drain.reason === null ? "" : ` (maintenance: ${printable(d.drain.reason)})`;
    lines.push(
      `  DRAINED since ${short(d.drain.since)} ${until}${why}: nothing new starts, slots are recorded skipped`,
    );
  }
  if (d.containment)
    lines.push(
      d.containment.mode === "cgroup"
        ? `  runs contained: ${printable(d.containment.reason)}`
        : `  runs contained by process group only (a process that leaves its group escapes the lock): ${printable(d.containment.reason)}`,
    );
  for (const w of d.containment?.warnings ?? []) lines.push(`  warning: ${printable(w)}`);
  if (d.http_error && d.http_error_since) {
    lines.push(
      `  http endpoint down since ${short(d.http_error_since)}: ${d.http_error} (retried every heartbeat)`,
    );
  }
  if (d.open_database) lines.push(`  warning: ${d.open_database} (allow_open_database: true)`);
  // A file system running short is said at the top; what the state dir takes, at the end.
  const disk = d.disk ? diskLines(d.disk) : [];
  lines.push(...disk.slice(1));
  // On a shared store, a line per node: which may run jobs, and whose clock is off.
  if (r.shared)
    for (const n of r.nodes) {
      const beat = n.heartbeat_age_s === null ? "never beat" : `beat ${age(n.heartbeat_age_s)} ago`;
      const off = n.clock_offset_ms === null ? "" : `, clock ${signed(n.clock_offset_ms)}`;
      const pid = n.pid === null ? "" : `, pid ${n.pid}`;
      // A node's name is checked where it is read (a host name's characters): no escaping, so
      // that the state keeps its colour.
      lines.push(`  node ${n.name} ${paint(n.state)}${pid}, ${beat}${off}`);
    }
  lines.push(...holdsLines(r).map(printable));
  for (const j of r.jobs)
    if (j.definition_differs_on.length > 0)
      lines.push(
        printable(`  ${j.name} is defined differently on ${j.definition_differs_on.join(", ")}`),
      );
  if (r.jobs.length === 0) {
    lines.push("no jobs", ...disk.slice(0, 1));
    return lines.join("\n");
  }
  const rows: string[][] = [
    ["HEALTH", "JOB", "LAST RUN", "LAST SUCCESS", "PROGRESS", "MARKERS", "NEXT", "NOW"],
  ];
  for (const j of r.jobs) rows.push(jobRow(j, now, r.shared));
  // The health word in colour (not the header): renderTable pads first, escape codes have no width.
  lines.push(...renderTable(rows, { paint: (c, n, i) => (n > 0 && i === 0 ? paint(c) : c) }));
  // Problems quote reasons and keys that jobs wrote: printable, as the table's cells are.
  for (const j of r.jobs) for (const p of j.problems) lines.push(printable(`  ${j.name}: ${p}`));
  const one = r.jobs.length === 1 ? r.jobs[0] : undefined;
  if (one && detail.length > 0)
    lines.push("", ...jobDetail(one, detail, now, r.shared).map(printable));
  else lines.push(...disk.slice(0, 1));
  return lines.join("\n");
}

/** A clock offset as +1.2s / -0.3s. */
const signed = (ms: number): string =>
  `${ms <= -50 ? "-" : "+"}${(Math.abs(ms) / 1000).toFixed(1)}s`;

function daemonLine(r: StatusReport, now: number, paint: (w: string) => string): string {
  const d = r.daemon;
  const every = d.heartbeat_interval_s !== null ? ` (every ${age(d.heartbeat_interval_s)})` : "";
  const beat =
    d.heartbeat_age_s === null ? "never beat" : `heartbeat ${age(d.heartbeat_age_s)} ago${every}`;
  switch (d.state) {
    case "running":
      return `daemon ${paint("running")}, pid ${d.pid}, ${beat}, started ${ago(d.started_at, now)}`;
    case "unresponsive":
      return `daemon ${paint("unresponsive")}: pid ${d.pid} is alive but not beating, ${beat}`;
    case "down":
      return `daemon ${paint("down")}: no daemon process${d.heartbeat_age_s === null ? "" : `, last heartbeat ${age(d.heartbeat_age_s)} ago`}`;
  }
}

/** ` on app01`: which node ran a run, on a shared store (with one node, every run is its). */
const onNode = (shared: boolean, node: string | null | undefined): string =>
  shared && typeof node === "string" ? ` on ${node}` : "";

function jobRow(j: JobReport, now: number, shared: boolean): string[] {
  // The run going now is in NOW; LAST RUN is the last one that ended.
  const last = j.last_finished_run;
  const running = j.running;
  return [
    j.health,
    j.name,
    last
      ? `${last.status}${onNode(shared, last.node)} ${ago(last.finished_at ?? last.started_at, now)}`
      : "-",
    ago(j.last_success_at, now),
    ago(j.last_progress_at, now),
    `${j.markers}${last ? ` (+${last.markers_new}, ${last.markers_skipped} done)` : ""}`,
    j.paused ? "paused" : short(j.next_slot),
    running
      ? `run ${running.run_id}${onNode(shared, running.node)} for ${age(Math.max(0, now - Date.parse(running.started_at)) / 1000)}, progress ${age(running.progress_age_s)} ago${running.slow ? " (slow)" : ""}${j.running_count > 1 ? ` (+${j.running_count - 1} more)` : ""}`
      : "",
  ];
}

function jobDetail(j: JobReport, detail: RunRow[], now: number, shared: boolean): string[] {
  const out: string[] = [];
  out.push(`${j.name}: ${j.schedule} (${j.timezone}), next ${short(j.next_slot)}`);
  out.push(
    `  lock: ${j.lock ? `held by run ${j.lock.run_id} (pid ${j.lock.pid ?? "-"}) since ${ago(j.lock.since, now)}` : "free"}`,
  );
  if (j.running) {
    const r = j.running;
    out.push(
      `  running: run ${r.run_id}${onNode(shared, r.node)}, pid ${r.pid ?? "-"}, started ${ago(r.started_at, now)}, last progress ${ago(r.progress_at, now)}${r.progress_message ? `: ${r.progress_message}` : ""}`,
    );
  }
  out.push(
    `  markers: ${j.markers} in its namespace; usual duration: ${j.p95_duration_ms === null ? "not known yet" : `${age(j.p95_duration_ms / 1000)} (p95)`}`,
  );
  out.push("  recent runs:");
  // NODE only on a shared store: with SQLite every run is this host's.
  const node = (h: HistoryEntry): string[] => (shared ? [h.node ?? "-"] : []);
  const rows = [
    [
      "RUN",
      "STATUS",
      "TRIGGER",
      ...(shared ? ["NODE"] : []),
      "STARTED",
      "DURATION",
      "MARKERS",
      "REASON",
    ],
  ];
  for (const h of detail.map(historyEntry)) {
    rows.push([
      String(h.run_id),
      h.status,
      h.trigger ?? "-",
      ...node(h),
      short(h.started_at),
      durationCell(h),
      markersCell(h),
      h.reason ?? (h.exit_code !== null && h.status !== "ok" ? `exit ${h.exit_code}` : ""),
    ]);
  }
  out.push(...renderTable(rows, { indent: "    " }));
  return out;
}

/** A run's DURATION cell (`status JOB`'s recent runs, `history`): `2.0s`, or `-` while it runs. */
export const durationCell = (h: HistoryEntry): string =>
  h.duration_ms === null ? "-" : formatSeconds(h.duration_ms);

/** A run's MARKERS cell (`status JOB`'s recent runs, `history`): `+3/2 done`, new and skipped. */
export const markersCell = (h: HistoryEntry): string =>
  `+${h.markers_new}/${h.markers_skipped} done`;
