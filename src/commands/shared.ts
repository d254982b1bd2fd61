// What every subcommand shares: its usage error, config loading, job lookup, opening the state
// store, and plain output. Kept light (no commander, no SQLite at import time): the fast `status`
// path and every command load it.
import fs from "node:fs";
import path from "node:path";
import { EXIT } from "../core/exit.js";
import type { Config, ConfigError, StatusConfig, StatusJobConfig } from "../core/types.js";
import type { OpenOptions, StoreTarget } from "../store/store.js";

// The one exit-code table (src/core/exit.ts), passed on for cli.ts, whose static imports are
// kept to args.js and shared.js (start-up: test/commands-startup.test.js). So is printable().
export { EXIT };
export { printable, printableLines } from "../core/printable.js";

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

/** Load and validate the config. */
export async function load(opt: string | undefined): Promise<Config> {
  return valid((await import("../config/config.js")).loadConfig(configPath(opt)));
}

/** The config, or a usage error listing every problem. */
export async function valid<C extends StatusConfig>(res: {
  config: C | null;
  errors: ConfigError[];
}): Promise<C> {
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

export function findJob<J extends StatusJobConfig>(
  config: { file: string; jobs: J[] },
  name: string,
): J {
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

/**
 * The store of the config's state dir. Every SQLite error its methods throw comes out as a
 * StoreError naming the store's file (read-only, corrupt, busy, full), so the CLI prints one line
 * and the exit code its kind means, never a SqliteError's stack.
 */
export async function openStore(config: Config, create = false, check = false) {
  const store = await import("../store/store.js");
  checkStateDir(config, store.StoreError);
  const target = store.storeTarget(config);
  const file = target.url ?? store.storePath(config.stateDir);
  const opened = await store.openStoreAt(target, { create, busyTimeoutMs: 5000, check });
  return new Proxy(opened, {
    get(target, prop, receiver) {
      const v: unknown = Reflect.get(target, prop, receiver);
      if (typeof v !== "function") return v;
      return (...args: unknown[]) => {
        const named = (e: unknown): never => {
          throw store.storeFailure(file, e) ?? e;
        };
        try {
          const r: unknown = v.apply(target, args);
          return r instanceof Promise ? r.catch(named) : r;
        } catch (e) {
          return named(e);
        }
      };
    },
  });
}

/**
 * A state_dir that exists but is not a directory (a file left where it should be) is refused
 * before anything tries to create a store in it, naming the setting and the config.
 */
export function checkStateDir(
  config: StatusConfig,
  StoreError: typeof import("../store/store.js").StoreError,
): void {
  let st: fs.Stats;
  try {
    st = fs.statSync(config.stateDir);
  } catch {
    return; // missing: created by the commands that create the store, "no store" for the rest
  }
  if (!st.isDirectory())
    throw new StoreError(
      `state_dir ${config.stateDir} is not a directory (state_dir in ${config.file})`,
      "io",
    );
}

/**
 * One line for an error of the file system (a path that cannot be made, read or written), or
 * null for any other error: those are bugs, and keep their stack.
 */
export function systemFailure(e: unknown): string | null {
  const err = e as NodeJS.ErrnoException;
  if (!(e instanceof Error) || typeof err.code !== "string" || typeof err.path !== "string")
    return null;
  const why = ERRNO_WORDS[err.code] ?? err.code;
  return `cronvisor: cannot ${err.syscall ?? "use"} ${err.path}: ${why}`;
}

const ERRNO_WORDS: Record<string, string> = {
  ENOENT: "no such file or directory",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EROFS: "read-only file system",
  ENOSPC: "no space left on device",
  EEXIST: "something else is already there",
  ENOTDIR: "a part of the path is not a directory",
  EISDIR: "is a directory",
  EMFILE: "too many open files",
};

/**
 * The store opened read-only (it writes nothing into the state dir, see OpenOptions), or null
 * when the daemon (or a run) has never created one. What the reading commands use.
 */
export async function openStoreOrEmpty(config: Config) {
  const store = await import("../store/store.js");
  return orEmpty(config, store, store.openStoreAt, false);
}

/**
 * openStoreOrEmpty for `status`: only what status reads (store.ts, openStatusStoreAt), a store
 * at rest read in place unless `inPlace` is false (its caller asks `changedSinceOpen()` before
 * it trusts what it read).
 */
export async function openStatusStoreOrEmpty(config: StatusConfig, inPlace = true) {
  const store = await import("../store/store.js");
  return orEmpty(config, store, store.openStatusStoreAt, inPlace);
}

async function orEmpty<S>(
  config: StatusConfig,
  store: typeof import("../store/store.js"),
  open: (t: StoreTarget, o: OpenOptions) => Promise<S>,
  inPlace: boolean,
): Promise<S | null> {
  checkStateDir(config, store.StoreError);
  try {
    return await open(store.storeTarget(config), {
      create: false,
      readonly: true,
      inPlace,
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

/**
 * A value as indented JSON, one document on stdout. Not through `out`: JSON.stringify returns a
 * rope, and `endsWith` would flatten it into a copy (1.6 MB for `status --json` on 1,000 jobs)
 * before the write flattens it again; JSON text never ends in a newline.
 */
export const outJson = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
};

/** An ISO time as the tables print it: a space for the T, whole seconds; null as "-". */
export const when = (iso: string | null): string =>
  iso === null ? "-" : iso.replace("T", " ").replace(/\.\d{3}Z$/, "Z");
