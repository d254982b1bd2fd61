// The argv a run spawns: the job's command (through the shell for a string), under setpriv for
// another user, inside the exit-status wrapper. The checks here turn the usual mistakes into a
// clear `spawn failed` reason before anything is spawned.
import fs from "node:fs";
import path from "node:path";
import { lookupUser } from "../core/passwd.js";
import { withExitFile } from "./exit-file.js";
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
 * The argv to spawn, after checks that turn the usual mistakes into a clear reason: a missing
 * cwd (Node would report ENOENT for the program), a missing or non-executable program (with a
 * wrapper around it, it would be exit 127 in the log instead), an unknown user.
 */
export function commandLine(spec: RunSpec): string[] {
  const cwd = statOrNull(spec.cwd);
  if (!cwd) throw new SpawnError("ENOENT", `cwd ${spec.cwd} does not exist`);
  if (!cwd.isDirectory()) throw new SpawnError("ENOTDIR", `cwd ${spec.cwd} is not a directory`);
  let argv =
    typeof spec.command === "string" ? [spec.shell, "-c", spec.command] : [...spec.command];
  if (argv.length === 0) throw new SpawnError("EINVAL", "empty command");
  checkExecutable(argv[0] as string, spec.env.PATH ?? "", spec.cwd);
  if (spec.user !== null) {
    const user = lookupUser(spec.user);
    if (!user) throw new SpawnError("ENOENT", `no such user: ${spec.user}`);
    if (process.getuid?.() !== 0 && process.getuid?.() !== user.uid) {
      throw new SpawnError("EPERM", `running as ${spec.user} needs root`);
    }
    if (!SETPRIV) throw new SpawnError("ENOENT", "setpriv (util-linux) not found: needed for user");
    argv = [SETPRIV, `--reuid=${user.uid}`, `--regid=${user.gid}`, "--init-groups", "--", ...argv];
  }
  return spec.exitFile ? withExitFile(argv, spec.exitFile) : argv;
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
