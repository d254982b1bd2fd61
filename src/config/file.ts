// The two inputs of a parse that come from outside the text: the config file's bytes and the
// host's time zone. Shared by loadConfig (load.ts) and the cache `status` reads (config-cache.ts),
// so that both read the file and report a file that cannot be read in exactly the same way.
import fs from "node:fs";
import path from "node:path";
import type { ConfigError } from "../core/types.js";
import { hostZone } from "../schedule/host-zone.js";

/**
 * The config file's bytes, or the one error a file that cannot be read is (at 1:1). Opened
 * without blocking and checked to be a regular file before it is read: a FIFO (or a device) put
 * where the config should be is refused at once instead of waiting forever for a writer.
 */
export function readConfigFile(file: string): { bytes: Buffer } | { error: ConfigError } {
  const cannot = (why: string) => ({
    error: { file, line: 1, col: 1, path: "(file)", message: `cannot read: ${why}` },
  });
  let fd: number;
  try {
    fd = fs.openSync(path.resolve(file), fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  } catch (e) {
    return cannot(readError(e));
  }
  try {
    const st = fs.fstatSync(fd);
    if (st.isDirectory()) return cannot("is a directory");
    if (!st.isFile()) return cannot("not a regular file");
    return { bytes: fs.readFileSync(fd) };
  } catch (e) {
    return cannot(readError(e));
  } finally {
    fs.closeSync(fd);
  }
}

function readError(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  return err.code === "ENOENT"
    ? "no such file"
    : err.code === "EACCES"
      ? "permission denied"
      : err.code === "EISDIR"
        ? "is a directory"
        : err.message;
}

/** The zone a config without `timezone:` gets: TZ, else /etc (schedule/host-zone.ts). */
export function hostTimezone(): string {
  return hostZone(process.env.TZ, "/etc");
}
