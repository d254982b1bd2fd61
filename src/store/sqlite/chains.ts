// Chains and the drain on SQLite (migration 014). Table-group functions: they run in their
// caller's transaction and never open one.
import type { Conn } from "../connection.js";
import {
  chainReason,
  drainDetail,
  type ChainRow,
  type ChainStart,
  type DrainRow,
} from "../chain-rows.js";
import * as S from "../queries/chains.js";
import { SQLITE } from "../queries/sql.js";
import { insertEvent } from "./events.js";

const SETTLED_CHAIN = S.settledChain(SQLITE);

/** Downstream starts, written with the upstream run's end (a start already written stays). */
export function insertChains(c: Conn, list: readonly ChainStart[], now: number): void {
  for (const ch of list)
    c.q(
      `INSERT INTO chains (job, slot, upstream, upstream_run, created_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT DO NOTHING`,
    ).run(ch.job, ch.slot, ch.upstream, ch.upstreamRun, now);
}

/** Every chain start not yet settled, oldest first. */
export function pendingChains(c: Conn): ChainRow[] {
  return c.q(S.PENDING_CHAINS).all() as ChainRow[];
}

/**
 * The chain starts among `list` whose downstream slot now has a disposition: the chained run of
 * that slot (if one started) says what it follows, and the start is gone. A start whose slot has
 * none yet (its write failed, or it waits in a queue) stays for the next look.
 */
export function settleChains(c: Conn, list: readonly { job: string; slot: number }[]): void {
  for (const { job, slot } of list) {
    const ch = c.q(SETTLED_CHAIN).get(job, slot) as ChainRow | undefined;
    if (!ch) continue;
    const reason = chainReason(ch.upstream, ch.upstream_run);
    c.q(S.CHAINED_REASON).run(reason, reason, job, slot);
    c.q(S.DELETE_CHAIN).run(job, slot);
  }
}

/** Set (or, with null, end) the drain, with an event saying so. */
export function setDrain(c: Conn, d: DrainRow | null, now: number): void {
  if (d === null) {
    const had = c.q(S.END_DRAIN).run().changes > 0;
    if (had) insertEvent(c, now, null, "resumed", "drain ended (resume --all)");
    return;
  }
  c.q(S.SET_DRAIN).run(d.since, d.until, d.reason);
  insertEvent(c, now, null, "paused", drainDetail(d));
}
