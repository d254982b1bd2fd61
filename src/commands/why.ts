// `cronvisor why JOB [--at TIME] [--json]`: what became of one slot of a job, and why. It only
// reads: the config (or the daemon's record of it while the file is broken, as `history` does)
// and the store, opened read-only, so it works while the daemon is down.
import { loadForReading } from "./running-config.js";
import { CliError, EXIT, findJob, openStoreOrEmpty, out, printable } from "./shared.js";
import type { SlotFacts, DaemonRow } from "../store/store.js";

export async function why(
  jobName: string,
  o: { config?: string; at?: string; json?: boolean },
): Promise<void> {
  const { config } = await loadForReading(o.config);
  let job;
  try {
    job = findJob(config, jobName);
  } catch (e) {
    // The contract: an unknown job exits 1 (the lookup's own code is a usage error's).
    if (e instanceof CliError) throw new CliError(e.message, EXIT.fail);
    throw e;
  }
  const { parseIsoTime } = await import("../schedule/zone.js");
  const at = o.at === undefined ? null : parseIsoTime(o.at);
  if (o.at !== undefined && at === null)
    throw new CliError(
      `--at ${JSON.stringify(o.at)}: not an ISO-8601 time (e.g. 2026-03-29T02:00 in the job's time zone, or 2026-03-29T00:00Z)`,
      EXIT.usage,
    );
  const now = Date.now();
  const { explainWhy, resolveTarget } = await import("../health/why.js");
  let target = resolveTarget(job, at, now);
  const store = await openStoreOrEmpty(config);
  let facts: SlotFacts | null = null;
  let daemonRow: DaemonRow | null = null;
  try {
    // No slot of the job's schedule, but one a chain (`then:`) claimed for the job: that slot.
    if (store && target.kind === "time" && target.at !== null) {
      const f = await store.slotFacts(job.name, target.at);
      if (f.claim !== null) [target, facts] = [{ kind: "slot", slot: target.at, note: null }, f];
    }
    if (store && target.kind === "slot") facts ??= await store.slotFacts(job.name, target.slot);
    else if (store) daemonRow = await store.daemon();
  } finally {
    await store?.close();
  }
  const { daemonReport } = await import("../health/status.js");
  const daemon = daemonReport(facts?.daemon ?? daemonRow, now).state;
  const report = explainWhy({ job, target, facts, daemon, now });
  if (o.json) return out(JSON.stringify(report, null, 2));
  out(report.explanation.map(printable).join("\n"));
}
