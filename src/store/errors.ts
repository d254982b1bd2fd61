// What a store failure is (StoreError), what SQLite's errors mean (storeFailure), and where a state
// dir's store file is: a module with no other import, so a marker command that only names the
// store in an error (through the broker) loads nothing of the engine.
import path from "node:path";

export const STORE_FILE = "cronvisor.db";

export function storePath(stateDir: string): string {
  return path.join(stateDir, STORE_FILE);
}

/**
 * The store cannot be used: absent, corrupt (empty, not SQLite, not cronvisor's, too new), at an
 * older schema that a read-only opener cannot bring forward, busy past its timeout, or unreadable.
 */
export class StoreError extends Error {
  constructor(
    message: string,
    readonly code: "missing" | "corrupt" | "old" | "busy" | "io",
  ) {
    super(message);
  }
}

/**
 * The StoreError an error thrown by SQLite means, naming the store's file; null for an error that
 * is not SQLite's (a bug, which keeps its stack). A StoreError is returned as it is.
 */
export function storeFailure(file: string, e: unknown): StoreError | null {
  if (e instanceof StoreError) return e;
  const code = (e as { code?: unknown }).code;
  if (typeof code !== "string" || !code.startsWith("SQLITE_")) return null;
  const msg = (e as Error).message;
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"))
    return new StoreError(
      `state store ${file} stayed busy past its timeout (another process holds its write lock: ${msg}); try again`,
      "busy",
    );
  if (code.startsWith("SQLITE_READONLY"))
    return new StoreError(
      `state store ${file} is read-only (${msg}); this command writes to it`,
      "io",
    );
  if (code.startsWith("SQLITE_CORRUPT") || code === "SQLITE_NOTADB")
    return new StoreError(
      `state store ${file} is not a valid database (${msg}); it was left untouched: restore it from a backup or move it away`,
      "corrupt",
    );
  return new StoreError(`cannot use state store ${file}: ${msg}`, "io");
}
