// Named locks and concurrency groups as `status` shows them (docs/locks.md): each lock the config
// names (or a running run holds) with its live holder, and each group with its live runs against
// its max_running. Pure: from the config, the store's holds of running runs and the liveness
// judgement status uses for every run (another node's by its lease).
import type { StatusConfig } from "../core/types.js";
import type { HeldRow, RunRow } from "../store/rows.js";

export interface LockReport {
  name: string;
  holder: { job: string; run_id: number; node: string | null } | null;
}

export interface GroupReport {
  name: string;
  running: number;
  max_running: number;
}

/** Does the config name any lock or group (else status reads no holds)? */
export function hasHolds(config: StatusConfig): boolean {
  return (config.groups ?? []).length > 0 || config.jobs.some((j) => (j.locks ?? []).length > 0);
}

export function holdsReport(
  config: StatusConfig,
  held: readonly HeldRow[],
  alive: (r: RunRow) => boolean,
): { locks: LockReport[]; groups: GroupReport[] } {
  const live = held.filter(alive);
  const names = new Set(config.jobs.flatMap((j) => j.locks ?? []));
  for (const h of live) if (h.hold_kind === "lock") names.add(h.hold_name);
  const locks = [...names].sort().map((name): LockReport => {
    const h = live.find((x) => x.hold_kind === "lock" && x.hold_name === name);
    return { name, holder: h ? { job: h.job, run_id: h.id, node: h.node ?? null } : null };
  });
  const groups = (config.groups ?? []).map((g) => ({
    name: g.name,
    running: live.filter((x) => x.hold_kind === "group" && x.hold_name === g.name).length,
    max_running: g.maxRunning,
  }));
  return { locks, groups };
}

/** The lines `status` prints for them (none when the config has neither). */
export function holdsLines(r: { locks: LockReport[]; groups: GroupReport[] }): string[] {
  const who = (l: LockReport): string =>
    l.holder === null ? "free" : `held by ${l.holder.job} (run ${l.holder.run_id})`;
  return [
    ...r.locks.map((l) => `  lock ${l.name}: ${who(l)}`),
    ...r.groups.map((g) => `  group ${g.name}: ${g.running} of ${g.max_running} running`),
  ];
}
