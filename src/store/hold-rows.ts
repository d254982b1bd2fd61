// The row types of named locks and concurrency groups (docs/locks.md, migration 013), beside
// rows.ts (store.ts re-exports both): what a reservation asks to hold, what it found, and the
// decision it asks for (daemon/admit.ts makes it). Types only, importing nothing.

/**
 * What a run holds besides its job's lock: its named locks (sorted: the order they are taken in)
 * and its group. The store judges them inside the reservation's transaction, asks `admit`, and
 * takes them with the run's start; they are released by the run's end.
 */
export interface HoldRequest {
  locks: readonly string[];
  group: { name: string; maxRunning: number } | null;
  /** The decision (daemon/admit.ts) on what the store found, inside the same transaction. */
  admit: (facts: HoldFacts) => Admission;
}

/** A live run holding a named lock (another node's judged by that node's lease). */
export interface LockHolder {
  job: string;
  runId: number;
  node: string | null;
}

/** What a reservation found of its holds: each lock's live holder, the group's live runs. */
export interface HoldFacts {
  locks: { name: string; holder: LockHolder | null }[];
  group: { name: string; running: number; maxRunning: number } | null;
}

export type Admission =
  | { kind: "start" }
  /** Not now: the caller keeps the run waiting for a hold (nothing is recorded). */
  | { kind: "wait"; reason: string }
  /** Not at all: a claimed slot is recorded `skipped` with this reason. */
  | { kind: "skip"; reason: string };
