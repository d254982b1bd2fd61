// The state store's entry: the Store interface (interface.ts), its row types, and the openers,
// which load their engine (better-sqlite3 or pg) only when called. Importers outside src/store/ import from here.
import type { OpenOptions } from "./connection.js";
import type { MarkerStore, Store } from "./interface.js";
import type { PgOpenOptions } from "./pg-connection.js";

// Loaded by every marker command: errors.js is its only import at run time (the rest is types).
export { STORE_FILE, StoreError, storeFailure, storePath } from "./errors.js";
export type { OpenOptions } from "./connection.js";
export type * from "./rows.js";
export type { MarkerStore, Store } from "./interface.js";
export type { PgOpenOptions } from "./pg-connection.js";

/** Open the store of a state dir (SQLite; the engine is loaded only here). */
export async function openStore(stateDir: string, opts: OpenOptions): Promise<Store> {
  const { SqliteStore } = await import("./sqlite-store.js");
  return SqliteStore.open(stateDir, opts);
}

/** Open only the marker path of a state dir's store: what a marker command inside a job loads. */
export async function openMarkerStore(stateDir: string, opts: OpenOptions): Promise<MarkerStore> {
  const { SqliteMarkerStore } = await import("./sqlite-marker-store.js");
  return SqliteMarkerStore.openMarkers(stateDir, opts);
}

/**
 * Open the PostgreSQL store at `url` (postgresql://USER@HOST:PORT/DB; the password from
 * PGPASSWORD or ~/.pgpass, as libpq does). pg is loaded only here: no SQLite path loads it.
 */
export async function openPgStore(url: string, opts: PgOpenOptions): Promise<Store> {
  const { PgStore } = await import("./pg-store.js");
  return PgStore.open(url, opts);
}
