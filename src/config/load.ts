// loadConfig: read the config file, then parse it (parse.ts). The only I/O of the config stage
// besides the cache that `status` reads (config-cache.ts).
import { createHash } from "node:crypto";
import { saveConfigCache } from "./config-cache.js";
import { hostTimezone, readConfigFile } from "./file.js";
import { parseConfig, type ParseResult } from "./parse.js";

/** Read the config file and parse it. A file that cannot be read is one error at 1:1. */
export function loadConfig(file: string): ParseResult {
  return loadConfigCacheable(file).result;
}

/**
 * loadConfig, plus `saveCache`: write the state dir's copy of exactly what was parsed, for
 * `status` (src/config/config-cache.ts); a no-op if the parse failed. The daemon calls it once its
 * store has opened (start) or the new config is accepted (reload). Nothing here reads that copy.
 * `hash`: the sha256 (hex) of the bytes parsed, which the daemon records with the config it runs;
 * null if the file could not be read.
 */
export function loadConfigCacheable(file: string): {
  result: ParseResult;
  saveCache: () => void;
  hash: string | null;
} {
  const read = readConfigFile(file);
  if ("error" in read)
    return { result: { config: null, errors: [read.error] }, saveCache: () => {}, hash: null };
  const zone = hostTimezone();
  const result = parseConfig(read.bytes.toString("utf8"), file, { hostTimezone: zone });
  const { config } = result;
  return {
    result,
    hash: createHash("sha256").update(read.bytes).digest("hex"),
    saveCache: () => {
      if (config) saveConfigCache(config, read.bytes, zone);
    },
  };
}
