// Named locks and concurrency groups on PostgreSQL (docs/locks.md, migration 013): the same
// operations as ../sqlite/holds.ts, with the judgement of another node's run by its lease. Takers
// of one name serialise on a transaction-scoped advisory lock per name (`lockHoldNames`), taken
// by a tick before any row lock, all at once and in name order, so two ticks never wait on each
// other's names, and a name has no row that every tick writes. Table-group functions: they run
// in their caller's transaction and never open one.
import type { Q } from "../pg-connection.js";
import type { HoldFacts, HoldRequest, LockHolder } from "../hold-rows.js";
import type { Owner, ReserveOutcome, ReserveRequest, RunRow, TickWrite } from "../rows.js";
import { fenced, interrupted, runResult } from "../../core/result.js";
import { leaseLeft } from "./daemon.js";
import { finishRun } from "./runs.js";
import { FORGET_ENDED_HOLDS } from "../queries/holds.js";

type Kind = "lock" | "group";

/** The advisory keys of every hold a batch asks for: `lock:db`, `group:heavy`. */
export function holdKeys(items: readonly TickWrite[]): string[] {
  const keys = new Set<string>();
  for (const w of items) {
    const h = "reserve" in w ? w.reserve.holds : undefined;
    if (!h) continue;
    for (const name of h.locks) keys.add(`lock:${name}`);
    if (h.group !== null) keys.add(`group:${h.group.name}`);
  }
  return [...keys].sort();
}

/**
 * Wait for, then hold until the transaction ends, each name's advisory lock, in name order (one
 * statement; the sort is done before the locks are asked for).
 */
export async function lockHoldNames(q: Q, keys: readonly string[]): Promise<void> {
  if (keys.length === 0) return;
  await q.all(
    `SELECT count(pg_advisory_xact_lock(hashtextextended('cronvisor.hold:' || k, 0)))
     FROM (SELECT k FROM unnest($1::text[]) AS k ORDER BY k COLLATE "C") s`,
    [keys],
  );
}

/**
 * The live runs holding `name`. A run of this node is judged by its processes (`alive`), one of
 * another node by that node's lease. A dead one is ended (`interrupted`, or `fenced` when its
 * node's lease ran out: its marker writes are refused from then on) if its job's row can be
 * locked at once; a job row another transaction holds is never waited for here (that would
 * take a row lock after the names' locks), so its run counts as live until a later look.
 */
async function liveHolders(
  q: Q,
  kind: Kind,
  name: string,
  now: number,
  alive: (r: RunRow) => boolean,
  node: string,
  me: Owner,
): Promise<RunRow[]> {
  const rows = await q.all<RunRow>(
    `WITH gone AS (${FORGET_ENDED_HOLDS})
     SELECT r.* FROM holds h JOIN runs r ON r.id = h.run_id AND r.status = 'running'
     WHERE h.kind = $1 AND h.name = $2 ORDER BY r.id`,
    [kind, name],
  );
  const live: RunRow[] = [];
  for (const r of rows) {
    const elsewhere = r.node !== null && r.node !== node;
    if (!elsewhere && alive(r)) {
      live.push(r);
      continue;
    }
    const lease = elsewhere ? await leaseLeft(q, r.node as string, { node, me }) : null;
    const diedHere = lease !== null && lease.here && !alive(r);
    if ((lease !== null && !diedHere) || !(await reap(q, r, now, node, elsewhere))) live.push(r);
  }
  return live;
}

async function reap(q: Q, r: RunRow, now: number, node: string, elsewhere: boolean) {
  const locked = await q.get(`SELECT 1 FROM jobs WHERE name = $1 FOR UPDATE SKIP LOCKED`, [r.job]);
  if (locked === undefined) return false;
  const end = elsewhere
    ? fenced(`node ${r.node}'s lease ran out while it held a named lock; node ${node} took it`)
    : interrupted("its processes and supervisor died");
  await finishRun(
    q,
    r.id,
    runResult(end, r.started_at, now, { bytes: r.log_bytes ?? 0, truncated: false }),
  );
  return true;
}

const holderOf = (r: RunRow): LockHolder => ({ job: r.job, runId: r.id, node: r.node ?? null });

/** Each named lock's live holder and the group's live runs, as `h.admit` is asked on. */
export async function judgeHolds(
  q: Q,
  h: HoldRequest,
  now: number,
  alive: (r: RunRow) => boolean,
  node: string,
  me: Owner,
): Promise<HoldFacts> {
  const locks: HoldFacts["locks"] = [];
  for (const name of h.locks) {
    const live = (await liveHolders(q, "lock", name, now, alive, node, me))[0];
    locks.push({ name, holder: live === undefined ? null : holderOf(live) });
  }
  if (h.group === null) return { locks, group: null };
  const running = (await liveHolders(q, "group", h.group.name, now, alive, node, me)).length;
  return { locks, group: { ...h.group, running } };
}

/** The new run holds its named locks and its group until its end: one statement. */
export async function takeHolds(q: Q, runId: number, h: HoldRequest): Promise<void> {
  const kinds = [...h.locks.map(() => "lock"), ...(h.group ? ["group"] : [])];
  const names = [...h.locks, ...(h.group ? [h.group.name] : [])];
  await q.run(
    `INSERT INTO holds (kind, name, run_id)
     SELECT k, n, $3::bigint FROM unnest($1::text[], $2::text[]) AS t(k, n)`,
    [kinds, names, runId],
  );
}

/**
 * The named locks and group of a reservation, judged and admitted (HoldRequest.admit): null to
 * start, else the refusal; a skipped slot's disposition goes to `skip` (the batch's), and a waiting one's
 * claim is given back (its run starts later, when the hold is free, and claims it then).
 */
export async function admitHolds(
  q: Q,
  a: ReserveRequest,
  h: HoldRequest,
  now: number,
  node: string,
  skip: (reason: string) => void,
): Promise<ReserveOutcome | null> {
  const admission = h.admit(await judgeHolds(q, h, now, a.holderAlive, node, a.owner));
  if (admission.kind === "start") return null;
  if (a.claimSlot && a.slot !== null) {
    if (admission.kind === "skip") skip(admission.reason);
    else
      await q.run("DELETE FROM slots WHERE job = $1 AND slot = $2 AND run_id IS NULL", [
        a.job,
        a.slot,
      ]);
  }
  return { kind: "held", admission };
}
