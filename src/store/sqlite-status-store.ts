// What `status` reads on SQLite: the marker path (its base) plus the daemon, history, jobs and
// status-read table groups, so that a status call loads no module of the writes it never makes
// (runs, events) nor `why`'s reads. SqliteStore extends it with the rest. Each method is one
// whole transaction or one statement, as everywhere in the store.
import type Database from "better-sqlite3";
import os from "node:os";
import { openConn, type Conn, type OpenOptions } from "./connection.js";
import type { StatusStore } from "./interface.js";
import type { StatusJob, SummaryParses } from "./status-rows.js";
import { SqliteMarkerStore } from "./sqlite-marker-store.js";
import * as daemon from "./sqlite/daemon.js";
import * as history from "./sqlite/history.js";
import * as status from "./sqlite/status.js";

export class SqliteStatusStore extends SqliteMarkerStore implements StatusStore {
  /** One machine, one node: every run and claim is judged by its processes here. */
  readonly shared = false;

  protected constructor(c: Conn, node: string) {
    super(c, node);
  }

  /** Open (synchronously) a state dir's store for what `status` reads. */
  static openStatus(stateDir: string, opts: OpenOptions): SqliteStatusStore {
    return new SqliteStatusStore(openConn(stateDir, opts), opts.node ?? os.hostname());
  }

  /** The connection itself, for tests and tools that write raw SQL. */
  get db(): Database.Database {
    return this.c.raw;
  }

  isOpen(): boolean {
    return this.c.open;
  }

  /** See Conn.changedSinceOpen: true when what was read may mix two states of the file. */
  changedSinceOpen(): boolean {
    return this.c.changedSinceOpen();
  }

  async daemon() {
    return daemon.daemonRow(this.c);
  }

  async runningConfig() {
    return daemon.runningConfig(this.c);
  }

  async nodes() {
    return daemon.nodes(this.c, Date.now());
  }

  async jobHashes() {
    return daemon.jobHashes(this.c);
  }

  async runningRuns(job?: string) {
    return history.runningRuns(this.c, job);
  }

  async history(job: string | null, limit: number) {
    return history.history(this.c, job, limit);
  }

  async jobReadings(job: string, repeatLimit: number) {
    return this.c.read(() => status.jobReadings(this.c, job, repeatLimit));
  }

  async drain() {
    return status.drain(this.c);
  }

  async statusRows(list: readonly StatusJob[], recentLimit: number, parses?: SummaryParses) {
    return this.c.read(() => status.statusRows(this.c, list, recentLimit, parses));
  }

  async holdsHeld() {
    return status.holdsHeld(this.c);
  }
}
