// The argv a run spawns: the job's command (through the shell for a string), under setpriv for
// another user. The checks here turn the usual mistakes into a clear `spawn failed` reason before
// anything is spawned.
import fs from "node:fs";
import path from "node:path";
import { ENV_NAME } from "../core/env-name.js";
import { lookupUser } from "../core/passwd.js";
import type { RunSpec } from "../core/types.js";

/** setpriv (util-linux) sets uid, gid and supplementary groups; Node's uid/gid options drop the latter. */
const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => fs.existsSync(p)) ?? null;

/** A run that cannot start: the code (ENOENT, EACCES, ...) goes first in the reason. */
export class SpawnError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The environment of the processes that run as root before a `user:` job's privilege drop
 * (setpriv): none of the job's. Its `env:` and its `env_file` (which the job's
 * user may own) are the user's to choose, and a dynamic loader honours LD_PRELOAD, GCONV_PATH and
 * the like in any root process that is not setuid.
 */
const ROOT_ENV: Readonly<Record<string, string>> = { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" };

/** The descriptor a `user:` run's environment arrives on, after the drop (see ENV_LOADER). */
export const ENV_FD = 4;

/**
 * Runs as the job's user, right after setpriv: enters the job's cwd (its first argument) with
 * that user's rights, so a cwd the user swapped for a link into a directory only root may reach
 * is not reached (the run fails, exit 126, saying so in its log); then reads the job's
 * environment from ENV_FD (the `export NAME='value'` lines of envScript, which the daemon writes
 * into a pipe, never into an argv that any user could read in /proc), closes it, and execs the job
 * with exactly that environment (PWD aside, which the shell sets).
 */
const ENV_LOADER = `cd -P -- "$1" 2>/dev/null || { printf '%s\\n' "cronvisor: the job cannot enter its cwd $1 as its user (missing, not a directory, or not reachable by that user)" >&2; exit 126; }; shift; s=; while IFS= read -r l <&${ENV_FD}; do s="$s$l
"; done; exec ${ENV_FD}<&-; unset PATH; eval "$s"; exec "$@"`;

/** What to spawn: the argv, its environment, and what to write to ENV_FD (null: nothing). */
export interface CommandLine {
  argv: string[];
  env: NodeJS.ProcessEnv;
  envScript: string | null;
}

/**
 * The argv to spawn, after checks that turn the usual mistakes into a clear reason: a missing
 * cwd (the exec would report ENOENT for the program), a missing or non-executable program, an unknown user. A `user:` job's
 * cwd and program are the user's to choose, so they are not looked at as root: the process is
 * started in "/" (the caller's spec.cwd) and its shell, once it runs as the user, enters
 * `spec.userCwd` and execs the program (a failure is the run's exit 126 or 127, said in its log).
 */
export function commandLine(spec: RunSpec): CommandLine {
  let argv =
    typeof spec.command === "string" ? [spec.shell, "-c", spec.command] : [...spec.command];
  if (argv.length === 0) throw new SpawnError("EINVAL", "empty command");
  if (spec.user === null) {
    const cwd = statOrNull(spec.cwd);
    if (!cwd) throw new SpawnError("ENOENT", `cwd ${spec.cwd} does not exist`);
    if (!cwd.isDirectory()) throw new SpawnError("ENOTDIR", `cwd ${spec.cwd} is not a directory`);
    checkExecutable(argv[0] as string, spec.env.PATH ?? "", spec.cwd);
    return { argv, env: spec.env, envScript: null };
  }
  const user = lookupUser(spec.user);
  if (!user) throw new SpawnError("ENOENT", `no such user: ${spec.user}`);
  if (process.getuid?.() !== 0 && process.getuid?.() !== user.uid) {
    throw new SpawnError("EPERM", `running as ${spec.user} needs root`);
  }
  if (!SETPRIV) throw new SpawnError("ENOENT", "setpriv (util-linux) not found: needed for user");
  const drop = [SETPRIV, `--reuid=${user.uid}`, `--regid=${user.gid}`, "--init-groups", "--"];
  const cwd = spec.userCwd ?? spec.cwd;
  argv = [...drop, "/bin/sh", "-c", ENV_LOADER, "cronvisor-env", cwd, ...argv];
  return { argv, env: { ...ROOT_ENV }, envScript: envScript(spec.env) };
}

/** `export NAME='value'` lines that give a shell exactly `env` (pure). */
function envScript(env: NodeJS.ProcessEnv): string {
  let out = "";
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue;
    // Names are checked when the config and the env_file are read; this keeps eval safe anyway.
    if (!ENV_NAME.test(name)) throw new SpawnError("EINVAL", `bad environment variable name`);
    out += `export ${name}='${value.replace(/'/g, "'\\''")}'\n`;
  }
  return out;
}

/** execvp(3)'s view of `program`: found via PATH (from the job's env) unless it has a slash. */
function checkExecutable(program: string, searchPath: string, cwd: string): void {
  const candidates = program.includes("/")
    ? [path.resolve(cwd, program)]
    : searchPath
        .split(":")
        .filter((dir) => dir !== "")
        .map((dir) => path.resolve(cwd, dir, program));
  let denied: string | null = null;
  for (const file of candidates) {
    const st = statOrNull(file);
    if (!st) continue;
    try {
      if (!st.isFile()) throw new Error("not a file");
      fs.accessSync(file, fs.constants.X_OK);
      return;
    } catch {
      denied ??= file;
    }
  }
  if (denied) throw new SpawnError("EACCES", `${denied} is not executable`);
  throw new SpawnError(
    "ENOENT",
    program.includes("/") ? `${program} does not exist` : `command not found: ${program}`,
  );
}

function statOrNull(file: string): fs.Stats | null {
  try {
    // No exception for a missing file: a PATH search misses in most directories.
    return fs.statSync(file, { throwIfNoEntry: false }) ?? null;
  } catch {
    return null;
  }
}
