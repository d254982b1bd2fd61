// A job's `limits:` against what a host can enforce (pure): which cgroup controller each limit
// needs, which limits a run gets, and the WARNING of each one that this host cannot enforce
// (validate, the daemon's start and status say them: a limit is never silently ignored).
import type { Limits } from "./types.js";

/** Which controller each cgroup limit needs. */
export const CONTROLLER = { memory: "memory", cpu: "cpu", tasks: "pids" } as const;

/** The cgroup limits of a job that these controllers can enforce; the others null (pure). */
export function enforceable(
  l: Limits,
  controllers: readonly string[],
): { memory: number | null; cpu: number | null; tasks: number | null } {
  const has = (k: keyof typeof CONTROLLER) => controllers.includes(CONTROLLER[k]);
  return {
    memory: has("memory") ? l.memoryBytes : null,
    cpu: has("cpu") ? l.cpuPercent : null,
    tasks: has("tasks") ? l.tasks : null,
  };
}

/**
 * The WARNINGs of the jobs' limits this host cannot enforce (pure): a limit is never silently
 * ignored. `controllers`: those the runs' cgroups have; null: no cgroup per run at all.
 */
export function limitWarnings(
  jobs: readonly { name: string; limits: Limits }[],
  controllers: readonly string[] | null,
): string[] {
  const out: string[] = [];
  for (const j of jobs) {
    const set = { memory: j.limits.memoryBytes, cpu: j.limits.cpuPercent, tasks: j.limits.tasks };
    for (const k of Object.keys(CONTROLLER) as (keyof typeof CONTROLLER)[]) {
      if (set[k] === null || controllers?.includes(CONTROLLER[k])) continue;
      out.push(
        controllers === null
          ? `${j.name}: limits.${k} is not enforced: runs have no cgroup of their own here`
          : `${j.name}: limits.${k} is not enforced: the runs' cgroups have no ${CONTROLLER[k]} controller (delegate it to cronvisor's cgroup)`,
      );
    }
  }
  return out;
}
