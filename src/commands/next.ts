// `cronvisor next`: upcoming fire times in each job's time zone.
import type { JobConfig } from "../core/types.js";
import { positiveInt } from "./args.js";
import { loadForReading } from "./running-config.js";
import { findJob, out } from "./shared.js";

export async function next(
  jobName: string | undefined,
  o: { config?: string; count: string; json?: boolean },
): Promise<void> {
  const { config } = await loadForReading(o.config);
  const jobs = jobName ? [findJob(config, jobName)] : config.jobs;
  const count = positiveInt(o.count, "--count");
  const { nextSlots } = await import("../schedule/schedule.js");
  const now = new Date();
  const list = jobs.map((j) => ({
    job: j.name,
    timezone: j.timezone,
    next: nextSlots(j, now, count).map((d) => d.toISOString()),
  }));
  if (o.json) return out(JSON.stringify(list, null, 2));
  for (const j of list) {
    const cfg = jobs.find((x) => x.name === j.job) as JobConfig;
    out(`${j.job} (${cfg.schedule}, ${j.timezone})`);
    if (cfg.pattern === null) out("  @reboot: once per machine boot");
    for (const t of j.next) out(`  ${t}  ${localTime(t, j.timezone)}`);
  }
}

/** `2026-03-29 01:05:00 EST`: zero-padded, 24-hour, so that the column lines up. */
function localTime(isoTime: string, timeZone: string): string {
  const parts: Record<string, string> = {};
  const f = new Intl.DateTimeFormat("en-US", {
    timeZone,
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
    hourCycle: "h23",
    timeZoneName: "short",
  });
  for (const x of f.formatToParts(new Date(isoTime))) parts[x.type] = x.value;
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second} ${parts.timeZoneName}`;
}
