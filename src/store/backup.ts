// `backup` and `restore` of the SQLite store: the one supported way to copy it out and to put a
// copy back (docs/store.md). A backup is VACUUM INTO a temporary file beside DEST: one read
// transaction, so the copy is one consistent moment of the store, and in WAL mode the daemon's
// writers go on committing while it is read (test/store-backup.test.js marks every second
// through a backup of 100,000 markers). The copy is checked, fsync'd and then hard-linked to DEST,
// which never replaces a file: DEST is a whole backup or nothing. A restore copies SRC into the
// state dir, checks it (integrity, cronvisor's tables, its schema version), brings an older one
// forward, keeps the store it replaces beside it, and renames the copy into place.
import type Database from "better-sqlite3";
import fs from "node:fs";
import path from "node:path";
import { daemonTrust, makeDirs, WRITE_NEW } from "../core/safe-path.js";
import { StoreError, storePath } from "./errors.js";
import { LATEST, migrate } from "./migrate.js";
import {
  newDatabase,
  openReadonly,
  schemaFactsSql,
  schemaProblem,
  withPrivateUmask,
} from "./store-file.js";

/** What a backup or restore copied, for its report. */
export interface CopyReport {
  runs: number;
  markers: number;
  bytes: number;
  /** The copy's schema version as it was read (a restore migrates an older one). */
  version: number;
}

/** A refusal (exit 2: DEST exists) or a failure (exit 1), with the operator's sentence. */
export class CopyError extends Error {
  constructor(
    message: string,
    readonly kind: "exists" | "refused" | "failed",
  ) {
    super(message);
  }
}

/**
 * Copy the state dir's store to `dest` (a path that must not exist), online. On any failure the
 * temporary file is removed and nothing is left at `dest`.
 */
export function backupStore(stateDir: string, dest: string): CopyReport {
  const file = storePath(stateDir);
  if (!fs.existsSync(file))
    throw new CopyError(`there is no store at ${file} to back up`, "refused");
  if (fs.lstatSync(dest, { throwIfNoEntry: false }))
    throw new CopyError(`${dest} already exists; it was left untouched`, "exists");
  if (!fs.statSync(path.dirname(dest), { throwIfNoEntry: false })?.isDirectory())
    throw new CopyError(`the directory ${path.dirname(dest)} does not exist`, "failed");
  const tmp = tempBeside(dest);
  try {
    fs.closeSync(fs.openSync(tmp, WRITE_NEW, 0o600));
    const version = vacuumInto(file, tmp);
    const report = checkCopy(tmp, version);
    fsyncFile(tmp);
    try {
      fs.linkSync(tmp, dest);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "EEXIST")
        throw new CopyError(`${dest} appeared during the backup; it was left untouched`, "exists");
      throw e;
    }
    fsyncFile(path.dirname(dest));
    return report;
  } catch (e) {
    throw asCopyError(e, `backup to ${dest} failed`);
  } finally {
    for (const f of [tmp, `${tmp}-journal`]) fs.rmSync(f, { force: true });
  }
}

function vacuumInto(file: string, tmp: string): number {
  // A writer's connection, not a read-only one: a read-only connection to a WAL store makes a
  // -wal and -shm it cannot remove. This one writes nothing but a checkpoint at its close.
  let db: Database.Database;
  try {
    db = newDatabase(file, { fileMustExist: true });
  } catch (e) {
    throw asCopyError(e, `cannot open the store ${file}`);
  }
  try {
    db.pragma("busy_timeout = 10000");
    const version = ourSchema(db, file);
    db.prepare("VACUUM INTO ?").run(tmp);
    return version;
  } finally {
    db.close();
  }
}

/** The copy's integrity and counts: a backup that cannot be read back is no backup. */
function checkCopy(file: string, version: number): CopyReport {
  const db = newDatabase(file, { readonly: true, fileMustExist: true });
  try {
    integrity(db, file);
    return { ...counts(db), bytes: fs.statSync(file).size, version };
  } finally {
    db.close();
  }
}

/** What holds the state dir, from the store's daemon row: a live daemon's pid, or null. */
export function daemonHolder(
  stateDir: string,
  alive: (pid: number, start: string | null) => boolean,
): number | null {
  const file = storePath(stateDir);
  if (!fs.existsSync(file)) return null;
  let db: Database.Database | null = null;
  try {
    // openReadonly: a plain read-only connection would leave a -wal and -shm behind.
    db = openReadonly(file).db;
    const row = db.prepare("SELECT pid, pid_start, stopped_at FROM daemon WHERE id = 1").get() as
      { pid: number | null; pid_start: string | null; stopped_at: number | null } | undefined;
    if (row && row.pid !== null && row.stopped_at === null && alive(row.pid, row.pid_start))
      return row.pid;
    return null;
  } catch {
    // A store that cannot be read (the reason for many a restore) names no daemon.
    return null;
  } finally {
    db?.close();
  }
}

export interface RestoreReport extends CopyReport {
  /** Where the store that was replaced is kept, or null when there was none. */
  kept: string | null;
  /** The schema version it was brought to (this cronvisor's). */
  latest: number;
}

/**
 * Put the backup `src` in place of the state dir's store. The caller has checked that no daemon
 * holds the state dir. `stamp`: the time in the kept store's name.
 */
