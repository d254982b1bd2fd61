// The disk the run logs take (logs/JOB/RUN.log in the state dir) and `logs.max_total`. The daemon
// keeps the total as it goes (one stat per ended run, one per removed log; the directory is
// walked once, at the first use), writes it with each heartbeat for `status` (daemon.disk), and,
// past max_total, removes the oldest finished runs' logs first until the total is a tenth under
// it, so that one prune makes room for many runs. A running run's log is never removed, nor is
// anything but a run's log file (a `.tail` ring, a link) counted as removable.
import fs from "node:fs";
import path from "node:path";

/** One run's log on disk. */
export interface LogFile {
  runId: number;
  path: string;
  bytes: number;
}

/** What a prune takes back to: a tenth under the cap. */
const PRUNE_TO = 0.9;

/**
 * Which logs to remove (pure): oldest run first, never one of `running`, until `total` is at
 * most PRUNE_TO of `max`; none while `total` is within `max`.
 */
export function logsToPrune(
  files: readonly LogFile[],
  total: number,
  max: number,
  running: ReadonlySet<number>,
): LogFile[] {
  if (total <= max) return [];
  const target = Math.floor(max * PRUNE_TO);
  const out: LogFile[] = [];
  let left = total;
  for (const f of [...files].sort((a, b) => a.runId - b.runId)) {
    if (left <= target) break;
    if (running.has(f.runId)) continue;
    out.push(f);
    left -= f.bytes;
  }
  return out;
}

const RUN_LOG = /^(\d+)\.log$/;

export class LogBudget {
  private total: number | null = null;

  constructor(
    private readonly stateDir: string,
    /** logs.max_total of the config in force (a reload may change it). */
    private readonly maxBytes: () => number,
    /** How a log goes once counted out: removed, or its inode recycled (run/spare.ts). */
    private readonly discard: (file: string) => void = (file) => fs.rmSync(file, { force: true }),
  ) {}

  /** The bytes the logs take now (the directory walked at the first call). */
  get bytes(): number {
    this.total ??= this.scan().total;
    return this.total;
  }

  /** A run's log is complete: count it. */
  add(file: string): void {
    if (this.total !== null) this.total += sizeOf(file);
  }

  /** Remove a log (a pruned run's) and count it out. */
  remove(file: string): void {
    const size = sizeOf(file);
    this.discard(file);
    if (this.total !== null) this.total = Math.max(0, this.total - size);
  }

  /** Are the logs past logs.max_total? */
  over(): boolean {
    return this.bytes > this.maxBytes();
  }

  /** Past max_total: the logs that go (removed here), oldest first, none of `running`. */
  prune(running: ReadonlySet<number>): LogFile[] {
    const { files, total } = this.scan();
    this.total = total;
    const gone = logsToPrune(files, total, this.maxBytes(), running);
    for (const f of gone) this.remove(f.path);
    return gone;
  }

  /** Every file under logs/ counted; the runs' logs listed. */
  private scan(): { files: LogFile[]; total: number } {
    const root = path.join(this.stateDir, "logs");
    const files: LogFile[] = [];
    let total = 0;
    for (const job of readDir(root)) {
      const dir = path.join(root, job);
      // Never through a link planted in logs/: a root daemon would remove what it points to.
      if (!fs.lstatSync(dir, { throwIfNoEntry: false })?.isDirectory()) continue;
      for (const name of readDir(dir)) {
        const file = path.join(dir, name);
        const st = fs.lstatSync(file, { throwIfNoEntry: false });
        if (!st?.isFile()) continue;
        total += st.size;
        const m = RUN_LOG.exec(name);
        if (m) files.push({ runId: Number(m[1]), path: file, bytes: st.size });
      }
    }
    return { files, total };
  }
}

function readDir(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return []; // none yet, or not a directory: nothing of ours to count
  }
}

function sizeOf(file: string): number {
  const st = fs.lstatSync(file, { throwIfNoEntry: false });
  return st?.isFile() ? st.size : 0;
}
