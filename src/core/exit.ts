// Exit codes: the CLI's own, and the one a run's end maps to when `cronvisor run` (or a wrapped
// command) passes it on. The run codes are the ones shells and timeout(1) use, so a script that
// calls cronvisor reads them as it would read the job's: 124 timed out, 126 cannot execute, 127 not
// found, 128+N killed by signal N. In core: the CLI, the marker commands and the runner all need it.
import { createRequire } from "node:module";

/** cronvisor's own exit codes (a run passes the job's code on instead, see runExitCode). */
export const EXIT = {
  ok: 0,
  /** no, not found, no daemon: `check` not marked, `logs` no such run, `reload` no daemon */
  fail: 1,
  /** `status --check` (the monitoring plugin convention): a job late, stuck, failing, repeating or idle */
  warning: 1,
  /** bad usage or an invalid config */
  usage: 2,
  /** `status --check`: the daemon is down or not beating, or the store cannot be read */
  critical: 2,
  /** refused (a stale fence: `mark`, `progress`); `status` with no store */
  unknown: 3,
  /** EX_UNAVAILABLE: `check` cannot tell (no access, unreadable store) */
  unavailable: 69,
  /** EX_TEMPFAIL: the job's lock or a marker claim is held; try again later. */
  busy: 75,
  /** As timeout(1): the run was stopped at its timeout. */
  timeout: 124,
  /** As sh: the program exists but could not be executed. */
  cannotExecute: 126,
  /** As sh: the program was not found, or the run could not start at all. */
  notFound: 127,
} as const;

/** Killed by signal N exits 128+N, as shells report it. */
export const SIGNAL_EXIT_BASE = 128;

let signals: Record<string, number | undefined> | null = null;

/**
 * The signal's number on this platform (`SIGTERM` -> 15), or 0 for a name it does not know.
 * The one signal-name table is the platform's own (os.constants.signals), not a copy. node:os is
 * loaded at the first call, not with this module: every `mark` call imports the table above and
 * never needs a signal (BENCHMARKS.md, "mark KEY").
 */
export function signalNumber(name: string): number {
  signals ??= (createRequire(import.meta.url)("node:os") as typeof import("node:os")).constants
    .signals as Record<string, number | undefined>;
  return signals[name] ?? 0;
}

/** The exit code a shell shows for a process killed by `signal`. */
export function signalExitCode(signal: string): number {
  return SIGNAL_EXIT_BASE + signalNumber(signal);
}

/**
 * The exit code of a finished run, as `cronvisor run` passes it on: the job's own code when it
 * exited; for a run that did not exit by itself, the code timeout(1) and shells use.
 */
export function runExitCode(end: {
  status: string;
  exitCode: number | null;
  signal: string | null;
}): number {
  if (end.exitCode !== null) return end.exitCode;
  if (end.status === "timeout") return EXIT.timeout;
  if (end.status === "spawn_failed") return EXIT.notFound;
  if (end.signal) return signalExitCode(end.signal);
  return EXIT.fail;
}
