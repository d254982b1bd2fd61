// The store file itself, before and around SQLite: is an existing file a cronvisor store this
// code may use (pure judgements), how a missing one is created (whole, or not at all), and how a
// reader reads a store at rest without writing a byte into the state dir.
//
// Only a missing file is ever created. An existing file that is empty (a bad restore, a full
// disk during a copy), not SQLite, or another program's database is refused and left untouched:
// taking it for a new store would forget every marker, and `check` would answer "not marked".
import type Database from "better-sqlite3";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { daemonTrust, makeDirs } from "../core/safe-path.js";
import { StoreError } from "./errors.js";
import { migrate } from "./migrate.js";

/**
 * better-sqlite3, loaded when a connection is first opened, not when this module is imported:
 * the in-job marker client (markers-cli.ts through the broker) imports the marker code but never
 * opens the store, and must not pay for (or need to read) the native module.
 */
let sqlite: typeof Database | null = null;
const nodeRequire = createRequire(import.meta.url);
function loadSqlite(): typeof Database {
  sqlite ??= nodeRequire("better-sqlite3") as typeof Database;
  return sqlite;
}

/**
 * better-sqlite3's native addon, required by its own path. Left to itself, better-sqlite3 finds
 * it through the `bindings` package, which builds an Error stack to learn its caller's file and
 * probes a dozen candidate paths: about 5 ms of every `status` call. undefined (better-sqlite3
 * then looks as it always does) if the addon is not where a normal install puts it.
 */
let addon: string | undefined | null = null;
/** Whether this process's SQLite takes `file:` URIs (see nativeBinding's `uri`). */
let uriFilenames = false;
function nativeBinding(uri: boolean): string | undefined {
  if (addon === null) {
    try {
      const dir = path.dirname(nodeRequire.resolve("better-sqlite3/package.json"));
      const file = path.join(dir, "build", "Release", "better_sqlite3.node");
      addon = fs.existsSync(file) ? loadAddon(file, uri) : undefined;
    } catch {
      addon = undefined;
    }
  }
  return addon;
}

/**
 * Load the addon (better-sqlite3's own require of the same path then finds it loaded). `uri`:
 * with URI filenames on, which better-sqlite3 (12.x) reads from SQLITE_USE_URI once, when its
 * addon is first loaded, for the whole process (SQLite's setting is global). Only a process
 * whose first open asks for an in-place read (`status`) turns it on; the variable is put back at
 * once, so no child inherits it, and newDatabase keeps every other file name a plain path.
 */
function loadAddon(file: string, uri: boolean): string {
  const was = process.env.SQLITE_USE_URI;
  if (uri) process.env.SQLITE_USE_URI = "1";
  try {
    nodeRequire(file);
    uriFilenames = uri || was === "1";
    return file;
  } finally {
    if (was === undefined) delete process.env.SQLITE_USE_URI;
    else process.env.SQLITE_USE_URI = was;
  }
}

/** A better-sqlite3 connection (`new Database(file, opts)`), its addon loaded directly. */
export function newDatabase(
  file: string | Buffer,
  opts: Database.Options = {},
  uri = false,
): Database.Database {
  const Db = loadSqlite();
  const binding = nativeBinding(uri);
  // With URI filenames on, a path that happens to begin with "file:" must stay a path.
  const name = typeof file === "string" && !uri && file.startsWith("file:") ? `./${file}` : file;
  return new Db(name, { ...opts, nativeBinding: binding });
}

/** What every refusal ends with: what the operator does next. */
export const LEFT_UNTOUCHED = "it was left untouched: restore it from a backup or move it away";

/** Tables every cronvisor store has had since its first migration. */
const OUR_TABLES = ["daemon", "jobs", "runs", "markers"] as const;

/** What an open SQLite file says about itself. */
export interface SchemaFacts {
  /** PRAGMA user_version: the number of migrations applied. */
  version: number;
  /** Which of OUR_TABLES it has. */
  tables: readonly string[];
}

export const schemaFactsSql = `SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (${OUR_TABLES.map((t) => `'${t}'`).join(", ")})`;

