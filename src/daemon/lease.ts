// A node's lease on a shared store (PostgreSQL): renewed by every beat, judged by other nodes by
// the database's clock (store/postgres/daemon.ts). A node that cannot renew it fences itself
// before it runs out: it starts nothing and stops its runs, so that when another node takes a
// job over, the old run is already dead (unless this node was frozen, when only the fence
// protects: its marker writes are refused once the job is taken over).
//
// The decisions are pure functions of the lease, the time the last successful renewal *began*
// (a renewal that began at t was committed by the store at or after t, so the lease runs at least
// to t + lease) and `now`, all on the monotonic clock: a step of the wall clock moves nothing.

/** How often a node renews: every beat, and at least three times per lease. */
export function renewEveryMs(heartbeatMs: number, leaseMs: number): number {
  return Math.max(100, Math.min(heartbeatMs, Math.floor(leaseMs / 3)));
}

/** A node fences itself once this much of its lease has gone by without a renewal. */
export function fenceAfterMs(leaseMs: number): number {
  return Math.floor((leaseMs * 2) / 3);
}

/**
 * The grace between SIGTERM and SIGKILL for a run stopped by the fence: the job's kill_grace, but
 * short enough that its processes are dead before the lease runs out (a sixth of it is left).
 */
export function fenceGraceMs(killGraceMs: number, leaseMs: number): number {
  return Math.min(killGraceMs, Math.floor(leaseMs / 6));
}

/** Does the node fence itself now? `renewedFrom`: when its last successful renewal began. */
export function mustFence(renewedFrom: number, now: number, leaseMs: number): boolean {
  return now - renewedFrom >= fenceAfterMs(leaseMs);
}
