// A validated config, kept as JSON in the state dir, so that `status` need not parse a big YAML
// file cold (150 to 300 ms for 1,000 jobs, plus ~100 ms to load the YAML parser) on every call.
//
// The cache is only ever a copy of (a cut of) what parseConfig returned for exactly these
// inputs, so it is used only while they all match: the config's absolute path, its exact text
// (kept in the cache and compared whole; the file is read every time), the host's time zone (the
// default of `timezone:`), the Node version (its time zone data decides which zones are valid),
// cronvisor's version, the identity of the modules that build a Config, and this file's format
// number. A mismatch, or a cache that is missing, unreadable, corrupt, not ours or writable by
// others, means a real parse. Only a successful parse is cached: a config with errors is parsed
// (and reported) every time. env_file contents are not part of a Config (they are read at each
// run start), so they are not a key.
//
// It keeps what `status` reads of each job, not the whole Config (StatusConfig, core/types.ts):
// for 1,000 jobs, a file of 282 KB to read and parse instead of 562.
//
// Only `status` reads the cache. The daemon always parses for real and refreshes the cache once
// its store is open (start) and after each accepted reload; `status` writes it after a miss.
// Writing is best effort: temp file + rename, mode 0600, only into a state dir that exists and is
// ours; never an error.
//
// The config's text is compared whole (its JSON is read anyway); the modules are known by a
// SHA-256 of their contents, never their mtimes, so a copy of the build (cp, rsync, npm install)
// keeps its cache, and the bundle and dist/ compute the same key. The bundle carries the digest
// of its build, written in by scripts/bundle.js (BUNDLED_BUILD_ID), so a plain `status` neither
// reads those modules nor loads node:crypto: side by side (issue 38, 60 alternating rounds of
// `status --json` on 1,000 jobs), 78.4 ms of CPU with it against 81.0 without (medians).
import type { Hash } from "node:crypto";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { STATUS_JOB_KEYS, type Config, type StatusConfig } from "../core/types.js";
import { VERSION } from "../core/version.js";
import { hostTimezone, readConfigFile } from "./file.js";
import type { ParseResult } from "./parse.js";

export const CONFIG_CACHE_FILE = "config-cache.json";
/** Bump when the file's layout or the shape of Config changes. */
const FORMAT = 3;
/** A parse result (parse.ts's ParseResult), whose config on a hit is the cache's StatusConfig. */
export type LoadResult = Omit<ParseResult, "config"> & { config: StatusConfig | null };

type Key = Record<string, string | number>;

interface CacheFile {
  key: Key;
  config: StatusConfig;
}

/** The part of `config` that status reads: every top-level key, each job's STATUS_JOB_KEYS. */
export function statusView(config: Config): StatusConfig {
  const jobs = config.jobs.map((j) => {
    const o: Partial<Record<string, unknown>> = {};
    for (const k of STATUS_JOB_KEYS) o[k] = j[k];
    return o as unknown as StatusConfig["jobs"][number];
  });
  return { ...config, jobs };
}

// The modules that turn YAML into a Config are every module of these folders (next to this
// file's compiled copy): listed by reading the folders, not by hand, so that a module added by a
// later split is part of the key too.
const PARSER_DIRS = ["./", "../schedule/", "../core/"];

/**
 * buildId() as it was when scripts/bundle.js made the bundle this copy of the module is in (the
 * script writes it here); null in dist/'s own module. The same contents give the same digest, so
 * it is the key dist/'s modules compute too, wherever the build was copied.
 */
const BUNDLED_BUILD_ID: string | null = null;

let build: string | undefined = BUNDLED_BUILD_ID ?? undefined;
/** cronvisor's version and a digest of the names and contents of the modules that build a Config. */
export function buildId(): string {
  if (build === undefined) {
    // Required here, not imported: the bundle never gets here, and never loads node:crypto.
    const { createHash } = createRequire(import.meta.url)(
      "node:crypto",
    ) as typeof import("node:crypto");
    const hash = createHash("sha256");
    for (const rel of PARSER_DIRS)
      hashModules(fileURLToPath(new URL(rel, import.meta.url)), rel, hash);
    build = `${VERSION} ${hash.digest("hex")}`;
  }
  return build;
}

/** Each .js file under `dir` into `hash`, name then bytes, in a stable order; "?" if unreadable. */
function hashModules(dir: string, prefix: string, hash: Hash): void {
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    hash.update(`${prefix} ?\0`);
    return;
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    const { name } = entry;
    const full = path.join(dir, name);
    if (entry.isDirectory()) {
      hashModules(full, `${prefix}${name}/`, hash);
    } else if (name.endsWith(".js")) {
      let bytes: Buffer | string;
      try {
        bytes = fs.readFileSync(full);
      } catch {
        bytes = "?";
      }
      hash.update(`${prefix}${name}\0${bytes.length}\0`);
      hash.update(bytes);
    }
  }
}

/** A Config is made from the file's text (parse.ts), so the text, not the bytes, is the key. */
function keyOf(file: string, text: string, zone: string): Key {
  return {
    format: FORMAT,
    cronvisor: buildId(),
    node: process.version,
    file: path.resolve(file),
    text,
    host_timezone: zone,
  };
}

