// The human view of `status`: the daemon line on top, then one line per job, health first.
// Colour only on a terminal and never with NO_COLOR.
import type { RunRow } from "./store.js";
import { historyEntry, type StatusReport } from "./status.js";

const COLORS: Record<string, string> = {
  ok: "32",
  running: "32",
  paused: "36",
  "never-run": "36",
  late: "33",
  repeating: "33",
  stuck: "31",
  failing: "31",
  unresponsive: "31",
  down: "31",
};

const age = (s: number | null): string => {
  if (s === null) return "-";
  if (s < 120) return `${Math.round(s)}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172_800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86_400)}d`;
};

const ago = (iso: string | null, now: number): string => (iso === null ? "never" : `${age((now - Date.parse(iso)) / 1000)} ago`);

export function renderStatus(r: StatusReport, detail: RunRow[], opts: { color: boolean; now?: number }): string {
  const now = opts.now ?? Date.now();
  const paint = (word: string): string => (opts.color && COLORS[word] ? `\x1b[${COLORS[word]}m${word}\x1b[0m` : word);
  const d = r.daemon;
  const lines: string[] = [];
  lines.push(
    `daemon ${paint(d.state)}${d.pid !== null ? ` pid ${d.pid}` : ""}, heartbeat ${d.heartbeat_age_s === null ? "never" : `${age(d.heartbeat_age_s)} ago`}${d.started_at ? `, started ${ago(d.started_at, now)}` : ""}`,
  );
  if (d.config_error) lines.push(`  config error (the daemon keeps its previous config):\n    ${d.config_error.split("\n").join("\n    ")}`);
  const rows: string[][] = [["HEALTH", "JOB", "LAST RUN", "LAST SUCCESS", "PROGRESS", "MARKERS", "NEXT", "NOW"]];
  for (const j of r.jobs) {
    const last = j.last_run;
    rows.push([
      j.health,
      j.name,
      last ? `${last.status} ${ago(last.finished_at ?? last.started_at, now)}` : "-",
      ago(j.last_success_at, now),
      ago(j.last_progress_at, now),
      `${j.markers}${last ? ` (+${last.markers_new}, ${last.markers_skipped} done)` : ""}`,
      j.paused ? "paused" : (j.next_slot?.replace("T", " ").replace(/:\d\d\.\d{3}Z$/, "Z") ?? "-"),
      j.running ? `running ${j.running.run_id} pid ${j.running.pid ?? "-"}, progress ${age(j.running.progress_age_s)} ago` : "",
    ]);
  }
  const widths: number[] = [];
  for (const row of rows) row.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  for (const row of rows) {
    const cells = row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i] ?? 0)));
    // Pad before painting: escape codes have no width.
    if (row !== rows[0]) cells[0] = cells[0]?.replace(row[0] as string, paint(row[0] as string)) ?? "";
    lines.push(cells.join("  ").trimEnd());
  }
  for (const j of r.jobs) for (const p of j.problems) lines.push(`  ${j.name}: ${p}`);
  if (r.jobs.length === 1 && detail.length > 0) {
    const j = r.jobs[0];
    lines.push("");
    lines.push(`${j?.name}: ${j?.schedule} (${j?.timezone}); lock: ${j?.lock ? `run ${j.lock.run_id} pid ${j.lock.pid ?? "-"} since ${j.lock.since}` : "free"}`);
    lines.push("recent runs:");
    for (const h of detail.map(historyEntry)) {
      lines.push(
        `  ${String(h.run_id).padStart(6)}  ${h.status.padEnd(12)} ${(h.trigger ?? "-").padEnd(8)} ${h.started_at}  ${h.duration_ms === null ? "-" : `${(h.duration_ms / 1000).toFixed(1)}s`}  +${h.markers_new}/${h.markers_skipped} done  ${h.reason ?? ""}`.trimEnd(),
      );
    }
  }
  return lines.join("\n");
}
