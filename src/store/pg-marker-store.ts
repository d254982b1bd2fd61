// The marker path on PostgreSQL (`mark`, `check`, `once`, `progress`): the connection and the
// markers table group only. PgStore extends it with the rest. Each method is one whole
// transaction (or one statement), as everywhere in the store; each write first takes the job's
// row lock (postgres/jobs.ts, lockJobs), then the run's, in that order everywhere.
import type { MarkerStore } from "./interface.js";
import { openPgConn, type PgConn, type PgOpenOptions } from "./pg-connection.js";
import type { Alive, MarkerWriter, Owner } from "./rows.js";
import { lockJobs } from "./postgres/jobs.js";
import * as markers from "./postgres/markers.js";

export class PgMarkerStore implements MarkerStore {
  protected constructor(protected readonly c: PgConn) {}

  /** Several nodes share a PostgreSQL store (see Store.shared). */
  get shared(): boolean {
    return true;
  }

  isOpen(): boolean {
    return this.c.open;
  }

  /** The node this connection writes as. */
  get node(): string {
    return this.c.node;
  }

  /** Open the marker path of the store at `url`. */
  static async openMarkers(url: string, opts: PgOpenOptions): Promise<PgMarkerStore> {
    return new PgMarkerStore(await openPgConn(url, opts));
  }

  async close(): Promise<void> {
    await this.c.close();
  }

  async isDone(w: MarkerWriter, key: string) {
    // A read; only a done key inside a run writes (its skip count).
    const done = await markers.isMarked(this.c.one, w.job, key);
    if (done && w.run) {
      const id = w.run.id;
      await this.c.write((q) => markers.countSkipped(q, id));
    }
    return done;
  }

  async markDone(w: MarkerWriter, keys: readonly string[], now: number) {
    return this.c.write(async (q) => {
      await lockJobs(q, [w.job]);
      return markers.markKeys(q, w, keys, now);
    });
  }

  async takeClaim(w: MarkerWriter, key: string, me: Owner, now: number, alive: Alive) {
    return this.c.write(async (q) => {
      await lockJobs(q, [w.job]);
      return markers.takeClaim(q, w, key, me, now, alive, this.c.node);
    });
  }

  async completeClaim(w: MarkerWriter, key: string, pid: number, now: number) {
    return this.c.write(async (q) => {
      await lockJobs(q, [w.job]);
      return markers.completeClaim(q, w, key, pid, now);
    });
  }

  async releaseClaim(job: string, key: string, pid: number) {
    await this.c.write((q) => markers.dropClaim(q, job, key, pid));
  }

  async setClaimCommand(
    job: string,
    key: string,
    pid: number,
    cmdPid: number,
    cmdStart: string | null,
  ) {
    await this.c.write((q) => markers.setClaimCommand(q, job, key, pid, cmdPid, cmdStart), {
      unsynced: true,
    });
  }

  async reportProgress(w: MarkerWriter, message: string | null, now: number) {
    return this.c.write(async (q) => {
      await lockJobs(q, [w.job]);
      return markers.progressIfLive(q, w, message, now);
    });
  }
}
