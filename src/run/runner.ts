// One run, from its start through the spawner to its one RunResult (src/core/result.ts): its log
// (a capped file, log.ts), its timeout and terminate() (SIGTERM to every process of the run, then
// SIGKILL after kill_grace), and what it measured. A run is every process it started: its cgroup
// (cgroup.ts) where this host has one, else its process group; it ends when its main process has
// exited and nothing of it is left (`leftovers:` says whether what is left is killed, waited for or
// kept apart), so no leftover ever outlives its run's lock.
import os from "node:os";
import { formatDuration } from "../core/duration.js";
import { commandLine } from "./command.js";
import { CappedLog } from "./log.js";
import { jobNice } from "./priority.js";
import { freshExitFile } from "./exit-file.js";
import { cgroupPopulated, groupAlive, type RunRef } from "../core/proc.js";
import { containment, signalRun } from "./cgroup.js";
import { Spawner, type RunAccount } from "./spawner.js";
import {
  exited,
  interrupted,
  NO_LOG,
  runResult,
  spawnFailed,
  stopped,
  stopStatus,
  type LogTotals,
  type RunEnd,
} from "../core/result.js";
import type { RunResult, RunSpec } from "../core/types.js";

export interface RunHandle {
  /** The main process; null when spawn failed. */
  pid: number | null;
  /** == pid: the main process leads its own group (and session). */
  pgid: number | null;
  /** startTimeOf(pid) read right after spawn: with pid, the run's identity. */
  pidStart: string | null;
  /** Resolves exactly once, never rejects. */
  done: Promise<RunResult>;
  /**
   * SIGTERM to the group, SIGKILL after graceMs (default spec.killGraceMs) if the main process
   * still lives. The run ends `timeout` for reason "timeout", else `killed` with the reason as
   * given. Idempotent: the first call wins; a no-op once the main process has exited.
   */
  terminate(reason: "timeout" | "killed" | string, graceMs?: number): void;
}

/**
 * Once nothing of a run is left, how long output may still drain from its pipes. Only a process
 * outside its cgroup (a kept one, or one that left its group without a cgroup) can hold them open
 * longer; they are closed then, so it cannot hang the run.
 */
export const DRAIN_MS = 1000;

/**
 * A run's one result, its log once opened, how a run that never got a process fails (said in its
 * log too), and the handle of such a run.
 */
function beginRun(spec: RunSpec) {
  const { done, settle } = settleOnce(Date.now());
  const r = {
    done,
    settle,
    log: null as CappedLog | null,
    failed: (e: unknown): void => {
      const err = e as NodeJS.ErrnoException;
      const reason = `spawn failed: ${err.code ?? "ERROR"} ${err.message} (job: ${spec.job}, run: ${spec.runId})`;
      // Say it in the log too: `cronvisor logs` is where an operator looks first.
      settle(spawnFailed(reason), r.log?.finish(`[cronvisor: ${reason}]\n`) ?? NO_LOG);
    },
    noProcess: { pid: null, pgid: null, pidStart: null, done, terminate: () => {} } as RunHandle,
  };
  return r;
}

/** This process's spawner, for a process that starts runs without a daemon (`cronvisor run`). */
let ownSpawner: Spawner | null = null;

/** The spawner of a process that starts runs on its own, made at its first run. */
export function defaultSpawner(): Spawner {
  return (ownSpawner ??= new Spawner(DRAIN_MS, containment().base));
}

/**
 * Start one run through the spawner (spawner.ts), the one way a run starts: resolves once the run
 * has a process (or has failed to start). The spawner puts it in its cgroup (or group), waits for
 * the main process, deals with what is left of the run (`leftovers:`), writes the exit file,
 * measures it and drains its output; this side keeps the log, the timeout and terminate().
 */
export function startRun(
  spec: RunSpec,
  spawner: Spawner = defaultSpawner(),
  nice: number = jobNice(os.getPriority(0)),
): Promise<RunHandle> {
  const run = beginRun(spec);
  const { done, settle, noProcess } = run;
  const failed = (code: string, message: string) =>
    run.failed(Object.assign(new Error(message), { code }));
  let line;
  let output: CappedLog;
  try {
    output = run.log = new CappedLog(spec.logPath, spec.logMaxBytes);
    line = commandLine(spec);
    freshExitFile(spec.exitFile);
    freshExitFile(spec.pidFile);
  } catch (e) {
    run.failed(e);
    return Promise.resolve(noProcess);
  }
  const echo = echoTo(spec.echo, spawner);
  return new Promise<RunHandle>((resolve) => {
    let stop: ReturnType<typeof escalation> | null = null;
    let end: RunEnd | null = null;
    let account: RunAccount | null = null;
    let pid = 0;
    spawner.start(
      {
        ...spec, // the spawner takes the spec's own fields (SpawnRequest); the rest is not sent
        nice,
        argv: line.argv,
        env: line.env as Record<string, string>,
        script: line.envScript,
      },
      {
        started: (p, pidStart) => {
          pid = p;
          stop = escalation(p, spec);
          resolve({ pid: p, pgid: p, pidStart, done, terminate: stop.terminate });
        },
        failed: (code, message) => {
          failed(code, message);
          resolve(noProcess);
        },
        output: (chunk) => {
          output.write(chunk);
          echo(chunk);
        },
        exited: (code, signal, acct) => {
          const ending = stop?.exited() ?? null;
          account = acct;
          end = ending ? stopped(ending.status, ending.reason, code, signal) : exited(code, signal);
          end = withLeftovers(end, acct, spec.leftovers);
        },
        closed: () => {
          echo.done();
          settle(end ?? exited(null, null), output.finish(), account);
        },
        lost: () => {
          // The spawner died (killed by hand, out of memory): nothing more will come for this run.
          if (pid === 0) {
            failed("ESRCH", "the spawner exited before the run started");
            resolve(noProcess);
            return;
          }
          if (end) return settle(end, output.finish(), account); // it had ended; only its output was cut
          watchLost({ id: spec.runId, job: spec.job }, pid, () => {
            const ending = stop?.exited() ?? null;
            settle(
              ending
                ? stopped(ending.status, ending.reason, null, null)
                : interrupted("the spawner exited: exit status unknown"),
              output.finish(),
              null,
            );
          });
        },
      },
    );
  });
}

