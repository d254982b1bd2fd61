// The last bytes of a finished run's log file, which a shared store keeps so that `cronvisor logs`
// works from any node. The path comes from the store, so it is opened as every log is: never
// through a symlink, never a FIFO or a device (a root daemon reads it).
import fs from "node:fs";

/** How much of a run's log a shared store keeps. */
export const LOG_TAIL_BYTES = 64 * 1024;

/** The last `max` bytes of the log at `file`, or null when there is no regular file to read. */
export function readLogTail(file: string, max = LOG_TAIL_BYTES): Buffer | null {
  let fd: number;
  try {
    const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
    fd = fs.openSync(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) return null;
    const size = Math.min(st.size, max);
    const buf = Buffer.alloc(size);
    const n = fs.readSync(fd, buf, 0, size, st.size - size);
    return buf.subarray(0, n);
  } catch {
    return null;
  } finally {
    fs.closeSync(fd);
  }
}
