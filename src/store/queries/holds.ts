// Named locks and concurrency groups (migration 013): the statements both engines run (see
// sql.ts). Judging a holder differs (PostgreSQL: another node's run by its lease; advisory locks
// per name), and so does taking holds (PostgreSQL: one statement for all).
import type { Dialect } from "./sql.js";

/** Forget the holds of kind $1 and name $2 whose runs have ended. */
export const FORGET_ENDED_HOLDS = `DELETE FROM holds WHERE kind = $1 AND name = $2 AND NOT EXISTS (
    SELECT 1 FROM runs r WHERE r.id = holds.run_id AND r.status = 'running')`;

/** Every hold of a running run, with its run (status: `locks` and `groups`). */
export const holdsHeld = (d: Dialect): string =>
  `SELECT h.kind AS hold_kind, h.name AS hold_name, r.* FROM holds h
   JOIN runs r ON r.id = h.run_id AND r.status = 'running' ORDER BY h.kind, h.name${d.bytewise}, r.id`;
