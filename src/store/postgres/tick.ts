// A tick's writes on PostgreSQL (PgStore.reserveRuns, recordDispositions, reserveRun): a constant
// number of round trips however many jobs are due (BEGIN goes with the claim; the starts, one
// statement each, and the riders (the pids and ends of earlier runs) are all sent at once; the
// COMMIT goes with the last where its answer decides nothing). Every tick takes its locks in one
// order, so that the ticks of several nodes never deadlock: named locks' and groups' advisory
// locks (holds.ts), then the slots (one INSERT, in (job, slot) order, claimed by their unique
// key), then the rows of the jobs it acts on and of the riders' runs (FOR UPDATE in name order,
// in the same statement: claimAndLock). A node whose slots were all taken by another (and with no
// riders) locks no job row and writes nothing. A reservation still checks the lock and bumps the
// fence under the job's row lock, in the same transaction as its slot. Table-group functions:
// they run in their caller's transaction and never open one.
import type { Q } from "../pg-connection.js";
import type {
  ReserveOutcome,
  ReserveRequest,
  Riders,
  RunRow,
  SlotRecord,
  TickOutcome,
  TickWrite,
} from "../rows.js";
import { DB_NOW } from "./daemon.js";
import { admitHolds, holdKeys, lockHoldNames, takeHolds } from "./holds.js";
import { lockJobs } from "./jobs.js";
import { SET_LOG_PATH } from "../queries/runs.js";
import {
  lockHeldReason,
  reapDeadHolders,
  recordEnds,
  setRunProcesses,
  type LogTail,
} from "./runs.js";

/** A tick's riders (rows.ts Riders), with the ends' log tails read before the transaction. */
export interface TickRiders extends Riders {
  tails: readonly LogTail[];
}
const NO_RIDERS: TickRiders = { procs: [], ends: [], tails: [] };

const keyOf = (job: string, slot: number): string => `${job}\u0000${slot}`;
const nowOf = (a: ReserveRequest): number => (typeof a.now === "function" ? a.now() : a.now);

/** A row to write once the jobs are locked: a disposition whose slot this tick won. */
interface Disposed extends SlotRecord {
  at: number;
}

/**
 * The batch's writes in order: each slot claimed, then each job locked, then each reservation,
 * then the dispositions' rows and slot stamps. The outcomes are those of the same writes made one
 * after another (a slot twice in a batch: the first write gets it). `makeJobs`: a
 * disposition's job row is made if missing (else, as on SQLite, its slot stamp is not kept).
 * `whole`: these are all the transaction's writes, so its last statement may take the COMMIT.
 */
