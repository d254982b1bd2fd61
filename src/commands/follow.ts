// Copying a run's log to stdout, once or while the run goes on (`logs --follow`).
import fs from "node:fs";
import { READ_NOFOLLOW } from "../core/safe-path.js";

/** Polls the log every 250 ms while `running()` says so; a log rewritten shorter starts over. */
export async function copyLog(
  logPath: string,
  follow: boolean,
  running: () => Promise<boolean>,
): Promise<void> {
  let offset = 0;
  const pump = (): void => {
    offset = copyFrom(logPath, offset);
  };
  pump();
  while (follow && (await running())) {
    await new Promise((r) => setTimeout(r, 250));
    pump();
  }
  if (follow) pump();
}

/** Write the file from `offset` to its end on stdout; the new offset. A missing file is empty. */
function copyFrom(logPath: string, offset: number): number {
  let fd: number;
  try {
    // Never through a link planted at the log's path, never blocking on a FIFO there.
    fd = fs.openSync(logPath, READ_NOFOLLOW);
  } catch {
    return offset;
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) return offset;
    const size = st.size;
    if (size < offset) offset = 0; // the log was rewritten (head + tail at the end of a capped run)
    const buf = Buffer.alloc(64 * 1024);
    while (offset < size) {
      const n = fs.readSync(fd, buf, 0, buf.length, offset);
      if (n <= 0) break;
      process.stdout.write(buf.subarray(0, n));
      offset += n;
    }
  } finally {
    fs.closeSync(fd);
  }
  return offset;
}
