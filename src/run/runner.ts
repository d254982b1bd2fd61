// All child-process handling for one run: spawn in its own process group, log the output to a
// capped file (log.ts), escalate SIGTERM -> SIGKILL on timeout or terminate(), and end in exactly
// one RunResult (src/core/result.ts). A run ends when its main process exits; whatever is left of its
// group is killed then, so a grandchild holding stdout open never keeps a run (or its lock) alive.
import { spawn, type ChildProcess } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { formatDuration } from "../core/duration.js";
import { ENV_FD, commandLine } from "./command.js";
import { CappedLog } from "./log.js";
import { spawnNiced } from "./priority.js";
import { freshExitFile } from "./exit-file.js";
import { groupAlive, signalGroup, startTimeOf } from "./proc.js";
import type { Spawner } from "./spawner.js";
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
 * After the main process exits (and its group is killed), how long output may still drain
 * from the pipes. Only a process that left the group (setsid) can hold them open longer; we
 * stop reading then, so it cannot hang the run.
 */
export const DRAIN_MS = 1000;

/**
 * What both ways of starting a run share: its one result, its log once opened, how a run that
 * never got a process fails (said in its log too), and the handle of such a run.
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

export function startRun(spec: RunSpec): RunHandle {
  const run = beginRun(spec);
  const { done, settle, failed, noProcess } = run;
  let log: CappedLog;
  let child: ChildProcess;
  try {
    log = run.log = new CappedLog(spec.logPath, spec.logMaxBytes);
    const { argv, env, envScript } = commandLine(spec);
    child = spawnNiced(
      () =>
        spawn(argv[0] as string, argv.slice(1), {
          cwd: spec.cwd,
          env,
          // "ignore" is /dev/null; a `user:` run reads its environment from ENV_FD (command.ts)
          stdio:
            envScript === null
              ? ["ignore", "pipe", "pipe"]
              : ["ignore", "pipe", "pipe", "ignore", "pipe"],
          detached: true, // setsid(): the child leads a new process group we can signal as one
        }),
      (c) => c.pid,
    );
    if (envScript !== null) writeEnv(child, envScript);
  } catch (e) {
    failed(e);
    return noProcess;
  }
  // Node reports ENOENT/EACCES/EMFILE from spawn as an 'error' event on the next tick.
  child.on("error", (e) => {
    if (child.pid === undefined) {
      for (const s of [child.stdout, child.stderr]) s?.destroy();
      failed(e);
    }
  });
  const pid = child.pid ?? null;
  if (pid === null) return noProcess;
  const pidStart = startTimeOf(pid);
  const streams = [child.stdout, child.stderr].filter((s): s is Readable => s !== null);
  const output = pipeOutput(streams, log, spec.echo);
  const stop = escalation(pid, spec);

  // ---- the end: the main process exits ------------------------------------------------------
  child.on("exit", (code, signal) => {
    const ending = stop.exited();
    // The run is over: leftover members of its group are killed, never waited on.
    signalGroup(pid, "SIGKILL");
    output.release();
    const drain = setTimeout(() => {
      for (const s of streams) s.destroy();
    }, DRAIN_MS);
    void output.closed.then(() => {
      clearTimeout(drain);
      const totals = output.log.finish(); // never throws: `done` must resolve whatever the disk does
      const end = ending
        ? stopped(ending.status, ending.reason, code, signal)
        : exited(code, signal);
      settle(end, totals);
    });
  });

  return { pid, pgid: pid, pidStart, done, terminate: stop.terminate };
}

/**
 * The same run, forked by the daemon's spawner (spawner.ts) instead of by Node: resolves once
 * the run has a process (or has failed to start). The spawner waits for the main process,
 * kills what is left of its group, writes the exit file and drains the output; this side keeps
 * the log, the timeout and terminate(). Only the daemon uses it: `cronvisor run` echoes the
 * output as it arrives, and forks itself (startRun).
 */
