// Which run and event ids are final, for the readers that follow new rows by id (the monitor's
// jobsChangedSince, the page's timelineChanges): an id is taken from its sequence when the row is
// inserted, not when it commits, so a reader that saw id N may later see a lower one commit.
// No writer takes a global lock to keep ids in commit order (that row would make the writers of
// every node commit one at a time); instead the reader tells from snapshots when every
// transaction that could still hold a lower id has ended, and moves its cursor only that far
// (rows past it are read again next time: the readers take a row twice as the same row).
//
// The facts: every writer of runs and events has its transaction id (xid) before it takes a row
// id (its statement writes a row first, or calls pg_current_xact_id(): tick.ts, events.ts). So
// the holders of ids up to a sequence value read at time t all have xids below the xmax of any
// snapshot taken after t; once a snapshot's xmin is at or past that xmax, they have all ended,
// and every id up to the value is final (committed and visible, or never to be). And a snapshot
// with no transaction in progress (xmin = xmax) makes every id below its newest visible one final.
import type { Q } from "../pg-connection.js";

/** A read's facts: its snapshot's bounds and the sequences' values read after it. */
export interface SnapshotFacts {
  xmin: number;
  xmax: number;
  runSeq: number;
  eventSeq: number;
}

/** Columns a read adds to one of its rows (a statement's one snapshot): see SnapshotFacts. */
export const SNAPSHOT_COLUMNS = `pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin,
  pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax,
  COALESCE(pg_sequence_last_value(pg_get_serial_sequence('runs', 'id')), 0) AS run_seq,
  COALESCE(pg_sequence_last_value(pg_get_serial_sequence('events', 'id')), 0) AS event_seq`;

export interface Final {
  runs: number;
  events: number;
}

interface Waiting {
  runSeq: number;
  eventSeq: number;
  /** The xmax of a snapshot taken after the values were read (null: none yet). */
  after: number | null;
}

/** At most this many reads wait to become final (more only make the cursors lag). */
const MAX_WAITING = 64;

/** The ids known final, as the reads of one process learn them. */
export class IdHorizon {
  private waiting: Waiting[] = [];
  private final: Final = { runs: 0, events: 0 };

  /** Call before a read's statement is sent: the reads that had answered by then. */
  before(): Waiting[] {
    return [...this.waiting];
  }

  /**
   * A read's facts, with `earlier` from before(): the ids final now. `seen`: the newest ids the
   * read saw (final too when nothing was in progress at its snapshot).
   */
  learn(earlier: readonly Waiting[], f: SnapshotFacts, seen: Final): Final {
    for (const w of earlier) w.after ??= f.xmax;
    const open: Waiting[] = [];
    for (const w of this.waiting) {
      if (w.after !== null && w.after <= f.xmin) {
        this.final.runs = Math.max(this.final.runs, w.runSeq);
        this.final.events = Math.max(this.final.events, w.eventSeq);
      } else open.push(w);
    }
    if (f.xmin === f.xmax) {
      this.final.runs = Math.max(this.final.runs, seen.runs);
      this.final.events = Math.max(this.final.events, seen.events);
    }
    if (open.length < MAX_WAITING)
      open.push({ runSeq: f.runSeq, eventSeq: f.eventSeq, after: null });
    this.waiting = open;
    return { ...this.final };
  }
}

/** A cursor moved to the newest id seen, but not past the final ones (and never back). */
export function advance(from: number, seen: number, final: number): number {
  return Math.max(from, Math.min(seen, final));
}

/** A row that carries SNAPSHOT_COLUMNS. */
export type SnapshotRow = { xmin: number; xmax: number; run_seq: number; event_seq: number };

/** The facts of a row that carries SNAPSHOT_COLUMNS. */
export function factsOf(r: SnapshotRow): SnapshotFacts {
  return { xmin: r.xmin, xmax: r.xmax, runSeq: r.run_seq, eventSeq: r.event_seq };
}

/** The newest run and event ids, and the snapshot's facts: one statement. */
export async function maxIdsWithFacts(q: Q): Promise<{ seen: Final; facts: SnapshotFacts }> {
  type Row = SnapshotRow & { runs: number; events: number };
  // Subqueries of no table: always one row.
  const r = (await q.get<Row>(
    `SELECT (SELECT COALESCE(MAX(id), 0) FROM runs) AS runs,
       (SELECT COALESCE(MAX(id), 0) FROM events) AS events, ${SNAPSHOT_COLUMNS}`,
  )) as Row;
  return { seen: { runs: r.runs, events: r.events }, facts: factsOf(r) };
}
