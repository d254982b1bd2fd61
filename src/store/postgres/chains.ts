// Chains and the drain on PostgreSQL: the same operations as ../sqlite/chains.ts. Table-group
// functions: they run in their caller's transaction and never open one.
import type { Q } from "../pg-connection.js";
import { chainReason, drainDetail, type ChainRow, type DrainRow } from "../chain-rows.js";
import * as S from "../queries/chains.js";
import { POSTGRES } from "../queries/sql.js";
import { insertEvent } from "./events.js";

const SETTLED_CHAIN = S.settledChain(POSTGRES);

export async function pendingChains(q: Q): Promise<ChainRow[]> {
  return q.all<ChainRow>(S.PENDING_CHAINS);
}

/** See ../sqlite/chains.ts settleChains; the chain rows are locked, so two nodes settle one once. */
export async function settleChains(
  q: Q,
  list: readonly { job: string; slot: number }[],
): Promise<void> {
  for (const { job, slot } of list) {
    const ch = await q.get<ChainRow>(SETTLED_CHAIN, [job, slot]);
    if (!ch) continue;
    const reason = chainReason(ch.upstream, ch.upstream_run);
    await q.run(S.CHAINED_REASON, [reason, reason, job, slot]);
    await q.run(S.DELETE_CHAIN, [job, slot]);
  }
}

export async function drain(q: Q): Promise<DrainRow | null> {
  return (await q.get<DrainRow>(S.DRAIN)) ?? null;
}

export async function setDrain(q: Q, d: DrainRow | null, now: number): Promise<void> {
  if (d === null) {
    const had = (await q.run(S.END_DRAIN)) > 0;
    if (had) await insertEvent(q, now, null, "resumed", "drain ended (resume --all)");
    return;
  }
  await q.run(S.SET_DRAIN, [d.since, d.until, d.reason]);
  await insertEvent(q, now, null, "paused", drainDetail(d));
}
