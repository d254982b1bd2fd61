// Paths a root daemon trusts. Node 20 has no openat(), and SQLite resolves symlinks in its own
// path, so a path is safe only if nobody but the trusted users can change what it names: every
// directory on the way (symlinks followed, each link's own directory checked first) is owned by
// a trusted user and not writable by others, unless sticky (/tmp); the last component is opened
// with O_NOFOLLOW where cronvisor opens it itself. Checked with lstat at start and at every
// reload; a problem names the path and what to change.
import fs from "node:fs";
import path from "node:path";

/** Symlink hops followed before giving up (as the kernel's ELOOP limit). */
const MAX_LINKS = 40;

export interface Trust {
  /** Owners whose directories and files are trusted: root and the daemon's own user. */
  uids: ReadonlySet<number>;
}

export function daemonTrust(): Trust {
  return { uids: new Set([0, process.getuid?.() ?? 0]) };
}

/**
 * Why `p` (absolute, or relative to the working dir) could be changed by an untrusted user:
 * every directory from / down to its parent, and `p` itself if it exists. Components that do
 * not exist yet end the walk (the daemon creates its state dir 0700). Empty when safe.
 */
export function pathProblems(p: string, trust: Trust): string[] {
  const problems: string[] = [];
  let todo = path.resolve(p).split("/").filter(Boolean);
  let cur = "/";
  for (let hops = 0; ;) {
    const st = lstatOrNull(cur);
    if (!st) return problems;
    const why = entryProblem(cur, st, trust);
    if (why) problems.push(why);
    if (st.isSymbolicLink()) {
      if (++hops > MAX_LINKS) return [...problems, `${cur}: too many symbolic links`];
      const target = path.resolve(path.dirname(cur), fs.readlinkSync(cur));
      todo = [...target.split("/").filter(Boolean), ...todo];
      cur = "/";
      continue;
    }
    const next = todo.shift();
    if (next === undefined) return problems;
    cur = path.join(cur, next);
  }
}

function entryProblem(p: string, st: fs.Stats, trust: Trust): string | null {
  if (!trust.uids.has(st.uid))
    return `${p} is owned by uid ${st.uid}, who could change what it names; chown root it`;
  if (st.isSymbolicLink()) return null; // a link's own mode means nothing
  const sticky = (st.mode & 0o1000) !== 0 && st.isDirectory();
  if ((st.mode & 0o002) !== 0 && !sticky)
    return `${p} is writable by others (mode ${mode(st)}); chmod o-w it`;
  if ((st.mode & 0o020) !== 0 && st.gid !== 0 && !sticky)
    return `${p} is writable by group ${st.gid} (mode ${mode(st)}); chmod g-w it`;
  return null;
}

const mode = (st: fs.Stats): string => (st.mode & 0o7777).toString(8);

function lstatOrNull(p: string): fs.Stats | null {
  try {
    return fs.lstatSync(p);
  } catch {
    return null;
  }
}

/** Flags for opening a file cronvisor reads that must be a regular file and never a link. */
export const READ_NOFOLLOW =
  fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK;

/** A new file cronvisor writes (a log, an exit file): never through a link planted in its place. */
export const WRITE_NOFOLLOW =
  fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC | fs.constants.O_NOFOLLOW;
