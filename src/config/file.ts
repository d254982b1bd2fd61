// The two inputs of a parse that come from outside the text: the config file's bytes and the
// host's time zone. Shared by loadConfig (load.ts) and the cache `status` reads (config-cache.ts),
// so that both read the file and report a file that cannot be read in exactly the same way.
import fs from "node:fs";
import path from "node:path";
import type { ConfigError } from "../core/types.js";

/** The config file's bytes, or the one error a file that cannot be read is (at 1:1). */
export function readConfigFile(file: string): { bytes: Buffer } | { error: ConfigError } {
  try {
    return { bytes: fs.readFileSync(path.resolve(file)) };
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    const why =
      err.code === "ENOENT"
        ? "no such file"
        : err.code === "EACCES"
          ? "permission denied"
          : err.code === "EISDIR"
            ? "is a directory"
            : err.message;
    return { error: { file, line: 1, col: 1, path: "(file)", message: `cannot read: ${why}` } };
  }
}

/** The zone a config without `timezone:` gets. */
export function hostTimezone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone;
}