/** Refuse a file of 0 bytes: SQLite would take it for a new, empty database. */
export function sizeProblem(file: string, size: number): StoreError | null {
  return size === 0
    ? new StoreError(`state store ${file} is empty (0 bytes); ${LEFT_UNTOUCHED}`, "corrupt")
    : null;
}

/**
 * Refuse to create a missing store over its predecessor's WAL (a restore that brought back only
 * the -wal, a store moved away without it): SQLite would replay its frames into the new file.
 */
export function walProblem(file: string, walSize: number): StoreError | null {
  return walSize > 0
    ? new StoreError(
        `state store ${file} is missing but its write-ahead log ${file}-wal is there; it was left untouched: restore the store from a backup, or move the -wal file away to start afresh`,
        "corrupt",
      )
    : null;
}

/**
 * Why an open SQLite file is not a store this code may use, or null. `reader`: a read-only
 * opener, which cannot bring an older schema forward; it refuses rather than guess which
 * columns exist, and says who migrates (a writer: the daemon, `run`, `pause`, `mark`).
 */
export function schemaProblem(
  file: string,
  facts: SchemaFacts,
  latest: number,
  reader: boolean,
): StoreError | null {
  if (facts.version < 1 || OUR_TABLES.some((t) => !facts.tables.includes(t))) {
    return new StoreError(
      `state store ${file} is not a cronvisor store (a SQLite database without cronvisor's tables, schema version ${facts.version}); ${LEFT_UNTOUCHED}`,
      "corrupt",
    );
  }
  if (facts.version > latest) {
    return new StoreError(
      `state store ${file} is at schema version ${facts.version}, newer than this cronvisor knows (${latest}); upgrade cronvisor`,
      "corrupt",
    );
  }
  if (reader && facts.version < latest) {
    return new StoreError(
      `state store ${file} is at schema version ${facts.version}, older than this cronvisor's ${latest}: the daemon or \`cronvisor run\` brings it forward when it starts; a read-only command does not`,
      "old",
    );
  }
  return null;
}

/**
 * Create a missing store whole. It is built under a temporary name in the state dir (same file
 * system), then hard-linked into place. link(2) is atomic and never replaces a file: a reader
 * sees no store or a whole one (never the 0-byte file SQLite starts from, which is refused as an
 * emptied store), and of two first writers exactly one links; the other gets EEXIST and opens
 * the winner's store. rename(2) would let the loser silently replace a store the winner may
 * already have written to. Where the file system has no hard links, an exclusive copy keeps
 * that second property (a reader may then glimpse a partial file and refuse it, once).
 */
export function createStoreFile(stateDir: string, file: string): void {
  // Never a recursive mkdir: each missing component is made and checked alone (see makeDirs).
  const unsafe = makeDirs(stateDir, daemonTrust());
  if (unsafe.length > 0)
    throw new StoreError(`refusing the state dir ${stateDir}: ${unsafe.join("; ")}`, "io");
  // node:crypto only here: it is most of a marker command's module loading otherwise.
  const { randomBytes } = nodeRequire("node:crypto") as typeof import("node:crypto");
  const tmp = path.join(stateDir, `.${path.basename(file)}.new-${randomBytes(6).toString("hex")}`);
  try {
    const db = withPrivateUmask(() => newDatabase(tmp));
    try {
      db.pragma("journal_mode = WAL");
      migrate(db);
    } finally {
      db.close(); // the only connection: checkpoints and removes the temporary WAL
    }
    if (publish(tmp, file)) fsyncDir(stateDir);
  } finally {
    for (const f of [tmp, `${tmp}-wal`, `${tmp}-shm`, `${tmp}-journal`])
      fs.rmSync(f, { force: true });
  }
}

/** Put the built store at `file` unless one is there already. True if this call put it. */
function publish(tmp: string, file: string): boolean {
  try {
    fs.linkSync(tmp, file);
    return true;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "EEXIST") return false; // another first writer won: open its store
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "ENOSYS")
      throw e;
  }
  try {
    fs.copyFileSync(tmp, file, fs.constants.COPYFILE_EXCL);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw e;
  }
}

