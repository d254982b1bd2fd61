// The run's log file, capped: the first half of the cap from the start of the output, the
// other half from its end, with a marker line saying how much was cut between them. Opening it
// may throw (the run then fails to spawn); after that, writes are synchronous (one chunk in
// memory at most) and never throw: a full disk must not end a run.
import fs from "node:fs";
import path from "node:path";
import type { LogTotals } from "../core/result.js";
import { WRITE_NEW, WRITE_NOFOLLOW } from "../core/safe-path.js";
import { takeSpare } from "./spare.js";

/**
 * Directories this process has made (or found) already: mkdir on every run start was a tenth of
 * the daemon's per-run CPU. A directory removed behind its back is made again when opening a
 * file in it fails (see openIn).
 */
const madeDirs = new Set<string>();

export function ensureDir(dir: string): void {
  if (madeDirs.has(dir)) return;
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  madeDirs.add(dir);
}

/** openSync in a directory ensureDir made, making it again if it has gone since. */
function openIn(file: string, flags: number, mode: number): number {
  ensureDir(path.dirname(file));
  try {
    return fs.openSync(file, flags, mode);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
    madeDirs.delete(path.dirname(file));
    ensureDir(path.dirname(file));
    return fs.openSync(file, flags, mode);
  }
}

/**
 * A run's log is a new file (run ids are fresh): created 0600 (a log may hold secrets) in one
 * call. Only a file already there (a run recorded again) is truncated and given that mode, and
 * a link planted there is refused (ELOOP) either way.
 */
function openLog(file: string): number {
  ensureDir(path.dirname(file));
  // A spare inode linked into place (spare.ts: creating a file is what costs here), made ours
  // like a file already there.
  if (takeSpare(file)) {
    try {
      const fd = fs.openSync(file, WRITE_NOFOLLOW, 0o600);
      fs.fchmodSync(fd, 0o600);
      return fd;
    } catch {
      // a spare that cannot be opened: the paths below report what is there
    }
  }
  try {
    return openIn(file, WRITE_NEW, 0o600);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
  }
  const fd = openIn(file, WRITE_NOFOLLOW, 0o600);
  fs.fchmodSync(fd, 0o600);
  return fd;
}

/**
 * The run's log, at most `maxBytes` (+ one marker line) on disk and never more than one chunk
 * in memory. The first half of the cap goes straight into the log file; after that the output
 * goes round a ring file of the other half (`LOG.tail`), so it always holds the latest bytes.
 * finish() appends the marker and the ring, oldest byte first, and removes the ring.
 */
export class CappedLog {
  private readonly fd: number;
  private readonly headMax: number;
  private readonly ringMax: number;
  private readonly ringPath: string;
  private ringFd: number | null = null;
  private head = 0;
  /** Bytes that went to the ring so far; the ring holds the last min(this, ringMax) of them. */
  private ringBytes = 0;
  /** Everything the job wrote, kept or not. */
  private total = 0;
  private error: NodeJS.ErrnoException | null = null;
  private finished: LogTotals | null = null;

  constructor(
    readonly file: string,
    maxBytes: number,
  ) {
    this.fd = openLog(file);
    this.headMax = Math.max(0, Math.floor(maxBytes / 2));
    this.ringMax = Math.max(0, Math.floor(maxBytes) - this.headMax);
    this.ringPath = `${file}.tail`;
  }

  /** Synchronous: a chunk is on disk (page cache) before the next one is read from the pipe. */
  write(chunk: Buffer): void {
    this.total += chunk.length;
    // After a failed write (a full disk) keep reading the pipe, so the job is not blocked.
    if (this.error) return;
    try {
      const toHead = Math.min(chunk.length, this.headMax - this.head);
      if (toHead > 0) fs.writeSync(this.fd, chunk, 0, toHead);
      this.head += toHead;
      if (toHead < chunk.length) this.toRing(chunk.subarray(toHead));
    } catch (e) {
      this.error = e as NodeJS.ErrnoException;
    }
  }

  private toRing(data: Buffer): void {
    const total = this.ringBytes + data.length;
    this.ringBytes = total;
    if (this.ringMax === 0) return;
    this.ringFd ??= fs.openSync(
      this.ringPath,
      (WRITE_NOFOLLOW & ~fs.constants.O_WRONLY) | fs.constants.O_RDWR,
      0o600,
    );
    const keep = data.subarray(Math.max(0, data.length - this.ringMax));
    let pos = (total - keep.length) % this.ringMax;
    let off = 0;
    while (off < keep.length) {
      const n = Math.min(keep.length - off, this.ringMax - pos);
      fs.writeSync(this.ringFd, keep, off, n, pos);
      off += n;
      pos = (pos + n) % this.ringMax;
    }
  }

  /** Assemble and close; idempotent. `note` is appended after the output (spawn failures). */
  finish(note?: string): LogTotals {
    if (this.finished) return this.finished;
    const kept = Math.min(this.ringBytes, this.ringMax);
    const cut = this.total - this.head - kept;
    try {
      if (this.error) throw this.error;
      if (cut > 0) fs.writeSync(this.fd, `\n[cronvisor: ${cut} bytes cut]\n`);
      if (this.ringMax > 0 && this.ringBytes > this.ringMax) {
        // The ring has wrapped: its oldest byte sits right after the newest one.
        const start = this.ringBytes % this.ringMax;
        this.copyRing(start, this.ringMax - start);
        this.copyRing(0, start);
      } else if (kept > 0) {
        this.copyRing(0, kept);
      }
      if (note) fs.writeSync(this.fd, note);
    } catch (e) {
      this.error ??= e as NodeJS.ErrnoException;
      try {
        fs.writeSync(
          this.fd,
          `\n[cronvisor: log write failed: ${this.error.code ?? this.error.message}]\n`,
        );
      } catch {
        // the disk is still full: the run's record says the log is truncated
      }
    }
    for (const close of [
      () => this.ringFd !== null && fs.closeSync(this.ringFd),
      () => this.ringFd !== null && fs.unlinkSync(this.ringPath),
      () => fs.closeSync(this.fd),
    ]) {
      try {
        close();
      } catch {
        // nothing more to do about it; the result below is still true
      }
    }
    this.finished = { bytes: this.total, truncated: cut > 0 || this.error !== null };
    return this.finished;
  }

  private copyRing(from: number, length: number): void {
    const buf = Buffer.allocUnsafe(Math.min(length, 64 * 1024));
    for (let done = 0; done < length;) {
      const n = fs.readSync(
        this.ringFd as number,
        buf,
        0,
        Math.min(buf.length, length - done),
        from + done,
      );
      if (n === 0) break;
      fs.writeSync(this.fd, buf, 0, n);
      done += n;
    }
  }
}