const sameKey = (a: Key, b: unknown): boolean => {
  if (b === null || typeof b !== "object") return false;
  const o = b as Key;
  const ka = Object.keys(a);
  return ka.length === Object.keys(o).length && ka.every((k) => a[k] === o[k]);
};

/**
 * Where the cache would be, without parsing: the state dir named by a plain top-level
 * `state_dir:` line (or the default). null when the line is written in a way this does not read
 * (flow style, anchors, a block scalar): then the cache is simply not used. A wrong guess costs
 * only speed: a cache is used only if the config it holds names the dir it was found in.
 */
export function guessStateDir(file: string, text: string): string | null {
  const lines = text.match(/^state_dir[ \t]*:.*$/gm);
  let value = "./.cronvisor";
  if (lines !== null) {
    if (lines.length !== 1) return null;
    const raw = (lines[0] as string).replace(/^state_dir[ \t]*:[ \t]*/, "").trimEnd();
    let m: RegExpMatchArray | null;
    if ((m = raw.match(/^"((?:[^"\\]|\\.)*)"(?:[ \t]+#.*)?$/))) {
      try {
        value = JSON.parse(`"${m[1]}"`) as string;
      } catch {
        return null;
      }
    } else if ((m = raw.match(/^'((?:[^']|'')*)'(?:[ \t]+#.*)?$/))) {
      value = (m[1] as string).replace(/''/g, "'");
    } else {
      value = raw.replace(/[ \t]+#.*$/, "");
      if (value === "" || /^[&*!{[|>%@`"'#]/.test(value)) return null;
    }
  }
  return path.resolve(path.dirname(path.resolve(file)), value);
}

/** The cached config if it is there, ours and made from exactly these inputs; else null. */
function readCache(dir: string, key: Key): StatusConfig | null {
  let fd: number;
  try {
    fd = fs.openSync(
      path.join(dir, CONFIG_CACHE_FILE),
      fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW,
    );
  } catch {
    return null;
  }
  try {
    const st = fs.fstatSync(fd);
    const uid = process.geteuid?.() ?? -1;
    // Someone else's file, or one others may write, could say anything: not trusted.
    if (!st.isFile() || (st.uid !== uid && st.uid !== 0) || (st.mode & 0o022) !== 0) return null;
    const c = JSON.parse(fs.readFileSync(fd, "utf8")) as Partial<CacheFile> | null;
    if (!c || !sameKey(key, c.key)) return null;
    return checkedConfig<StatusConfig>(c.config, String(key.file), dir);
  } catch {
    return null;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * A config read back from its JSON form: this cache's StatusConfig, or the whole Config the daemon
 * records in the store as the config it runs (`C`, unchecked beyond the top-level keys below).
 * null unless it is the config of `file` with its state in `stateDir`: a copy found elsewhere, or
 * of another file, is not used.
 */
export function checkedConfig<C extends StatusConfig = Config>(
  value: unknown,
  file: string,
  stateDir: string,
): C | null {
  if (value === null || typeof value !== "object") return null;
  const config = value as Partial<C>;
  if (
    config.file !== file ||
    config.stateDir !== stateDir ||
    !Array.isArray(config.jobs) ||
    typeof config.timezone !== "string"
  )
    return null;
  return config as C;
}

/** Write the cache for `config` (best effort: any failure leaves things as they were). */
function writeCache(config: Config, key: Key): void {
  const dir = config.stateDir;
  let tmp: string | null = null;
  try {
    // Only into an existing state dir of ours: never create one, never leave a file owned by
    // another user (root running `status`) in a daemon's state dir.
    const st = fs.statSync(dir);
    if (!st.isDirectory() || st.uid !== (process.geteuid?.() ?? -1)) return;
    const body = JSON.stringify({ key, config: statusView(config) } satisfies CacheFile);
    tmp = path.join(dir, `.${CONFIG_CACHE_FILE}.${process.pid}.tmp`);
    fs.writeFileSync(tmp, body, { mode: 0o600, flag: "wx" });
    fs.renameSync(tmp, path.join(dir, CONFIG_CACHE_FILE));
    tmp = null;
  } catch {
    // read-only state dir, full disk, a directory in the way: the next call parses again
  } finally {
    if (tmp !== null) fs.rmSync(tmp, { force: true });
  }
}

/** After a successful parse of `bytes`: refresh the cache (the daemon; `status` after a miss). */
export function saveConfigCache(config: Config, bytes: Buffer, zone: string): void {
  writeCache(config, keyOf(config.file, bytes.toString("utf8"), zone));
}

/**
 * loadConfig for `status`: the cached Config when its key matches, else a real parse (whose
 * result, if valid, is cached). Errors are never cached, so they read exactly as from loadConfig.
 */
export async function loadConfigCached(file: string): Promise<LoadResult> {
  const read = readConfigFile(file);
  if ("error" in read) return { config: null, errors: [read.error] };
  const zone = hostTimezone();
  const text = read.bytes.toString("utf8");
  const dir = guessStateDir(file, text);
  const key = keyOf(file, text, zone);
  if (dir !== null) {
    const config = readCache(dir, key);
    if (config !== null) return { config, errors: [] };
  }
  const { parseConfig } = await import("./parse.js");
  const res = parseConfig(text, file, { hostTimezone: zone });
  if (res.config) writeCache(res.config, key);
  return res;
}
