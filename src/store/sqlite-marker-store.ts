// The marker path on SQLite (`mark`, `check`, `once`, `progress` inside a job): the connection
// and the markers table group only, so a `mark` call loads no other store module. SqliteStore
// extends it with the rest. Each method is one whole transaction, as everywhere in the store.
import os from "node:os";
import { openConn, type Conn, type OpenOptions } from "./connection.js";
import type { MarkerStore } from "./interface.js";
import type { Alive, MarkerWriter, Owner } from "./rows.js";
import * as markers from "./sqlite/markers.js";

export class SqliteMarkerStore implements MarkerStore {
  protected constructor(
    protected readonly c: Conn,
    /** The node this connection writes as (its claims' `node`). */
    readonly node: string,
  ) {}

  /** Open (synchronously: SQLite opens a local file) the marker path of a state dir's store. */
  static openMarkers(stateDir: string, opts: OpenOptions): SqliteMarkerStore {
    return new SqliteMarkerStore(openConn(stateDir, opts), opts.node ?? os.hostname());
  }

  async close(): Promise<void> {
    this.c.close();
  }

  async isDone(w: MarkerWriter, key: string) {
    // A read; only a done key inside a run writes (its skip count), so `check` takes the write
    // lock only when it has something to count.
    const done = markers.isMarked(this.c, w.job, key);
    if (done && w.run) this.c.write(() => markers.countSkipped(this.c, w.run?.id ?? null));
    return done;
  }

  async markDone(w: MarkerWriter, keys: readonly string[], now: number) {
    return this.c.write(() => markers.markKeys(this.c, w, keys, now));
  }

  async takeClaim(w: MarkerWriter, key: string, me: Owner, now: number, alive: Alive) {
    return this.c.write(() => markers.takeClaim(this.c, w, key, me, now, alive, this.node));
  }

  async completeClaim(w: MarkerWriter, key: string, pid: number, now: number) {
    return this.c.write(() => markers.completeClaim(this.c, w, key, pid, now));
  }

  async releaseClaim(job: string, key: string, pid: number) {
    this.c.write(() => markers.dropClaim(this.c, job, key, pid));
  }

  async setClaimCommand(
    job: string,
    key: string,
    pid: number,
    cmdPid: number,
    cmdStart: string | null,
  ) {
    this.c.writeUnsynced(() => markers.setClaimCommand(this.c, job, key, pid, cmdPid, cmdStart));
  }

  async reportProgress(w: MarkerWriter, message: string | null, now: number) {
    return this.c.write(() => markers.progressIfLive(this.c, w, message, now));
  }
}
