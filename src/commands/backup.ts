// `cronvisor backup DEST` and `cronvisor restore SRC`: the SQLite store copied out while the
// daemon runs, and a copy put back while it does not (src/store/backup.ts; docs/store.md).
import path from "node:path";
import { EXIT } from "../core/exit.js";
import type { Config } from "../core/types.js";
import { CliError, load, out } from "./shared.js";

export async function backup(dest: string, o: { config?: string }): Promise<void> {
  const config = await load(o.config);
  if (config.store !== null) throw new CliError(pgAdvice(config.store, "backup"), EXIT.usage);
  const { backupStore, CopyError } = await import("../store/backup.js");
  const target = path.resolve(dest);
  try {
    const r = backupStore(config.stateDir, target);
    out(
      `backed up ${r.runs} runs and ${r.markers} markers (${r.bytes} bytes, schema version ${r.version}) to ${target}`,
    );
  } catch (e) {
    if (e instanceof CopyError)
      throw new CliError(`cronvisor: ${e.message}`, e.kind === "exists" ? EXIT.usage : EXIT.fail);
    throw e;
  }
}

export async function restore(src: string, o: { config?: string }): Promise<void> {
  const config = await load(o.config);
  if (config.store !== null) throw new CliError(pgAdvice(config.store, "restore"), EXIT.usage);
  const { restoreStore, daemonHolder, CopyError } = await import("../store/backup.js");
  const { isAlive } = await import("../core/proc.js");
  const pid = daemonHolder(config.stateDir, isAlive);
  if (pid !== null)
    throw new CliError(
      `cronvisor: a daemon (pid ${pid}) holds the state dir ${config.stateDir}; stop it first (systemctl stop cronvisor), then restore`,
      EXIT.fail,
    );
  const from = path.resolve(src);
  try {
    const r = restoreStore(config.stateDir, from, stampOf(new Date()));
    const migrated =
      r.version < r.latest ? `, brought from schema version ${r.version} to ${r.latest}` : "";
    out(
      `restored ${r.runs} runs and ${r.markers} markers from ${from}${migrated} into ${config.stateDir}`,
    );
    out(
      r.kept === null
        ? "there was no store before it"
        : `the store it replaced is kept as ${r.kept}`,
    );
  } catch (e) {
    if (e instanceof CopyError) throw new CliError(`cronvisor: ${e.message}`, EXIT.fail);
    throw e;
  }
}

/** 2026-03-29T01:00:00.000Z -> 20260329T010000Z: a file name without colons. */
function stampOf(d: Date): string {
  return d
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}Z$/, "Z");
}

/** What to do instead with a PostgreSQL store: its own tools, with the options that matter. */
function pgAdvice(url: Config["store"], what: "backup" | "restore"): string {
  const u = new URL(url ?? "");
  u.password = "";
  const db = u.href;
  return what === "backup"
    ? `cronvisor: the store is PostgreSQL (store: ${db}); nothing was written. Back it up with pg_dump, which copies one consistent snapshot while the daemons run:\n  pg_dump --format=custom --file=DEST '${db}'`
    : `cronvisor: the store is PostgreSQL (store: ${db}); nothing was changed. Stop every node's daemon, then restore with pg_restore:\n  pg_restore --clean --if-exists --single-transaction --dbname='${db}' SRC`;
}
