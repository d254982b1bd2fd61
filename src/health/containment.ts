// How a daemon contains its runs, as status reports it (src/run/cgroup.ts decides it; the
// daemon's claim records it in its row), and the WARNINGs of the limits it cannot enforce.
import { limitWarnings } from "../core/limits.js";
import type { Limits } from "../core/types.js";

export interface ContainmentReport {
  mode: "cgroup" | "process-group";
  reason: string;
  /** The controllers its runs' cgroups have (memory, cpu, pids). */
  controllers: string[];
  /** Each job limit this daemon cannot enforce (a WARNING): none when all are. */
  warnings: string[];
}

/** The daemon row's containment, as its claim wrote it (JSON), judged for these jobs; or null. */
export function parseContainment(
  text: string | null,
  jobs: readonly { name: string; limits: Limits }[],
): ContainmentReport | null {
  if (text === null) return null;
  try {
    const c = JSON.parse(text) as { mode?: unknown; reason?: unknown; controllers?: unknown };
    if ((c.mode === "cgroup" || c.mode === "process-group") && typeof c.reason === "string") {
      const controllers = Array.isArray(c.controllers) ? c.controllers.map(String) : [];
      const warnings = limitWarnings(jobs, c.mode === "cgroup" ? controllers : null);
      return { mode: c.mode, reason: c.reason, controllers, warnings };
    }
  } catch {
    // a row written by something else: said as unknown
  }
  return null;
}
