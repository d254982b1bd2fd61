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
import fs, { type BigIntStats } from "node:fs";
import { StoreError, storePath } from "./errors.js";
import { LATEST, migrate } from "./migrate.js";
import { sqlitePlaceholders } from "./queries/sql.js";
import {
  changedSince,
  createStoreFile,
  LEFT_UNTOUCHED,
  openReadonly,
  schemaFactsSql,
  schemaProblem,
  sizeProblem,
  walProblem,
  newDatabase,
  type ReadonlyDb,
  type SchemaFacts,
} from "./store-file.js";

export { StoreError };

export interface OpenOptions {
  /** Create the state dir and store if missing (writers: the daemon, `run`, `pause`, `mark --job`). */
  create: boolean;
  /** Milliseconds a writer waits for another writer before SQLITE_BUSY. */
  busyTimeoutMs?: number;
  /**
   * Read only (status, history, logs, markers, check outside a run): no migration, no WAL
   * switch, no file created in the state dir; a store at an older schema is refused.
   */
  readonly?: boolean;
  /** Run PRAGMA quick_check at open (the daemon does; a CLI call inside a job must be fast). */
  check?: boolean;
  /**
   * With `readonly`, for a reader that asks afterwards whether the file changed under it
   * (`Conn.changedSinceOpen`: status): a store at rest is read where it lies, not copied.
   */
  inPlace?: boolean;
  /** The node this process writes as (its runs' `node`; default: the host name). */
  node?: string;
}

export class Conn {
  private readonly stmts = new Map<string, Database.Statement>();

  constructor(
    readonly raw: Database.Database,
    /** The file and its stat at open, when it is read in place (see openReadonly). */
    private readonly inPlace: { file: string; st: BigIntStats } | null = null,
  ) {}

  /**
   * Has a writer written the file since this connection opened it in place? Then what was read
   * may mix the file's states: open again and read again. Always false for any other connection.
   */
  changedSinceOpen(): boolean {
    return this.inPlace !== null && changedSince(this.inPlace.file, this.inPlace.st);
  }

  /**
   * A prepared statement, cached: the same SQL is compiled once per connection (and per row
   * shape: a shared statement may be read as objects here and as arrays there). `arrays`: rows
   * as arrays. A shared statement's $1..$n become `?` (queries/sql.ts).
   */
  q(sql: string, arrays = false): Database.Statement {
    const key = arrays ? `\u0000${sql}` : sql;
    let s = this.stmts.get(key);
    if (!s) {
      s = this.raw.prepare(sqlitePlaceholders(sql));
      if (arrays) s.raw(true);
      this.stmts.set(key, s);
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
 * Open the store. Only a missing file is created (whole: see createStoreFile); an existing one
 * is used only if it is a cronvisor store, and is never replaced: an empty, foreign, corrupt or
 * unreadable file is left untouched and reported, because a new store would forget every
 * marker. Nothing is written before the file is known to be ours (not even the WAL switch), and
 * a read-only open writes nothing at all.
 */
export function openConn(stateDir: string, opts: OpenOptions): Conn {
  const file = storePath(stateDir);
  let st = statOrNull(file);
  if (!st && (!opts.create || opts.readonly)) {
    throw new StoreError(
      `no state store at ${file} (has the daemon or a run ever started?)`,
      "missing",
    );
  }
  if (!st) {
    const orphan = walProblem(file, statOrNull(`${file}-wal`)?.size ?? 0);
    if (orphan) throw orphan;
    create(stateDir, file);
    st = statOrNull(file);
  }
  const empty = sizeProblem(file, st?.size ?? 0);
  if (empty) throw empty;
  const { db, inPlace } = connect(file, opts);
  try {
    const facts: SchemaFacts = {
      version: db.pragma("user_version", { simple: true }) as number,
      tables: db.prepare(schemaFactsSql).pluck().all() as string[],
    };
    const refused = schemaProblem(file, facts, LATEST, opts.readonly ?? false);
    if (refused) throw refused;
    if (opts.check) quickCheck(db, file);
    if (!opts.readonly) {
      db.pragma("journal_mode = WAL");
      migrate(db);
    }
  } catch (e) {
    try {
      db.close();
    } catch {
      // already closed
    }
    // Read in place while a writer wrote the file: what failed may be a torn read. Again, as
    // the writer left it (its -wal, or a copy).
    if (inPlace && changedSince(file, inPlace))
      return openConn(stateDir, { ...opts, inPlace: false });
    if (e instanceof StoreError) throw e;
    throw openFailure(file, e);
  }
  return new Conn(db, inPlace ? { file, st: inPlace } : null);
}

function statOrNull(file: string): fs.Stats | null {
  try {
    return fs.statSync(file, { throwIfNoEntry: false }) ?? null;
  } catch (e) {
    throw openFailure(file, e);
  }
}

function create(stateDir: string, file: string): void {
  try {
    createStoreFile(stateDir, file);
  } catch (e) {
    if (e instanceof StoreError) throw e;
    throw new StoreError(`cannot create state store ${file}: ${(e as Error).message}`, "io");
  }
}

function connect(file: string, opts: OpenOptions): ReadonlyDb {
  try {
    // An existing store keeps its 0600 (SQLite gives its WAL the store's mode); creating one
    // sets the umask (createStoreFile). A worker thread (the marker broker) may not set it.
    const { db, inPlace } = opts.readonly
      ? openReadonly(file, opts.inPlace ?? false)
      : { db: newDatabase(file, { fileMustExist: true }), inPlace: null };
    db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 5000}`);
    // better-sqlite3 keeps NORMAL on a database already in WAL mode: set FULL on every connection.
    db.pragma("synchronous = FULL");
    db.pragma("foreign_keys = OFF");
    return { db, inPlace };
  } catch (e) {
    throw openFailure(file, e);
  }
}

function quickCheck(db: Database.Database, file: string): void {
  const rows = db.pragma("quick_check") as { quick_check: string }[];
  const bad = rows.map((r) => r.quick_check).filter((m) => m !== "ok");
  if (bad.length > 0) {
    throw new StoreError(
      `state store ${file} failed its integrity check (${bad.slice(0, 3).join("; ")}); ${LEFT_UNTOUCHED}`,
      "corrupt",
    );
  }
}

function openFailure(file: string, e: unknown): StoreError {
  const err = e as { code?: string; message?: string };
  const msg = err.message ?? String(e);
  if (err.code === "SQLITE_NOTADB" || err.code === "SQLITE_CORRUPT") {
    return new StoreError(
      `state store ${file} is not a valid database (${msg}); ${LEFT_UNTOUCHED}`,
      "corrupt",
    );
  }
  if (err.code === "SQLITE_BUSY")
    return new StoreError(`state store ${file} is busy: ${msg}`, "busy");
  return new StoreError(`cannot open state store ${file}: ${msg}`, "io");
}
