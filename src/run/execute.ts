// Starting one run of a job, shared by the daemon's ticks and `cronvisor run`: take the lock and
// the slot in one store transaction, build the job's environment, spawn, record the pid, and
// record the one result when it ends. The same path for both is what makes a manual run and a
// scheduled tick exclude each other.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { lookupUser } from "../core/passwd.js";
import { WRITE_NOFOLLOW } from "../core/safe-path.js";
import { buildJobEnv, daemonOwners, readEnvFile } from "./env.js";
import {
  exitFileFor,
  pidFileFor,
  readExitFile,
  readPidFile,
  removeExitFile,
  retireExitFile,
} from "./exit-file.js";
import { runAlive } from "../core/proc.js";
import { runResult, spawnFailed } from "../core/result.js";
import { jobNice } from "./priority.js";
import { startRun, type RunHandle } from "./runner.js";
import { containment } from "./cgroup.js";
import { enforceable } from "../core/limits.js";
import type { Spawner } from "./spawner.js";
import type {
  HoldRequest,
  Owner,
  ReserveOutcome,
  ReserveRequest,
  RunRow,
  Store,
} from "../store/store.js";
import type { Config, JobConfig, RunBroker, RunResult, Trigger } from "../core/types.js";

// Where they lived before the split; the exit file's own module is exit-file.ts.
export { exitFileFor, pidFileFor, readExitFile, readPidFile, removeExitFile, retireExitFile };

export interface RunContext {
  config: Config;
  store: Store;
  owner: Owner;
  now: () => number;
  /** The marker broker of the supervising process; null: jobs reach the store directly. */
  broker?: RunBroker | null;
  /** The daemon's spawner (spawner.ts); absent: this process's own (`cronvisor run`). */
  spawner?: Spawner | null;
  /**
   * The admission decision for a job's named locks and group (daemon/admit.ts), for one run to
   * start; required to start a job that has either.
   */
  admit?: (job: JobConfig, o: { trigger: Trigger }) => HoldRequest["admit"];
}

export type LaunchOutcome =
  | { kind: "started"; run: RunRow; handle: RunHandle; finished: Promise<RunRow> }
  | { kind: "locked"; holder: RunRow }
  | { kind: "held"; reason: string }
  | { kind: "duplicate" };

export interface LaunchOptions {
  slot: number | null;
  /** Claim the slot (first run of a scheduled slot); retries and resumes reuse a claimed slot. */
  claimSlot: boolean;
  trigger: Trigger;
  attempt: number;
  echo?: NodeJS.WritableStream;
  /** false: a backfill's slot (see ReserveRequest.stamp). */
  stamp?: boolean;
}

export function logPathFor(stateDir: string, job: string, runId: number): string {
  return path.join(stateDir, "logs", job, `${runId}.log`);
}

type Reserved =
  | { kind: "started"; run: RunRow }
  | { kind: "locked"; holder: RunRow }
  | { kind: "held"; reason: string }
  | { kind: "duplicate" };

/** What the store needs to reserve one run of `job` (reserveRun, or a tick's reserveRuns). */
export function reservation(ctx: RunContext, job: JobConfig, o: LaunchOptions): ReserveRequest {
  return {
    job: job.name,
    slot: o.slot,
    claimSlot: o.claimSlot,
    trigger: o.trigger,
    attempt: o.attempt,
    now: ctx.now,
    owner: ctx.owner,
    lock: job.overlap !== "allow",
    holderAlive: runAlive,
    logPath: (id) => logPathFor(ctx.config.stateDir, job.name, id),
    ...(o.stamp === false ? { stamp: false } : {}),
    ...holdsOf(ctx, job, o),
  };
}

/** The named locks and group a run of `job` holds (docs/locks.md), if it has any. */
function holdsOf(ctx: RunContext, job: JobConfig, o: LaunchOptions): { holds?: HoldRequest } {
  // A config recorded before named locks (a daemon's running config) has neither key.
  const locks = job.locks ?? [];
  const group = (ctx.config.groups ?? []).find((g) => g.name === job.group) ?? null;
  if (locks.length === 0 && group === null) return {};
  if (!ctx.admit) throw new Error(`no admission decision for ${job.name}'s locks and group`);
  return { holds: { locks, group, admit: ctx.admit(job, o) } };
}

function reserved(res: ReserveOutcome): Reserved {
  if (res.kind === "held") return { kind: "held", reason: res.admission.reason };
  return res.kind === "duplicate" ? { kind: "duplicate" } : res;
}

/** One run, start to recorded end: the path of `cronvisor run`. The daemon batches the same steps. */
export async function launch(
  ctx: RunContext,
  job: JobConfig,
  o: LaunchOptions,
): Promise<LaunchOutcome> {
  // Lock, slot, fence and the `running` row in one store transaction, committed before the
  // spawn: the job's own `mark` calls must see their run.
  const res = reserved(await ctx.store.reserveRun(reservation(ctx, job, o)));
  if (res.kind !== "started") return res;
  const run = res.run;
  const handle = await spawnRun(ctx, job, run, o.echo);
  if (handle.pid !== null && handle.pgid !== null) {
    await ctx.store.setRunProcess(run.id, handle.pid, handle.pidStart, handle.pgid);
  }
  const finished = handle.done.then((result) => recordEnd(ctx, run.id, result));
  return { kind: "started", run, handle, finished };
}

/**
 * The daemon's environment, copied once: each read of process.env is a getenv() call through
 * C++, and every run start read it again. Nothing in cronvisor changes its own environment.
 */
let daemonEnv: NodeJS.ProcessEnv | null = null;

