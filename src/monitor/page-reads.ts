// The status page's store reads, kept between pages. A page is the rows read from the store
// judged at `now`: the judgement (health, ages, the verdict) is made again for every page, but
// the rows are the same until someone commits. SQLite's `data_version` changes whenever another
// connection commits (the page's own connection is read-only), so the rows read at one version
// are exactly the rows a new read at that version would return. (A shared PostgreSQL store does
// not count its lease renewals in its data_version: there every page reads again, as below.)
//
// After a commit (on a daemon that beats every 10 s, most of them are its heartbeat, which
// changes no job), the read is incremental where that is cheaper and as exact as a whole read:
// the jobs' rows are read again only if a write to the jobs table has counted since (SQLite's
// job_writes, migration 007; the heartbeat writes none), and then a summary read back unchanged
// is not parsed again (SummaryParses); the daemon's row, the nodes, the running runs and the
// attempts are read again at every commit; the timelines ask only for what changed since the runs they saw
// (Store.timelineChanges: rows inserted since, the rows that were running, and per job the count
// of rows finished in the range, which tells a prune's deletions; a count that disagrees with
// the merged rows makes the page read them whole).
import type {
  StatusRows,
  StatusStore,
  Store,
  SummaryParses,
  TimelineChanges,
  TimelineRow,
} from "../store/store.js";

type Hashes = Awaited<ReturnType<Store["jobHashes"]>>;
type Timelines = Map<string, TimelineRow[]>;

/** A row on a timeline from `since`: running, or finished at or after it (as the query). */
const inRange = (r: TimelineRow, since: number): boolean =>
  r.status === "running" || (r.finished_at ?? -Infinity) >= since;

/** Rows finished at or after `since`: what timelineChanges counts. */
const finishedIn = (rows: readonly TimelineRow[], since: number): number =>
  rows.reduce((n, r) => (r.finished_at !== null && r.finished_at >= since ? n + 1 : n), 0);

/** The kept rows cut to a later `since`, as a new read would cut them. */
export function cutTimelines(kept: Timelines, since: number): Timelines {
  const out: Timelines = new Map();
  for (const [job, rows] of kept)
    out.set(
      job,
      rows.filter((r) => inRange(r, since)),
    );
  return out;
}

/**
 * Kept timelines brought up to date by the changes since (pure): a finished row never changes,
 * so each job's rows are its kept finished ones in range, replaced or joined by the rows read
 * again (those running then, as they are now, and those inserted since), oldest first. Null if
 * a job's count of rows finished in the range disagrees: rows were deleted (a prune), and the
 * caller reads the whole range again.
 */
export function mergeTimelines(
  kept: Timelines,
  changes: TimelineChanges,
  since: number,
): Timelines | null {
  const out: Timelines = new Map();
  for (const [job, rows] of kept) {
    const fresh = changes.rows.get(job);
    let list = rows.filter((r) => r.status !== "running" && inRange(r, since));
    if (fresh) {
      const byId = new Map(list.map((r) => [r.id, r]));
      for (const r of fresh) if (inRange(r, since)) byId.set(r.id, r);
      list = [...byId.values()].sort((a, b) => a.id - b.id);
    }
    if (finishedIn(list, since) !== (changes.finished.get(job) ?? 0)) return null;
    out.set(job, list);
  }
  return out;
}

interface KeptLines {
  key: string;
  since: number;
  /** The newest run id when the rows were read (or brought up to date). */
  maxId: number;
  /** The data_version they were brought up to date at (null: the store does not count). */
  version: number | null;
  rows: Timelines;
}

export class PageReads {
  /** The store's data_version the kept rows were read at; null: nothing is kept. */
  private version: number | null = null;
  private status: { key: string; rows: StatusRows } | null = null;
  private hashes: Hashes | null = null;
  private lines: KeptLines | null = null;
  /** The summaries as last parsed: kept across commits, as they are checked at each read. */
  private readonly parses: SummaryParses = { jobs: new Map() };

  constructor(readonly store: Store) {}

  /**
   * At the start of each page: forget what was kept if the store has changed since. The version
   * is read before any row, so kept rows are never older than the version they are kept under
   * (a commit between the two only makes the next page read again).
   */
  async check(): Promise<void> {
    const version = this.store.shared ? null : await this.store.dataVersion();
    if (version === null || version !== this.version) {
      this.status = null;
      this.hashes = null;
    }
    this.version = version;
  }

  /** The store as `buildStatus` reads it: its rows and the nodes' job hashes as kept. */
  statusStore(): StatusStore {
    const s = this.store;
    return {
      shared: s.shared,
      node: s.node,
      close: () => s.close(),
      isOpen: () => s.isOpen(),
      daemon: () => s.daemon(),
      runningConfig: () => s.runningConfig(),
      nodes: () => s.nodes(),
      runningRuns: (...a) => s.runningRuns(...a),
      history: (...a) => s.history(...a),
      jobReadings: (...a) => s.jobReadings(...a),
      holdsHeld: () => s.holdsHeld(),
      drain: () => s.drain(),
      jobHashes: async () => {
        const keep = this.version !== null;
        const hashes = (keep && this.hashes) || (await s.jobHashes());
        if (keep) this.hashes = hashes;
        return hashes;
      },
      statusRows: async (list, limit) => {
        const key = `${limit} ${JSON.stringify(list)}`;
        if (this.version !== null && this.status?.key === key) return this.status.rows;
        // Jobs gone from the config (a reload) leave no parse behind.
        if (this.parses.jobs.size > list.length) this.parses.jobs.clear();
        const rows = await s.statusRows(list, limit, this.parses);
        if (this.version !== null) this.status = { key, rows };
        return rows;
      },
    };
  }

  /**
   * Store.timelines, from the kept rows: as they are while the store is unchanged (the range only
   * moves forward with `now`, so they are cut in memory), brought up to date by the changes
   * since after a commit, and read whole for other jobs, a wider range or deleted rows.
   */
  async timelines(jobs: readonly string[], since: number): Promise<Timelines> {
    const key = JSON.stringify(jobs);
    const kept = this.lines;
    if (kept?.key !== key || kept.since > since) return this.readTimelines(jobs, since, key);
    if (this.version === null || kept.version !== this.version) {
      const running: number[] = [];
      for (const rows of kept.rows.values())
        for (const r of rows) if (r.status === "running") running.push(r.id);
      const changes = await this.store.timelineChanges(jobs, since, kept.maxId, running);
      if (!this.store.shared) for (const rows of changes.rows.values()) nodeless(rows);
      const rows = mergeTimelines(kept.rows, changes, since);
      if (rows === null) return this.readTimelines(jobs, since, key);
      this.lines = { key, since, maxId: changes.maxId, version: this.version, rows };
      return rows;
    }
    return cutTimelines(kept.rows, since);
  }

  private async readTimelines(jobs: readonly string[], since: number, key: string) {
    // The newest id first: a row committed between the two reads comes again with the next
    // changes (and replaces its copy), never goes missing.
    const { runId } = await this.store.maxIds();
    const rows = await this.store.timelines(jobs, since);
    if (!this.store.shared) for (const list of rows.values()) nodeless(list);
    this.lines = { key, since, maxId: runId, version: this.version, rows };
    return rows;
  }
}

/** One node has nothing to tell apart: a bar names its node only on a shared store. */
function nodeless(rows: TimelineRow[]): void {
  for (const r of rows) r.node = null;
}
