// Named locks and concurrency groups (docs/locks.md, migration 013): what a reservation finds of
// the holds it asks for, and taking them for the run it starts. Called by reserveRun next to the
// job's lock, in its caller's BEGIN IMMEDIATE (which serialises every taker: the judgement and
// the take are one step). A hold is released by its run's end (no longer `running`): no write.
import type { Conn } from "../connection.js";
import type { HoldFacts, HoldRequest, LockHolder } from "../hold-rows.js";
import type { RunRow } from "../rows.js";
import { FORGET_ENDED_HOLDS } from "../queries/holds.js";

type Kind = "lock" | "group";

/**
 * The live runs holding `name`, after forgetting the rows of runs that ended and ending (via
 * `reap`: recorded `interrupted`, as the job's lock does) a holder whose processes and
 * supervisor are gone: a lock whose holder is dead is free at once.
 */
function liveHolders(
  c: Conn,
  kind: Kind,
  name: string,
  alive: (r: RunRow) => boolean,
  reap: (r: RunRow) => void,
): RunRow[] {
  c.q(FORGET_ENDED_HOLDS).run(kind, name);
  const rows = c
    .q(
      `SELECT r.* FROM holds h JOIN runs r ON r.id = h.run_id
       WHERE h.kind = ? AND h.name = ? ORDER BY r.id`,
    )
    .all(kind, name) as RunRow[];
  return rows.filter((r) => {
    if (alive(r)) return true;
    reap(r);
    return false;
  });
}

const holderOf = (r: RunRow): LockHolder => ({ job: r.job, runId: r.id, node: r.node ?? null });

/** Each named lock's live holder and the group's live runs, as `h.admit` is asked on. */
export function judgeHolds(
  c: Conn,
  h: HoldRequest,
  alive: (r: RunRow) => boolean,
  reap: (r: RunRow) => void,
): HoldFacts {
  return {
    locks: h.locks.map((name) => {
      const live = liveHolders(c, "lock", name, alive, reap)[0];
      return { name, holder: live === undefined ? null : holderOf(live) };
    }),
    group:
      h.group === null
        ? null
        : {
            ...h.group,
            running: liveHolders(c, "group", h.group.name, alive, reap).length,
          },
  };
}

/** The new run holds its named locks and its group until its end. */
export function takeHolds(c: Conn, runId: number, h: HoldRequest): void {
  const ins = c.q("INSERT INTO holds (kind, name, run_id) VALUES (?, ?, ?)");
  for (const name of h.locks) ins.run("lock", name, runId);
  if (h.group !== null) ins.run("group", h.group.name, runId);
}