export async function writeTick(
  q: Q,
  items: readonly TickWrite[],
  node: string,
  makeJobs = false,
  whole = false,
  riders: TickRiders = NO_RIDERS,
): Promise<TickOutcome[]> {
  const first = new Map<string, number>();
  const claims: Claim[] = [];
  items.forEach((w, i) => {
    const c = claimOf(w);
    if (c === null || first.has(keyOf(c.job, c.slot))) return;
    first.set(keyOf(c.job, c.slot), i);
    claims.push({ ...c, yieldMs: "reserve" in w ? (w.reserve.yieldMs ?? null) : null });
  });
  const make = items.flatMap((w) =>
    "reserve" in w ? [w.reserve.job] : makeJobs ? [w.dispose.job] : [],
  );
  const slotless = items.flatMap((w) =>
    "reserve" in w && claimOf(w) === null ? [w.reserve.job] : [],
  );
  const riderIds = [...riders.procs.map((p) => p.runId), ...riders.ends.map((e) => e.runId)];
  // Named locks and groups first, before any row lock (postgres/holds.ts).
  await lockHoldNames(q, holdKeys(items));
  const { won, idle } = await claimAndLock(q, claims, make, slotless, riderIds, node);
  // The riders first (their jobs are locked with the claims' jobs, in the one name order): a
  // start below sees a run that exited as ended. Sent with the starts, one round trip.
  const ridden = Promise.all([
    setRunProcesses(q, riders.procs),
    recordEnds(q, riders.ends, riders.tails),
  ]);
  const wins = (w: TickWrite, i: number): boolean => {
    const c = claimOf(w);
    return c === null || (won.has(keyOf(c.job, c.slot)) && first.get(keyOf(c.job, c.slot)) === i);
  };
  const dups = items.some((w, i) => "reserve" in w && !wins(w, i));
  const out: (TickOutcome | null)[] = [];
  const disposed: Disposed[] = [];
  const starts: { i: number; a: ReserveRequest; now: number }[] = [];
  // With named locks or a group, the job's lock is judged first, then the holds, then the start,
  // one after another (admitHolds): after the others.
  const judged: { i: number; a: ReserveRequest; now: number }[] = [];
  for (const [i, w] of items.entries()) {
    if (!wins(w, i)) out.push(null);
    else if ("dispose" in w) {
      disposed.push({ ...w.dispose, at: w.now });
      out.push({ kind: "recorded", recorded: true });
    } else {
      // The clock read once the lock is held (see ReserveRequest.now).
      (w.reserve.holds ? judged : starts).push({ i, a: w.reserve, now: nowOf(w.reserve) });
      out.push(null);
    }
  }
  // Every start sent at once (one round trip however many: the server runs them in order, so a
  // second start of a job sees the first's run). The last may take the COMMIT with it if no
  // start can find the lock held: no lock asked for, or none of the job's runs was running under
  // the lock (and no earlier start of the job in this batch); and nothing follows (no
  // disposition, no taken slot to read).
  const sure = starts.every(
    ({ a }, n) =>
      !a.lock || (idle.has(a.job) && !starts.slice(0, n).some((x) => x.a.job === a.job)),
  );
  const commitWithLast = whole && sure && judged.length === 0 && disposed.length === 0 && !dups;
  const sent = starts.map(({ a, now }, n) =>
    start(q, a, now, node, a.lock, commitWithLast && n === starts.length - 1),
  );
  const runs = await Promise.all(sent);
  await ridden;
  // A start that found the lock held: the running runs judged (a dead node's taken over), one
  // job after another (rare: a run still running at its next slot).
  for (const [n, { i, a, now }] of starts.entries()) {
    const run = runs[n];
    out[i] =
      run !== undefined
        ? { kind: "started", run: await withLogPath(q, a, run) }
        : await reserveJudged(q, a, now, node, disposed);
  }
  for (const { i, a, now } of judged) out[i] = await reserveJudged(q, a, now, node, disposed);
  await writeDispositions(q, disposed, node, whole && !dups);
  return fillDuplicates(q, items, out, whole);
}

/** A slot to claim; `yieldMs`: not while a live node's run holds the job (ReserveRequest). */
interface Claim {
  job: string;
  slot: number;
  yieldMs: number | null;
}

function claimOf(w: TickWrite): { job: string; slot: number } | null {
  if ("dispose" in w) return { job: w.dispose.job, slot: w.dispose.slot };
  const a = w.reserve;
  return a.claimSlot && a.slot !== null ? { job: a.job, slot: a.slot } : null;
}

/**
 * Claim the slots and lock the jobs this tick then acts on, in one statement and in that order:
 * the slots not taken yet inserted (in key order), then the rows of the jobs whose slots were
 * won (and of the reservations that claim none) locked in name order (see jobs.lockJobs), `w`
 * being an aggregate of `won` that the lock waits for; the missing ones of `make` are made. A row
 * that another transaction made after this statement's snapshot is not seen by its SELECT (its
 * INSERT waited for that commit, then did nothing): those few are locked by a second statement,
 * with a fresh snapshot. Returns the keys of the slots this transaction won, and the locked jobs
 * known to have no running run (`idle`): none in the statement's snapshot, and the job's fence
 * as locked (the row's newest version, read once the lock is held) the same as in the snapshot.
 * Only a start makes a running run, and it bumps the fence under this lock: so none started
 * between the snapshot and the lock, and none can start before this transaction ends.
 */
