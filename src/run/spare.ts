// Spare files: the inodes of finished runs' exit files, kept by the daemon to become its later
// runs' log files instead of being freed. Only exit files: no one but the daemon and the spawner
// ever opens one. A pruned log may still be open in a reader (`logs --follow`, the page), who
// must never see a later run's output through it: it goes to the spawner (recycleLog), which
// keeps it for a later exit file only while no one holds it open. On ext4 without a journal,
// creating a file scans past every inode freed in its block group in the last ~30 s
// (`recently_deleted`):
// with one exit file freed per run, that was 0.3 to 1.7 ms of the daemon's CPU per log created,
// about half of its own per-run cost (perf, BENCHMARKS.md "Issue 16: the run path, continued"),
// against 0.07 ms to link a spare into place. A spare is never freed, so it adds nothing to the
// scan either. With a journal (or another filesystem) a spare costs about what a create does.
// Still paying (issue 38, side by side on ext4 without a journal, 50 per-second jobs, 20
// alternating 5 s rounds each under load): 2.35 ms of CPU per run (daemon + children) with spares
// against 3.08 without, the daemon with its spawner 1.56 against 2.45 (medians); dearer without
// in 18 of the 20 rounds.
import fs from "node:fs";
import path from "node:path";

/**
 * More than a tick's worth of runs (the pool fills as runs end and empties as the next tick's
 * start); past it a retired file is removed as before. At 512, a tick of 600 runs removed 88
 * exit files and created as many logs each second.
 */
const MAX_SPARES = 4096;

/** Spare paths, newest last; each an empty regular file of ours, with one link. */
const spares: string[] = [];
let counter = 0;
const SUFFIX = ".spare";

/** A new spare's name in `stateDir`/runs: this daemon's pid first (a spawner's start with `s`). */
function spareName(stateDir: string): string {
  return path.join(stateDir, "runs", `${process.pid}-${counter++}${SUFFIX}`);
}

const NOFOLLOW_WRITE = fs.constants.O_WRONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK;

/**
 * Instead of removing `file` (a finished run's exit file, once read), empty it and keep
 * its inode as a spare in `stateDir`/runs, when it is a plain file of this process's user with no
 * other name. Anything else (a link or a FIFO planted in its place, a file also linked elsewhere,
 * another user's) is removed, never followed, as before. Never throws.
 */
export function retire(file: string, stateDir: string): void {
  if (spares.length < MAX_SPARES && keep(file, stateDir)) return;
  try {
    fs.rmSync(file, { force: true });
  } catch {
    // best effort, as removing the exit file always was
  }
}

function keep(file: string, stateDir: string): boolean {
  let fd: number;
  try {
    fd = fs.openSync(file, NOFOLLOW_WRITE);
  } catch {
    return false; // gone, a link (ELOOP), a FIFO without a reader (ENXIO): removed instead
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.nlink !== 1 || st.uid !== (process.getuid?.() ?? st.uid)) return false;
    if (st.size > 0) fs.ftruncateSync(fd, 0);
    const spare = spareName(stateDir);
    fs.renameSync(file, spare);
    spares.push(spare);
    return true;
  } catch {
    return false;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * A pruned log (its run is over): its name goes at once, as removing it did, and its inode to
 * `give` (Spawner.recycle), which makes it a later run's exit file if no one holds it open, so
 * that an inode serves run after run and none is created or freed per run. Removed when there is
 * nothing to give it to or the rename fails. Never throws.
 */
export function recycleLog(
  file: string,
  stateDir: string,
  give: ((spare: string) => boolean) | null,
): void {
  let name = file;
  try {
    if (give !== null) {
      const spare = spareName(stateDir);
      fs.renameSync(file, spare); // never follows `file`: a planted link is the spawner's to refuse
      name = spare;
      if (give(spare)) return;
    }
  } catch {
    // gone already, or on another filesystem than runs/ (EXDEV): removed as before
  }
  try {
    fs.rmSync(name, { force: true });
  } catch {
    // best effort, as removing a pruned log always was
  }
}

/**
 * Give `file` (a new run's log, in a directory that exists) a spare's inode: link it there and
 * drop the spare's name. False when there is no spare, or something is at `file` already (the
 * caller's own open then refuses a link or truncates a file, as without spares).
 */
export function takeSpare(file: string): boolean {
  for (;;) {
    const spare = spares.pop();
    if (spare === undefined) return false;
    try {
      fs.linkSync(spare, file); // link(2) never follows `spare` and never replaces `file`
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "EEXIST") {
        spares.push(spare);
        return false;
      }
      if (code === "ENOENT" && fs.existsSync(spare)) {
        spares.push(spare); // the log's directory went: the caller's own open makes it again
        return false;
      }
      // The spare is gone, or on another filesystem than the log (EXDEV): try the next one.
      fs.rmSync(spare, { force: true });
      continue;
    }
    try {
      fs.unlinkSync(spare);
    } catch {
      // the log has the inode; a leftover name is cleared at the next start
    }
    return true;
  }
}

/** At a daemon's start: spares an earlier daemon left (it kept them in memory only). */
export function clearSpares(stateDir: string): void {
  const dir = path.join(stateDir, "runs");
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return; // no runs/ yet
  }
  for (const n of names)
    if (n.endsWith(SUFFIX) && !spares.includes(path.join(dir, n)))
      fs.rmSync(path.join(dir, n), { force: true });
}

/** How many spares this process holds (tests, the benchmarks' notes). */
export function spareCount(): number {
  return spares.length;
}
