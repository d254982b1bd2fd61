// Chains and the drain on PostgreSQL (migration 014): a layer of PgStore of their own, between
// the reads and the rest. Each method is one transaction or one statement.
import type { PgConn } from "./pg-connection.js";
import { PgReadStore } from "./pg-read-store.js";
import type { DrainRow } from "./chain-rows.js";
import * as chains from "./postgres/chains.js";

export class PgChainStore extends PgReadStore {
  protected constructor(c: PgConn) {
    super(c);
  }

  async pendingChains() {
    return chains.pendingChains(this.c.one);
  }

  async settleChains(list: readonly { job: string; slot: number }[]) {
    if (list.length === 0) return;
    await this.c.write((q) => chains.settleChains(q, list));
  }

  async drain() {
    return chains.drain(this.c.one);
  }

  async setDrain(d: DrainRow | null, now: number) {
    await this.c.write((q) => chains.setDrain(q, d, now));
  }
}