async function claimAndLock(
  q: Q,
  claims: readonly Claim[],
  make: readonly string[],
  slotless: readonly string[],
  riderIds: readonly number[],
  node: string,
): Promise<{ won: Set<string>; idle: Set<string> }> {
  if (claims.length === 0 && slotless.length === 0 && riderIds.length === 0)
    return { won: new Set(), idle: new Set() };
  const rows = await q.all<{ k: string; job: string; slot: number | null; idle: boolean | null }>(
    `WITH won AS (
       INSERT INTO slots (job, slot, run_id)
       SELECT job, slot, NULL FROM unnest($1::text[], $2::bigint[], $6::bigint[]) AS c(job, slot, y)
       WHERE c.y IS NULL OR NOT EXISTS (
         SELECT 1 FROM runs r JOIN daemon d ON d.node = r.node
         WHERE r.job = c.job AND r.status = 'running' AND r.node <> $7
           AND d.renewed_at > ${DB_NOW} - c.y)
       ORDER BY job COLLATE "C", slot
       ON CONFLICT DO NOTHING RETURNING job, slot),
     w AS (SELECT array_agg(job) || $4::text[]
         || ARRAY(SELECT job FROM runs WHERE id = ANY($5::bigint[])) AS jobs FROM won),
     made AS (
       INSERT INTO jobs (name) SELECT DISTINCT n FROM unnest($3::text[]) AS n, w
       WHERE n = ANY(w.jobs) ON CONFLICT (name) DO NOTHING RETURNING name),
     locked AS (
       SELECT j.name, j.fence FROM jobs j, w WHERE j.name = ANY(w.jobs)
       ORDER BY j.name FOR UPDATE OF j),
     seen AS (
       SELECT j.name, j.fence,
         EXISTS (SELECT 1 FROM runs r WHERE r.job = j.name AND r.status = 'running') AS busy
       FROM jobs j, w WHERE j.name = ANY(w.jobs))
     SELECT 'won' AS k, job, slot, NULL::boolean AS idle FROM won
     UNION ALL SELECT 'have', name, NULL, NULL FROM made
     UNION ALL SELECT 'have', l.name, NULL, NOT s.busy AND s.fence = l.fence
       FROM locked l JOIN seen s ON s.name = l.name`,
    [
      claims.map((c) => c.job),
      claims.map((c) => c.slot),
      [...new Set(make)],
      [...new Set(slotless)],
      [...new Set(riderIds)],
      claims.map((c) => c.yieldMs),
      node,
    ],
  );
  const won = rows.filter((r) => r.k === "won");
  const have = new Set(rows.filter((r) => r.k === "have").map((r) => r.job));
  const unseen = [...new Set([...won.map((r) => r.job), ...slotless])].filter((n) => !have.has(n));
  if (unseen.length > 0) await lockJobs(q, unseen);
  return {
    won: new Set(won.map((r) => keyOf(r.job, r.slot as number))),
    idle: new Set(rows.filter((r) => r.idle === true).map((r) => r.job)),
  };
}

/**
 * Start the run in one statement: the fence bumped (and the slot stamp moved, and a new job's
 * first_seen_at set) on the job's row, unless a run of the job is running (when `guard`); the run
 * row inserted with its id and log path; the slot given its run. No row when a run is running.
 * The run's id is taken once the job's row is written (`n` waits for `f`), so the transaction
 * has its xid before the id: the readers' horizon rests on that (horizon.ts).
 */
