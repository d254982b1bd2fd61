// What every subcommand shares: its usage error, config loading, job lookup, opening the state
// store, and plain output. Kept light (no commander, no SQLite at import time): the fast `status`
// path and every command load it.
import path from "node:path";
import { EXIT } from "../core/exit.js";
import type { Config, ConfigError, JobConfig } from "../core/types.js";

// The one exit-code table (src/core/exit.ts), passed on for cli.ts, whose static imports are
// kept to args.js and shared.js (start-up: test/commands-startup.test.js).
export { EXIT };

/** An error the CLI prints as it is (one message, no stack) and exits with `code`. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly code: number,
  ) {
    super(message);
  }
}

export function configPath(opt: string | undefined): string {
  return path.resolve(opt ?? process.env.CRONVISOR_CONFIG ?? "jobs.yaml");
}

/**
 * Load and validate the config. `cached`: take the state dir's copy of a validated config when it
 * matches the file exactly (only `status` does; see src/config/config-cache.ts).
 */
export async function load(opt: string | undefined, cached = false): Promise<Config> {
  const file = configPath(opt);
  return valid(
    cached
      ? await (await import("../config/config-cache.js")).loadConfigCached(file)
      : (await import("../config/config.js")).loadConfig(file),
  );
}

/** The config, or a usage error listing every problem. */
export async function valid(res: {
  config: Config | null;
  errors: ConfigError[];
}): Promise<Config> {
  if (!res.config) {
    const { formatConfigError } = await import("../core/types.js");
    throw new CliError(res.errors.map(formatConfigError).join("\n"), EXIT.usage);
  }
  return res.config;
}

/**
 * As root, refuse a config whose file, state dir or env_files another user could change (see
 * src/config/safety.ts): `daemon` and `run` start nothing then, and exit 2.
 */
export async function checkSafe(config: Config): Promise<void> {
  const { checkOwnership, UnsafeError } = await import("../config/safety.js");
  try {
    checkOwnership(config);
  } catch (e) {
    if (e instanceof UnsafeError) throw new CliError(e.message, EXIT.usage);
    throw e;
  }
}

export function findJob(config: Config, name: string): JobConfig {
  const job = config.jobs.find((j) => j.name === name);
  if (!job) {
    const names = config.jobs.map((j) => j.name).join(", ");
    throw new CliError(
      `no job named ${JSON.stringify(name)} in ${config.file} (jobs: ${names || "none"})`,
      EXIT.usage,
    );
  }
  return job;
}

export async function openStore(config: Config, create = false, check = false) {
  const store = await import("../store/store.js");
  return store.openStore(config.stateDir, { create, busyTimeoutMs: 5000, check });
}

/**
 * The store opened read-only (it writes nothing into the state dir, see OpenOptions), or null
 * when the daemon (or a run) has never created one. What the reading commands use.
 */
export async function openStoreOrEmpty(config: Config) {
  const store = await import("../store/store.js");
  try {
    return await store.openStore(config.stateDir, {
      create: false,
      readonly: true,
      busyTimeoutMs: 5000,
    });
  } catch (e) {
    if (e instanceof store.StoreError && e.code === "missing") return null;
    throw e;
  }
}

export const out = (s: string): void => {
  process.stdout.write(s.endsWith("\n") ? s : `${s}\n`);
};

/** An ISO time as the tables print it: a space for the T, whole seconds; null as "-". */
export const when = (iso: string | null): string =>
  iso === null ? "-" : iso.replace("T", " ").replace(/\.\d{3}Z$/, "Z");
