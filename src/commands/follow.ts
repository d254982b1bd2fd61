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
  const pump = async (): Promise<void> => {
    offset = await copyFrom(logPath, offset);
  };
  await pump();
  while (follow && (await running())) {
    await new Promise((r) => setTimeout(r, 250));
    await pump();
  }
  if (follow) await pump();
}

/**
 * Write `chunk` to stdout, waiting for the stream to drain when it asks. A pipe's writes are
 * asynchronous: the stream keeps `chunk` itself until written, so it must never be reused.
 */
function write(chunk: Buffer): Promise<void> {
  if (process.stdout.write(chunk)) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const done = (e?: Error): void => {
      process.stdout.off("drain", done);
      process.stdout.off("error", done);
      if (e) reject(e);
      else resolve();
    };
    process.stdout.once("drain", done);
    process.stdout.once("error", done);
  });
}

/** Write the file from `offset` to its end on stdout; the new offset. A missing file is empty. */
async function copyFrom(logPath: string, offset: number): Promise<number> {
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
    while (offset < size) {
      // A buffer per chunk: the one written may still be queued when the next is read.
      const buf = Buffer.allocUnsafe(64 * 1024);
      const n = fs.readSync(fd, buf, 0, buf.length, offset);
      if (n <= 0) break;
      await write(buf.subarray(0, n));
      offset += n;
    }
  } finally {
    fs.closeSync(fd);
  }
  return offset;
}