const START = `WITH f AS (
    UPDATE jobs SET fence = fence + 1, first_seen_at = COALESCE(first_seen_at, $5::bigint),
      scanned_to = CASE WHEN $2::bigint IS NULL OR NOT $13::boolean THEN scanned_to
        ELSE GREATEST(COALESCE(scanned_to, 0), $2::bigint) END
    WHERE name = $1::text AND NOT ($12::boolean AND EXISTS (
      SELECT 1 FROM runs WHERE job = $1::text AND status = 'running'))
    RETURNING fence),
  n AS (SELECT nextval(pg_get_serial_sequence('runs', 'id')) AS id, fence FROM f),
  r AS (INSERT INTO runs (id, job, slot, trigger, status, attempt, started_at, fence, owner_pid,
      owner_start, progress_at, node, log_path)
    SELECT n.id, $1::text, $3::bigint, $4::text, 'running', $6::integer, $5::bigint, n.fence,
      $7::integer, $8::text, $5::bigint, $9::text, $10::text || n.id || $11::text FROM n
    RETURNING *),
  s AS (UPDATE slots SET run_id = r.id FROM r WHERE slots.job = $1::text AND slots.slot = $2::bigint)
SELECT * FROM r`;

/** Send the start (not awaited: see writeTick); `last`: the COMMIT goes behind it. */
function start(
  q: Q,
  a: ReserveRequest,
  now: number,
  node: string,
  guard: boolean,
  last = false,
): Promise<RunRow | undefined> {
  const slot = a.claimSlot ? a.slot : null;
  const parts = logPathParts(a.logPath);
  if (last && parts !== null) q.last();
  return q
    .send<RunRow>(START, [
      a.job,
      slot,
      a.slot,
      a.trigger,
      now,
      a.attempt,
      a.owner.pid,
      a.owner.start,
      node,
      parts?.[0] ?? null,
      parts?.[1] ?? null,
      guard,
      a.stamp !== false,
    ])
    .then((rows) => rows[0]);
}

/** A run whose log path is not of the text-around-the-id shape: written by a second UPDATE. */
async function withLogPath(q: Q, a: ReserveRequest, run: RunRow): Promise<RunRow> {
  if (logPathParts(a.logPath) !== null) return run;
  const log_path = a.logPath(run.id);
  return q.run(SET_LOG_PATH, [log_path, run.id]).then(() => ({ ...run, log_path }));
}

/**
 * A log path as text around the run's id, so the run's row is written with it in one statement
 * (the id is known only there); null when `logPath` is not of that shape (then a second UPDATE).
 */
export function logPathParts(logPath: (id: number) => string): [string, string] | null {
  const probe = (id: number): [string, string] | null => {
    const p = logPath(id);
    const at = p.indexOf(String(id));
    if (at < 0 || p.lastIndexOf(String(id)) !== at) return null;
    return [p.slice(0, at), p.slice(at + String(id).length)];
  };
  const a = probe(918273645);
  const b = probe(546372819);
  return a !== null && b !== null && a[0] === b[0] && a[1] === b[1] ? a : null;
}

/**
 * A reservation judged step by step (slot won, job row locked): its start found the lock held, or
 * it has named locks or a group. The running runs are judged (a dead holder's taken over), then
 * its holds (admitHolds); the run starts, or the slot is skipped (or, waiting, given back).
 */