function fsyncDir(dir: string): void {
  const fd = fs.openSync(dir, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** The store and its WAL are created 0600: runs and markers may say more than they should. */
export function withPrivateUmask<T>(fn: () => T): T {
  const old = process.umask(0o077);
  try {
    return fn();
  } finally {
    process.umask(old);
  }
}

/** The largest store a reader copies into memory (see openReadonly). */
const SNAPSHOT_MAX = 256n * 1024n * 1024n;
/**
 * A store file written this recently is not read in place: two writes inside one tick of the
 * file system's clock can leave its mtime as it was, and the check after the read would miss
 * the second. A second is far beyond any such tick (every write of data sets the mtime).
 */
const IN_PLACE_QUIET_NS = 1_000_000_000n;

/** A read-only connection, and for one that reads the file in place, the file as it was opened. */
export interface ReadonlyDb {
  db: Database.Database;
  inPlace: fs.BigIntStats | null;
}

/**
 * A read-only connection that writes nothing into the state dir. SQLite cannot open a WAL-mode
 * file read-only without its -wal and -shm files: it creates them, and a read-only connection
 * cannot remove them on close. So:
 *  - with a -wal file there (a writer is open, or a crashed one left it), a plain read-only
 *    connection: it only uses files that exist, and shares the writer's view;
 *  - with none, the store is at rest and the main file holds all of it. `inPlace` (status, which
 *    checks afterwards: changedSince): the file is opened as SQLite's `immutable` URI, which
 *    reads it where it lies with no lock, -wal or -shm, if this process's SQLite takes URIs and
 *    the file has not been written for a second. Otherwise it is read into memory (marked as a
 *    rollback-journal file in the copy, which SQLite then reads as it is) and queried there. That
 *    costs the file's size in memory and a read of it, only while no writer is open
 *    (BENCHMARKS.md: the status row). A writer that came and went during the read (the file's
 *    size, times or inode changed, or a WAL appeared) makes it read again. A store over
 *    SNAPSHOT_MAX is not copied: the plain connection then creates SQLite's empty -wal and -shm
 *    (never the store itself), which is cheaper than that much memory.
 *
 * A writer that opens after an in-place reader writes into its own new -wal; only a checkpoint
 * writes the main file, and that changes its times: changedSince then says so, and the reader
 * reads again (from the -wal's view, or a copy).
 */
export function openReadonly(file: string, inPlace = false): ReadonlyDb {
  for (let attempt = 0; attempt < 3; attempt++) {
    if (fs.existsSync(`${file}-wal`)) break;
    const before = fs.statSync(file, { bigint: true });
    if (inPlace && attempt === 0) {
      const db = openInPlace(file, before);
      if (db) return { db, inPlace: before };
    }
    if (before.size > SNAPSHOT_MAX) break;
    const bytes = fs.readFileSync(file);
    const after = fs.statSync(file, { bigint: true });
    if (fs.existsSync(`${file}-wal`) || !sameFile(before, after)) continue;
    // Bytes 18 and 19 of the header are the write and read format: 2 is WAL, 1 rollback.
    if (bytes.length >= 100 && bytes[18] === 2 && bytes[19] === 2) bytes[18] = bytes[19] = 1;
    return { db: newDatabase(bytes, { readonly: true }), inPlace: null };
  }
  return { db: newDatabase(file, { readonly: true, fileMustExist: true }), inPlace: null };
}

/** The file opened `immutable` where it lies, or null where that cannot be trusted (see above). */
function openInPlace(file: string, st: fs.BigIntStats): Database.Database | null {
  const nowNs = BigInt(Date.now()) * 1_000_000n;
  if (nowNs - st.mtimeNs < IN_PLACE_QUIET_NS) return null;
  // The addon, with URI filenames if this is the process's first open; off if it was loaded
  // before without them (then the URI would name a file that does not exist).
  nativeBinding(true);
  if (!uriFilenames) return null;
  const url = `${pathToFileURL(path.resolve(file)).href}?mode=ro&immutable=1`;
  return newDatabase(url, { readonly: true, fileMustExist: true }, true);
}

/** Has the file been written (or replaced) since `st` was taken? */
export function changedSince(file: string, st: fs.BigIntStats): boolean {
  const now = fs.statSync(file, { bigint: true, throwIfNoEntry: false });
  return now === undefined || !sameFile(st, now);
}

function sameFile(a: fs.BigIntStats, b: fs.BigIntStats): boolean {
  return a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs;
}
