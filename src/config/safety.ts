// Safe by default: as root, a config file, state dir or env_file that another user could write,
// or swap by writing a directory on its path, would let them run commands as root, read root's
// files through the daemon, or redirect its writes. Refuse it, and say what to change. Checked
// by `daemon` and `run` at start (exit 2) and by the daemon at every reload (the old config
// keeps running).
import fs from "node:fs";
import path from "node:path";
import { lookupUser } from "../core/passwd.js";
import { daemonTrust, makeDirs, pathProblems, type Trust } from "../core/safe-path.js";
import type { Config, JobConfig } from "../core/types.js";

export class UnsafeError extends Error {}

export function checkOwnership(config: Config, uid: number = process.getuid?.() ?? -1): void {
  if (uid !== 0) return;
  const trust = daemonTrust();
  const problems = new Set<string>();
  const add = (list: string[]): void => list.forEach((p) => problems.add(p));
  // Every directory and link on the way, then what it names (stricter: no group write at all).
  const check = (what: string, p: string): void => {
    add(pathProblems(p, trust));
    const st = statOrNull(p);
    if (st) add(ownProblems(what, p, st, trust.uids));
  };
  check("config file", config.file);
  check("state dir", config.stateDir);
  for (const job of config.jobs) if (job.envFile) add(envFileProblems(job, trust));
  // The state dir is made here, where it is checked, and checked again whole: see makeStateDir.
  if (problems.size === 0 && makeStateDir(config.stateDir, trust, add))
    check("state dir", config.stateDir);
  if (problems.size > 0) {
    throw new UnsafeError(`refusing to run as root:\n  ${[...problems].join("\n  ")}`);
  }
}

/**
 * Make a missing state dir (0700, and its missing parents 0700) one component at a time, each
 * component on the way checked as it is reached (makeDirs): the path check above stops at the
 * first missing component, so another user who can write the directory above it (a sticky /tmp)
 * could otherwise plant a link there between that check and the store's mkdir. False when the
 * system refused a mkdir (read-only, permission, full): the store's creation reports that, as
 * before. True otherwise: check the whole path again.
 */
function makeStateDir(dir: string, trust: Trust, add: (list: string[]) => void): boolean {
  try {
    add(makeDirs(dir, trust, 0o700));
  } catch (e) {
    if (typeof (e as NodeJS.ErrnoException).code !== "string") throw e;
    return false;
  }
  return true;
}

/** The env_file of a job: a job's own user may own it (it is their environment), nobody else. */
function envFileProblems(job: JobConfig, trust: Trust): string[] {
  const file = job.envFile as string;
  const st = lstatOrNull(file);
  // A missing env_file fails its runs (named in each run's reason), not the whole config.
  if (!st) return pathProblems(path.dirname(file), trust);
  const owners = new Set(trust.uids);
  const user = job.user === null ? null : lookupUser(job.user);
  if (user) owners.add(user.uid);
  return [
    ...pathProblems(path.dirname(file), trust),
    ...ownProblems(`env_file of job ${job.name}`, file, st, owners),
  ];
}

function ownProblems(what: string, p: string, st: fs.Stats, owners: ReadonlySet<number>): string[] {
  const out: string[] = [];
  if (st.isSymbolicLink() && what.startsWith("env_file")) {
    out.push(`${what} ${p} is a symbolic link; name the file itself`);
    return out;
  }
  if (st.mode & 0o022) {
    out.push(
      `${what} ${p} is writable by group or others (mode ${(st.mode & 0o777).toString(8)}); chmod go-w it`,
    );
  }
  if (!owners.has(st.uid)) {
    out.push(`${what} ${p} is owned by uid ${st.uid}, not root; chown root it`);
  }
  return out;
}

function lstatOrNull(p: string): fs.Stats | null {
  try {
    return fs.lstatSync(p);
  } catch {
    return null;
  }
}

function statOrNull(p: string): fs.Stats | null {
  try {
    return fs.statSync(p);
  } catch {
    return null;
  }
}
