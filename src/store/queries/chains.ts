// Chains and the drain (migration 014): the statements both engines run (see sql.ts). Writing
// chain starts differs (PostgreSQL: in the statement that records the runs' ends).
import type { Dialect } from "./sql.js";

/**
 * The chain start of job $1's slot $2 once that slot has a disposition (locked on PostgreSQL, so
 * two nodes settle it once).
 */
export const settledChain = (d: Dialect): string =>
  `SELECT c.* FROM chains c WHERE c.job = $1 AND c.slot = $2
     AND EXISTS (SELECT 1 FROM slots s WHERE s.job = c.job AND s.slot = c.slot)${d.forUpdate}`;

export const PENDING_CHAINS = "SELECT * FROM chains ORDER BY created_at, job";
/** The chained run of a slot says what it follows ($1 and $2: the same text), ahead of its own. */
export const CHAINED_REASON = `UPDATE runs SET reason = CASE WHEN reason IS NULL THEN $1 ELSE $2 || '; ' || reason END
  WHERE job = $3 AND slot = $4 AND trigger = 'chained'`;
export const DELETE_CHAIN = "DELETE FROM chains WHERE job = $1 AND slot = $2";
export const DRAIN = "SELECT since, until, reason FROM drain WHERE id = 1";
export const END_DRAIN = "DELETE FROM drain WHERE id = 1";
export const SET_DRAIN = `INSERT INTO drain (id, since, until, reason) VALUES (1, $1, $2, $3)
  ON CONFLICT (id) DO UPDATE SET since = excluded.since, until = excluded.until,
    reason = excluded.reason`;
