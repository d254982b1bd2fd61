// The config a command that only reads works from (`status`, `history`, `next`, `logs`,
// `markers`): the file's, or, while the file cannot be read or has errors, the config the daemon
// runs as it recorded it in the store (at start and at each accepted reload). That record is used
// only when the daemon row names this very file; otherwise, or with no record, the command fails
// as it always did. Commands that change state (`run`, `pause`, `unmark`, ...) never use it: they
// must act on the config the operator wrote.
import type { Config, StatusConfig } from "../core/types.js";
import { configPath, valid } from "./shared.js";

export interface ReaderConfig<C extends StatusConfig = Config> {
  /** `status`'s (cached: true) may hold only what status reads of each job (StatusConfig). */
  config: C;
  /** null when the file is valid; else its every error (FILE:LINE:COL: ...), and `config` is the record. */
  fileErrors: string[] | null;
}

/**
 * Load the config for a reader. On the fallback, say so first, on stderr (stdout stays what
 * scripts read: one JSON document with --json, the verdict first with --check): the notice with
 * when the running config was accepted, then the file's first error.
 */
export async function loadForReading(
  opt: string | undefined,
  cached: true,
): Promise<ReaderConfig<StatusConfig>>;
export async function loadForReading(opt: string | undefined): Promise<ReaderConfig>;
export async function loadForReading(
  opt: string | undefined,
  cached = false,
): Promise<ReaderConfig<StatusConfig>> {
  const file = configPath(opt);
  const res = cached
    ? await (await import("../config/config-cache.js")).loadConfigCached(file)
    : (await import("../config/config.js")).loadConfig(file);
  if (res.config) return { config: res.config, fileErrors: null };
  const rec = await recordedConfig(file);
  if (rec === null) return { config: await valid(res), fileErrors: null };
  const { formatConfigError } = await import("../core/types.js");
  const { brokenFileNotice } = await import("../health/status.js");
  const errors = res.errors.map(formatConfigError);
  const more =
    errors.length > 1 ? `\n(${errors.length - 1} more: cronvisor validate -c ${file})` : "";
  process.stderr.write(`${brokenFileNotice(rec.acceptedAt, rec.runs)}\n${errors[0]}${more}\n`);
  return { config: rec.config, fileErrors: errors };
}

/**
 * The config the daemon recorded for `file`, or null: no store, a store that cannot be opened,
 * no record (no daemon yet, or one from before the record existed), a record of another file, or
 * one that is not a Config of this file and state dir. The state dir is found as the config cache
 * finds it (a plain `state_dir:` line, else the default; the default if the file is unreadable).
 */
async function recordedConfig(
  file: string,
): Promise<{ config: Config; acceptedAt: number; runs: boolean } | null> {
  const { checkedConfig, guessStateDir } = await import("../config/config-cache.js");
  const { readConfigFile } = await import("../config/file.js");
  const read = readConfigFile(file);
  const dir = guessStateDir(file, "bytes" in read ? read.bytes.toString("utf8") : "");
  if (dir === null) return null;
  const { openStore } = await import("../store/store.js");
  let store;
  try {
    store = await openStore(dir, { create: false, busyTimeoutMs: 5000 });
  } catch {
    return null;
  }
  try {
    const rec = await store.runningConfig();
    if (rec === null || rec.config_file !== file) return null;
    const { unpackConfig } = await import("../core/config-record.js");
    const config = checkedConfig(unpackConfig(rec.config_json), file, dir);
    if (config === null) return null;
    const { isAlive } = await import("../core/proc.js");
    const runs = rec.stopped_at === null && rec.pid !== null && isAlive(rec.pid, rec.pid_start);
    return { config, acceptedAt: rec.config_accepted_at, runs };
  } catch {
    return null;
  } finally {
    await store.close();
  }
}