export function restoreStore(stateDir: string, src: string, stamp: string): RestoreReport {
  const file = storePath(stateDir);
  if (!fs.statSync(src, { throwIfNoEntry: false })?.isFile())
    throw new CopyError(`${src} is not a file`, "refused");
  if ((fs.statSync(`${src}-wal`, { throwIfNoEntry: false })?.size ?? 0) > 0)
    throw new CopyError(
      `${src} has a write-ahead log beside it (${src}-wal): it is a live store or a copy of one, not a backup; make one with \`cronvisor backup\``,
      "refused",
    );
  // A new host's first start from a backup: the state dir is made as the daemon makes it.
  const unsafe = makeDirs(stateDir, daemonTrust());
  if (unsafe.length > 0)
    throw new CopyError(`refusing the state dir ${stateDir}: ${unsafe.join("; ")}`, "refused");
  const tmp = tempBeside(file);
  try {
    fs.copyFileSync(src, tmp, fs.constants.COPYFILE_EXCL);
    fs.chmodSync(tmp, 0o600);
    // As root, the restored store belongs to whoever owns the state dir (the daemon's user).
    const dirOwner = fs.statSync(stateDir);
    if (process.getuid?.() === 0) fs.chownSync(tmp, dirOwner.uid, dirOwner.gid);
    const report = prepare(tmp, src);
    fsyncFile(tmp);
    const kept = keepCurrent(file, stamp);
    fs.renameSync(tmp, file);
    fsyncFile(stateDir);
    return { ...report, kept, latest: LATEST };
  } catch (e) {
    throw asCopyError(e, `restore of ${src} failed`);
  } finally {
    for (const f of [tmp, `${tmp}-wal`, `${tmp}-shm`, `${tmp}-journal`])
      fs.rmSync(f, { force: true });
  }
}

/** Check the copy of SRC and bring it to this cronvisor's schema, in WAL mode like every store. */
function prepare(tmp: string, src: string): CopyReport {
  const db = withPrivateUmask(() => newDatabase(tmp, { fileMustExist: true }));
  try {
    integrity(db, src);
    const version = ourSchema(db, src);
    db.pragma("journal_mode = WAL");
    migrate(db);
    return { ...counts(db), bytes: fs.statSync(src).size, version };
  } catch (e) {
    throw asCopyError(e, `${src} cannot be read as a store`);
  } finally {
    db.close(); // the only connection: checkpoints and removes its WAL
  }
}

/**
 * Keep the store being replaced as FILE.before-restore-STAMP (its WAL with it), or null when
 * there is none. Its WAL is first checkpointed into it where it can be.
 */
function keepCurrent(file: string, stamp: string): string | null {
  if (!fs.existsSync(file)) return null;
  try {
    const db = newDatabase(file, { fileMustExist: true });
    try {
      db.pragma("busy_timeout = 5000");
      db.pragma("wal_checkpoint(TRUNCATE)");
    } finally {
      db.close();
    }
  } catch {
    // A damaged store is kept as it is, WAL and all.
  }
  const kept = `${file}.before-restore-${stamp}`;
  fs.linkSync(file, kept);
  if (fs.existsSync(`${file}-wal`)) fs.renameSync(`${file}-wal`, `${kept}-wal`);
  fs.rmSync(`${file}-shm`, { force: true });
  return kept;
}

/** The schema version of a cronvisor store, or a refusal naming `name`. */
function ourSchema(db: Database.Database, name: string): number {
  const version = db.pragma("user_version", { simple: true }) as number;
  const tables = db.prepare(schemaFactsSql).pluck().all() as string[];
  const problem = schemaProblem(name, { version, tables }, LATEST, false);
  if (problem) throw new CopyError(problem.message.replace(/^state store /, ""), "refused");
  return version;
}

function integrity(db: Database.Database, name: string): void {
  const rows = db.pragma("integrity_check") as { integrity_check: string }[];
  const bad = rows.map((r) => r.integrity_check).filter((m) => m !== "ok");
  if (bad.length > 0)
    throw new CopyError(
      `${name} failed its integrity check (${bad.slice(0, 3).join("; ")})`,
      "refused",
    );
}

function counts(db: Database.Database): { runs: number; markers: number } {
  return {
    runs: db.prepare("SELECT count(*) FROM runs").pluck().get() as number,
    markers: db.prepare("SELECT count(*) FROM markers").pluck().get() as number,
  };
}

/** A fresh name in `target`'s directory (same file system: link and rename stay atomic). */
function tempBeside(target: string): string {
  const rand = Math.random().toString(36).slice(2, 10);
  return path.join(path.dirname(target), `.${path.basename(target)}.partial-${rand}`);
}

function fsyncFile(p: string): void {
  const fd = fs.openSync(p, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

function asCopyError(e: unknown, what: string): CopyError {
  if (e instanceof CopyError) return e;
  if (e instanceof StoreError) return new CopyError(e.message, "refused");
  const err = e as { code?: string; message?: string };
  const code = err.code ?? "";
  const kind = code === "SQLITE_NOTADB" || code.startsWith("SQLITE_CORRUPT") ? "refused" : "failed";
  return new CopyError(`${what}: ${err.message ?? String(e)}`, kind);
}
