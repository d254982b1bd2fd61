// One connection to the SQLite store: open (create or require), pragmas, integrity check and
// migrations. WAL and synchronous=FULL: a commit is on disk when the call returns. Writes use
// BEGIN IMMEDIATE so two processes (the daemon, `cronvisor run`, `mark`) serialise on the write
// lock instead of failing half-way.
//
// The transaction rule: `Conn.write` and `Conn.read` are called only by a whole store operation
// (a SqliteStore method, a Markers method); the table-group functions in ./sqlite/ take a Conn
// and run in their caller's transaction, never opening one. A nested call throws, so a helper
// that opens its own transaction by mistake fails its first test instead of committing half a
// batch.
import type Database from "better-sqlite3";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { StoreError } from "./errors.js";
import { migrate } from "./migrate.js";

export { StoreError };

export const STORE_FILE = "cronvisor.db";

/**
 * better-sqlite3, loaded when a connection is first opened, not when this module is imported:
 * the in-job marker client (markers-cli.ts through the broker) imports the marker code but never
 * opens the store, and must not pay for (or need to read) the native module.
 */
let sqlite: typeof Database | null = null;
function loadSqlite(): typeof Database {
  sqlite ??= createRequire(import.meta.url)("better-sqlite3") as typeof Database;
  return sqlite;
}

export interface OpenOptions {
  /** Create the state dir and store if missing (the daemon and `run` do; readers don't). */
  create: boolean;
  /** Milliseconds a writer waits for another writer before SQLITE_BUSY. */
  busyTimeoutMs?: number;
  readonly?: boolean;
  /** Run PRAGMA quick_check at open (the daemon does; a CLI call inside a job must be fast). */
  check?: boolean;
}

export function storePath(stateDir: string): string {
  return path.join(stateDir, STORE_FILE);
}

export class Conn {
  private readonly stmts = new Map<string, Database.Statement>();

  constructor(readonly raw: Database.Database) {}

  /** A prepared statement, cached: the same SQL is compiled once per connection. `rows`: as arrays. */
  q(sql: string, arrays = false): Database.Statement {
    let s = this.stmts.get(sql);
    if (!s) {
      s = this.raw.prepare(sql);
      if (arrays) s.raw(true);
      this.stmts.set(sql, s);
    }
    return s;
  }

  /** Run fn as one BEGIN IMMEDIATE transaction. fn is synchronous: never pass an async function. */
  write<T>(fn: () => T): T {
    this.assertOutside();
    return this.raw.transaction(fn).immediate();
  }

  /** Run fn with every read in it seeing one snapshot (a deferred transaction). */
  read<T>(fn: () => T): T {
    this.assertOutside();
    return this.raw.transaction(fn).deferred();
  }

  /** Commit one write without waiting for fsync (synchronous=NORMAL for this commit only). */
  writeUnsynced<T>(fn: () => T): T {
    this.raw.pragma("synchronous = NORMAL");
    try {
      return this.write(fn);
    } finally {
      this.raw.pragma("synchronous = FULL");
    }
  }

  get open(): boolean {
    return this.raw.open;
  }

  close(): void {
    if (this.raw.open) this.raw.close();
  }

  private assertOutside(): void {
    if (this.raw.inTransaction)
      throw new Error("store: a transaction was opened inside another (one per store operation)");
  }
}

/**
 * Open the store. Never replaces a store that fails to open or check: a corrupt or unreadable
 * file is left untouched and reported, because an empty store would forget every marker.
 */
export function openConn(stateDir: string, opts: OpenOptions): Conn {
  const file = storePath(stateDir);
  const exists = storeExists(file);
  if (!exists && !opts.create) {
    throw new StoreError(
      `no state store at ${file} (has the daemon or a run ever started?)`,
      "missing",
    );
  }
  if (!exists) fs.mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const db = connect(file, exists, opts);
  try {
    if (opts.check) quickCheck(db, file);
    if (!opts.readonly) migrate(db);
  } catch (e) {
    try {
      db.close();
    } catch {
      // already closed
    }
    if (e instanceof StoreError) throw e;
    throw openFailure(file, e);
  }
  return new Conn(db);
}

/** Is there a store file? A state dir we may not enter is an error, not "no store". */
function storeExists(file: string): boolean {
  try {
    fs.statSync(file);
    return true;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return false;
    throw new StoreError(`cannot read state store ${file}: ${code ?? (e as Error).message}`, "io");
  }
}

function connect(file: string, exists: boolean, opts: OpenOptions): Database.Database {
  try {
    // The store is created 0600 (SQLite gives its WAL the store's mode): runs and markers may
    // say more than they should. Only when creating: a worker thread (the marker broker) opens
    // an existing store and may not set the umask.
    const oldMask = exists ? null : process.umask(0o077);
    let db: Database.Database;
    try {
      const Sqlite = loadSqlite();
      db = new Sqlite(file, { readonly: opts.readonly ?? false, fileMustExist: exists });
    } finally {
      if (oldMask !== null) process.umask(oldMask);
    }
    db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 5000}`);
    if (!opts.readonly) db.pragma("journal_mode = WAL");
    // better-sqlite3 keeps NORMAL on a database already in WAL mode: set FULL on every connection.
    db.pragma("synchronous = FULL");
    db.pragma("foreign_keys = OFF");
    return db;
  } catch (e) {
    throw openFailure(file, e);
  }
}

function quickCheck(db: Database.Database, file: string): void {
  const rows = db.pragma("quick_check") as { quick_check: string }[];
  const bad = rows.map((r) => r.quick_check).filter((m) => m !== "ok");
  if (bad.length > 0) {
    throw new StoreError(
      `state store ${file} failed its integrity check (${bad.slice(0, 3).join("; ")}); it was left untouched: restore it from a backup or move it away`,
      "corrupt",
    );
  }
}

function openFailure(file: string, e: unknown): StoreError {
  const err = e as { code?: string; message?: string };
  const msg = err.message ?? String(e);
  if (err.code === "SQLITE_NOTADB" || err.code === "SQLITE_CORRUPT") {
    return new StoreError(
      `state store ${file} is not a valid database (${msg}); it was left untouched: restore it from a backup or move it away`,
      "corrupt",
    );
  }
  if (err.code === "SQLITE_BUSY")
    return new StoreError(`state store ${file} is busy: ${msg}`, "busy");
  return new StoreError(`cannot open state store ${file}: ${msg}`, "io");
}
