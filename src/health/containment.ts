// How a daemon contains its runs, as status reports it (src/run/cgroup.ts decides it; the
// daemon's claim records it in its row).

export interface ContainmentReport {
  mode: "cgroup" | "process-group";
  reason: string;
}

/** The daemon row's containment, as its claim wrote it (JSON), or null. */
export function parseContainment(text: string | null): ContainmentReport | null {
  if (text === null) return null;
  try {
    const c = JSON.parse(text) as { mode?: unknown; reason?: unknown };
    if ((c.mode === "cgroup" || c.mode === "process-group") && typeof c.reason === "string")
      return { mode: c.mode, reason: c.reason };
  } catch {
    // a row written by something else: said as unknown
  }
  return null;
}
