// `cronvisor history`: runs and slot dispositions, newest first, then the store's events.
import { positiveInt } from "./args.js";
import { loadForReading } from "./running-config.js";
import { findJob, openStoreOrEmpty, out, when } from "./shared.js";
import { renderTable } from "../core/table.js";

export async function history(
  jobName: string | undefined,
  o: { config?: string; limit: string; json?: boolean },
): Promise<void> {
  const { config } = await loadForReading(o.config);
  if (jobName) findJob(config, jobName);
  const limit = positiveInt(o.limit, "--limit");
  const store = await openStoreOrEmpty(config);
  const { historyEntry } = await import("../health/status.js");
  const { durationCell, markersCell } = await import("../health/render.js");
  const rows = store ? (await store.history(jobName ?? null, limit)).map(historyEntry) : [];
  const events = store ? await store.events(jobName ?? null, limit) : [];
  // NODE only on a shared store: with SQLite every run is this host's.
  const shared = store?.shared === true;
  await store?.close();
  if (o.json) return out(JSON.stringify(rows, null, 2));
  const t = [
    [
      ...["RUN", "JOB", "STATUS", "TRIGGER", ...(shared ? ["NODE"] : []), "SLOT", "STARTED"],
      ...["DURATION", "MARKERS", "REASON"],
    ],
  ];
  for (const r of rows) {
    t.push([
      String(r.run_id),
      r.job,
      r.status,
      r.trigger ?? "-",
      ...(shared ? [r.node ?? "-"] : []),
      when(r.slot),
      when(r.started_at),
      durationCell(r),
      markersCell(r),
      r.reason ?? (r.exit_code !== null ? `exit ${r.exit_code}` : ""),
    ]);
  }
  out(rows.length === 0 ? "no runs recorded" : renderTable(t).join("\n"));
  if (events.length > 0) {
    out("\nEVENTS");
    const lines = events.map((e) => [
      when(new Date(e.at).toISOString()),
      e.job ?? "-",
      e.kind,
      e.detail ?? "",
    ]);
    out(renderTable(lines).join("\n"));
  }
}
