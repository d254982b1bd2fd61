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
 * not exist yet end the walk: makeDirs creates them, checking each, and the caller checks again.
 * Empty when safe.
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
      const link = readlinkOrNull(cur);
      // Gone (or replaced) between the lstat and the readlink: someone is changing it right now.
      if (link === null)
        return [
          ...problems,
          `${cur} changed while cronvisor checked it; check who can write there`,
        ];
      const target = path.resolve(path.dirname(cur), link);
      todo = [...target.split("/").filter(Boolean), ...todo];
      cur = "/";
      continue;
    }
    const next = todo.shift();
    if (next === undefined) return problems;
    cur = path.join(cur, next);
  }
}

/**
 * Make directory `p` and each missing directory above it (all `mode`), one component at a time
 * with a plain mkdir, never a recursive one, and check every component on the way as it is
 * reached: a path check stops at the first component that does not exist yet, so another user
 * who can write the directory above it (a sticky /tmp) could plant a link there between the check
 * and the mkdir and take the rest of the path, and everything written below it, into their own
 * directory. So: a component that exists (or that someone else made first: EEXIST) must not be
 * owned by an untrusted user (a link of theirs, a directory of theirs); a component made here, or
 * found made a moment before, must be a real directory, owned by a trusted user, that others
 * cannot write. The first that is not stops the walk: its problem is returned and nothing is made
 * below it. Call pathProblems after this for the whole path (links followed, modes of what
 * existed). Throws mkdir's own errors (EACCES, EROFS, ENOSPC, ...).
 */
export function makeDirs(p: string, trust: Trust, mode = 0o700): string[] {
  let cur = "/";
  for (const part of path.resolve(p).split("/").filter(Boolean)) {
    cur = path.join(cur, part);
    const found = lstatOrNull(cur);
    if (found) {
      if (!trust.uids.has(found.uid)) return [ownerProblem(cur, found)];
      continue;
    }
    let made = true;
    try {
      fs.mkdirSync(cur, { mode });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      made = false;
    }
    const why = madeProblem(cur, lstatOrNull(cur), trust, made);
    if (why) return [why];
  }
  return [];
}

/** Why a directory just made (or found made by someone else a moment before) is not ours. */
function madeProblem(p: string, st: fs.Stats | null, trust: Trust, made: boolean): string | null {
  const by = made ? "made by cronvisor a moment ago" : "made by someone else as cronvisor made it";
  const ahead = "make it ahead, as root, where no other user can write";
  if (!st) return `${p} (${by}) is gone again; ${ahead}`;
  if (st.isSymbolicLink())
    return `${p} is a symbolic link owned by uid ${st.uid}, ${by}; nothing was made through it; ${ahead}`;
  if (!st.isDirectory()) return `${p} is not a directory (${by}); ${ahead}`;
  return entryProblem(p, st, trust);
}

/** An existing component on the way that is not a trusted user's (a link or directory of theirs). */
const ownerProblem = (p: string, st: fs.Stats): string =>
  st.isSymbolicLink()
    ? `${p} is a symbolic link owned by uid ${st.uid}, who could change what it names; remove it`
    : `${p} is owned by uid ${st.uid}, who could change what it names; chown root it`;

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

function readlinkOrNull(p: string): string | null {
  try {
    return fs.readlinkSync(p);
  } catch {
    return null;
  }
}

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

/** A file that must not exist yet (a temporary one, linked into place once it is whole). */
export const WRITE_NEW =
  fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW;
