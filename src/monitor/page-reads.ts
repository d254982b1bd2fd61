// The status page's store reads, kept while the store has not changed. A page is the rows read
// from the store judged at `now`: the judgement (health, ages, the verdict) is made again for
// every page, but the rows are the same until someone commits. SQLite's `data_version` changes
// whenever another connection commits (the page's own connection is read-only), so the rows read
// at one version are exactly the rows a new read at that version would return. A client that
// reloads the page every second, on a daemon that beats every 10 s, then reads 1,000 jobs' rows
// once per beat instead of once per load. (A shared PostgreSQL store does not count its lease
// renewals in its data_version, so there every page reads everything again.)
import type { StatusRows, StatusStore, Store, TimelineRow } from "../store/store.js";

type Hashes = Awaited<ReturnType<Store["jobHashes"]>>;
type Timelines = Map<string, TimelineRow[]>;

export class PageReads {
  /** The store's data_version the kept rows were read at; null: nothing is kept. */
  private version: number | null = null;
  private status: { key: string; rows: StatusRows } | null = null;
  private hashes: Hashes | null = null;
  private lines: { key: string; since: number; rows: Timelines } | null = null;

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
      this.lines = null;
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
      jobHashes: async () => {
        const keep = this.version !== null;
        const hashes = (keep && this.hashes) || (await s.jobHashes());
        if (keep) this.hashes = hashes;
        return hashes;
      },
      statusRows: async (list, limit) => {
        const key = `${limit} ${JSON.stringify(list)}`;
        if (this.version !== null && this.status?.key === key) return this.status.rows;
        const rows = await s.statusRows(list, limit);
        if (this.version !== null) this.status = { key, rows };
        return rows;
      },
    };
  }

  /**
   * Store.timelines: rows kept for the same jobs from an earlier `since` are a superset (the
   * range only moves forward with `now`), so those finished before `since` are dropped here.
   */
  async timelines(jobs: readonly string[], since: number): Promise<Timelines> {
    const key = JSON.stringify(jobs);
    const kept = this.lines;
    if (this.version !== null && kept?.key === key && kept.since <= since) {
      const out: Timelines = new Map();
      for (const [job, rows] of kept.rows)
        out.set(
          job,
          rows.filter((r) => r.status === "running" || (r.finished_at ?? -Infinity) >= since),
        );
      return out;
    }
    const rows = await this.store.timelines(jobs, since);
    // One node has nothing to tell apart: a bar names its node only on a shared store.
    if (!this.store.shared) for (const list of rows.values()) for (const r of list) r.node = null;
    if (this.version !== null) this.lines = { key, since, rows };
    return rows;
  }
}