async function reserveJudged(
  q: Q,
  a: ReserveRequest,
  now: number,
  node: string,
  disposed: Disposed[],
): Promise<ReserveOutcome> {
  const { held, tookOver } = a.lock
    ? await reapDeadHolders(q, a.job, now, a.holderAlive, node, a.owner)
    : { held: null, tookOver: [] };
  if (held) {
    const { holder, lease } = held;
    if (a.claimSlot && a.slot !== null && a.stamp === false) {
      // A backfill's slot stays free: the slot row this transaction claimed is given back.
      await q.run("DELETE FROM slots WHERE job = $1 AND slot = $2 AND run_id IS NULL", [
        a.job,
        a.slot,
      ]);
    } else if (a.claimSlot && a.slot !== null) {
      // Another node's run holds the lock by that node's lease: if the node is dead, the lock is
      // free when the lease ends, and the slot is caught up then (daemon/blocked.ts).
      const reason = lease
        ? lockHeldReason(lease, holder.id)
        : `overlap: run ${holder.id} holds the lock`;
      disposed.push({ job: a.job, slot: a.slot, status: "skipped", reason, at: now });
    }
    return lease ? { kind: "locked", holder, lease } : { kind: "locked", holder };
  }
  if (a.holds) {
    const refused = await admitHolds(q, a, a.holds, now, node, (reason) => {
      if (a.slot !== null)
        disposed.push({ job: a.job, slot: a.slot, status: "skipped", reason, at: now });
    });
    if (refused) return refused;
  }
  const taken = await withLogPath(q, a, (await start(q, a, now, node, false)) as RunRow);
  if (a.holds) await takeHolds(q, taken.id, a.holds);
  return tookOver.length > 0
    ? { kind: "started", run: taken, tookOver }
    : { kind: "started", run: taken };
}

/**
 * The run rows of the dispositions, and their jobs' slot stamps: one statement, with the COMMIT
 * when it is the transaction's `last`.
 */
async function writeDispositions(q: Q, d: readonly Disposed[], node: string, last: boolean) {
  if (d.length === 0) return;
  if (last) q.last();
  await q.run(
    `WITH d AS (
       SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[])
         WITH ORDINALITY AS d(job, slot, status, reason, at, i)),
     r AS (INSERT INTO runs (job, slot, trigger, status, reason, attempt, started_at,
         finished_at, duration_ms, node)
       SELECT job, slot, 'schedule', status, reason, 1, at, at, 0, $6::text FROM d ORDER BY i)
     UPDATE jobs SET scanned_to = GREATEST(COALESCE(jobs.scanned_to, 0), m.slot)
     FROM (SELECT job, MAX(slot) AS slot FROM d GROUP BY job) m WHERE jobs.name = m.job`,
    [
      d.map((x) => x.job),
      d.map((x) => x.slot),
      d.map((x) => x.status),
      d.map((x) => x.reason),
      d.map((x) => x.at),
      node,
    ],
  );
}

/** The writes whose slot was taken: `duplicate` (with the slot's run) or not recorded. */
async function fillDuplicates(
  q: Q,
  items: readonly TickWrite[],
  out: readonly (TickOutcome | null)[],
  last: boolean,
): Promise<TickOutcome[]> {
  const dup = items.filter((w, i) => out[i] === null && "reserve" in w).map((w) => claimOf(w));
  const runOf = new Map<string, number | null>();
  if (dup.length > 0) {
    if (last) q.last(); // a read the outcomes only report
    const rows = await q.all<{ job: string; slot: number; run_id: number | null }>(
      `SELECT s.job, s.slot, s.run_id FROM slots s
       JOIN unnest($1::text[], $2::bigint[]) AS c(job, slot) ON s.job = c.job AND s.slot = c.slot`,
      [dup.map((c) => c?.job), dup.map((c) => c?.slot)],
    );
    for (const r of rows) runOf.set(keyOf(r.job, r.slot), r.run_id);
  }
  // No slot row at all: nobody claimed it, this claim gave way to a live node's run (yieldMs).
  return items.map((w, i): TickOutcome => {
    const o = out[i];
    if (o !== null && o !== undefined) return o;
    if ("dispose" in w) return { kind: "recorded", recorded: false };
    const c = claimOf(w) as { job: string; slot: number };
    const k = keyOf(c.job, c.slot);
    return runOf.has(k) || w.reserve.yieldMs === undefined
      ? { kind: "duplicate", slotRunId: runOf.get(k) ?? null }
      : { kind: "duplicate", slotRunId: null, yielded: true };
  });
}