export function startRunVia(spawner: Spawner, spec: RunSpec, nice: number): Promise<RunHandle> {
  const run = beginRun(spec);
  const { done, settle, noProcess } = run;
  const failed = (code: string, message: string) =>
    run.failed(Object.assign(new Error(message), { code }));
  let line;
  let output: CappedLog;
  try {
    if (!spec.exitFile) throw new Error("a spawner run needs its exit file");
    output = run.log = new CappedLog(spec.logPath, spec.logMaxBytes);
    // No wrapper: the spawner writes the exit file itself.
    line = commandLine({ ...spec, exitFile: undefined });
    freshExitFile(spec.exitFile);
  } catch (e) {
    run.failed(e);
    return Promise.resolve(noProcess);
  }
  return new Promise<RunHandle>((resolve) => {
    let stop: ReturnType<typeof escalation> | null = null;
    let end: RunEnd | null = null;
    let pid = 0;
    spawner.start(
      {
        runId: spec.runId,
        nice,
        cwd: spec.cwd,
        exitFile: spec.exitFile as string,
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
        output: (chunk) => output.write(chunk),
        exited: (code, signal) => {
          const ending = stop?.exited() ?? null;
          end = ending ? stopped(ending.status, ending.reason, code, signal) : exited(code, signal);
        },
        closed: () => settle(end ?? exited(null, null), output.finish()),
        lost: () => {
          // The spawner died (killed by hand, out of memory): nothing more will come for this run.
          if (pid === 0) {
            failed("ESRCH", "the spawner exited before the run started");
            resolve(noProcess);
            return;
          }
          if (end) return settle(end, output.finish()); // it had ended; only its output was cut
          // Still running: watched like an adopted run until its group is gone. Its timeout and
          // terminate() still signal the group; its exit status is unknown.
          const poll = setInterval(() => {
            if (groupAlive(pid)) return;
            clearInterval(poll);
            const ending = stop?.exited() ?? null;
            settle(
              ending
                ? stopped(ending.status, ending.reason, null, null)
                : interrupted("the spawner exited: exit status unknown"),
              output.finish(),
            );
          }, 500);
        },
      },
    );
  });
}

/** A `user:` run's environment, into the pipe its loader reads after the privilege drop. */
function writeEnv(child: ChildProcess, script: string): void {
  const pipe = child.stdio?.[ENV_FD] as Writable | null | undefined;
  if (!pipe) return; // the spawn failed: its 'error' event tells the story
  pipe.on("error", () => {}); // a run that ended before reading it: its 'exit' tells the story
  pipe.end(script);
}

/** `done` and the one call that resolves it: later calls are ignored. */
function settleOnce(startedAt: number): {
  done: Promise<RunResult>;
  settle: (end: RunEnd, log: LogTotals) => void;
} {
  let resolve!: (r: RunResult) => void;
  const done = new Promise<RunResult>((res) => (resolve = res));
  let settled = false;
  const settle = (end: RunEnd, log: LogTotals): void => {
    if (settled) return;
    settled = true;
    resolve(runResult(end, startedAt, Date.now(), log));
  };
  return { done, settle };
}

/** Both pipes into the log (and the echo stream, if any), in the order chunks arrive. */
function pipeOutput(
  streams: Readable[],
  log: CappedLog,
  echo: NodeJS.WritableStream | undefined,
): { log: CappedLog; closed: Promise<unknown>; release: () => void } {
  let echoPaused = false;
  let echoBackpressure = echo !== undefined;
  const onData = (chunk: Buffer) => {
    log.write(chunk);
    if (!echo) return;
    try {
      // Respect a slow reader of `cronvisor run` instead of queueing its output in memory.
      if (!echo.write(chunk) && echoBackpressure && !echoPaused) {
        echoPaused = true;
        for (const s of streams) s.pause();
        echo.once("drain", () => {
          echoPaused = false;
          for (const s of streams) s.resume();
        });
      }
    } catch {
      // a closed terminal must not end the run; the log still gets everything
    }
  };
  const closed = streams.map(
    (s) =>
      new Promise<void>((resolve) => {
        s.on("data", onData);
        s.on("error", () => {}); // a destroyed pipe; 'close' follows
        s.on("close", resolve);
      }),
  );
  return {
    log,
    closed: Promise.all(closed),
    // Output still in the pipes is read; stop honouring a slow echo reader so it drains.
    release: () => {
      echoBackpressure = false;
      if (echoPaused) for (const s of streams) s.resume();
    },
  };
}

/**
 * SIGTERM the group, SIGKILL after the grace: on terminate(), or at the spec's timeout.
 * exited() says the main process is gone (no more signals) and how the run was being stopped.
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
    // Until 'exit' is emitted, Node has not reaped pid, so the group id cannot have been reused.
    signalGroup(pid, "SIGTERM");
    signalGroup(pid, "SIGCONT"); // a stopped (SIGSTOP) member acts on SIGTERM only once continued
    killTimer = setTimeout(() => {
      if (!exited) signalGroup(pid, "SIGKILL");
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
