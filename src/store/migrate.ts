// Numbered migrations, one .sql file per step per engine (migrations/sqlite/NNN_name.sql), applied
// in one transaction; the number of steps applied is kept in PRAGMA user_version, so a store
// written by an older cronvisor opens and is brought forward, and one written by a newer one is
// refused. The files are copied next to the compiled module by the build (scripts/copy-sql.js)
// and read only when a step is due.
import type Database from "better-sqlite3";
import fs from "node:fs";
import { StoreError } from "./errors.js";
import { INCLUDES } from "./digest.js";

const DIR = new URL("./migrations/sqlite/", import.meta.url);
const NAME = /^(\d{3})_[a-z0-9_]+\.sql$/;
/**
 * The number of the newest migration file. A store at this version opens without listing the
 * folder (every `mark` call opens the store); test/store-interface.test.js checks it is the
 * folder's count.
 */
export const LATEST = 16;

/** The SQLite migration files in order. */
export const migrationFiles = (): string[] => migrationFilesIn(DIR);

/** One engine's migration files in order; their numbers must run 1, 2, 3... with no gap. */
export function migrationFilesIn(dir: URL): string[] {
  const files = fs
    .readdirSync(dir)
    .filter((f) => NAME.test(f))
    .sort();
  files.forEach((f, i) => {
    if (Number(NAME.exec(f)?.[1]) !== i + 1)
      throw new Error(`store migrations: ${f} is out of sequence (expected number ${i + 1})`);
  });
  return files;
}

/**
 * A migration file's text for `engine`: each line `\include NAME` becomes what INCLUDES holds
 * for it (a definition written once for both engines, digest.ts). SQLite takes the line for no
 * SQL, so a file fed to sqlite3 by hand fails instead of skipping it (psql reads it as its own
 * `\include FILE` and says there is no such file).
 */
export function migrationText(dir: URL, file: string, engine: "sqlite" | "postgresql"): string {
  return fs
    .readFileSync(new URL(file, dir), "utf8")
    .replace(/^\\include (\w+)$/gm, (line, name) => {
      const text = INCLUDES[name as string]?.[engine];
      if (text === undefined)
        throw new Error(`store migration ${file}: nothing to include as ${line}`);
      return text;
    });
}

export function migrate(db: Database.Database): void {
  const version = db.pragma("user_version", { simple: true }) as number;
  if (version === LATEST) return;
  const files = migrationFiles();
  if (version > files.length) {
    throw new StoreError(
      `state store schema version ${version} is newer than this cronvisor knows (${files.length}); upgrade cronvisor`,
      "corrupt",
    );
  }
  if (version === files.length) return;
  db.transaction(() => {
    // Re-read inside the write lock: another process may have migrated meanwhile.
    const v = db.pragma("user_version", { simple: true }) as number;
    for (const f of files.slice(v)) db.exec(migrationText(DIR, f, "sqlite"));
    db.pragma(`user_version = ${files.length}`);
  }).immediate();
}