/**
 * A run whose spawner died while it ran: watched like an adopted run until nothing of it is left
 * (`gone` then). Its timeout and terminate() still signal it; its exit status is unknown.
 */
function watchLost(run: RunRef, pid: number, gone: () => void): void {
  const poll = setInterval(() => {
    if (groupAlive(pid) || cgroupPopulated(run)) return;
    clearInterval(poll);
    gone();
  }, 500);
}

/**
 * The run's end with what became of its leftovers said (pure): "killed 2 leftover processes",
 * "left 2 processes running", "waited for 2 leftover processes"; and an OOM kill named.
 */
export function withLeftovers(
  end: RunEnd,
  acct: RunAccount,
  leftovers: RunSpec["leftovers"],
): RunEnd {
  const said: string[] = [];
  if (acct.oomKills !== null && acct.oomKills > 0 && end.signal === "SIGKILL")
    said.push("killed by the OOM killer (its memory limit)");
  const n = acct.left ?? 0;
  const procs = n === 1 ? "process" : "processes";
  if (n > 0)
    said.push(
      leftovers === "keep"
        ? `left ${n} ${procs} running`
        : leftovers === "wait"
          ? `waited for ${n} leftover ${procs}`
          : `killed ${n} leftover ${procs}`,
    );
  if (said.length === 0) return end;
  return { ...end, reason: [end.reason, ...said].filter((r) => r !== null).join("; ") };
}

/**
 * `cronvisor run`'s copy of the output to its terminal: a slow reader pauses the spawner's output
 * (this process has that one run) instead of queueing it in memory. A closed terminal never ends
 * the run: the log still gets everything.
 */
function echoTo(
  echo: NodeJS.WritableStream | undefined,
  spawner: Spawner,
): ((chunk: Buffer) => void) & { done: () => void } {
  let paused = false;
  let broken = false;
  const resume = (): void => {
    if (!paused) return;
    paused = false;
    spawner.resumeOutput();
  };
  // A reader that went away (`cronvisor run JOB | head -1`) never drains: stop echoing, go on.
  const gone = (): void => {
    broken = true;
    resume();
  };
  echo?.once("error", gone);
  echo?.once("close", gone);
  const write = (chunk: Buffer): void => {
    if (!echo || broken) return;
    try {
      if (!echo.write(chunk) && !paused) {
        paused = true;
        spawner.pauseOutput();
        echo.once("drain", resume);
      }
    } catch {
      // a closed terminal
    }
  };
  // The run's output is over: the spawner's other runs (and its end) are never held back.
  const done = (): void => {
    echo?.removeListener("drain", resume);
    echo?.removeListener("error", gone);
    echo?.removeListener("close", gone);
    resume();
  };
  return Object.assign(write, { done });
}

/** `done` and the one call that resolves it: later calls are ignored. */
function settleOnce(startedAt: number): {
  done: Promise<RunResult>;
  settle: (end: RunEnd, log: LogTotals, account?: RunAccount | null) => void;
} {
  let resolve!: (r: RunResult) => void;
  const done = new Promise<RunResult>((res) => (resolve = res));
  let settled = false;
  const settle = (end: RunEnd, log: LogTotals, account: RunAccount | null = null): void => {
    if (settled) return;
    settled = true;
    const result = runResult(end, startedAt, Date.now(), log);
    if (account) {
      result.cpuS = account.cpuS;
      result.memoryPeakBytes = account.memoryPeakBytes;
    }
    resolve(result);
  };
  return { done, settle };
}

/**
 * SIGTERM every process of the run, SIGKILL after the grace: on terminate(), or at the spec's
 * timeout. exited() says nothing of the run is left (no more signals) and how it was being stopped.
 */
function escalation(
  pid: number,
  spec: RunSpec,
): {
  terminate: (reason: string, graceMs?: number) => void;
  exited: () => { status: "timeout" | "killed" | "fenced"; reason: string } | null;
} {
  let exited = false;
  let ending: { status: "timeout" | "killed" | "fenced"; reason: string } | null = null;
  const ref = { id: spec.runId, job: spec.job };
  let killTimer: NodeJS.Timeout | undefined;
  const terminate = (reason: string, graceMs = spec.killGraceMs) => {
    if (exited || ending) return;
    ending =
      reason === "timeout"
        ? {
            status: "timeout",
            reason:
              spec.timeoutMs === null
                ? "timeout"
                : `timeout after ${formatDuration(spec.timeoutMs)}`,
          }
        : { status: stopStatus(reason), reason };
    // The cgroup holds what left the group; the group is signalled too where there is none.
    signalRun(ref, pid, "SIGTERM");
    signalRun(ref, pid, "SIGCONT"); // a stopped (SIGSTOP) one acts on SIGTERM once continued
    killTimer = setTimeout(() => {
      if (!exited) signalRun(ref, pid, "SIGKILL");
    }, graceMs);
  };
  const timeoutTimer =
    spec.timeoutMs === null ? undefined : setTimeout(() => terminate("timeout"), spec.timeoutMs);
  return {
    terminate,
    exited: () => {
      exited = true;
      clearTimeout(timeoutTimer);
      clearTimeout(killTimer);
      return ending;
    },
  };
}
