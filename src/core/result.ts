// The one way a RunResult is made. A run ends in exactly one of these ends, and the result maps
// one-to-one onto the run row's end columns (status, reason, exit_code, signal, finished_at,
// duration_ms, log_bytes), with the reason it ended in words. Pure, and in core because the runner, the daemon's
// adoption and the store (a dead lock holder recorded `interrupted`) all build one.
import type { RunResult } from "./types.js";

/** How a run ended, before the clock and the log are added. */
export type RunEnd = Pick<RunResult, "status" | "reason" | "exitCode" | "signal">;

/** What the run's log holds at the end: every byte the job wrote, and whether some were cut. */
export interface LogTotals {
  bytes: number;
  truncated: boolean;
}

export const NO_LOG: LogTotals = { bytes: 0, truncated: false };

/**
 * The main process exited by itself: `ok` on 0, else `failed` with `exit N` (or `signal S`
 * when it was killed by a signal nobody here sent). `reason` replaces that wording when the
 * caller knows more (an exit status read late from the wrapper's exit file).
 */
export function exited(
  exitCode: number | null,
  signal: string | null,
  reason?: string | null,
): RunEnd {
  const status = exitCode === 0 ? "ok" : "failed";
  const said = exitCode === 0 ? null : exitCode !== null ? `exit ${exitCode}` : `signal ${signal}`;
  return { status, reason: reason === undefined ? said : reason, exitCode, signal };
}

/** Stopped by cronvisor: at its timeout, or by terminate() with the reason given there. */
export function stopped(
  status: "timeout" | "killed" | "fenced",
  reason: string,
  exitCode: number | null,
  signal: string | null,
): RunEnd {
  return { status, reason, exitCode, signal };
}

/** No process ever ran: the reason starts with `spawn failed:` and the code (ENOENT, ...). */
export function spawnFailed(reason: string): RunEnd {
  return { status: "spawn_failed", reason, exitCode: null, signal: null };
}

/** Its processes died with whoever watched them, so how it ended is unknown. */
export function interrupted(reason: string): RunEnd {
  return { status: "interrupted", reason, exitCode: null, signal: null };
}

/** How a reason for stopping a run starts when its node fenced itself (see stopStatus). */
export const FENCED_PREFIX = "fenced: ";

/** The status of a run stopped for `reason`: `fenced` when its node fenced itself, else `killed`. */
export function stopStatus(reason: string): "killed" | "fenced" {
  return reason.startsWith(FENCED_PREFIX) ? "fenced" : "killed";
}

/**
 * Its node lost its lease (it could not reach the store, or it was frozen) and the run was
 * stopped or taken over: its marker writes are refused from then on. Treated as `interrupted`
 * by health, alerts and catch-up.
 */
export function fenced(reason: string): RunEnd {
  return { status: "fenced", reason, exitCode: null, signal: null };
}

/** The RunResult of an end: the run's span (duration from it) and its log's totals. */
export function runResult(
  end: RunEnd,
  startedAt: number,
  finishedAt: number,
  log: LogTotals = NO_LOG,
): RunResult {
  return {
    ...end,
    startedAt,
    finishedAt,
    durationMs: finishedAt - startedAt,
    logBytes: log.bytes,
    logTruncated: log.truncated,
    cpuS: null,
    memoryPeakBytes: null,
  };
}
