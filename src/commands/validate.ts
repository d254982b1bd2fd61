// `cronvisor validate`: check the config; print every error, or each job's next fire times.
import { load, out } from "./shared.js";
import { renderTable } from "../core/table.js";

export async function validate(o: { config?: string }): Promise<void> {
  const config = await load(o.config);
  const { nextSlots } = await import("../schedule/schedule.js");
  const now = new Date();
  const rows = [["JOB", "TIMEZONE", "NEXT"]];
  for (const j of config.jobs) {
    const next =
      j.pattern === null
        ? "@reboot (once per boot)"
        : nextSlots(j, now, 3)
            .map((d) => d.toISOString())
            .join(", ");
    rows.push([j.name, j.timezone, next]);
  }
  out(`${config.file}: ok, ${config.jobs.length} job(s)`);
  out(renderTable(rows).join("\n"));
  // Limits this host cannot enforce: said, never silently ignored (the config is still valid).
  if (config.jobs.some((j) => Object.values(j.limits).some((v) => v !== null))) {
    const { likelyControllers } = await import("../run/cgroup.js");
    const { limitWarnings } = await import("../core/limits.js");
    for (const w of limitWarnings(config.jobs, likelyControllers(config.stateDir)))
      out(`WARNING: ${w}`);
  }
}
