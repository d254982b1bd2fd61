// Exit codes of the command-line contract (README "Commands"), in one table for every command and
// for the marker commands inside a job. A run's own exit code (the job's, 124 timeout, 127 spawn
// failed, 128+N for signal N) is not here: src/run/ owns it.
export const EXIT = {
  ok: 0,
  /** no, not found, no daemon: `check` not marked, `logs` no such run, `reload` no daemon */
  fail: 1,
  /** bad usage or an invalid config; `status --check` CRITICAL */
  usage: 2,
  /** refused: a stale fence (`mark`, `progress`); `status --check` UNKNOWN */
  refused: 3,
  /** EX_UNAVAILABLE: `check` cannot tell (no access, unreadable store) */
  unavailable: 69,
  /** EX_TEMPFAIL: the store or a claim is busy; try again */
  busy: 75,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];
