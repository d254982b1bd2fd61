// Safe by default: as root, a config file or state dir that others could write would let them
// run commands as root. Refuse it, and say why.
import fs from "node:fs";
import type { Config } from "../core/types.js";

export class UnsafeError extends Error {}

export function checkOwnership(config: Config, uid: number = process.getuid?.() ?? -1): void {
  if (uid !== 0) return;
  const problems: string[] = [];
  for (const [what, p] of [
    ["config file", config.file],
    ["state dir", config.stateDir],
  ] as const) {
    let st: fs.Stats;
    try {
      st = fs.statSync(p);
    } catch {
      continue; // a state dir not created yet is created 0700 by the daemon
    }
    if (st.mode & 0o022) {
      problems.push(
        `${what} ${p} is writable by group or others (mode ${(st.mode & 0o777).toString(8)}); chmod go-w it`,
      );
    }
    if (st.uid !== 0) {
      problems.push(`${what} ${p} is owned by uid ${st.uid}, not root; chown root it`);
    }
  }
  if (problems.length > 0) {
    throw new UnsafeError(`refusing to run as root:\n  ${problems.join("\n  ")}`);
  }
}
