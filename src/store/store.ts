// The state store's entry: the Store interface (interface.ts), its row types, and the openers,
// which load their engine (better-sqlite3 or pg) only when called. Importers outside src/store/ import from here.
import type { OpenOptions } from "./connection.js";
import type { MarkerStore, StatusStore, Store } from "./interface.js";
import { createRequire } from "node:module";
import type { PgOpenOptions } from "./pg-connection.js";

// Loaded by every marker command: errors.js is its only import at run time (the rest is types).
export { STORE_FILE, StoreError, storeFailure, storePath } from "./errors.js";
export type { OpenOptions } from "./connection.js";
export type * from "./rows.js";
export type * from "./hold-rows.js";
export type * from "./chain-rows.js";
export type * from "./status-rows.js";
export type * from "./why-rows.js";
export type { MarkerStore, StatusStore, Store } from "./interface.js";
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

/** Where a config's store is: SQLite in its state dir, or PostgreSQL at a URL (`store:`). */
export interface StoreTarget {
  stateDir: string;
  /** postgresql://USER@HOST:PORT/DB, or null: SQLite in stateDir. */
  url: string | null;
  passwordFile: string | null;
  /** The node this process writes as. */
  node: string;
  /** PostgreSQL: how long a connect or a query may take (ms). */
  timeoutMs?: number;
  /** PostgreSQL: keep finished runs' log tails (`log_tails:`, default true). */
  logTails?: boolean;
}

/** A config's store target; `node:` defaults to the host name. */
export function storeTarget(config: {
  stateDir: string;
  store: string | null;
  passwordFile: string | null;
  node: string | null;
  leaseMs: number;
  logTails?: boolean;
}): StoreTarget {
  return {
    stateDir: config.stateDir,
    url: config.store,
    passwordFile: config.passwordFile,
    // node:os only here: a marker command inside a job imports this module and never asks.
    node:
      config.node ??
      (createRequire(import.meta.url)("node:os") as typeof import("node:os")).hostname(),
    // A quarter of the lease: a node learns in time that the store does not answer.
    timeoutMs: Math.max(500, Math.min(10_000, Math.floor(config.leaseMs / 4))),
    logTails: config.logTails ?? true,
  };
}

async function pgOptions(t: StoreTarget, opts: OpenOptions): Promise<PgOpenOptions> {
  const { readPasswordFile } = await import("./pg-password.js");
  return {
    create: opts.create,
    readonly: opts.readonly ?? false,
    node: t.node,
    ...(t.passwordFile !== null ? { password: readPasswordFile(t.passwordFile) } : {}),
    ...(t.timeoutMs !== undefined ? { timeoutMs: t.timeoutMs } : {}),
    ...(t.logTails === false ? { logTails: false } : {}),
  };
}

/** Open the store a config names: PostgreSQL with `store:`, else SQLite in its state dir. */
export async function openStoreAt(t: StoreTarget, opts: OpenOptions): Promise<Store> {
  if (t.url === null) return openStore(t.stateDir, { ...opts, node: t.node });
  return openPgStore(t.url, await pgOptions(t, opts));
}

/**
 * Open the store a config names for what `status` reads: on SQLite, a store that loads only
 * the table groups status reads (sqlite-status-store.ts); on PostgreSQL, the whole store.
 */
export async function openStatusStoreAt(t: StoreTarget, opts: OpenOptions): Promise<StatusStore> {
  if (t.url !== null) return openPgStore(t.url, await pgOptions(t, opts));
  const { SqliteStatusStore } = await import("./sqlite-status-store.js");
  return SqliteStatusStore.openStatus(t.stateDir, { ...opts, node: t.node });
}

/** Open only the marker path of the store a config names (the broker's worker). */
export async function openMarkerStoreAt(t: StoreTarget, opts: OpenOptions): Promise<MarkerStore> {
  if (t.url === null) return openMarkerStore(t.stateDir, { ...opts, node: t.node });
  const { PgMarkerStore } = await import("./pg-marker-store.js");
  return PgMarkerStore.openMarkers(t.url, await pgOptions(t, opts));
}
