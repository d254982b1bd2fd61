// Slots waiting for a named lock or their group (docs/locks.md): held by the daemon (not the
// store) and offered again whenever a run ends, at every tick and at every heartbeat (another
// node's run ending is seen there), in their turn: the earlier slot first, then the higher
// `priority:`. A daemon restarted while a slot waits finds it unrecorded, and `catchup:` decides.
import type { JobConfig } from "../core/types.js";
import type { Pending } from "./state.js";

export interface Waiter {
  job: JobConfig;
  p: Pending;
  /** Why it waits, as the store's admission said (`lock db held by backup (run 812)`). */
  reason?: string;
}

/** The turn among waiting starts: earlier slot first, then higher priority (pure). */
export function byTurn(a: Waiter, b: Waiter): number {
  const sa = a.p.slot ?? Number.MAX_SAFE_INTEGER;
  const sb = b.p.slot ?? Number.MAX_SAFE_INTEGER;
  return sa - sb || (b.job.priority ?? 0) - (a.job.priority ?? 0);
}

/**
 * A batch's writes with its grouped starts put in their turn among themselves (the others keep
 * their places): the store admits them one after another, so the first in turn gets the room.
 */
export function inTurn<W extends Waiter & { record?: unknown }>(writes: W[]): W[] {
  const at = writes.flatMap((w, i) => (w.record === undefined && w.job.group ? [i] : []));
  if (at.length < 2) return writes;
  const sorted = at.map((i) => writes[i] as W).sort(byTurn);
  const out = [...writes];
  at.forEach((i, k) => (out[i] = sorted[k] as W));
  return out;
}

export class Waiting {
  private list: Waiter[] = [];

  add(job: JobConfig, p: Pending, reason: string): void {
    this.list.push({ job, p, reason });
  }

  has(name: string): boolean {
    return this.list.some((w) => w.job.name === name);
  }

  /** Why the job's slot waits, or null when none does. */
  reasonOf(name: string): string | null {
    return this.list.find((w) => w.job.name === name)?.reason ?? null;
  }

  get size(): number {
    return this.list.length;
  }

  /** Every waiter, in turn; the list is left empty (a waiter refused again is added again). */
  drain(): Waiter[] {
    const out = this.list.sort(byTurn);
    this.list = [];
    return out;
  }
}
