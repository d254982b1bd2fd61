// The state store's entry: the Store interface (interface.ts), its row types, and openStore, which
// loads the engine. Importers outside src/store/ import from here.
import type { OpenOptions } from "./connection.js";
import type { MarkerStore, Store } from "./interface.js";

export { StoreError, storeFailure } from "./errors.js";
export { STORE_FILE, storePath, type OpenOptions } from "./connection.js";
export type * from "./rows.js";
export type { MarkerStore, Store } from "./interface.js";

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