/** Spawn a reserved run: the request is sent to the spawner before this returns. */
export async function spawnRun(
  ctx: RunContext,
  job: JobConfig,
  run: RunRow,
  echo?: NodeJS.WritableStream,
): Promise<RunHandle> {
  const { config } = ctx;
  const cronvisor: Record<string, string> = {
    CRONVISOR_JOB: job.name,
    CRONVISOR_RUN_ID: String(run.id),
    CRONVISOR_FENCE: String(run.fence),
    CRONVISOR_SLOT: new Date(run.slot ?? run.started_at).toISOString(),
    CRONVISOR_ATTEMPT: String(run.attempt),
    CRONVISOR_TRIGGER: run.trigger ?? "manual",
    CRONVISOR_STATE_DIR: config.stateDir,
  };
  const broker = ctx.broker ?? null;
  if (broker) {
    // Registered before the spawn: the job's first `mark` may come at once. A `user:` job's run
    // is served on its user's own socket (an unknown user fails the spawn just after).
    const uid = job.user === null ? undefined : lookupUser(job.user)?.uid;
    cronvisor.CRONVISOR_BROKER = broker.socketFor(uid);
    // Every run reserved since the first migration has a fence; a null one matches no write.
    const fence = run.fence ?? 0;
    cronvisor.CRONVISOR_SECRET = broker.register({ job: job.name, runId: run.id, fence, uid });
  }
  const handle = await startOrFail(ctx, job, run, cronvisor, echo);
  if (handle.pgid !== null) broker?.setGroup(run.id, handle.pgid);
  else broker?.unregister(run.id);
  return handle;
}

function startOrFail(
  ctx: RunContext,
  job: JobConfig,
  run: RunRow,
  cronvisor: Record<string, string>,
  echo: NodeJS.WritableStream | undefined,
): RunHandle | Promise<RunHandle> {
  const { config } = ctx;
  let env: Record<string, string>;
  try {
    const user = job.user === null ? null : lookupUser(job.user);
    // A job's own user may own its env_file (it is their environment); nobody else but root.
    const owners = daemonOwners();
    if (user) owners.add(user.uid);
    const envFileText = job.envFile === null ? null : readEnvFile(job.envFile, owners);
    env = buildJobEnv({
      base: (daemonEnv ??= { ...process.env }),
      configEnv: job.env,
      envFileText,
      envFilePath: job.envFile,
      cronvisor,
      user:
        user && job.user !== null ? { name: job.user, home: user.home, shell: user.shell } : null,
    });
  } catch (e) {
    const reason = `spawn failed: ${(e as Error).message} (job: ${job.name}, run: ${run.id})`;
    // Said in the run's log too, as the runner does for its spawn failures: `cronvisor logs` is
    // where an operator looks first.
    const logPath = run.log_path ?? logPathFor(config.stateDir, job.name, run.id);
    let logBytes = 0;
    try {
      fs.mkdirSync(path.dirname(logPath), { recursive: true, mode: 0o700 });
      const note = `[cronvisor: ${reason}]\n`;
      // Never through a link planted in its place (as the runner's log, log.ts).
      const fd = fs.openSync(logPath, WRITE_NOFOLLOW, 0o600);
      try {
        fs.writeSync(fd, note);
      } finally {
        fs.closeSync(fd);
      }
      logBytes = Buffer.byteLength(note);
    } catch {
      // a full disk: the run's record still carries the reason
    }
    return failedHandle(ctx.now(), reason, logBytes);
  }
  const spec = {
    job: job.name,
    runId: run.id,
    command: job.command,
    shell: config.shell,
    // A `user:` job's cwd is the user's to choose: its shell enters it after the privilege
    // drop (command.ts); nothing walks it as root, so the process starts in "/".
    cwd: job.user === null ? job.cwd : "/",
    userCwd: job.user === null ? undefined : job.cwd,
    env,
    user: job.user,
    logPath: run.log_path ?? logPathFor(config.stateDir, job.name, run.id),
    logMaxBytes: job.log.maxSizeBytes,
    timeoutMs: job.timeoutMs,
    killGraceMs: job.killGraceMs,
    echo,
    exitFile: exitFileFor(config.stateDir, run.id),
    pidFile: pidFileFor(config.stateDir, run.id),
    leftovers: job.leftovers,
    nofile: job.limits.nofile,
    ...enforceable(job.limits, containment().controllers),
    // Runs of the job at once: each in a cgroup of its own, so that one of them that ended is
    // never taken for alive (nor killed as its leftovers) because of another in the job's kept
    // cgroup (core/proc.ts cgroupPopulated, run/cgroup.ts signalCgroup).
    ownCgroup: job.overlap === "allow",
  };
  return startRun(spec, ctx.spawner ?? undefined, jobNice(os.getPriority(0)));
}

/** A run that could not get as far as a process (unreadable env_file, unknown user). */
function failedHandle(now: number, reason: string, logBytes: number): RunHandle {
  const result = runResult(spawnFailed(reason), now, now, { bytes: logBytes, truncated: false });
  return {
    pid: null,
    pgid: null,
    pidStart: null,
    done: Promise.resolve(result),
    terminate: () => {},
  };
}

async function recordEnd(ctx: RunContext, runId: number, result: RunResult): Promise<RunRow> {
  try {
    await ctx.store.finishRun(runId, result);
  } catch (e) {
    // A full disk or a busy store must not lose the run: the row stays `running` and the exit
    // file stays, and the daemon's next reap (every heartbeat) records the end from the file.
    process.stderr.write(
      `cronvisor: could not record the end of run ${runId}: ${(e as Error).message}\n`,
    );
    return { ...((await ctx.store.run(runId)) as RunRow), status: "running" };
  }
  removeExitFile(ctx.config.stateDir, runId);
  ctx.broker?.unregister(runId);
  return (await ctx.store.run(runId)) as RunRow;
}
