// The exit-status file: a wrapper shell runs the job and writes its exit status to a file under
// the state dir, so a daemon restarted while the job runs (which cannot wait() for a process it
// did not start) still learns how it ended. This module owns its path, the wrapper, reading it
// back and removing it once the end is recorded.
import fs from "node:fs";
import path from "node:path";
import { READ_NOFOLLOW } from "../core/safe-path.js";
import { ensureDir } from "./log.js";
import { retire } from "./spare.js";

/**
 * `sh -c EXIT_WRAPPER cronvisor-run EXITFILE ARGV...` runs ARGV and writes its exit status to
 * EXITFILE.
 * - The job runs in the foreground: a trapped signal then waits until the job has ended, so
 *   the wrapper outlives the job without a wait loop. Signals go to the whole group, so the job
 *   gets its own SIGTERM (once; nothing is forwarded) and keeps its kill_grace for cleanup.
 * - `trap :` (not `trap ''`): an ignored signal would be inherited by the job; a trapped one
 *   is reset to the default in it.
 * - The shell's own stderr goes to /dev/null so its "Killed" notices stay out of the job's log;
 *   the job gets the real stderr back (fd 3) in a subshell, where the redirection lives.
 * - A job killed by signal N shows as 128+N here (sh cannot tell that from `exit 128+N`).
 * - `set -C` (noclobber: O_EXCL) before writing: the status never goes through a link or into a
 *   file planted where EXITFILE should be new.
 */
const EXIT_WRAPPER =
  'f=$1; shift; trap : HUP INT QUIT TERM; exec 3>&2 2>/dev/null; (exec "$@" 2>&3 3>&-); rc=$?; set -C; echo "$rc" > "$f"; exit "$rc"';

/**
 * The same wrapper folded into the shell a root job's string command needs anyway: `SHELL -c
 * FOLDED_WRAPPER SHELL EXITFILE COMMAND` evals COMMAND in the subshell where the plain wrapper
 * would exec `SHELL -c COMMAND`: one exec of a shell less per run. COMMAND sees what `SHELL -c`
 * gives it ($0 the shell, no arguments, the signals' defaults, the real stderr), except that
 * `$$` is the run's main process (the wrapper), as for an argv job. Never for a `user:` job: its
 * command runs as the user, and the exit status must be written by a process the user cannot
 * reach (the wrapper outside setpriv).
 */
const FOLDED_WRAPPER =
  'f=$1; shift; trap : HUP INT QUIT TERM; exec 3>&2 2>/dev/null; (unset f; trap - HUP INT QUIT TERM; exec 2>&3 3>&-; eval "shift; $1"); rc=$?; set -C; echo "$rc" > "$f"; exit "$rc"';

/**
 * Whether the job's environment leaves a shell's own start-up alone. bash reads SHELLOPTS,
 * BASHOPTS and BASH_ENV, and imports exported functions (`BASH_FUNC_echo%%`), at its start: a
 * job env with `SHELLOPTS=errexit` or a function named `echo` would stop the folded wrapper
 * before it writes the status. With any of them the plain /bin/sh wrapper writes it instead.
 */
function plainShellEnv(env: Readonly<Record<string, string>>): boolean {
  for (const k of Object.keys(env))
    if (k === "SHELLOPTS" || k === "BASHOPTS" || k === "BASH_ENV" || k === "ENV") return false;
    else if (k.startsWith("BASH_FUNC_")) return false;
  return true;
}

/** Shells known to take the folded wrapper (POSIX `set -C`, `trap`, `eval`, subshells). */
const FOLDABLE = new Set(["sh", "dash", "bash"]);

/** A root job's string command with its exit status written by its own shell, or null. */
export function foldedExitFile(
  shell: string,
  command: string,
  exitFile: string,
  env: Readonly<Record<string, string>>,
): string[] | null {
  if (!FOLDABLE.has(path.basename(shell)) || !plainShellEnv(env)) return null;
  freshExitFile(exitFile);
  return [shell, "-c", FOLDED_WRAPPER, shell, exitFile, command];
}

export function exitFileFor(stateDir: string, runId: number): string {
  return path.join(stateDir, "runs", `${runId}.exit`);
}

/**
 * `argv` inside the wrapper that writes `exitFile`. The wrapper runs as the daemon's user
 * (outside setpriv), so it can write the state dir.
 */
export function withExitFile(argv: string[], exitFile: string): string[] {
  freshExitFile(exitFile);
  return ["/bin/sh", "-c", EXIT_WRAPPER, "cronvisor-run", exitFile, ...argv];
}

/** No stale status may be read for a new run: whatever lies at its exit file's path goes. */
export function freshExitFile(exitFile: string): void {
  ensureDir(path.dirname(exitFile));
  // A stale status must never be read for this run. Run ids are fresh, so there rarely is
  // one: look first (existsSync does not throw; a failed unlink's exception cost 4% of the
  // daemon's CPU at 50 runs a second).
  if (fs.existsSync(exitFile)) fs.unlinkSync(exitFile);
}

/**
 * The exit status the wrapper recorded, or null when it has not (yet) written one, or when what
 * lies there is not a small regular file (a link or a FIFO planted in its place is never
 * followed or waited on: a daemon adopting runs must not freeze).
 */
export function readExitFile(file: string): number | null {
  let fd: number | null = null;
  try {
    fd = fs.openSync(file, READ_NOFOLLOW);
    if (!fs.fstatSync(fd).isFile()) return null;
    const buf = Buffer.alloc(16);
    const n = Number.parseInt(buf.toString("utf8", 0, fs.readSync(fd, buf)).trim(), 10);
    return Number.isFinite(n) ? n : null;
  } catch {
    return null;
  } finally {
    if (fd !== null) fs.closeSync(fd);
  }
}

/**
 * The daemon's way to be done with an exit file once the end is recorded: its inode becomes a
 * spare for a later run's log (spare.ts). `cronvisor run`, which exits next, removes it instead.
 */
export function retireExitFile(stateDir: string, runId: number): void {
  retire(exitFileFor(stateDir, runId), stateDir);
}

/** Once the end is recorded, the wrapper's exit file has served its purpose. */
export function removeExitFile(stateDir: string, runId: number): void {
  try {
    fs.unlinkSync(exitFileFor(stateDir, runId));
  } catch {
    // best effort: a stale exit file is never read for a finished run
  }
}
